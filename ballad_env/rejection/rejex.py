"""RejEx: rejection without labels, on ExCeeD's confidence (``docs/method.md``, RejEx).

ExCeeD (Perini, Vercruyssen and Davis, ECML-PKDD 2020, "Quantifying the confidence of
anomaly detectors in their example-wise predictions") asks how stable a detector's
prediction of an example is if the training set were drawn again. A detector trained on n
examples with contamination gamma flags an example iff its score exceeds those of
n - floor(n gamma) training examples. With k the training scores at most the example's
score, the chance that a training example scores at most it has the Beta(1 + k, 1 + n - k)
posterior, whose mean is p = (1 + k) / (2 + n); ExCeeD's outlier probability is

    P(Y_hat = 1 | s) = P(Bin(n, p) > n - floor(n gamma)),

and its confidence in the prediction made is P(Y_hat = 1 | s) for a flagged example, else
1 - P(Y_hat = 1 | s) (``exceed_confidence``: what pyod's ``predict_confidence`` returns).

RejEx (Perini and Davis, NeurIPS 2023, "Unsupervised Anomaly Detection with Rejection")
rejects an example iff its stability 2 |P(Y_hat = 1 | s) - 0.5| <= 1 - 2 exp(-T), i.e. iff
both P(Y_hat = 1 | s) and 1 - P(Y_hat = 1 | s) are at least exp(-T) (T = 32 by default).
Which counts k it rejects depends on n, gamma and T only: a run of consecutive k
(``rejected_counts``), so the rule is a band of the detector's scores between two training
scores. The paper gives, from n, gamma and T alone:

* the expected test rejection rate, t2 - t1, where t1 < t2 solve
  F(floor(n gamma) - 1; n, t) = 1 - exp(-T) and = exp(-T) (F the binomial CDF): the rule
  rejects iff 1 - t2 <= p <= 1 - t1 (``expected_rejection``);
* an upper bound on the test rejection rate that holds with probability 1 - delta
  (``rejection_bound``; delta = ``RATE_BOUND_DELTA``, our choice);
* an upper bound on the expected cost per test example,
  c_fp min(gamma, t1) + c_fn min(gamma, 1 - t2) + c_r (t2 - t1) (``cost_bound``): the
  accepted flagged examples (mass t1, at most the gamma flagged) bound the false positives,
  the accepted unflagged ones (mass 1 - t2, at most the gamma anomalies) the false negatives.

The three hold for a score function fixed before the test examples are drawn, the training
and test examples i.i.d.: our detectors without labels. Labels of D pull SSDO's and SSIF's
scores of the labeled training examples towards their labels, so after an AL round the
training and test scores are no longer exchangeable and the figures are estimates only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ballad_env.cost import Costs
from ballad_env.rejection.confidence import labeled_cost, rejection_probability

#: The paper's default tolerance T: reject iff the stability is at most 1 - 2 exp(-32).
DEFAULT_T = 32.0
#: The tolerances ``"rejex-tuned"`` chooses among on the labeled examples (T <= ln 2 rejects
#: nothing: 1 - 2 exp(-T) <= 0).
TUNED_T = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: The rejection-rate bound holds with probability 1 - delta (our choice of delta).
RATE_BOUND_DELTA = 0.05


def flag_count(n: int, gamma: float) -> int:
    """floor(n gamma): how many of the n training examples the detector flags (as pyod's
    ``int(n * contamination)``, floating point included)."""
    return int(n * gamma)


def outlier_probability(counts: np.ndarray, n: int, gamma: float) -> np.ndarray:
    """ExCeeD's P(Y_hat = 1 | s) = P(Bin(n, p) > n - floor(n gamma)), p = (1 + k) / (2 + n),
    for each example with ``counts`` k (training scores at most its score)."""
    return _tails(n, gamma)[0][np.asarray(counts, dtype=np.intp)]


def exceed_confidence(counts: np.ndarray, n: int, gamma: float, flagged: np.ndarray
                      ) -> np.ndarray:
    """ExCeeD's confidence in the prediction made: P(Y_hat = 1 | s) where ``flagged``, else
    1 - P(Y_hat = 1 | s)."""
    upper, lower = _tails(n, gamma)
    counts = np.asarray(counts, dtype=np.intp)
    return np.where(np.asarray(flagged, dtype=bool), upper[counts], lower[counts])


def stability(counts: np.ndarray, n: int, gamma: float) -> np.ndarray:
    """RejEx's confidence 2 |P(Y_hat = 1 | s) - 0.5| = 1 - 2 min(P, 1 - P), both tails
    computed apart so that the small one keeps its precision."""
    upper, lower = _tails(n, gamma)
    counts = np.asarray(counts, dtype=np.intp)
    return 1.0 - 2.0 * np.minimum(upper[counts], lower[counts])


def rejection_threshold(t: float) -> float:
    """RejEx's threshold on the stability: 1 - 2 exp(-T) (at most 0 for T <= ln 2)."""
    return 1.0 - 2.0 * math.exp(-t)


