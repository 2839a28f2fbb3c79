"""The crossed study's factors: each level is a set of ``Settings`` options, and a factor
combination is one episode setting (or a reason why the lattice cannot pose it).

A new level is one entry in :data:`FACTORS` (its options, merged into ``Settings``); a new
factor is one more key. Combinations whose labels depend on the order of the rounds (the
lattice's own check, ``ballad_env.replay.lattice.check_lattice_settings``), or whose options
``Settings`` rejects (an option not built yet), are kept with the reason, so every table
says what was not posed and why.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ballad_env.data.adbench import dataset_group
from ballad_env.replay.lattice import check_lattice_settings
from ballad_env.settings import Settings

#: factor -> level -> the Settings options of that level (the first level: our default).
#: SADAL's protocol: its split (80/20, then D/V 50/50), its budget (20% of D and V in 10
#: rounds) and its rejection cost (c_r = min(c_fp (1 - gamma), c_fn gamma)).
#: ``two-sided-most``: the two-sided rejector whose exact search takes, among equally cheap
#: thresholds, those that reject most (``docs/sadal.md``, "two_sided_tie").
#: ``rejex``: RejEx (T = 32), which reads no label; ``rejex-tuned``: its T chosen on the
#: labels that set the rejection (``ballad_env.rejection.rejex``).
FACTORS: dict[str, dict[str, dict[str, Any]]] = {
    "detector": {"ssdo": {}, "ssif": {"detector": "ssif"}},
    "rejector": {"confidence": {}, "two-sided": {"rejector": "two-sided"},
                 "two-sided-most": {"rejector": "two-sided", "two_sided_tie": "most"},
                 "rejex": {"rejector": "rejex"}, "rejex-tuned": {"rejector": "rejex-tuned"}},
    "queries": {"ours": {},
                "sadal": {"al_strategy": "threshold-distance",
                          "lr_strategy": "stratified-probability"},
                "sadal-al": {"al_strategy": "threshold-distance"}},
    "costs": {"default": {}, "cfn10": {"c_fn": 10.0}, "cfp10": {"c_fp": 10.0}},
    "protocol": {"ours": {},
                 "sadal": {"split": "sadal", "budget_rule": "sadal", "budget_fraction": 0.2,
                           "round_fraction": 0.02, "c_r": "bound"}},
}
#: The factors, in the order of the tables' columns.
FACTOR_NAMES = tuple(FACTORS)
#: The status of a combination the lattice poses, of one it cannot, and of one it cannot
#: pose only because its queries depend on the path, played in live episodes instead
#: (``live.py``).
POSED, NOT_POSABLE, LIVE = "posed", "not-posable", "live"


@dataclass(frozen=True)
class Combination:
    """One level of every factor, ``levels`` in :data:`FACTOR_NAMES` order."""

    levels: tuple[str, ...]

    @property
    def label(self) -> str:
        """The levels joined by ``/`` (``ssdo/confidence/ours/default/ours``)."""
        return "/".join(self.levels)

    def columns(self) -> dict[str, str]:
        """factor -> level: the columns every row of this combination carries."""
        return dict(zip(FACTOR_NAMES, self.levels, strict=True))

    def options(self, factors: Mapping[str, Mapping[str, dict[str, Any]]] = FACTORS
                ) -> dict[str, Any]:
        """The ``Settings`` options of this combination (later factors win a shared name)."""
        merged: dict[str, Any] = {}
        for factor, level in zip(FACTOR_NAMES, self.levels, strict=True):
            merged.update(factors[factor][level])
        return merged


def check_levels(chosen: Mapping[str, Sequence[str]],
                 factors: Mapping[str, Mapping[str, Any]] = FACTORS) -> None:
    """A ``ValueError`` naming the factor and its levels if a chosen level is unknown, or a
    factor has no level."""
    for factor in FACTOR_NAMES:
        levels = list(chosen.get(factor, []))
        if not levels:
            raise ValueError(f"no level of factor {factor!r}: choose some of "
                             f"{', '.join(factors[factor])}")
        unknown = [level for level in levels if level not in factors[factor]]
        if unknown:
            raise ValueError(f"unknown {factor} level(s) {', '.join(unknown)}: use some of "
                             f"{', '.join(factors[factor])}")


def combinations(chosen: Mapping[str, Sequence[str]]) -> list[Combination]:
    """Every combination of the chosen levels (each factor's levels in the given order)."""
    check_levels(chosen)
    return [Combination(tuple(levels))
            for levels in itertools.product(*(list(dict.fromkeys(chosen[f]))
                                              for f in FACTOR_NAMES))]


def combination_settings(combination: Combination, base: Settings | None = None,
                         factors: Mapping[str, Mapping[str, dict[str, Any]]] = FACTORS
                         ) -> Settings | str:
    """The combination's episode settings (``base`` with its options), or, when the lattice
    cannot pose it, the reason (``Settings``' or ``check_lattice_settings``' error)."""
    try:
        settings = (base or Settings()).replace(**combination.options(factors))
    except (ValueError, TypeError) as err:
        return f"settings refused: {err}"
    try:
        check_lattice_settings(settings)
    except ValueError as err:
        return str(err)
    return settings


def split_posable(combos: Sequence[Combination], base: Settings | None = None
                  ) -> tuple[dict[Combination, Settings], dict[Combination, str]]:
    """The combinations the lattice poses, with their settings, and the others with the
    reason."""
    posed: dict[Combination, Settings] = {}
    refused: dict[Combination, str] = {}
    for combo in combos:
        found = combination_settings(combo, base)
        if isinstance(found, str):
            refused[combo] = found
        else:
            posed[combo] = found
    return posed, refused


def path_refused(combination: Combination, base: Settings | None = None,
                 factors: Mapping[str, Mapping[str, dict[str, Any]]] = FACTORS
                 ) -> Settings | None:
    """The combination's settings if the lattice refuses them only because its query
    strategies depend on the path (with the default strategies in their place it would pose
    them), else ``None``: those settings are playable in live episodes, the others (an
    option ``Settings`` refuses, a shared query stream) are not."""
    try:
        settings = (base or Settings()).replace(**combination.options(factors))
    except (ValueError, TypeError):
        return None
    defaults = Settings()
    try:
        check_lattice_settings(settings)
    except ValueError:
        try:
            check_lattice_settings(settings.replace(al_strategy=defaults.al_strategy,
                                                    lr_strategy=defaults.lr_strategy))
        except ValueError:
            return None
        return settings
    return None


def split_live(refused: Mapping[Combination, str], base: Settings | None = None
               ) -> dict[Combination, Settings]:
    """Among the refused combinations, those refused only because their queries depend on
    the path, with their settings (:func:`path_refused`)."""
    found = {combo: path_refused(combo, base) for combo in refused}
    return {combo: settings for combo, settings in found.items() if settings is not None}


__all__ = ["FACTORS", "FACTOR_NAMES", "LIVE", "NOT_POSABLE", "POSED", "Combination",
           "check_levels", "combination_settings", "combinations", "dataset_group", "path_refused",
           "split_live", "split_posable"]
