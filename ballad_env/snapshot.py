"""The snapshot: one frozen record of an episode at one moment, and what derives from it.

``Snapshot`` is the one state record: the observation (``ballad_env.observation``), the
environment's ``info``, the lattice's per-state figures and the results' columns all
derive from it, in the live environment and in the replay alike (``side_record`` is a
side's part of the record for both).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ballad_env.rewards import SIDE_SIGNAL_NAMES

AL, LR = 0, 1
ACTION_NAMES = ("AL", "LR")
#: Each side's suffix in feature and record names.
SIDE_SUFFIXES = ("al", "lr")


def action_name(action: int | None) -> str:
    """``"AL"`` or ``"LR"`` for an action, ``""`` for none (the start of an episode)."""
    return ACTION_NAMES[action] if action is not None else ""


def detector_traits(p_train: np.ndarray) -> tuple[float, float]:
    """Label-free traits of a detector's anomaly probabilities on D: the share it flags
    (p > 0.5) and its mean confidence, mean |2p - 1| (0: every p is 0.5; 1: every p is 0
    or 1). Both in [0, 1] on every data set."""
    p = np.asarray(p_train, dtype=float)
    return float(np.mean(p > 0.5)), float(np.mean(np.abs(2.0 * p - 1.0)))


def side_record(side: int, signals: dict[str, float] | None, shown: str) -> dict[str, Any]:
    """One side's entries of ``Snapshot.record``: its latest side signals (0 before its
    first round), the ``shown`` one again as ``reward_<side>``, and whether it is measured."""
    suffix = SIDE_SUFFIXES[side]
    values = signals if signals is not None else dict.fromkeys(SIDE_SIGNAL_NAMES, 0.0)
    return {f"reward_{suffix}": values[shown],
            **{f"{name}_{suffix}": values[name] for name in SIDE_SIGNAL_NAMES},
            f"{suffix}_measured": signals is not None}


@dataclass(frozen=True)
class Snapshot:
    """Everything that can be observed or reported about an episode at one moment.

    The observation (``ballad_env.observation``), the environment's ``info``, the lattice's
    per-state figures and the results' columns are all derived from it. ``previous`` and
    ``latest`` depend on the path to the state; every other field only on the state (i, j).
    """

    dataset: str
    round: int
    n_rounds: int
    n_al: int
    n_lr: int
    previous: int | None  # the action of the round just taken (None at the start)
    queried: np.ndarray  # indices the previous round labeled, into D or V
    test_cost: float
    fpr: float
    fnr: float
    rejection_rate: float
    auc: float
    test_cost_per_example: float  # the test cost under each metric, whichever is in force
    test_cost_class_conditional: float
    tau: float  # the rejector's figure (confidence: tau; two-sided: right - left)
    threshold_left: float  # the rejection band's ends in P (confidence: 0.5 -/+ tau / 2)
    threshold_right: float
    #: RejEx's expected test rejection rate and its bounds on the rate and the cost per test
    #: example (``ballad_env.rejection.rejex``); -1 for a rejector without them
    rejex_expected_rejection: float
    rejex_rejection_bound: float
    rejex_cost_bound: float
    val_cost: float  # M(tau) on the labels that set tau
    val_rejection: float  # share of all of V rejected
    val_sample_cost: float  # cost on the labeled V examples only: unbiased, a uniform sample
    val_sample_se: float  # its standard error, sd / sqrt(labeled V) (0 below two labels)
    n_labeled_train: int
    n_labeled_val: int
    n_train: int
    n_val: int
    n_anomalies_found: int
    contamination: float
    max_cost: float  # the largest unit cost, to scale costs into [0, 1]
    c_fp: float  # the unit costs in force (a false positive, a false negative, a rejection)
    c_fn: float
    c_r: float
    n_features: int  # the data's dimension
    per_round: int  # labels bought per round
    # Label-free traits of the detector on D (``detector_traits`` below):
    # at the start (the prior's detector, before any label) and now (after i AL rounds).
    prior_flagged: float  # share of D with anomaly probability > 0.5, at the start
    prior_confidence: float  # mean |2p - 1| over D, at the start
    flagged_train: float  # share of D with anomaly probability > 0.5, now
    confidence_train: float  # mean |2p - 1| over D, now
    train_shift: float  # mean |p_now - p_start| over D: how far AL has moved the detector
    al_available: bool
    lr_available: bool
    latest: dict[int, dict[str, float] | None]  # each side's latest side signals

    @property
    def action_mask(self) -> np.ndarray:
        """Boolean (AL, LR): which actions can be taken now."""
        return np.array([self.al_available, self.lr_available])

    def signal(self, side: int, name: str) -> float:
        """A side's latest value of side signal ``name`` (0 until that side is measured)."""
        values = self.latest[side]
        return values[name] if values is not None else 0.0

    def record(self, shown_signal: str = "entropy") -> dict[str, Any]:
        """The scalar ``info`` entries (``RECORD_FIELDS``): test figures, both sides' signals
        (``shown_signal`` also as ``reward_al``/``reward_lr``), the rejector's tau and band
        (``threshold_left``, ``threshold_right``) and label counts."""
        values: dict[str, Any] = {
            "dataset": self.dataset, "round": self.round, "action": action_name(self.previous),
            "test_cost": self.test_cost, "fpr": self.fpr, "fnr": self.fnr,
            "rejection_rate": self.rejection_rate, "auc": self.auc,
            "test_cost_per_example": self.test_cost_per_example,
            "test_cost_class_conditional": self.test_cost_class_conditional,
            **side_record(AL, self.latest[AL], shown_signal),
            **side_record(LR, self.latest[LR], shown_signal),
            "tau": self.tau, "threshold_left": self.threshold_left,
            "threshold_right": self.threshold_right,
            "rejex_expected_rejection": self.rejex_expected_rejection,
            "rejex_rejection_bound": self.rejex_rejection_bound,
            "rejex_cost_bound": self.rejex_cost_bound, "val_cost": self.val_cost,
            "n_labeled_train": self.n_labeled_train, "n_labeled_val": self.n_labeled_val,
            "n_anomalies_found": self.n_anomalies_found,
        }
        return {key: values[key] for key in RECORD_FIELDS}

    def info(self, shown_signal: str = "entropy", queried_width: int = 0) -> dict[str, Any]:
        """The environment's ``info``: the record plus the indices just queried (padded with
        -1 to ``queried_width``: ``padded_queried``) and the mask."""
        return {**self.record(shown_signal),
                "queried": padded_queried(self.queried, queried_width),
                "action_mask": self.action_mask}


