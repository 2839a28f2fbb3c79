"""Learning to reject: confidence, threshold search and rejection probabilities.

See ``docs/method.md``, Rejection.

An example is rejected (the detector abstains) iff its confidence C(x) is below tau.
tau minimises the empirical cost M(tau) on labeled examples. M is piecewise constant
in tau and changes only at observed confidences, so the ``"exact"`` search evaluates
every distinct candidate in O(m log m); ``"bayes"`` is the paper's Gaussian-process
search (skopt ``gp_minimize``), kept for faithfulness.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ballad_env.cost import Costs
from ballad_env.registry import Registry

DEFAULT_TAU = 0.1  # the paper's threshold before any label
#: Where tau goes inside the interval of thresholds that reject the same examples.
TAU_POSITIONS = ("as-found", "bottom", "middle", "top")
#: The published code's gp_minimize seed, the same in every round.
AUTHORS_SEARCH_SEED = 331


def confidence(p: np.ndarray) -> np.ndarray:
    """C(x) = 2 |P(x) - 0.5|: 0 on the decision boundary, 1 for certain predictions."""
    return 2.0 * np.abs(np.asarray(p, dtype=np.float64) - 0.5)


def rejection_probability(conf: np.ndarray, tau: float) -> np.ndarray:
    """P_rej(x) = 2^(-(C(x)/tau)^2), at least 0.5 iff C(x) <= tau; 0 everywhere when tau = 0."""
    conf = np.asarray(conf, dtype=np.float64)
    if tau <= 0:
        return np.zeros_like(conf)
    return np.exp2(-((conf / tau) ** 2))


def empirical_cost(
    tau: float, conf: np.ndarray, pred: np.ndarray, y: np.ndarray, costs: Costs
) -> float:
    """M(tau) = (c_fp FP + c_fn FN + c_r R) / m over labeled examples (or the class-conditional
    cost, by ``costs.metric``); FP, FN among accepted."""
    conf = np.asarray(conf)
    if conf.size == 0:
        return 0.0
    return labeled_cost(conf < tau, pred, y, costs)


def labeled_cost(rejected: np.ndarray, pred: np.ndarray, y: np.ndarray, costs: Costs) -> float:
    """The cost M of any rejection rule on labeled examples: ``rejected`` their mask,
    ``pred`` the 0/1 predictions, ``y`` the labels (0 for none)."""
    rejected = np.asarray(rejected, dtype=bool)
    if rejected.size == 0:
        return 0.0
    y = np.asarray(y)
    false_positive, false_negative = _accepted_errors(rejected, pred, y)
    n_anomaly = int(np.sum(y == 1))
    return float(costs.of_counts(false_positive.sum(), false_negative.sum(), rejected.sum(),
                                 rejected.size - n_anomaly, n_anomaly))


def _accepted_errors(rejected: np.ndarray, pred: np.ndarray, y: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the accepted false positives and false negatives."""
    pred, y = np.asarray(pred), np.asarray(y)
    return ~rejected & (pred == 1) & (y == 0), ~rejected & (pred == 0) & (y == 1)


def example_costs(
    tau: float, conf: np.ndarray, pred: np.ndarray, y: np.ndarray, costs: Costs
) -> np.ndarray:
    """Each labeled example's cost: c_r if rejected (conf < tau), else c_fp for a false
    positive, c_fn for a false negative, 0 if right. Their mean is ``empirical_cost``."""
    return labeled_example_costs(np.asarray(conf) < tau, pred, y, costs)


def labeled_example_costs(rejected: np.ndarray, pred: np.ndarray, y: np.ndarray,
                          costs: Costs) -> np.ndarray:
    """``example_costs`` of any rejection rule (``rejected``: the labeled examples' mask)."""
    rejected = np.asarray(rejected, dtype=bool)
    false_positive, false_negative = _accepted_errors(rejected, pred, y)
    out = np.zeros(rejected.size, dtype=np.float64)
    out[false_positive] = costs.c_fp
    out[false_negative] = costs.c_fn
    out[rejected] = costs.c_r
    return out


