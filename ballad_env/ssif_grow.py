"""Growing SSIF's trees (``ballad_env.ssif``): all the trees of a forest in lockstep.

Each tree draws from its own random source in the published order (depth first, left
subtree before right; at a node: the candidate features, then the feature, then the cut), so
the trees can grow side by side: in every step each unfinished tree takes its next node in
that order, and the split distributions of those nodes, one per tree, are computed together
(``ssif_split.split_distributions`` on a padded batch). A tree grown alone
(``TreeGrower``) and in a forest gets the same nodes, bit for bit; growing them together
spends the NumPy calls of one node on a hundred.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ballad_env.ssif_split import (
    SplitDistributions,
    candidate_axis,
    normalise,
    refine_axes,
    split_distributions,
)

#: A tree's random source: a Generator (ours) or a legacy RandomState (the published code's).
TreeRandom = np.random.Generator | np.random.RandomState


#: The published code's Euler-Mascheroni constant, to its ten digits.
EULER_GAMMA = 0.5772156649


def c_factor(n: int) -> float:
    """Average path length of an unsuccessful search in a binary search tree of n points,
    2 (ln(n - 1) + gamma) - 2 (n - 1) / n, with n < 2 taken as 2 (so c(0) = c(1) = c(2))."""
    n = max(n, 2)
    return 2.0 * (np.log(n - 1) + EULER_GAMMA) - (2.0 * (n - 1.0) / (n * 1.0))


def leaf_value(y: np.ndarray, depth: int, depth_limit: int) -> float:
    """A leaf's path length: depth (1 + normal share - anomaly share) above the limit,
    depth + c(leaf size) at it (no label adjustment there). A leaf at the root gives 0 (the
    published code divides by the depth there and crashes)."""
    if depth >= depth_limit:
        return depth + c_factor(y.size)
    anomaly = np.count_nonzero(y == 1) / y.size if y.size else 0.0
    normal = np.count_nonzero(y == -1) / y.size if y.size else 0.0
    return depth * (1 + normal - anomaly)


@dataclass
class IsolationTree:
    """One semi-supervised isolation tree in flat arrays (node 0 the root; ``left`` -1 at a
    leaf, whose ``value`` is the path length a point reaching it gets)."""

    feature: list[int] = field(default_factory=list)
    threshold: list[float] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)

    def add(self) -> int:
        """A new node (a leaf until given children); its index."""
        self.feature.append(-1)
        self.threshold.append(0.0)
        self.left.append(-1)
        self.right.append(-1)
        self.value.append(0.0)
        return len(self.left) - 1

    def path_lengths(self, X: np.ndarray) -> np.ndarray:
        """Each row's path length: the ``value`` of the leaf it reaches (left iff x < cut)."""
        return path_lengths([self], X)[:, 0]


def path_lengths(trees: list[IsolationTree], X: np.ndarray) -> np.ndarray:
    """(rows, trees): each row's path length in each tree, all trees walked together one
    level at a time."""
    sizes = [len(tree.left) for tree in trees]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)

    def flat(name: str, shift: bool = False) -> np.ndarray:
        parts = [np.asarray(getattr(tree, name)) for tree in trees]
        if shift:  # child indices into the stacked nodes; -1 stays -1 (a leaf)
            parts = [np.where(p >= 0, p + o, -1) for p, o in zip(parts, offsets, strict=True)]
        return np.concatenate(parts)

    feature, threshold, value = flat("feature"), flat("threshold"), flat("value")
    left, right = flat("left", True), flat("right", True)
    node = np.broadcast_to(offsets, (len(X), len(trees))).copy()
    inner = left[node] >= 0
    while inner.any():
        rows, at = np.nonzero(inner)
        nodes = node[rows, at]
        goes_left = X[rows, feature[nodes]] < threshold[nodes]
        node[rows, at] = np.where(goes_left, left[nodes], right[nodes])
        inner = left[node] >= 0
    return value[node]


