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

**Batches.** For speed the functions score B nodes (one per tree of a forest grown in
lockstep, ``detectors.ssif.grow``) and K features of each at once: a node's values are a column of a
padded array ``(rows, B, K)`` with a ``(rows, B)`` mask of the real rows, its candidate
points a row of ``(B, M)`` of which the first ``m[b]`` are real. The results are
bit-identical to one feature of one node at a time, as the published code computes them:
sums over a node's values run along the first axis of an array with at least 8 values per
row, which NumPy adds row after row (the one-feature order; padded rows add 0), and sums over
candidate points are taken on exactly the node's ``m[b]`` points (NumPy's pairwise sum
depends on the length). ``unlabeled_component``, ``labeled_component`` and
``split_distribution`` are the one-feature forms.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: The published code's margin of the candidate points inside [0, 1].
EPS = 1e-4
#: Values per masked array of the unlabeled component (1 MiB of floats): larger batches
#: are computed a few candidate points at a time.
_CHUNK = 2**17


def _entropy_terms(p: np.ndarray | float, q: np.ndarray | float | None = None) -> np.ndarray:
    """-p log2 p - q log2 q (q = 1 - p unless given), where a 0 log 0 (or a log of a negative
    number, Quirk: see ``labeled_components``) makes the whole value 0, as the published
    code's ``nan_to_num`` does."""
    p = np.asarray(p, dtype=np.float64)
    q = 1 - p if q is None else np.asarray(q, dtype=np.float64)
    value = -p * np.log2(p) - q * np.log2(q)
    return _finite(value)


def _finite(values: np.ndarray) -> np.ndarray:
    """``values`` with every NaN or infinity replaced by 0 (``nan_to_num(.., 0, 0, 0)``)."""
    return np.where(np.isfinite(values), values, 0.0)