def mean_and_standard_error(values: np.ndarray) -> tuple[float, float]:
    """(mean, sample sd / sqrt(m)) of ``values``: (0, 0) for none, SE 0 for one value."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 0.0, 0.0
    if values.size == 1:
        return float(values[0]), 0.0
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))


def search_interval(conf: np.ndarray) -> tuple[float, float]:
    """[Q(0.01), Q(0.5)] of labeled confidences, widened by 0.1 either side when degenerate."""
    lo, hi = (float(v) for v in np.quantile(conf, [0.01, 0.5]))
    if hi <= lo:
        lo, hi = max(0.0, lo - 0.1), min(1.0, lo + 0.1)
    return lo, hi


#: name -> search(conf, pred, y, costs, lo, hi, n_calls=..., seed=...) returning tau.
SearchFunction = Callable[..., float]
THRESHOLD_SEARCHES: Registry[SearchFunction] = Registry("threshold search")


@THRESHOLD_SEARCHES.register("exact")
def _exact_search(
    conf: np.ndarray, pred: np.ndarray, y: np.ndarray, costs: Costs, lo: float, hi: float,
    n_calls: int = 0, seed: int = 0,
) -> float:
    """Minimise M over every tau in [lo, hi] that yields a distinct rejection set.

    tau rejects {C < tau}; the candidates lo, the observed confidences in (lo, hi] and hi
    reach every such set. Ties go to the smallest candidate.
    """
    order = np.argsort(conf, kind="stable")
    c_sorted = conf[order]
    fp_sorted = ((pred == 1) & (y == 0))[order]
    fn_sorted = ((pred == 0) & (y == 1))[order]
    inside = c_sorted[(c_sorted > lo) & (c_sorted < hi)]
    candidates = np.unique(np.concatenate([[lo], inside, [hi]]))
    n_rejected = np.searchsorted(c_sorted, candidates, side="left")
    cum_fp = np.concatenate([[0], np.cumsum(fp_sorted)])
    cum_fn = np.concatenate([[0], np.cumsum(fn_sorted)])
    fp = cum_fp[-1] - cum_fp[n_rejected]
    fn = cum_fn[-1] - cum_fn[n_rejected]
    n_anomaly = int(np.sum(y == 1))
    cost = costs.of_counts(fp, fn, n_rejected, conf.size - n_anomaly, n_anomaly)
    return float(candidates[int(np.argmin(cost))])  # argmin: first, i.e. smallest, tau


@THRESHOLD_SEARCHES.register("bayes")
def _bayes_search(
    conf: np.ndarray, pred: np.ndarray, y: np.ndarray, costs: Costs, lo: float, hi: float,
    n_calls: int = 20, seed: int = 0,
) -> float:
    """The paper's search: skopt's gp_minimize over [lo, hi] with ``n_calls`` evaluations.

    ``seed`` comes from the state (i, j), so the search does not depend on the path."""
    from skopt import gp_minimize

    def objective(point: list[float]) -> float:
        return empirical_cost(point[0], conf, pred, y, costs)

    with warnings.catch_warnings():
        # M is piecewise constant: the GP often proposes points it has already seen.
        warnings.simplefilter("ignore")
        result = gp_minimize(objective, [(lo, hi)], n_calls=n_calls,
                             n_initial_points=min(10, n_calls), random_state=seed)
    # Ties: the smallest tau among the evaluated points with the best cost.
    evaluated = np.array([x[0] for x in result.x_iters])
    values = np.asarray(result.func_vals)
    return float(evaluated[values == values.min()].min())


@THRESHOLD_SEARCHES.register("authors-bayes")
def _authors_bayes_search(
    conf: np.ndarray, pred: np.ndarray, y: np.ndarray, costs: Costs, lo: float, hi: float,
    n_calls: int = 50, seed: int = 0,
) -> float:
    """The published code's search: gp_minimize over [lo, hi] started at x0 = Q(0.10) of the
    confidences, with seed 331 in every round (``seed`` is ignored), returning the best point
    in the order gp_minimize found it (no tie rule)."""
    from skopt import gp_minimize

    def objective(point: list[float]) -> float:
        return empirical_cost(point[0], conf, pred, y, costs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = gp_minimize(objective, [(lo, hi)], n_calls=n_calls,
                             random_state=AUTHORS_SEARCH_SEED, x0=[np.quantile(conf, 0.10)])
    return float(result.x[0])


def place_tau(tau: float, conf: np.ndarray, lo: float, hi: float, position: str) -> float:
    """tau moved within [lo, hi] to the bottom, middle or top of the interval of thresholds that
    reject the same examples {C < tau} (``"as-found"``: unchanged). Every point of it has the
    same cost on the labeled examples; test examples between them are rejected or not."""
    if position == "as-found":
        return tau
    below, above = conf[conf < tau], conf[conf >= tau]
    bottom = max(lo, float(np.nextafter(below.max(), np.inf))) if below.size else lo
    top = min(hi, float(above.min())) if above.size else hi
    return {"bottom": bottom, "middle": 0.5 * (bottom + top), "top": top}[position]


#: Searches that take a number of evaluations (``n_calls``).
CALL_SEARCHES = ("bayes", "authors-bayes")


@dataclass(frozen=True)
class ThresholdSearch:
    """How tau is found: a registered search (``"exact"``, the default, ``"bayes"`` or
    ``"authors-bayes"``) with ``n_calls`` evaluations where the search takes a number of them,
    and where tau is placed in its optimal interval (``position``, one of ``TAU_POSITIONS``)."""

    method: str = "exact"
    n_calls: int = 20
    position: str = "as-found"

    def __post_init__(self) -> None:
        THRESHOLD_SEARCHES.check(self.method)
        if self.method in CALL_SEARCHES and self.n_calls < 2:
            raise ValueError(f"{self.method} threshold search needs n_calls >= 2, "
                             f"got {self.n_calls}")
        if self.position not in TAU_POSITIONS:
            raise ValueError(f"unknown tau position {self.position!r}: use one of "
                             f"{', '.join(TAU_POSITIONS)}")

    def __call__(
        self, p: np.ndarray, y: np.ndarray, costs: Costs, seed: int = 0
    ) -> float:
        """tau minimising M on labeled examples with anomaly probabilities ``p``, labels ``y``."""
        p = np.asarray(p, dtype=np.float64)
        if p.size == 0:
            return 0.0
        conf = confidence(p)
        pred = (p > 0.5).astype(np.int8)
        y = np.asarray(y)
        lo, hi = search_interval(conf)
        search = THRESHOLD_SEARCHES[self.method]
        tau = search(conf, pred, y, costs, lo, hi, n_calls=self.n_calls, seed=seed)
        return place_tau(tau, conf, lo, hi, self.position)
