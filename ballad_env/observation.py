"""The observation: named features in [0, 1], the same for every data set, from a snapshot.

Side-signal features come first (``<signal>_al``, ``<signal>_lr`` for every signal of
``ballad_env.rewards.SIDE_SIGNALS``), then fixed features. ``STATE_FEATURES`` depend only on
the state (i AL rounds, j LR rounds); the others on the path to it.

Observations are versioned (``OBSERVATIONS``): ``"v0"`` is the environment's original
observation, unchanged (saved policies depend on it); ``"v1"`` appends ``V1_FEATURES``
(the cost on the labeled validation sample and its standard error), so every v0 feature
keeps its index; ``"v2"`` appends ``V2_FEATURES`` to v1 (the costs, the budget and label-free
traits of the data and the detector, for allocators meant to carry across data sets and
cost levels). ``encode(snapshot, version)`` builds any of them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from ballad_env.rewards import SIDE_SIGNAL_NAMES
from ballad_env.snapshot import AL, LR, SIDE_SUFFIXES, Snapshot

_SIGNAL_FEATURES = tuple(f"{name}_{side}" for name in SIDE_SIGNAL_NAMES for side in ("al", "lr"))
#: Features fixed by the state (i, j), whatever the path to it, with their meaning.
STATE_FEATURE_HELP = {
    "budget_used": "rounds taken / rounds in the budget",
    "labeled_train": "labeled fraction of D",
    "labeled_val": "labeled fraction of V",
    "anomalies_found": "anomalies labeled / expected anomalies in D and V (clipped to 1)",
    "contamination": "gamma, the known fraction of anomalies",
    "tau": "current rejection threshold",
    "val_rejection": "share of V rejected by tau",
    "val_cost": "cost estimate on the labels that set tau, over the largest unit cost",
    "al_available": "D still holds a whole round of unlabeled examples",
    "lr_available": "V still holds a whole round of unlabeled examples",
}
STATE_FEATURES = tuple(STATE_FEATURE_HELP)
#: Observation features, in order.
OBSERVATION_FEATURES = (
    *_SIGNAL_FEATURES,
    "al_measured", "lr_measured",
    *STATE_FEATURES[:8],
    "prev_al", "prev_lr",
    *STATE_FEATURES[8:],
)
FEATURE_INDEX = {name: i for i, name in enumerate(OBSERVATION_FEATURES)}
#: Features v1 appends to v0, with their meaning (also fixed by the state (i, j)).
V1_FEATURE_HELP = {
    "val_sample_cost": "cost on the labeled validation examples only (a uniform sample of V), "
                       "over the largest unit cost; 0 before any V label",
    "val_sample_se": "standard error of val_sample_cost, over the largest unit cost",
}
V1_FEATURES = tuple(V1_FEATURE_HELP)
#: Features v2 appends to v1, with their meaning: the costs and the budget, and label-free
#: traits of the data set and of the detector, each scaled to a range that means the same on
#: every data set (also fixed by the state (i, j), so a lattice holds them).
V2_FEATURE_HELP = {
    "cost_fp": "c_fp over the largest unit cost",
    "cost_fn": "c_fn over the largest unit cost",
    "cost_r": "c_r over the largest unit cost",
    "cost_ratio": "(log10(c_fn / c_fp) + 2) / 4: 0.5 at equal costs, 0.75 at c_fn = 10 c_fp",
    "log_size": "log10(rows of D and V) / 6",
    "log_dimension": "log10(features) / 4",
    "log_contamination": "(log10(gamma) + 4) / 4",
    "budget_share": "labels in the whole budget / rows of D",
    "prior_flagged": "share of D the label-free start detector flags (p > 0.5), f, against "
                     "gamma: f / (f + gamma), 0.5 when it flags gamma",
    "prior_confidence": "mean |2p - 1| over D of the label-free start detector",
    "flagged_ratio": "prior_flagged's figure for the detector now",
    "confidence_train": "prior_confidence's figure for the detector now",
    "train_shift": "mean |p now - p at the start| over D: how far AL rounds moved the detector",
}
V2_FEATURES = tuple(V2_FEATURE_HELP)
#: Feature names of each observation version, in order.
OBSERVATIONS: dict[str, tuple[str, ...]] = {
    "v0": OBSERVATION_FEATURES, "v1": (*OBSERVATION_FEATURES, *V1_FEATURES),
    "v2": (*OBSERVATION_FEATURES, *V1_FEATURES, *V2_FEATURES)}
#: Index of every feature of any version (a version's features are a prefix of the next's).
ALL_FEATURE_INDEX = {name: i for i, name in enumerate(OBSERVATIONS["v2"])}


def check_version(version: str) -> tuple[str, ...]:
    """The feature names of observation ``version``; a clear error for an unknown one."""
    if version not in OBSERVATIONS:
        raise ValueError(f"unknown observation version {version!r}: use one of "
                         f"{', '.join(OBSERVATIONS)}")
    return OBSERVATIONS[version]


def state_features(snapshot: Snapshot | Any) -> dict[str, Any]:
    """The features that depend only on the state (i, j), scaled to [0, 1].

    ``snapshot`` may also hold the state figures as arrays (a lattice's grid, as the replay
    reads it): each feature is then computed elementwise, with the same operations on the
    same float64 values, so every element equals the scalar one to the bit.
    """
    s = snapshot
    expected_anomalies = _at_least_one(s.contamination * (s.n_train + s.n_val))
    return {
        "budget_used": s.round / s.n_rounds,
        "labeled_train": s.n_labeled_train / s.n_train,
        "labeled_val": s.n_labeled_val / s.n_val,
        "anomalies_found": _at_most_one(s.n_anomalies_found / expected_anomalies),
        "contamination": s.contamination,
        "tau": s.tau,
        "val_rejection": s.val_rejection,
        "val_cost": _at_most_one(s.val_cost / s.max_cost),
        "al_available": _flag(s.al_available), "lr_available": _flag(s.lr_available),
    }


def v1_features(snapshot: Snapshot | Any) -> dict[str, Any]:
    """The features v1 appends, scaled to [0, 1] by the largest unit cost (elementwise on
    arrays too, as ``state_features``)."""
    return {"val_sample_cost": _at_most_one(snapshot.val_sample_cost / snapshot.max_cost),
            "val_sample_se": _at_most_one(snapshot.val_sample_se / snapshot.max_cost)}


def v2_features(snapshot: Snapshot | Any) -> dict[str, Any]:
    """The features v2 appends (``V2_FEATURE_HELP``), each in [0, 1] (clipped by ``encode``);
    elementwise on arrays too, as ``state_features``."""
    s = snapshot
    return {
        "cost_fp": s.c_fp / s.max_cost, "cost_fn": s.c_fn / s.max_cost,
        "cost_r": s.c_r / s.max_cost,
        "cost_ratio": (np.log10(s.c_fn / s.c_fp) + 2.0) / 4.0,
        "log_size": np.log10(s.n_train + s.n_val) / 6.0,
        "log_dimension": np.log10(s.n_features) / 4.0,
        "log_contamination": (np.log10(np.maximum(s.contamination, 1e-12)) + 4.0) / 4.0,
        "budget_share": s.n_rounds * s.per_round / s.n_train,
        "prior_flagged": _against(s.prior_flagged, s.contamination),
        "prior_confidence": s.prior_confidence,
        "flagged_ratio": _against(s.flagged_train, s.contamination),
        "confidence_train": s.confidence_train,
        "train_shift": s.train_shift,
    }


def _against(share: Any, contamination: Any) -> Any:
    """``share / (share + gamma)``: 0.5 where a detector flags gamma of D (0 if both are 0)."""
    return share / np.maximum(share + contamination, 1e-12)


def side_features(side: int, signals: dict[str, Any] | None) -> dict[str, Any]:
    """One side's features: its latest side signals (0 until measured; a NaN, the published
    cosine rule's, as 1: the observation stays in its box, and a rule comparing ``al >= lr``
    on it still plays LR against it) and whether it is measured. ``signals`` may hold arrays
    (a lattice's reward tables): elementwise."""
    suffix = SIDE_SUFFIXES[side]
    features = {f"{name}_{suffix}": 0.0 if signals is None else _nan_as_one(signals[name])
                for name in SIDE_SIGNAL_NAMES}
    features[f"{suffix}_measured"] = signals is not None
    return features


def _nan_as_one(x: Any) -> Any:
    """``x`` with NaN replaced by 1.0 (elementwise on an array)."""
    return np.where(np.isnan(x), 1.0, x) if isinstance(x, np.ndarray) else (
        1.0 if math.isnan(x) else x)


def _at_most_one(x: Any) -> Any:
    """``min(1.0, x)``; elementwise on an array as Python's ``min`` picks (1.0 unless
    x < 1.0, NaN included)."""
    return np.where(x < 1.0, x, 1.0) if isinstance(x, np.ndarray) else min(1.0, x)


def _at_least_one(x: Any) -> Any:
    """``max(1.0, x)``; elementwise on an array as Python's ``max`` picks."""
    return np.where(x > 1.0, x, 1.0) if isinstance(x, np.ndarray) else max(1.0, x)


def _flag(x: Any) -> Any:
    """``float(bool(x))``: 1.0 or 0.0 (elementwise on an array)."""
    return np.where(x != 0, 1.0, 0.0) if isinstance(x, np.ndarray) else float(x)


def encode(snapshot: Snapshot, version: str = "v0") -> np.ndarray:
    """The observation vector (float32, clipped to [0, 1]) of ``snapshot`` in ``version``."""
    names = check_version(version)
    values: dict[str, float] = dict(state_features(snapshot))
    if version != "v0":
        values.update(v1_features(snapshot))
    if version not in ("v0", "v1"):
        values.update(v2_features(snapshot))
    for side in (AL, LR):
        values.update(side_features(side, snapshot.latest[side]))
    values["prev_al"] = snapshot.previous == AL
    values["prev_lr"] = snapshot.previous == LR
    obs = np.array([values[name] for name in names], dtype=np.float32)
    return np.clip(obs, 0.0, 1.0)


def observation_space(version: str = "v0") -> spaces.Box:
    """``Box(0, 1, (number of features of version,), float32)``."""
    n = len(check_version(version))
    return spaces.Box(np.zeros(n, np.float32), np.ones(n, np.float32), dtype=np.float32)


def feature_table(version: str = "v0") -> str:
    """The features of ``version`` as a Markdown table (index, name, meaning)."""
    names = check_version(version)
    meaning = {**STATE_FEATURE_HELP, **V1_FEATURE_HELP, **V2_FEATURE_HELP,
               "al_measured": "1 once an AL round has been taken",
               "lr_measured": "1 once an LR round has been taken",
               "prev_al": "previous action was AL", "prev_lr": "previous action was LR"}
    for name in SIDE_SIGNAL_NAMES:
        meaning[f"{name}_al"] = f"latest AL {name} reward (0 until measured)"
        meaning[f"{name}_lr"] = f"latest LR {name} reward (0 until measured)"
    rows = [f"| {i} | {name} | {meaning[name]} |" for i, name in enumerate(names)]
    return "\n".join(["| index | name | meaning |", "|---|---|---|", *rows])


__all__ = ["ALL_FEATURE_INDEX", "FEATURE_INDEX", "OBSERVATIONS", "OBSERVATION_FEATURES",
           "STATE_FEATURES", "V1_FEATURES", "V2_FEATURES", "check_version", "encode",
           "feature_table", "observation_space", "side_features", "state_features",
           "v1_features", "v2_features"]
