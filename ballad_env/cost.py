"""Costs of mistakes and rejections, and the test-set evaluation of a detector with rejection."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

#: How a detector with a reject option is scored (``docs/method.md``, Cost metric).
COST_METRICS = ("per_example", "class_conditional")
#: Rules for c_r when no number is given: ``"gamma"`` (the contamination, BALLAD's paper) or
#: ``"bound"`` (min(c_fp (1 - gamma), c_fn gamma), the largest c_r the cost inequality
#: allows: SADAL's default, ``SADAL.py`` line 48).
C_R_RULES = ("gamma", "bound")


def rejection_cost(contamination: float, c_fp: float = 1.0, c_fn: float = 1.0,
                   c_r: float | str | None = None) -> float:
    """c_r: the number given, or by its rule (``C_R_RULES``; None is ``"gamma"``).

    The two rules agree at c_fp = c_fn = 1 whenever gamma <= 0.5; they part when a cost is
    raised: c_fn = 10 at gamma = 0.05 gives "bound" min(0.95, 0.5) = 0.5, "gamma" 0.05."""
    if c_r is None or c_r == "gamma":
        return contamination
    if c_r == "bound":
        return min(c_fp * (1 - contamination), c_fn * contamination)
    if isinstance(c_r, str):
        raise ValueError(f"unknown rejection cost {c_r!r}: give a number or one of "
                         f"{', '.join(C_R_RULES)}")
    return c_r


#: The range of each cost a user sets (c_fp, c_fn, c_r): beyond it the test cost overflows
#: or the reward's scale underflows (``Settings``; a cost derived by a rule may be smaller).
COST_RANGE = (1e-6, 1e6)


@dataclass(frozen=True)
class Costs:
    """Costs of a false positive, a false negative and a rejection (c_fp, c_fn, c_r), and the
    metric that adds them up: ``"per_example"`` (c_fp FP + c_fn FN + c_r R) / n, or
    ``"class_conditional"`` c_r R / n + c_fp FP / n_normal + c_fn FN / n_anomaly."""

    c_fp: float = 1.0
    c_fn: float = 1.0
    c_r: float = 0.0
    metric: str = "per_example"

    def __post_init__(self) -> None:
        if self.metric not in COST_METRICS:
            raise ValueError(f"unknown cost metric {self.metric!r}: use one of "
                             f"{', '.join(COST_METRICS)}")

    @classmethod
    def for_contamination(
        cls, contamination: float, c_fp: float = 1.0, c_fn: float = 1.0,
        c_r: float | str | None = None, metric: str = "per_example",
    ) -> Costs:
        """Costs with c_r a number or a rule (``rejection_cost``; default gamma, the paper),
        checked against the cost inequality."""
        costs = cls(c_fp, c_fn, rejection_cost(contamination, c_fp, c_fn, c_r), metric)
        costs.check(contamination)
        return costs

    def check(self, contamination: float) -> None:
        """Raise unless c_r <= min(c_fp (1 - gamma), c_fn gamma), all costs positive and finite.

        Otherwise always predicting one class costs less than rejecting (docs/method.md, Protocol).
        """
        values = {"c_fp": self.c_fp, "c_fn": self.c_fn, "c_r": self.c_r}
        for name, value in values.items():
            is_number = isinstance(value, numbers.Real) and not isinstance(value, bool)
            if not (is_number and math.isfinite(value) and 0 < value <= COST_RANGE[1]):
                raise ValueError(f"invalid costs: {name} must be a positive finite number "
                                 f"up to {COST_RANGE[1]:g}, got {value!r}")
        bound = min(self.c_fp * (1 - contamination), self.c_fn * contamination)
        if self.c_r > bound * (1 + 1e-12):
            raise ValueError(
                f"invalid costs: c_r = {self.c_r:g} exceeds min(c_fp * (1 - gamma), c_fn * gamma)"
                f" = {bound:g} for contamination gamma = {contamination:g}; rejecting would cost "
                "more than always predicting one class"
            )

    def per_example(self, fp, fn, rejected, n: int):
        """(c_fp FP + c_fn FN + c_r R) / n; works elementwise on arrays of counts."""
        return (self.c_fp * fp + self.c_fn * fn + self.c_r * rejected) / max(1, n)

    def class_conditional(self, fp, fn, rejected, n_normal: int, n_anomaly: int):
        """c_r R / n + c_fp FP / n_normal + c_fn FN / n_anomaly (the paper's written formula,
        with rates over all examples of a class); a class with no example adds 0; elementwise."""
        n = n_normal + n_anomaly
        return (self.c_r * rejected / max(1, n) + self.c_fp * fp / max(1, n_normal)
                + self.c_fn * fn / max(1, n_anomaly))

    def of_counts(self, fp, fn, rejected, n_normal: int, n_anomaly: int):
        """The cost under ``metric`` of FP, FN and R counted over n_normal + n_anomaly examples."""
        if self.metric == "class_conditional":
            return self.class_conditional(fp, fn, rejected, n_normal, n_anomaly)
        return self.per_example(fp, fn, rejected, n_normal + n_anomaly)

    @property
    def max_cost(self) -> float:
        """The largest cost of one example, to scale costs into [0, 1]."""
        return max(self.c_fp, self.c_fn, self.c_r)


@dataclass(frozen=True)
class Evaluation:
    """Test metrics of a detector with a reject option: the cost under the costs' metric,
    rates, AUC, and the cost under each metric."""

    cost: float
    fpr: float
    fnr: float
    rejection_rate: float
    auc: float
    cost_per_example: float = float("nan")
    cost_class_conditional: float = float("nan")


def roc_auc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC as the Mann-Whitney statistic on average ranks (ties count one half).

    Equal to scikit-learn's ``roc_auc_score`` and an order of magnitude cheaper on the
    small test sets evaluated after every round.
    """
    positive = np.asarray(y) == 1
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    from scipy.stats import rankdata  # slow to import; only this ranking needs it

    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(p: np.ndarray, y: np.ndarray, rejected: np.ndarray, costs: Costs) -> Evaluation:
    """Cost under ``costs.metric`` (default per example, (c_fp FP + c_fn FN + c_r R) / n), where
    FP and FN count accepted examples; both metrics' costs are reported too.

    FPR and FNR are the accepted mistakes over all normals and all anomalies; the ROC AUC
    ranks by anomaly probability without rejection (NaN when y has one class).
    """
    p, y, rejected = np.asarray(p, dtype=np.float64), np.asarray(y), np.asarray(rejected, bool)
    pred = p > 0.5
    normal, anomaly = y == 0, y == 1
    fp = int(np.sum(~rejected & pred & normal))
    fn = int(np.sum(~rejected & ~pred & anomaly))
    n_rej = int(rejected.sum())
    n_normal, n_anomaly = int(normal.sum()), int(anomaly.sum())
    per_example = float(costs.per_example(fp, fn, n_rej, y.size))
    conditional = float(costs.class_conditional(fp, fn, n_rej, n_normal, n_anomaly))
    both_classes = normal.any() and anomaly.any()
    return Evaluation(
        cost=conditional if costs.metric == "class_conditional" else per_example,
        fpr=fp / n_normal if n_normal else 0.0,  # Python floats, as every figure of info
        fnr=fn / n_anomaly if n_anomaly else 0.0,
        rejection_rate=n_rej / max(1, y.size),
        auc=roc_auc(y, p) if both_classes else float("nan"),
        cost_per_example=per_example,
        cost_class_conditional=conditional,
    )
