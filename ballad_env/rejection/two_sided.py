"""SADAL's two-sided rejection: a band of abstention around P = 0.5 (``docs/sadal.md``).

BALLAD rejects examples whose confidence 2 |P - 0.5| is below one threshold, a band symmetric
around 0.5. SADAL fits each side apart: an example is rejected iff left <= P <= right, with

* the **left** threshold (below 0.5) minimising, over the labeled validation examples with
  P < 0.5, (c_fn FN + c_r R) / (validation examples with P < 0.5, labeled or not), an example
  accepted iff P < left (so a false negative is an accepted anomaly);
* the **right** threshold (at or above 0.5) minimising, over those with P >= 0.5,
  (c_fp FP + c_r R) / (validation examples with P >= 0.5), accepted iff P > right;
* at most half of the validation set rejected: each side searches an interval whose end is a
  quantile of that side's validation probabilities; the side with the larger error cost
  (left when c_fn > c_fp, else right) goes first and the second side gets what is left.

The searches are registered in ``TWO_SIDED_SEARCHES``: ``"exact"`` (ours, the default) tries
every threshold that rejects a distinct set of labeled examples, as BALLAD's exact search
does; ``"authors-bayes"`` is the published code's ``gp_minimize`` (50 calls per side when
c_fn > c_fp, else 30; started at the side's validation probability nearest 0.5; seeded).
The cost is a step function of the threshold, so many thresholds tie; where the exact search
lands among them is ``TIE_RULES`` (the setting ``two_sided_tie``): the one that rejects
fewest (the default), the middle of the tied thresholds, or the one that rejects most.

Where the published code crashes, these functions do the evident fix (``docs/sadal.md``):
a side without validation probabilities gets 0.5; an interval whose ends invert (exactly one
probability >= 0.5, or a tie at the maximum) shrinks to its lower end.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ballad_env.cost import Costs
from ballad_env.registry import Registry

#: The published code's evaluations per side: first side and second side alike.
AUTHORS_CALLS = {"left-first": 50, "right-first": 30}
#: The largest share of the validation set the two sides may reject together.
MAX_REJECTED_SHARE = 0.5
#: Where the exact search lands among a side's thresholds of least cost (``_land``).
TIE_RULES = ("fewest", "middle", "most")


@dataclass(frozen=True)
class TwoSidedThresholds:
    """Reject iff left <= P <= right (0.5 for both: reject only P = 0.5)."""

    left: float = 0.5
    right: float = 0.5

    @property
    def thresholds(self) -> tuple[float, float]:
        """(left, right)."""
        return self.left, self.right

    @property
    def tau(self) -> float:
        """The band's width right - left (BALLAD's confidence band (0.5 - tau / 2,
        0.5 + tau / 2) has width tau): the figure the observation shows as ``tau``."""
        return self.right - self.left

    def reject(self, p: np.ndarray) -> np.ndarray:
        """Mask of the rejected examples."""
        p = np.asarray(p, dtype=np.float64)
        return (p >= self.left) & (p <= self.right)

    def rejection_probability(self, p: np.ndarray) -> np.ndarray:
        """SADAL's soft rejection: 1 - 2^(-(P / left)^2) below 0.5 and
        1 - 2^(-((1 - P) / (1 - right))^2) from 0.5 on; 0.5 at either threshold."""
        p = np.asarray(p, dtype=np.float64)
        out = np.zeros_like(p)
        low = p < 0.5
        with np.errstate(divide="ignore", invalid="ignore"):
            out[low] = 1 - np.exp(np.log(0.5) * np.power(p[low] / self.left, 2))
            out[~low] = 1 - np.exp(np.log(0.5) * np.power((1 - p[~low]) / (1 - self.right), 2))
        return out


def side_cost(threshold: float, p: np.ndarray, y: np.ndarray, costs: Costs, side: str,
              n_side: int) -> float:
    """One side's cost at ``threshold`` over its labeled examples (probabilities ``p``, 0/1
    labels ``y``), divided by ``n_side``, the validation examples on that side.

    Left: accepted iff P < threshold, c_fn per accepted anomaly, c_r per rejection.
    Right: accepted iff P > threshold, c_fp per accepted normal, c_r per rejection.
    """
    return float(_side_costs(np.array([threshold]), p, y, costs, side, n_side)[0])


def _side_costs(thresholds: np.ndarray, p: np.ndarray, y: np.ndarray, costs: Costs, side: str,
                n_side: int) -> np.ndarray:
    """``side_cost`` at every threshold at once."""
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y)
    t = np.asarray(thresholds, dtype=np.float64)[:, None]
    if side == "left":
        accepted, wrong, c_error = p < t, y == 1, costs.c_fn
    else:
        accepted, wrong, c_error = p > t, y == 0, costs.c_fp
    errors = np.sum(accepted & wrong, axis=1)
    rejected = np.sum(~accepted, axis=1)
    return (errors * c_error + rejected * costs.c_r) / max(n_side, 1)


@dataclass(frozen=True)
class SideProblem:
    """What one side's search sees: its labeled probabilities and labels, the number of
    validation examples on the side, the interval [low, high] of thresholds, the
    published search's starting point and number of calls, and the costs."""

    side: str
    p: np.ndarray
    y: np.ndarray
    n_side: int
    low: float
    high: float
    start: float
    n_calls: int
    costs: Costs
    tie: str = "fewest"

    def __post_init__(self) -> None:
        check_tie(self.tie)

    def cost(self, thresholds: np.ndarray) -> np.ndarray:
        """The side's cost at each threshold."""
        return _side_costs(thresholds, self.p, self.y, self.costs, self.side, self.n_side)