def _left_of(values: np.ndarray, valid: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """(rows, M, B, K): whether each real value lies strictly left of each candidate point
    (the candidate points before the nodes and features, so that the inner loops run over
    B K values)."""
    return (values[:, None] < axis.T[None, :, :, None]) & valid[:, None, :, None]


def _row_sums(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(B, K): the sum of the first ``lengths[b]`` entries of each row of ``values``
    (B, K, M), as ``np.sum`` of exactly those entries (its pairwise order)."""
    sums = np.zeros(values.shape[:2])
    for length in np.unique(lengths):
        nodes = lengths == length
        sums[nodes] = np.sum(values[nodes, :, :length], axis=-1)
    return sums


def unlabeled_components(values: np.ndarray, valid: np.ndarray, axis: np.ndarray
                         ) -> np.ndarray:
    """U(t), (B, K, M): ``_unlabeled_components`` a few candidate points at a time, so that
    its masked arrays stay small (in cache, and within memory on large nodes); the points
    are independent of each other."""
    step = max(4, _CHUNK // (2 * values.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        if step >= axis.shape[1]:
            return _unlabeled_components(values, valid, axis)
        return np.concatenate([_unlabeled_components(values, valid, axis[:, j:j + step])
                               for j in range(0, axis.shape[1], step)], axis=-1)


def _unlabeled_components(values: np.ndarray, valid: np.ndarray, axis: np.ndarray
                          ) -> np.ndarray:
    """U(t), (B, K, M), from the unlabeled (normalised) ``values`` (rows, B, K) of K features
    of B nodes, ``valid`` (rows, B) marking real rows, at the candidate points ``axis`` (B, M).

    An empty side has variance 0; a term that is not finite (0 ln 0, ln 0) counts 0, so a cut
    with no spread on either side scores w_l ln w_l + w_r ln w_r only (Quirk: the best
    possible cut, zero within-side variance, loses its -ln sqrt term instead of scoring +inf).
    A node without unlabeled values scores 0.
    """
    m = axis.shape[1]
    left = _left_of(values, valid, axis)
    mask = np.concatenate([left, ~left & valid[:, None, :, None]], axis=1)
    count = mask.sum(axis=0)
    selected = np.where(mask, values[:, None], 0.0)
    # numpy.nanvar's arithmetic; an empty side (count 0) gets variance 0
    mean = selected.sum(axis=0) / np.maximum(count, 1)
    deviation = np.where(mask, selected - mean, 0.0)
    variance = np.where(count > 0, (deviation * deviation).sum(axis=0) / count, 0.0)
    count, variance = count.transpose(1, 2, 0), variance.transpose(1, 2, 0)
    share_left = count[..., :m] / valid.sum(axis=0)[:, None, None]
    share_right = 1 - share_left
    within = share_left * variance[..., :m] + share_right * variance[..., m:]
    terms = (_finite(share_left * np.log(share_left))
             + _finite(share_right * np.log(share_right)))
    spread = _finite(np.log(np.sqrt(within)))
    has_values = np.asarray(valid.any(axis=0))
    return np.where(has_values[:, None, None], terms - spread, 0.0)


def labeled_components(anomalies: np.ndarray, anomalous: np.ndarray, normals: np.ndarray,
                       normal: np.ndarray, n_labeled: np.ndarray, axis: np.ndarray
                       ) -> np.ndarray:
    """L(t), (B, K, M), from the (normalised) values of the labeled anomalies (rows, B, K;
    real rows ``anomalous``) and of the normals (``normals``, ``normal``) of B nodes with
    ``n_labeled`` labeled values each, at the candidate points ``axis`` (B, M). The normals
    are the labeled normals, or the unlabeled values for a node without one.

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
    n_anomalies = anomalous.sum(axis=0)[:, None, None]
    n_normals = normal.sum(axis=0)[:, None, None]
    n_labeled = np.asarray(n_labeled)[:, None, None]
    a_left = _left_of(anomalies, anomalous, axis).sum(axis=0).transpose(1, 2, 0)
    n_left = _left_of(normals, normal, axis).sum(axis=0).transpose(1, 2, 0)
    a_right, n_right = n_anomalies - a_left, n_normals - n_left
    with np.errstate(divide="ignore", invalid="ignore"):
        p_left = _finite(a_left / (a_left + n_left))
        p_right = _finite(a_right / (a_right + n_right))
        share_normal = n_normals / n_labeled
        share_left = (a_left + n_left) / n_labeled
        gain = (_entropy_terms(1 - share_normal, share_normal)
                - share_left * _entropy_terms(p_left) - (1 - share_left) * _entropy_terms(p_right))
    return np.where(n_anomalies > 0, gain, 0.0)


def _min_max(scores: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Scores (B, K, M) scaled to [0, 1] over the ``real`` (B, M) points of each row; all 0 in
    a row that is constant."""
    real = real[:, None, :]
    low = np.where(real, scores, np.inf).min(axis=-1, keepdims=True)
    high = np.where(real, scores, -np.inf).max(axis=-1, keepdims=True)
    scaled = (scores - low) / (high - low)
    return np.where(np.isnan(scaled) | ~real, 0.0, scaled)


class SplitDistributions:
    """Distributions on [0, 1] of where to cut K features of B nodes (normalised units), one
    per row of ``heights`` (B, K, M), of which the first ``m[b]`` points are node b's.

    A row whose heights are all equal is the uniform distribution on [0, 1]. Any other row is
    a histogram on the bins [axis_0, axis_1), ..., [axis_last, 1] whose *densities* are its
    heights; its cdf is linear within bins and its quantile function the inverse (as scipy's
    ``rv_histogram`` with ``density=True``, done here with the same arithmetic).
    """

    def __init__(self, axis: np.ndarray, m: np.ndarray, heights: np.ndarray) -> None:
        self.axis, self.m = axis, m
        real = np.arange(axis.shape[1]) < m[:, None]
        self.real = real
        self.uniform = (np.where(real[:, None], heights, -np.inf).max(axis=-1)
                        == np.where(real[:, None], heights, np.inf).min(axis=-1))
        edges = np.full((len(m), axis.shape[1] + 1), np.inf)
        edges[:, :-1] = np.where(real, axis, np.inf)
        edges[np.arange(len(m)), m] = 1.0
        self.edges = edges
        widths = np.where(real, edges[:, 1:] - edges[:, :-1], 0.0)[:, None, :]
        density = heights / _row_sums(heights * widths, m)[..., None]
        self.cdf_at_edges = np.concatenate(
            [np.zeros(heights.shape[:2] + (1,)), np.cumsum(density * widths, axis=-1)], axis=-1)

    def quantile(self, node: int, row: int, u: float) -> float:
        """The cut whose cdf is ``u`` (``u`` in (0, 1)) under feature ``row`` of ``node``."""
        if self.uniform[node, row]:
            return float(u)
        end = self.m[node] + 1
        return float(np.interp(u, self.cdf_at_edges[node, row, :end], self.edges[node, :end]))

    def cdf(self, node: int, row: int, x: np.ndarray) -> np.ndarray:
        """P(cut < x) under feature ``row`` of ``node``."""
        if self.uniform[node, row]:
            return np.clip(x, 0.0, 1.0)
        end = self.m[node] + 1
        return np.interp(x, self.edges[node, :end], self.cdf_at_edges[node, row, :end])

    def divergences(self) -> np.ndarray:
        """(B, K): the KL divergence from the uniform distribution of the mass between
        consecutive candidate points (the last bin, [axis_last, 1], is left out, as
        published): sum of p log(p / w) - p + w, p the mass and w the width of each gap.
        A uniform row's masses are its widths: 0 exactly."""
        # The cdf at each candidate point, as np.interp gives it at a knot: its value at the
        # last edge equal to the point.
        at = (self.edges[:, None, :] <= self.axis[:, :, None]).sum(axis=-1) - 1
        at_axis = np.take_along_axis(self.cdf_at_edges, np.maximum(at, 0)[:, None, :], axis=-1)
        from scipy.special import kl_div  # slow to import; replay never needs it

        gaps = kl_div(np.diff(at_axis, axis=-1), np.diff(self.axis, axis=-1)[:, None, :])
        return np.where(self.uniform, 0.0, _row_sums(gaps, self.m - 1))


def split_distributions(scaled: np.ndarray, valid: np.ndarray, labels: np.ndarray,
                        axis: np.ndarray, m: np.ndarray) -> SplitDistributions:
    """The split distributions of K features of B nodes from their values normalised to
    [0, 1] (``scaled``, (rows, B, K); ``valid`` (rows, B) the real rows) and the nodes'
    labels in {-1, 0, 1} (rows, B), at the candidate points ``axis`` (B, M; the first
    ``m[b]`` real)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        labeled = valid & (labels != 0)
        n_labeled = labeled.sum(axis=0)
        if not n_labeled.any():  # no labels: every real row is unlabeled
            u = unlabeled_components(scaled, valid, axis)
            lab = np.zeros_like(u)
        else:
            unlabeled = valid & (labels == 0)
            u = unlabeled_components(*_gather(scaled, unlabeled), axis)
            has_normals = (valid & (labels == -1)).any(axis=0)
            normal = (labels == -1) & valid & has_normals | unlabeled & ~has_normals
            anomalous = valid & (labels == 1)
            lab = (labeled_components(*_gather(scaled, anomalous), *_gather(scaled, normal),
                                      n_labeled, axis) if anomalous.any() else np.zeros_like(u))
        labeled_share = (n_labeled / valid.sum(axis=0))[:, None, None]
        real = np.arange(axis.shape[1]) < m[:, None]
        heights = ((1 - labeled_share) * _min_max(u, real)
                   + (1 + labeled_share) * _min_max(lab, real))
        return SplitDistributions(axis, m, heights)


def _gather(values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of each node that ``rows`` (rows, B) selects, moved to the top, in order:
    (values (n, B, K), real (n, B)), n the most any node has (at least 1)."""
    position = np.cumsum(rows, axis=0) - 1
    n = max(int(rows.sum(axis=0).max(initial=0)), 1)
    gathered = np.zeros((n,) + values.shape[1:])
    real = np.zeros((n, values.shape[1]), dtype=bool)
    at, node = np.nonzero(rows)
    gathered[position[at, node], node] = values[at, node]
    real[position[at, node], node] = True
    return gathered, real


def unlabeled_component(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """U(t) of one feature's unlabeled values (``unlabeled_components`` of one node)."""
    values = np.asarray(values, dtype=np.float64)[:, None, None]
    return unlabeled_components(values, np.ones(values.shape[:2], dtype=bool), axis[None])[0, 0]


def labeled_component(values: np.ndarray, labels: np.ndarray, axis: np.ndarray,
                      unlabeled: np.ndarray) -> np.ndarray:
    """L(t) of one feature's labeled ``values`` (labels in {-1, 1}; ``unlabeled`` the node's
    unlabeled values): ``labeled_components`` of one node."""
    values, labels = np.asarray(values, dtype=np.float64), np.asarray(labels)
    normals = values[labels == -1] if np.any(labels == -1) else np.asarray(unlabeled, float)
    anomalies = values[labels == 1]
    return labeled_components(anomalies[:, None, None], np.ones((len(anomalies), 1), bool),
                              normals[:, None, None], np.ones((len(normals), 1), bool),
                              np.array([len(values)]), axis[None])[0, 0]


def normalise(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Values scaled to [0, 1] by their column's minimum and maximum; 0.5 in a constant
    column."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (values - low) / (high - low)
    scaled[np.isnan(scaled)] = 0.5
    return scaled


def split_distribution(feature: np.ndarray, labels: np.ndarray, axis: np.ndarray
                       ) -> SplitDistributions:
    """The split distribution of one feature of one node (``labels`` in {-1, 0, 1}): node 0,
    feature 0 of the result."""
    feature = np.asarray(feature, dtype=np.float64)
    scaled = normalise(feature, feature.min(), feature.max())[:, None, None]
    return split_distributions(scaled, np.ones((len(feature), 1), dtype=bool),
                               np.asarray(labels)[:, None], axis[None],
                               np.array([axis.size]))


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
