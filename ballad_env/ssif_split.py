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

Speed: a node scores all its candidate features at once, a column each (``values`` of shape
(n, k) give components of shape (k, m) over the m candidate points), so a node costs a few
dozen NumPy calls whatever k. The results are bit-identical to one feature at a time: the
sums over a node's values are taken along the first axis of an array of at least 8 columns,
which NumPy adds row after row (the order of the one-feature code), and the sums over
candidate points along the last axis, pairwise as a 1-d sum.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import kl_div

#: The published code's margin of the candidate points inside [0, 1].
EPS = 1e-4


def _entropy_terms(p: np.ndarray | float, q: np.ndarray | float | None = None) -> np.ndarray:
    """-p log2 p - q log2 q (q = 1 - p unless given), where a 0 log 0 (or a log of a negative
    number, Quirk: see ``labeled_components``) makes the whole value 0, as the published
    code's ``nan_to_num`` does."""
    p = np.asarray(p, dtype=np.float64)
    q = 1 - p if q is None else np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = -p * np.log2(p) - q * np.log2(q)
    return _finite(value)


def _left_counts(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """(k, m): for each column of ``values`` (n, k) and candidate point t, how many values lie
    strictly left of it (< t)."""
    return (values[:, :, None] < axis).sum(axis=0)


def _finite(values: np.ndarray) -> np.ndarray:
    """``values`` with every NaN or infinity replaced by 0 (``nan_to_num(.., 0, 0, 0)``)."""
    return np.where(np.isfinite(values), values, 0.0)


def _masked_variances(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per column k and mask column j, the population variance of the ``values[:, k]`` that
    ``mask[:, k, j]`` selects (0 where it selects none), with ``numpy.nanvar``'s arithmetic.
    ``mask`` has at least 8 columns per feature, so its sums run row after row."""
    count = mask.sum(axis=0)
    selected = np.where(mask, values[:, :, None], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = selected.sum(axis=0) / count
        deviation = np.where(mask, selected - mean, 0.0)
        variance = (deviation * deviation).sum(axis=0) / count
    return np.where(count > 0, variance, 0.0)


def unlabeled_components(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """U(t), shape (k, m), for the unlabeled (normalised) ``values`` (n, k) of k features at
    each candidate point t of ``axis`` (m).

    An empty side has variance 0; a term that is not finite (0 ln 0, ln 0) counts 0, so a cut
    with no spread on either side scores w_l ln w_l + w_r ln w_r only (Quirk: the best
    possible cut, zero within-side variance, loses its -ln sqrt term instead of scoring +inf).
    """
    values = np.asarray(values, dtype=np.float64)
    m = axis.size
    left = values[:, :, None] < axis
    variances = _masked_variances(values, np.concatenate([left, ~left], axis=2))
    share_left = left.sum(axis=0) / len(values)
    share_right = 1 - share_left
    within = share_left * variances[:, :m] + share_right * variances[:, m:]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (_finite(share_left * np.log(share_left))
                 + _finite(share_right * np.log(share_right)))
        spread = _finite(np.log(np.sqrt(within)))
    return terms - spread


def labeled_components(values: np.ndarray, labels: np.ndarray, axis: np.ndarray,
                       unlabeled: np.ndarray) -> np.ndarray:
    """L(t), shape (k, m), for the labeled (normalised) ``values`` (n, k) with ``labels`` in
    {-1, 1}; ``unlabeled`` (n_u, k) the node's unlabeled values.

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
    if len(anomalies) == 0:
        return np.zeros((values.shape[1], axis.size))
    normals = values[labels == -1] if np.any(labels == -1) else np.asarray(unlabeled)
    a_left, n_left = _left_counts(anomalies, axis), _left_counts(normals, axis)
    a_right, n_right = len(anomalies) - a_left, len(normals) - n_left
    with np.errstate(divide="ignore", invalid="ignore"):
        p_left = _finite(a_left / (a_left + n_left))
        p_right = _finite(a_right / (a_right + n_right))
    share_normal = len(normals) / len(values)
    share_left = (a_left + n_left) / len(values)
    return (_entropy_terms(1 - share_normal, share_normal) - share_left * _entropy_terms(p_left)
            - (1 - share_left) * _entropy_terms(p_right))


def unlabeled_component(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """U(t) of one feature's unlabeled values (``unlabeled_components`` of one column)."""
    return unlabeled_components(np.asarray(values, dtype=np.float64)[:, None], axis)[0]


def labeled_component(values: np.ndarray, labels: np.ndarray, axis: np.ndarray,
                      unlabeled: np.ndarray) -> np.ndarray:
    """L(t) of one feature (``labeled_components`` of one column)."""
    return labeled_components(np.asarray(values, dtype=np.float64)[:, None], labels, axis,
                              np.asarray(unlabeled, dtype=np.float64)[:, None])[0]


def _min_max(scores: np.ndarray) -> np.ndarray:
    """Each row of scores scaled to [0, 1]; all 0 in a row that is constant."""
    low, high = scores.min(axis=1, keepdims=True), scores.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (scores - low) / (high - low)
    return np.where(np.isnan(scaled), 0.0, scaled)


class SplitDistributions:
    """Distributions on [0, 1] of where to cut k features of a node (normalised units), one
    per row of ``heights`` (k, m).

    A row whose heights are all equal is the uniform distribution on [0, 1]. Any other row is
    a histogram on the bins [axis_0, axis_1), ..., [axis_last, 1] whose *densities* are its
    heights; its cdf is linear within bins and its quantile function the inverse (as scipy's
    ``rv_histogram`` with ``density=True``, done here with the same arithmetic).
    """

    def __init__(self, axis: np.ndarray, heights: np.ndarray) -> None:
        heights = np.atleast_2d(np.asarray(heights, dtype=np.float64))
        self.axis = axis
        self.uniform = heights.max(axis=1) == heights.min(axis=1)
        self.edges = np.append(axis, 1)
        widths = self.edges[1:] - self.edges[:-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            density = heights / np.sum(heights * widths, axis=1, keepdims=True)
        cumulative = np.cumsum(density * widths, axis=1)
        self.cdf_at_edges = np.hstack([np.zeros((len(heights), 1)), cumulative])

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray:
        """P(cut < x) under row ``row``'s distribution."""
        if self.uniform[row]:
            return np.clip(x, 0.0, 1.0)
        return np.interp(x, self.edges, self.cdf_at_edges[row])

    def quantile(self, row: int, u: float) -> float:
        """The cut whose cdf is ``u`` (``u`` in (0, 1)) under row ``row``'s distribution."""
        if self.uniform[row]:
            return float(u)
        return float(np.interp(u, self.cdf_at_edges[row], self.edges))

    def divergences(self) -> np.ndarray:
        """Per row, the KL divergence from the uniform distribution of the mass between
        consecutive candidate points (the last bin, [axis_last, 1], is left out, as
        published): sum of p log(p / w) - p + w, p the mass and w the width of each gap.
        A uniform row's masses are its widths: 0 exactly."""
        # The cdf at each candidate point, as np.interp gives it at a knot: the value at the
        # last edge equal to the point.
        at_axis = self.cdf_at_edges[:, np.searchsorted(self.edges, self.axis, "right") - 1]
        divergence = np.sum(kl_div(np.diff(at_axis, axis=1), np.diff(self.axis)), axis=1)
        return np.where(self.uniform, 0.0, divergence)


def split_distributions(scaled: np.ndarray, labels: np.ndarray, axis: np.ndarray
                        ) -> SplitDistributions:
    """The split distributions of k features of a node, given their values normalised to
    [0, 1] (``scaled``, (n, k)) and the node's labels in {-1, 0, 1}."""
    labels = np.asarray(labels)
    unlabeled, labeled = labels == 0, labels != 0
    n_labeled = np.count_nonzero(labeled)
    labeled_share = n_labeled / labels.size
    zeros = np.zeros((scaled.shape[1], axis.size))
    u = unlabeled_components(scaled[unlabeled], axis) if n_labeled < labels.size else zeros
    lab = (labeled_components(scaled[labeled], labels[labeled], axis, scaled[unlabeled])
           if n_labeled else zeros)
    return SplitDistributions(axis, (1 - labeled_share) * _min_max(u)
                              + (1 + labeled_share) * _min_max(lab))


def normalise(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Values scaled to [0, 1] by their column's minimum and maximum; 0.5 in a constant
    column."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (values - low) / (high - low)
    scaled[np.isnan(scaled)] = 0.5
    return scaled


def split_distribution(feature: np.ndarray, labels: np.ndarray, axis: np.ndarray
                       ) -> SplitDistributions:
    """The split distribution of one feature of a node (``labels`` in {-1, 0, 1})."""
    feature = np.asarray(feature, dtype=np.float64)[:, None]
    return split_distributions(normalise(feature, feature.min(axis=0), feature.max(axis=0)),
                               labels, axis)


@lru_cache(maxsize=256)
def _evenly_spaced(n_points: int) -> np.ndarray:
    points = np.linspace(EPS, 1 - EPS, n_points)
    points.setflags(write=False)
    return points


def candidate_axis(n_node: int) -> np.ndarray:
    """The node's candidate cut points: max(5, n / 10) - 1 evenly spaced in [EPS, 1 - EPS]
    (read-only: refining makes a new array)."""
    return _evenly_spaced(max(5, int(n_node / 10)) - 1)


def _refine(axis: np.ndarray, top_a: float, bottom_a: float, top_n: float, bottom_n: float
            ) -> np.ndarray:
    """The axis refined for one feature whose anomalies' extremes (``top_a``, ``bottom_a``)
    and the others' (``top_n``, ``bottom_n``) are given in normalised units (see
    ``refine_axis``)."""
    if top_a > top_n and top_n > axis[-1]:
        axis = np.append(axis, [top_n, (top_n + top_a) / 2])
    elif top_a > top_n and top_n != 0:
        axis = np.sort(np.append(axis, top_n - EPS))
    if bottom_a < bottom_n and bottom_n < axis[0]:
        axis = np.concatenate([[(bottom_n + bottom_a) / 2, bottom_n], axis])
    elif bottom_a < bottom_n and bottom_n != 1:
        axis = np.sort(np.append(axis, bottom_n + EPS))
    return axis


def refine_axes(axis: np.ndarray, X: np.ndarray, labels: np.ndarray, low: np.ndarray,
                high: np.ndarray, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``features`` (columns of the node's X, ``low`` and ``high`` its column extremes)
    on which some labeled anomaly lies outside the range of the other examples, and the axis
    refined for each of them in turn (``refine_axis``, one feature)."""
    anomalous = labels == 1
    anomalies, others = X[anomalous][:, features], X[~anomalous][:, features]
    top_a, bottom_a = anomalies.max(axis=0), anomalies.min(axis=0)
    top_n, bottom_n = others.max(axis=0), others.min(axis=0)
    useful = (top_a > top_n) | (bottom_a < bottom_n)
    low, span = low[features], high[features] - low[features]
    extremes = (np.vstack([top_a, bottom_a, top_n, bottom_n]) - low) / span
    for i in np.flatnonzero(useful):
        axis = _refine(axis, *extremes[:, i].tolist())
    return features[useful], axis


def refine_axis(axis: np.ndarray, feature: np.ndarray, labels: np.ndarray) -> np.ndarray | None:
    """Adjust the candidate points for a feature on which some labeled anomaly lies outside
    the range of the other examples (unlabeled or normal); None when none does (the feature
    is then not a candidate, as it cannot isolate a labeled anomaly).

    Where the anomalies stick out above (below), a point just inside the others' extreme is
    added (the extreme minus (plus) EPS), or, when that extreme lies beyond the last (first)
    candidate point, the extreme and its midpoint with the anomalies' extreme. Quirk: the
    points added for one feature stay in the axis shared by every feature of the node.
    """
    column = np.asarray(feature, dtype=np.float64)[:, None]
    useful, axis = refine_axes(axis, column, np.asarray(labels), column.min(axis=0),
                               column.max(axis=0), np.array([0]))
    return axis if useful.size else None


__all__ = ["EPS", "SplitDistributions", "candidate_axis", "labeled_component",
           "labeled_components", "normalise", "refine_axes", "refine_axis",
           "split_distribution", "split_distributions", "unlabeled_component",
           "unlabeled_components"]