def check_tie(tie: str, search: str = "exact") -> None:
    """A ``ValueError`` naming ``two_sided_tie`` for a tie rule that is not one of
    ``TIE_RULES``, or one other than ``"fewest"`` with a search that has no tie rule."""
    if tie not in TIE_RULES:
        raise ValueError(f"unknown two_sided_tie {tie!r}: use one of {', '.join(TIE_RULES)}")
    if tie != "fewest" and search != "exact":
        raise ValueError(f"two_sided_tie={tie!r} places the exact search's threshold; the "
                         f"{search!r} search has no tie rule: use threshold_search='exact', "
                         "or leave two_sided_tie at 'fewest'")


#: name -> search(problem, seed) returning the side's threshold.
SideSearch = Callable[[SideProblem, int], float]
TWO_SIDED_SEARCHES: Registry[SideSearch] = Registry("two-sided threshold search")


@TWO_SIDED_SEARCHES.register("exact")
def _exact_side(problem: SideProblem, seed: int = 0) -> float:
    """The cheapest of every threshold in [low, high] that rejects a distinct set of labeled
    examples: the ends and each labeled probability inside. Among the thresholds of least
    cost it lands by ``problem.tie`` (``_land``); ``"fewest"`` takes the one that rejects
    fewest (the largest on the left, the smallest on the right)."""
    inside = problem.p[(problem.p > problem.low) & (problem.p < problem.high)]
    candidates = np.unique(np.concatenate([[problem.low], inside, [problem.high]]))
    cost = problem.cost(candidates)
    best = np.flatnonzero(cost == cost.min())
    if problem.tie == "fewest":
        return float(candidates[best[-1]] if problem.side == "left" else candidates[best[0]])
    return _land(candidates, cost == cost.min(), problem.side, problem.tie)


