"""SSIF's split criterion: where a semi-supervised isolation tree cuts a node (``docs/sadal.md``).

An isolation tree cuts at random; SSIF (Stradiotti, Perini and Davis, SDM 2024) draws the cut
from a *split distribution* over the node's normalised feature range, a histogram whose bin
heights score how good a cut at each candidate point would be:

* the **unlabeled component** U(t) rewards cuts that leave each side compact, as Otsu's
  threshold does: U(t) = w_l ln w_l + w_r ln w_r - ln sqrt(w_l var_l + w_r var_r), with w the
  shares and var the (population) variances of the unlabeled values left (< t) and right (>= t);
* the **labeled component** L(t) is the information gain of the cut on the labels: anomalies
  against labeled normals, or against the unlabeled values when no normal is labeled;
* each is min-max scaled to [0, 1] over the candidate points and mixed as
  (1 - pp) U + (1 + pp) L, pp the labeled share of the node.

Every function repeats the published code's arithmetic, so that forests grown with the same
random numbers agree to rounding, including its quirks (each named ``Quirk`` below).
"""

from __future__ import annotations

import numpy as np
from scipy.special import kl_div

#: The published code's margin of the candidate points inside [0, 1].
EPS = 1e-4


def _entropy_terms(p: np.ndarray | float, q: np.ndarray | float | None = None) -> np.ndarray:
    """-p log2 p - q log2 q (q = 1 - p unless given), where a 0 log 0 (or a log of a negative
    number, Quirk: see ``labeled_component``) makes the whole value 0, as the published code's
    ``nan_to_num`` does."""
    p = np.asarray(p, dtype=np.float64)
    q = 1 - p if q is None else np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = -p * np.log2(p) - q * np.log2(q)
    return _finite(value)