@dataclass
class _Pending:
    """A node to grow: its examples, depth, and where its index goes in its parent."""

    X: np.ndarray
    y: np.ndarray
    depth: int
    parent: int = -1
    is_left: bool = True


@dataclass
class _Split:
    """A node about to be cut: its examples' column extremes, candidate features and points."""

    grower: TreeGrower
    node: int
    pending: _Pending
    low: np.ndarray
    high: np.ndarray
    chosen: np.ndarray
    axis: np.ndarray


class TreeGrower:
    """Grows one tree on a sample (X, y) with its own random source, one node at a time in
    the published order (``next_split``, then ``cut``); ``grow`` grows it alone."""

    def __init__(self, rng: TreeRandom, depth_limit: int, n_candidates: int,
                 X: np.ndarray, y: np.ndarray) -> None:
        self.rng, self.depth_limit, self.n_candidates = rng, depth_limit, n_candidates
        self.tree = IsolationTree()
        self.stack = [_Pending(X, y, 0)]

    def grow(self) -> IsolationTree:
        """The whole tree, grown alone."""
        return grow_trees([self])[0]

    def next_split(self) -> _Split | None:
        """The next node in depth-first order that is cut, with its candidates drawn (leaves
        on the way get their values); None when the tree is complete."""
        while self.stack:
            pending = self.stack.pop()
            node = self.tree.add()
            if pending.parent >= 0:
                children = self.tree.left if pending.is_left else self.tree.right
                children[pending.parent] = node
            X, y = pending.X, pending.y
            n_anomalies = int(np.count_nonzero(y == 1))
            if pending.depth < self.depth_limit and n_anomalies < len(y):
                low, high = X.min(axis=0), X.max(axis=0)
                varying = np.flatnonzero(low < high)
                if varying.size:  # else all rows are equal: a leaf
                    chosen, axis = self.candidates(X, y, low, high, varying, n_anomalies > 0)
                    return _Split(self, node, pending, low, high, chosen, axis)
            self.tree.value[node] = leaf_value(y, pending.depth, self.depth_limit)
        return None

    def candidates(self, X: np.ndarray, y: np.ndarray, low: np.ndarray, high: np.ndarray,
                   varying: np.ndarray, has_anomaly: bool) -> tuple[np.ndarray, np.ndarray]:
        """The features to score and the candidate cut points: the ``varying`` features
        (``low`` and ``high`` the columns' extremes); with a labeled anomaly, only those on
        which one lies outside the others' range (all that vary if none does); at most
        ``n_candidates`` of them, drawn without replacement."""
        axis = candidate_axis(len(X))
        pool = varying
        if has_anomaly:
            useful, axis = refine_axes(axis, X, y, low, high, varying)
            if useful.size:
                pool = useful
        return self.rng.choice(pool, min(self.n_candidates, len(pool)), replace=False), axis

    def cut(self, split: _Split, distributions: SplitDistributions, cumulative: np.ndarray,
            weights: np.ndarray, row: int) -> None:
        """Cut ``split``'s node (row ``row`` of ``distributions``): the feature, drawn with
        probability proportional to its split distribution's KL divergence from uniform
        (``feature_weights``), and the cut, a draw from that distribution mapped back to the
        feature's range. Its children go on the stack."""
        chosen, X = split.chosen, split.pending.X
        u = self.rng.uniform(0, 1)
        rows = {int(k): i for i, k in enumerate(chosen)}
        if sum(cumulative.tolist()) != 0:
            feature = int(np.searchsorted(cumulative, u))
            if feature not in rows:  # u above a rounded total: published KeyError
                feature = int(np.flatnonzero(weights > 0)[-1])
        else:  # weights not finite
            feature = int(self.rng.choice(list(rows), 1, replace=False)[0])
        q = distributions.quantile(row, rows[feature], self.rng.uniform(0, 1))
        low, high = split.low[feature], split.high[feature]
        cut = float(q * (high - low) + low)
        self.tree.feature[split.node], self.tree.threshold[split.node] = feature, cut
        goes_left = X[:, feature] < cut
        goes_right = ~goes_left
        depth, y = split.pending.depth + 1, split.pending.y
        self.stack.append(_Pending(X[goes_right], y[goes_right], depth, split.node, False))
        self.stack.append(_Pending(X[goes_left], y[goes_left], depth, split.node, True))


