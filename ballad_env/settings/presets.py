"""The published codes' options: what ``Settings.authors_code()`` (BALLAD's published code)
and ``Settings.sadal()`` (SADAL's) switch on. Plain data, so that ``settings`` and others
can read it without importing each other."""

from __future__ import annotations

from typing import Any

#: The published code's behaviour where it differs from the defaults (docs/method.md,
#: "The published code's variant"): ``Settings.authors_code()`` switches all of them, and a
#: setting with all of them is named ``<prior>_authors...``.
AUTHORS_CODE: dict[str, str] = {
    "split": "authors", "prior_train_scores": "rescored", "squash_quantile": "whole-percent",
    "tau_without_val": "zero", "entropy_log": "authors", "initial_fit": "train-val",
    "al_strategy": "uncertainty-argsort", "lr_strategy": "per-round", "query_rng": "authors"}
#: The seed of the published code's one query stream: its ``load_dataset`` calls
#: ``np.random.seed(331)`` whatever the split's ``random_state``, so every split seed draws
#: its labels from this seed's stream. ``Settings.authors_code()`` sets ``query_seed`` to it.
#: It is not in ``AUTHORS_CODE``: it holds only with ``query_rng="authors"``, and settings
#: that draw from the split seed's stream keep their names (``<prior>_authors...``); the
#: preset's are ``<prior>_authors..._qseed331``.
AUTHORS_QUERY_SEED = 331
#: The published code's arithmetic where it changes a number, added after results of the
#: preset were stored: ``Settings.authors_code()`` sets them, and like ``query_seed`` they are
#: not in ``AUTHORS_CODE``, so settings stored before them keep their names; the preset's
#: name carries them as tags (``..._squashf-authors_lterms-authors_cos-authors``).
#: ``squash_formula`` and ``label_terms``: anomatools' squashing and label sums (ours differ in
#: the last bit, which can move the threshold search's tau); ``cosine_rule``: the published
#: cosine signal (``docs/method.md``, Rewards).
AUTHORS_ARITHMETIC: dict[str, str] = {"squash_formula": "authors", "label_terms": "authors",
                                      "cosine_rule": "authors"}
#: The published SADAL code's behaviour (``docs/sadal.md``): ``Settings.sadal()`` switches
#: all of them. Its one legacy stream (``query_rng="authors"``) is seeded with the split
#: seed, as ``SADAL(..., seed)`` seeds its ``RandomState`` with the seed of its D/V split.
SADAL_CODE: dict[str, Any] = {
    "detector": "ssif", "rejector": "two-sided", "threshold_search": "authors-bayes",
    "lr_strategy": "stratified-probability", "al_strategy": "threshold-distance-authors",
    "entropy_terms": "binary", "initial_fit": "train-val", "tau_without_val": "validation",
    "split": "sadal", "budget_rule": "sadal", "budget_fraction": 0.2, "round_fraction": 0.02,
    "c_r": "bound", "query_rng": "authors", "ssif_seed": "authors",
    "ssif_contamination": 0.1, "scaling": "none"}


__all__ = ["AUTHORS_ARITHMETIC", "AUTHORS_CODE", "AUTHORS_QUERY_SEED", "SADAL_CODE"]