@lru_cache(maxsize=64)
def _tails(n: int, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """(P(Y_hat = 1 | s), 1 - P(Y_hat = 1 | s)) for every count k = 0..n, each tail from
    its own function (``binom.sf`` and ``binom.cdf``), read-only."""
    p = (1.0 + np.arange(n + 1)) / (2.0 + n)
    from scipy.stats import binom  # slow to import; only RejEx needs it

    cut = n - flag_count(n, gamma)
    upper, lower = binom.sf(cut, n, p), binom.cdf(cut, n, p)
    upper.setflags(write=False)
    lower.setflags(write=False)
    return upper, lower


def rejected_counts(n: int, gamma: float, t: float) -> tuple[int, int]:
    """The counts k rejected under tolerance ``t``: k_low..k_high inclusive (k_low > k_high:
    none). Both tails must be at least exp(-T); the upper one grows with k, the lower one
    falls, so the rejected counts are consecutive."""
    upper, lower = _tails(n, gamma)
    level = math.exp(-t)
    rejected = np.flatnonzero(np.minimum(upper, lower) >= level)
    if rejected.size == 0:
        return n + 1, n
    return int(rejected[0]), int(rejected[-1])


def _tail_root(k: int, n: int, level: float) -> float:
    """The t in [0, 1] with binomial CDF F(k; n, t) = ``level`` (F falls from 1 to 0 in t)."""
    from scipy.optimize import brentq  # slow to import; only RejEx needs it
    from scipy.stats import binom

    return float(brentq(lambda t: binom.cdf(k, n, t) - level, 0.0, 1.0, xtol=1e-14))


@lru_cache(maxsize=256)  # fixed per episode (|D|, gamma, T): every refit reads it
def band_ends(n: int, gamma: float, t: float) -> tuple[float, float]:
    """(t1, t2): F(floor(n gamma) - 1; n, t1) = 1 - exp(-T), F(...; t2) = exp(-T); the rule
    rejects the examples whose p lies in [1 - t2, 1 - t1]. (0, 0) when nothing can be
    rejected (T <= ln 2, or no example flagged)."""
    k = flag_count(n, gamma) - 1
    level = math.exp(-t)
    if k < 0 or level >= 0.5:
        return 0.0, 0.0
    return _tail_root(k, n, 1.0 - level), _tail_root(k, n, level)


def expected_rejection(n: int, gamma: float, t: float) -> float:
    """The paper's estimate of the test rejection rate: t2 - t1 (``band_ends``)."""
    t1, t2 = band_ends(n, gamma, t)
    return t2 - t1


def exchangeable_rejection(n: int, gamma: float, t: float) -> float:
    """The exact expected rejection rate of a test example whose score is exchangeable with
    the n training scores (no ties): its count k is uniform on 0..n, so the share of the
    n + 1 counts rejected."""
    low, high = rejected_counts(n, gamma, t)
    return max(high - low + 1, 0) / (n + 1)


def rejection_bound(n: int, gamma: float, t: float, delta: float = RATE_BOUND_DELTA) -> float:
    """The paper's upper bound on the test rejection rate, holding with probability
    1 - delta: the width of an interval of the score's quantile that holds the rejected band
    (its ends from Hoeffding's inequality on the binomial tails), clipped to [0, 1], plus
    2 sqrt(log(2 / delta) / (2 n)) for the training scores' empirical distribution."""
    right = (n + 1 - gamma * (n + 2)) / n + t * (n + 2) / math.sqrt(2 * n ** 3 * t)
    inner = 2 * n * (-3 * gamma ** 2 - 2 * n * (1 - gamma) ** 2 + 4 * gamma - 3) \
        + t * (n + 2) ** 2 - 8
    left = (2 + n * (1 - gamma) * (n + 1)) / n ** 2 \
        - math.sqrt(0.5 * n ** 5 * max(inner, 0.0)) / n ** 4
    return min(1.0, right) - max(0.0, left) + 2 * math.sqrt(math.log(2 / delta) / (2 * n))


def cost_bound(n: int, gamma: float, t: float, costs: Costs) -> float:
    """The paper's upper bound on the expected cost per test example:
    c_fp min(gamma, t1) + c_fn min(gamma, 1 - t2) + c_r (t2 - t1)."""
    t1, t2 = band_ends(n, gamma, t)
    if t2 <= t1:  # nothing rejected: every flagged example may be wrong, and every anomaly
        return costs.c_fp * gamma + costs.c_fn * gamma
    return (costs.c_fp * min(gamma, t1) + costs.c_fn * min(gamma, 1 - t2)
            + costs.c_r * (t2 - t1))


@dataclass(frozen=True)
class RejExBand:
    """RejEx's rule with tolerance ``t`` on the detector's training probabilities ``train``
    (sorted; P rises with the score, so counts of P are counts of scores): reject iff an
    example's count k (training probabilities at most its P) is in k_low..k_high.

    ``tau`` and ``thresholds`` describe the band in P, [train[k_low - 1], train[k_high]):
    the observation's feature and the info's band ends. ``figures``: the paper's expected
    rejection rate and bounds for this n, gamma and T."""

    t: float
    gamma: float
    low: int
    high: int
    figures: dict[str, float] = field(compare=False)
    train: np.ndarray = field(compare=False, repr=False)

    @classmethod
    def fit(cls, train: np.ndarray, gamma: float, t: float, costs: Costs) -> RejExBand:
        """The rule on these training probabilities (sorted here)."""
        ordered = np.sort(np.asarray(train, dtype=np.float64))
        n = ordered.size
        low, high = rejected_counts(n, gamma, t)
        figures = {"rejex_expected_rejection": expected_rejection(n, gamma, t),
                   "rejex_rejection_bound": rejection_bound(n, gamma, t),
                   "rejex_cost_bound": cost_bound(n, gamma, t, costs)}
        return cls(t, gamma, low, high, figures, ordered)

    def counts(self, p: np.ndarray) -> np.ndarray:
        """Each example's count k: the training probabilities at most its P."""
        return np.searchsorted(self.train, np.asarray(p, dtype=np.float64), side="right")

    @property
    def thresholds(self) -> tuple[float, float]:
        if self.low > self.high:
            return 0.5, 0.5
        n = self.train.size
        left = float(self.train[self.low - 1]) if self.low > 0 else 0.0
        right = float(self.train[self.high]) if self.high < n else 1.0
        return left, right

    @property
    def tau(self) -> float:
        left, right = self.thresholds
        return right - left

    def reject(self, p: np.ndarray) -> np.ndarray:
        k = self.counts(p)
        return (k >= self.low) & (k <= self.high)

    def rejection_probability(self, p: np.ndarray) -> np.ndarray:
        """BALLAD's soft rejection 2^(-(C / tau)^2) on RejEx's stability C with tau its
        threshold 1 - 2 exp(-T): at least 0.5 iff rejected; 0 where T rejects nothing."""
        conf = stability(self.counts(p), self.train.size, self.gamma)
        return rejection_probability(conf, rejection_threshold(self.t))


def tuned_band(train: np.ndarray, gamma: float, costs: Costs, p: np.ndarray, y: np.ndarray,
               default: float, grid: tuple[float, ...] = TUNED_T) -> RejExBand:
    """The band whose T, among ``grid``, costs least on the labeled examples (probabilities
    ``p``, labels ``y``; ties: the smallest T, which rejects fewest); ``default`` without
    labeled examples."""
    if np.size(p) == 0:
        return RejExBand.fit(train, gamma, default, costs)
    pred = (np.asarray(p) > 0.5).astype(np.int8)
    bands = [RejExBand.fit(train, gamma, t, costs) for t in sorted(grid)]
    cost = [labeled_cost(band.reject(p), pred, y, costs) for band in bands]
    return bands[int(np.argmin(cost))]


__all__ = ["DEFAULT_T", "RATE_BOUND_DELTA", "TUNED_T", "RejExBand", "band_ends", "cost_bound",
           "exceed_confidence", "exchangeable_rejection", "expected_rejection", "flag_count",
           "outlier_probability", "rejected_counts", "rejection_bound", "rejection_threshold",
           "stability", "tuned_band"]