def feature_weights(splits: list[_Split], divergences: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per node (a row each), the probabilities of drawing each feature, proportional to its
    candidates' KL divergences (``divergences``, (B, K)), equal over the candidates when
    these sum to 0 or less, and their cumulative sums (NaN counted 0), as published."""
    weights = np.zeros((len(splits), splits[0].pending.X.shape[1]))
    for b, split in enumerate(splits):
        weights[b, split.chosen] = divergences[b, :len(split.chosen)]
    for b in np.flatnonzero(weights.sum(axis=1) <= 0):
        weights[b, splits[b].chosen] = 1
    with np.errstate(invalid="ignore", divide="ignore"):
        weights /= weights.sum(axis=1, keepdims=True)
    cumulative = np.cumsum(weights, axis=1)
    if not np.isfinite(cumulative).all():
        cumulative = np.nan_to_num(cumulative, nan=0)
    return weights, cumulative


def grow_trees(growers: list[TreeGrower]) -> list[IsolationTree]:
    """Grow the trees in lockstep: each step cuts the next node of every unfinished tree,
    their split distributions computed together."""
    active = list(growers)
    while active:
        splits = [split for grower in active if (split := grower.next_split()) is not None]
        if not splits:
            break
        for group in _size_groups(splits):
            distributions = batch_distributions(group)
            weights, cumulative = feature_weights(group, distributions.divergences())
            for row, split in enumerate(group):
                split.grower.cut(split, distributions, cumulative[row], weights[row], row)
        active = [split.grower for split in splits]
    return [grower.tree for grower in growers]


def _size_groups(splits: list[_Split]) -> list[list[_Split]]:
    """The nodes in groups of similar size (1-3, 4-15, 16-63, ... examples), so that a batch
    padded to its largest node wastes little."""
    groups: dict[int, list[_Split]] = {}
    for split in splits:
        groups.setdefault(len(split.pending.X).bit_length() // 2, []).append(split)
    return list(groups.values())


def batch_distributions(splits: list[_Split]) -> SplitDistributions:
    """The split distributions of the candidate features of several nodes, padded into one
    batch (rows to the largest node, features to the most candidates, points to the most)."""
    n_rows = max(len(split.pending.X) for split in splits)
    n_features = max(len(split.chosen) for split in splits)
    m = np.array([split.axis.size for split in splits])
    values = np.zeros((n_rows, len(splits), n_features))
    low, high = np.zeros((len(splits), n_features)), np.ones((len(splits), n_features))
    valid = np.zeros((n_rows, len(splits)), dtype=bool)
    labels = np.zeros((n_rows, len(splits)), dtype=np.int8)
    axis = np.full((len(splits), m.max()), 2.0)  # padding: right of every value
    for b, split in enumerate(splits):
        X, chosen, n, k = split.pending.X, split.chosen, len(split.pending.X), len(split.chosen)
        values[:n, b, :k] = X[:, chosen]
        low[b, :k], high[b, :k] = split.low[chosen], split.high[chosen]
        valid[:n, b] = True
        labels[:n, b] = split.pending.y
        axis[b, :split.axis.size] = split.axis
    return split_distributions(normalise(values, low, high), valid, labels, axis, m)


__all__ = ["EULER_GAMMA", "IsolationTree", "TreeGrower", "TreeRandom", "c_factor",
           "feature_weights", "grow_trees", "leaf_value", "path_lengths"]