def _pieces(candidates: np.ndarray, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's interval [a, b] of thresholds that reject the same labeled examples
    as it does (``candidates``: sorted, distinct, the ends low and high included).

    Left (accepted iff P < t): the cost is constant on (c_(j-1), c_j], so c_j's interval
    starts just above c_(j-1); low's is [low, low]. Right (accepted iff P > t): constant on
    [c_j, c_(j+1)), so c_j's ends just below c_(j+1); high's is [high, high]."""
    if side == "left":
        return np.concatenate([candidates[:1], np.nextafter(candidates[:-1], np.inf)]), candidates
    return candidates, np.concatenate([np.nextafter(candidates[1:], -np.inf), candidates[-1:]])


def _land(candidates: np.ndarray, best: np.ndarray, side: str, tie: str) -> float:
    """The threshold of ``tie`` among the thresholds of least cost: the union of the
    intervals (``_pieces``) of the candidates masked by ``best``, all inside [low, high], so
    within the side's share of the at-most-half cap.

    ``"fewest"``: its end that rejects fewest (left: its largest point, right: its
    smallest); ``"most"``: its end that rejects most; ``"middle"``: the midpoint of those
    two ends, or where it falls between tied intervals (a costlier threshold) the tied
    threshold nearest to it (the smaller on equal distance)."""
    starts, ends = (piece[best] for piece in _pieces(candidates, side))
    fewest, most = (ends.max(), starts.min()) if side == "left" else (starts.min(), ends.max())
    if tie != "middle":
        return float(fewest if tie == "fewest" else most)
    middle = 0.5 * (fewest + most)
    nearest = np.clip(middle, starts, ends)
    return float(nearest[np.argmin(np.abs(nearest - middle))])


@TWO_SIDED_SEARCHES.register("authors-bayes")
def _authors_bayes_side(problem: SideProblem, seed: int = 0) -> float:
    """The published search: skopt's ``gp_minimize`` over [low, high] with ``n_calls``
    evaluations, started at ``start`` and seeded with ``seed`` (the published code draws it
    from its stream, ``randint(0, 100)``, once per round)."""
    from skopt import gp_minimize

    def objective(point: list[float]) -> float:
        return float(problem.cost(np.array([point[0]]))[0])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # piecewise-constant cost: repeated proposals
        result = gp_minimize(objective, [(problem.low, problem.high)], n_calls=problem.n_calls,
                             random_state=seed, x0=[problem.start], n_jobs=1)
    return float(result.x[0])


def _quantile_bound(values: np.ndarray, at_most: int, side: str) -> float:
    """The end of a side's interval that lets it reject at most ``at_most`` of ``values``:
    the (1 - k / n) quantile on the left, the k / n quantile on the right,
    k = min(n - 1, at_most)."""
    k = min(values.size - 1, max(at_most, 0))
    share = k / values.size
    return float(np.quantile(values, 1 - share if side == "left" else share))


def side_problem(side: str, p_all: np.ndarray, p: np.ndarray, y: np.ndarray, costs: Costs,
                 at_most: int, n_calls: int, tie: str = "fewest") -> SideProblem | None:
    """The search problem of one side, or None when no validation probability lies on it.

    ``p_all``: every validation probability; ``p``, ``y``: the labeled ones and their labels.
    Left interval: [(1 - k / n) quantile of the probabilities below 0.5, their maximum's
    midpoint with 0.5]. Right: [the midpoint of 0.5 and the minimum at or above 0.5, the
    k / n quantile of those, or the largest probability below the overall maximum when the
    quantile is that maximum]; an inverted interval shrinks to its lower end. ``tie``: where
    the exact search lands among the thresholds of least cost (``TIE_RULES``).
    """
    on_side = (p_all < 0.5) if side == "left" else (p_all >= 0.5)
    values = p_all[on_side]
    if values.size == 0:
        return None
    mine = (p < 0.5) if side == "left" else (p >= 0.5)
    if side == "left":
        low, high = _quantile_bound(values, at_most, side), (0.5 + values.max()) / 2
        start = float(values.max())
    else:
        low, high = (0.5 + values.min()) / 2, _quantile_bound(values, at_most, side)
        if high == p_all.max():
            below_max = p_all[p_all != p_all.max()]
            high = float(below_max.max()) if below_max.size else low
        start = float(values.min())
    high = max(high, low)
    return SideProblem(side, p[mine], np.asarray(y)[mine], int(values.size), float(low),
                       float(high), min(max(start, low), high), n_calls, costs, tie)


def fit_two_sided(p_val: np.ndarray, labeled: np.ndarray, y_val: np.ndarray, costs: Costs,
                  search: str = "exact", seed: int = 0, tie: str = "fewest"
                  ) -> TwoSidedThresholds:
    """Both thresholds from the validation probabilities ``p_val``, the mask (or indices)
    ``labeled`` of the labeled validation examples and their 0/1 labels (``y_val``, read
    where labeled). The side with the larger error cost first; ties: right first. ``tie``:
    where the exact search lands among each side's thresholds of least cost
    (``TIE_RULES``; the published search has no such rule and takes ``"fewest"`` only)."""
    check_tie(tie, search)
    p_all = np.asarray(p_val, dtype=np.float64)
    mask = np.zeros(p_all.size, dtype=bool)
    mask[labeled] = True
    p, y = p_all[mask], np.asarray(y_val)[mask]
    run = TWO_SIDED_SEARCHES[search]
    order = ("left", "right") if costs.c_fn > costs.c_fp else ("right", "left")
    n_calls = AUTHORS_CALLS["left-first" if order[0] == "left" else "right-first"]
    at_most = int(MAX_REJECTED_SHARE * p_all.size)
    found = {"left": 0.5, "right": 0.5}
    for side in order:
        problem = side_problem(side, p_all, p, y, costs, at_most, n_calls, tie)
        if problem is None:
            continue
        found[side] = problem.low if problem.low == problem.high else run(problem, seed)
        if side == "left":
            at_most -= int(np.sum(p_all[p_all < 0.5] >= found[side]))
        else:
            at_most -= int(np.sum(p_all[p_all >= 0.5] <= found[side]))
    return TwoSidedThresholds(found["left"], found["right"])


def binary_entropy(p: np.ndarray) -> np.ndarray:
    """H(p) = -p log2 p - (1 - p) log2 (1 - p), 0 at 0 and 1 (SADAL's reward entropy; BALLAD's
    is the one term -p log2 p)."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
    return np.where(np.isfinite(h), h, 0.0)


def entropy_change(new: np.ndarray, old: np.ndarray) -> float:
    """SADAL's reward: the mean over examples of |H(new) - H(old)| (binary entropies of two
    outputs of one side: anomaly probabilities for AL, rejection probabilities for LR)."""
    new_h, old_h = binary_entropy(new), binary_entropy(old)
    return float(np.mean(np.abs(old_h - new_h))) if new_h.size else 0.0


__all__ = ["AUTHORS_CALLS", "MAX_REJECTED_SHARE", "TIE_RULES", "TWO_SIDED_SEARCHES", "SideProblem",
           "TwoSidedThresholds", "binary_entropy", "check_tie", "entropy_change", "fit_two_sided",
           "side_cost", "side_problem"]