def _left_counts(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """For each candidate point t, how many ``values`` lie strictly left of it (< t)."""
    return np.searchsorted(np.sort(values), axis, side="left")


def _finite(values: np.ndarray) -> np.ndarray:
    """``values`` with every NaN or infinity replaced by 0 (``nan_to_num(.., 0, 0, 0)``)."""
    return np.where(np.isfinite(values), values, 0.0)


def _masked_variance(column: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per column of ``mask``, the population variance of the ``column`` values it selects
    (0 where it selects none), with ``numpy.nanvar``'s arithmetic."""
    count = mask.sum(axis=0)
    values = np.where(mask, column, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = values.sum(axis=0) / count
        deviation = np.where(mask, values - mean, 0.0)
        variance = (deviation * deviation).sum(axis=0) / count
    return np.where(count > 0, variance, 0.0)


def unlabeled_component(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """U(t) for the unlabeled (normalised) values at each candidate point t of ``axis``.

    An empty side has variance 0; a term that is not finite (0 ln 0, ln 0) counts 0, so a cut
    with no spread on either side scores w_l ln w_l + w_r ln w_r only (Quirk: the best
    possible cut, zero within-side variance, loses its -ln sqrt term instead of scoring +inf).
    """
    values = np.asarray(values, dtype=np.float64)
    column = values[:, None]
    left = column < axis
    var_left, var_right = _masked_variance(column, left), _masked_variance(column, ~left)
    share_left = left.sum(axis=0) / values.size
    share_right = 1 - share_left
    within = share_left * var_left + share_right * var_right
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (_finite(share_left * np.log(share_left))
                 + _finite(share_right * np.log(share_right)))
        spread = _finite(np.log(np.sqrt(within)))
    return terms - spread


def labeled_component(values: np.ndarray, labels: np.ndarray, axis: np.ndarray,
                      unlabeled: np.ndarray) -> np.ndarray:
    """L(t) for the labeled (normalised) ``values`` with ``labels`` in {-1, 1}.

    * No labeled anomaly: 0 everywhere. (Quirk: the published code measures each point's
      distance to the normals' range and then zeroes every distance, because its mask
      compares distances with positions and is always true; labeled normals therefore steer
      no cut, only the leaves' depths.)
    * Anomalies and labeled normals: the information gain of the cut,
      H(all) - c_l H(left) - c_r H(right), H the binary entropy, c_l the share left.
    * Anomalies only: the unlabeled values play the normals, but the shares are divided by
      the number of *labeled* values (Quirk: c_l can exceed 1 and c_r be negative, and H(all)
      counts 0 when the unlabeled outnumber the labeled).
    """
    values, labels = np.asarray(values, dtype=np.float64), np.asarray(labels)
    anomalies = values[labels == 1]
    if anomalies.size == 0:
        return np.zeros(axis.size)
    normals = values[labels == -1] if np.any(labels == -1) else np.asarray(unlabeled)
    a_left, n_left = _left_counts(anomalies, axis), _left_counts(normals, axis)
    a_right, n_right = anomalies.size - a_left, normals.size - n_left
    with np.errstate(divide="ignore", invalid="ignore"):
        p_left = _finite(a_left / (a_left + n_left))
        p_right = _finite(a_right / (a_right + n_right))
    share_normal = normals.size / values.size
    share_left = (a_left + n_left) / values.size
    return (_entropy_terms(1 - share_normal, share_normal) - share_left * _entropy_terms(p_left)
            - (1 - share_left) * _entropy_terms(p_right))


def _min_max(scores: np.ndarray) -> np.ndarray:
    """Scores scaled to [0, 1]; all 0 when they are constant."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (scores - scores.min()) / (scores.max() - scores.min())
    return np.where(np.isnan(scaled), 0.0, scaled)


class SplitDistribution:
    """A distribution on [0, 1] of where to cut one feature of a node (normalised units).

    ``heights`` None: uniform on [0, 1]. Else a histogram on the bins
    [axis_0, axis_1), ..., [axis_last, 1] whose *densities* are ``heights``; its cdf is
    linear within bins and its quantile function the inverse (as scipy's ``rv_histogram``
    with ``density=True``, done here with the same arithmetic).
    """

    def __init__(self, axis: np.ndarray, heights: np.ndarray | None) -> None:
        self.axis = axis
        self.uniform = heights is None
        self.edges = np.array([0.0, 1.0])
        self.cdf_at_edges = np.array([0.0, 1.0])
        if heights is not None:
            self.edges = np.append(axis, 1)
            widths = self.edges[1:] - self.edges[:-1]
            density = heights / float(np.sum(heights * widths))
            self.cdf_at_edges = np.hstack([0.0, np.cumsum(density * widths)])

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """P(cut < x)."""
        if self.uniform:
            return np.clip(x, 0.0, 1.0)
        return np.interp(x, self.edges, self.cdf_at_edges)

    def quantile(self, u: float) -> float:
        """The cut whose cdf is ``u`` (``u`` in (0, 1))."""
        if self.uniform:
            return float(u)
        return float(np.interp(u, self.cdf_at_edges, self.edges))

    def divergence(self) -> float:
        """KL divergence from the uniform distribution of the mass between consecutive
        candidate points (the last bin, [axis_last, 1], is left out, as published):
        sum of p log(p / w) - p + w, p the mass and w the width of each gap."""
        mass = np.diff(self.cdf(self.axis))
        return float(np.sum(kl_div(mass, np.diff(self.axis))))


def split_distribution(feature: np.ndarray, labels: np.ndarray, axis: np.ndarray
                       ) -> SplitDistribution:
    """The split distribution of one feature of a node (``labels`` in {-1, 0, 1})."""
    feature, labels = np.asarray(feature, dtype=np.float64), np.asarray(labels)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.nan_to_num((feature - feature.min()) / (feature.max() - feature.min()),
                               nan=0.5)
    unlabeled, labeled = labels == 0, labels != 0
    labeled_share = np.count_nonzero(labeled) / labels.size
    u = (unlabeled_component(scaled[unlabeled], axis) if unlabeled.any()
         else np.zeros(axis.size))
    lab = (labeled_component(scaled[labeled], labels[labeled], axis, scaled[unlabeled])
           if labeled.any() else np.zeros(axis.size))
    heights = (1 - labeled_share) * _min_max(u) + (1 + labeled_share) * _min_max(lab)
    if heights.max() == heights.min():
        return SplitDistribution(axis, None)
    return SplitDistribution(axis, heights)


def candidate_axis(n_node: int) -> np.ndarray:
    """The node's candidate cut points: max(5, n / 10) - 1 evenly spaced in [EPS, 1 - EPS]."""
    n_bins = max(5, int(n_node / 10))
    return np.linspace(EPS, 1 - EPS, n_bins - 1)


def refine_axis(axis: np.ndarray, feature: np.ndarray, labels: np.ndarray) -> np.ndarray | None:
    """Adjust the candidate points for a feature on which some labeled anomaly lies outside
    the range of the other examples (unlabeled or normal); None when none does (the feature
    is then not a candidate, as it cannot isolate a labeled anomaly).

    Where the anomalies stick out above (below), a point just inside the others' extreme is
    added (the extreme minus (plus) EPS), or, when that extreme lies beyond the last (first)
    candidate point, the extreme and its midpoint with the anomalies' extreme. Quirk: the
    points added for one feature stay in the axis shared by every feature of the node.
    """
    anomalous = labels == 1
    top_a, bottom_a = feature[anomalous].max(), feature[anomalous].min()
    top_n, bottom_n = feature[~anomalous].max(), feature[~anomalous].min()
    if top_a <= top_n and bottom_n <= bottom_a:
        return None
    low, span = feature.min(), feature.max() - feature.min()
    top_a, bottom_a = (top_a - low) / span, (bottom_a - low) / span
    top_n, bottom_n = (top_n - low) / span, (bottom_n - low) / span
    if top_a > top_n and top_n > axis[-1]:
        axis = np.append(axis, [top_n, (top_n + top_a) / 2])
    elif top_a > top_n and top_n != 0:
        axis = np.sort(np.append(axis, top_n - EPS))
    if bottom_a < bottom_n and bottom_n < axis[0]:
        axis = np.concatenate([[(bottom_n + bottom_a) / 2, bottom_n], axis])
    elif bottom_a < bottom_n and bottom_n != 1:
        axis = np.sort(np.append(axis, bottom_n + EPS))
    return axis


__all__ = ["EPS", "SplitDistribution", "candidate_axis", "labeled_component", "refine_axis",
           "split_distribution", "unlabeled_component"]