#: The least width of ``info["queried"]`` (``padded_queried``): every data set whose rounds
#: buy at most this many labels gives ``info`` one shape, so Gymnasium's vector envs can
#: stack sub-environments that play different data sets.
QUERIED_WIDTH = 64


def padded_queried(queried: np.ndarray, width: int) -> np.ndarray:
    """A copy of ``queried`` (int64) padded with -1 to ``width`` entries: ``info["queried"]``
    keeps one shape whatever the round bought (none at a reset) and whatever the data set."""
    out = np.full(max(width, len(queried)), -1, dtype=np.int64)
    out[:len(queried)] = queried
    return out


def queried_width(per_round: int, width: int | None) -> int:
    """The width of ``info["queried"]`` of an environment whose data sets' rounds buy up to
    ``per_round`` labels: ``width`` if given (a ``ValueError`` if narrower than a round),
    else the wider of ``QUERIED_WIDTH`` and ``per_round``."""
    if width is None:
        return max(QUERIED_WIDTH, per_round)
    if isinstance(width, bool) or not isinstance(width, int | np.integer) or width < per_round:
        raise ValueError(f"queried_width={width!r}: a round buys up to {per_round} labels here, "
                         f"so give a whole number of at least {per_round} (or None)")
    return int(width)


#: Snapshot fields that depend on the path to a state, not only on the state (i, j).
PATH_FIELDS = ("previous", "queried", "latest")
#: Numeric snapshot fields fixed by the state (i, j): what the lattice stores per state.
STATE_FIGURES = tuple(f.name for f in fields(Snapshot)
                      if f.name not in (*PATH_FIELDS, "dataset"))
#: The keys of ``Snapshot.record``: the columns of tidy per-round results.
RECORD_FIELDS = ("dataset", "round", "action", "test_cost", "fpr", "fnr", "rejection_rate",
                 "auc", "test_cost_per_example", "test_cost_class_conditional",
                 "reward_al", "reward_lr",
                 *(f"{name}_{side}" for name in SIDE_SIGNAL_NAMES for side in ("al", "lr")),
                 "al_measured", "lr_measured", "tau", "threshold_left", "threshold_right",
                 "rejex_expected_rejection", "rejex_rejection_bound", "rejex_cost_bound",
                 "val_cost", "n_labeled_train", "n_labeled_val", "n_anomalies_found")

#: The Python type of each state figure in a ``Snapshot`` (what ``bool``, ``int`` or
#: ``float`` makes of a lattice's stored value).
FIGURE_TYPES: dict[str, type] = {f.name: {"bool": bool, "int": int}.get(str(f.type), float)
                                 for f in fields(Snapshot) if f.name in STATE_FIGURES}


__all__ = ["ACTION_NAMES", "AL", "FIGURE_TYPES", "LR", "PATH_FIELDS", "QUERIED_WIDTH",
           "RECORD_FIELDS", "SIDE_SUFFIXES", "STATE_FIGURES", "Snapshot", "action_name",
           "detector_traits", "padded_queried", "queried_width", "side_record"]
