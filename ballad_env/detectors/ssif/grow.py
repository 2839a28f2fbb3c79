"""Growing SSIF's trees (``ballad_env.detectors.ssif.forest``): all the trees of a forest in
lockstep.

Each tree draws from its own random source in the published order (depth first, left
subtree before right; at a node: the candidate features, then the feature, then the cut), so
the trees can grow side by side: in every step each unfinished tree takes its next node in
that order, and those nodes (one per tree, in groups of similar size) are scored together
(``ssif_split.split_distributions`` on a padded batch), then split together (children's
rows, column extremes and label counts for the whole group at once). Only the random draws,
and the few steps that depend on them, run once per node. A tree grown alone
(``grow_tree``) gets the nodes it gets in a forest, and every float is the one the
published, one node and one feature at a time, code computes (``tests/test_ssif.py`` checks
probabilities recorded by our earlier per-node implementation bit for bit): about 10 times
faster on data sets of a few hundred rows (``docs/sadal.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ballad_env.detectors.ssif.split import (
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
    """A leaf's path length from its labels ``y`` (``leaf_value_of_counts``)."""
    return leaf_value_of_counts(y.size, int(np.count_nonzero(y == 1)),
                                int(np.count_nonzero(y == -1)), depth, depth_limit)


def leaf_value_of_counts(n: int, n_anomalies: int, n_normals: int, depth: int,
                         depth_limit: int) -> float:
    """A leaf's path length: depth (1 + normal share - anomaly share) of its n examples above
    the limit, depth + c(n) at it (no label adjustment there). A leaf at the root gives 0
    (the published code divides by the depth there and crashes)."""
    if depth >= depth_limit:
        return depth + c_factor(n)
    anomaly = n_anomalies / n if n else 0.0
    normal = n_normals / n if n else 0.0
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
    """A node to grow: its rows of the tree's sample, depth, where its index goes in its
    parent, and what decides whether it is a leaf (its columns' extremes, label counts)."""

    rows: np.ndarray
    depth: int
    parent: int
    is_left: bool
    low: np.ndarray
    high: np.ndarray
    n_anomalies: int
    n_normals: int
    n_varying: int


@dataclass
class _Split:
    """A node about to be cut: its tree, index, candidate features and points."""

    grower: TreeGrower
    node: int
    pending: _Pending
    chosen: np.ndarray
    axis: np.ndarray


class TreeGrower:
    """One tree growing on its sample (``forest.X[index]``) with its own random source, one
    node at a time in the published order: ``next_split`` draws the next node's candidates,
    ``cut`` its feature and cut."""

    def __init__(self, forest: ForestGrower, index: int, rng: TreeRandom) -> None:
        self.forest, self.index, self.rng = forest, index, rng
        self.tree = IsolationTree()
        X, y = forest.X[forest.samples[index]], forest.y[forest.samples[index]]
        low, high = X.min(axis=0), X.max(axis=0)
        self.stack = [_Pending(np.arange(len(X)), 0, -1, True, low, high,
                               int(np.count_nonzero(y == 1)), int(np.count_nonzero(y == -1)),
                               int(np.count_nonzero(low < high)))]

    def next_split(self) -> _Split | None:
        """The next node in depth-first order that is cut, with its candidates drawn (leaves
        on the way get their values); None when the tree is complete."""
        limit = self.forest.depth_limit
        while self.stack:
            pending = self.stack.pop()
            node = self.tree.add()
            if pending.parent >= 0:
                children = self.tree.left if pending.is_left else self.tree.right
                children[pending.parent] = node
            n = len(pending.rows)
            if pending.depth < limit and pending.n_anomalies < n and pending.n_varying:
                chosen, axis = self.candidates(pending)
                return _Split(self, node, pending, chosen, axis)
            # a leaf: at the depth limit, only labeled anomalies (or none), or all rows equal
            self.tree.value[node] = leaf_value_of_counts(
                n, pending.n_anomalies, pending.n_normals, pending.depth, limit)
        return None

    def candidates(self, pending: _Pending) -> tuple[np.ndarray, np.ndarray]:
        """The features to score and the candidate cut points: the features that vary; with
        a labeled anomaly, only those on which one lies outside the others' range (all that
        vary if none does); at most ``n_candidates`` of them, drawn without replacement."""
        axis = candidate_axis(len(pending.rows))
        pool = varying = (pending.low < pending.high).nonzero()[0]
        if pending.n_anomalies:
            rows = self.forest.samples[self.index][pending.rows]
            useful, axis = refine_axes(axis, self.forest.X[rows], self.forest.y[rows],
                                       pending.low, pending.high, varying)
            if useful.size:
                pool = useful
        size = min(self.forest.n_candidates, len(pool))
        if isinstance(self.rng, np.random.RandomState):  # its choice, without the overhead
            return pool[self.rng.permutation(len(pool))[:size]], axis
        return self.rng.choice(pool, size, replace=False), axis

    def cut(self, split: _Split, distributions: SplitDistributions, cumulative: np.ndarray,
            weights: np.ndarray, row: int) -> tuple[int, float]:
        """The feature and cut of ``split``'s node (row ``row`` of ``distributions``): the
        feature drawn with probability ``weights`` (``cumulative`` their running sums), the
        cut a draw from its split distribution mapped back to the feature's range."""
        chosen = split.chosen.tolist()
        u = self.rng.uniform(0, 1)
        if sum(cumulative.tolist()) != 0:
            feature = int(np.searchsorted(cumulative, u))
            if feature not in chosen:  # u above a rounded total: published KeyError
                feature = int(np.flatnonzero(weights > 0)[-1])
        else:  # weights not finite
            feature = int(self.rng.choice(chosen, 1, replace=False)[0])
        q = distributions.quantile(row, chosen.index(feature), self.rng.uniform(0, 1))
        low, high = split.pending.low[feature], split.pending.high[feature]
        cut = float(q * (high - low) + low)
        self.tree.feature[split.node], self.tree.threshold[split.node] = feature, cut
        return feature, cut


class ForestGrower:
    """Grows the trees of a forest in lockstep: each step draws the next node of every
    unfinished tree, computes their split distributions together (in groups of similar
    size), cuts them, and splits all their rows at once.

    Tree t grows on the rows ``samples[t]`` of (X, y), in that order."""

    def __init__(self, X: np.ndarray, y: np.ndarray, samples: np.ndarray,
                 rngs: list[TreeRandom], depth_limit: int, n_candidates: int) -> None:
        self.X, self.y, self.samples = X, y, samples
        self.depth_limit, self.n_candidates = depth_limit, n_candidates
        self.growers = [TreeGrower(self, t, rng) for t, rng in enumerate(rngs)]

    def grow(self) -> list[IsolationTree]:
        """Every tree, grown."""
        active = list(self.growers)
        while active:
            splits = [split for grower in active if (split := grower.next_split()) is not None]
            for group in _size_groups(splits):
                self._cut(group)
            active = [split.grower for split in splits]
        return [grower.tree for grower in self.growers]

    def _cut(self, splits: list[_Split]) -> None:
        """Cut a group of nodes (one per tree) and push their children."""
        batch = _Batch(self, splits)
        distributions = batch.distributions()
        weights, cumulative = feature_weights(batch.chosen, batch.k,
                                              distributions.divergences(), self.X.shape[1])
        cuts = [split.grower.cut(split, distributions, cumulative[b], weights[b], b)
                for b, split in enumerate(splits)]
        batch.push_children(np.array([feature for feature, _ in cuts]),
                            np.array([cut for _, cut in cuts]))


class _Batch:
    """A group of nodes padded into arrays: ``rows`` (n, B) of each node's rows of its
    tree's sample (``valid`` where real), in order; ``data_rows`` the same rows of X."""

    def __init__(self, forest: ForestGrower, splits: list[_Split]) -> None:
        self.forest, self.splits = forest, splits
        self.n = np.array([len(split.pending.rows) for split in splits])
        at = np.arange(self.n.sum()) - np.repeat(np.cumsum(self.n) - self.n, self.n)
        nodes = np.repeat(np.arange(len(splits)), self.n)
        self.rows = np.zeros((self.n.max(), len(splits)), dtype=np.intp)
        self.rows[at, nodes] = np.concatenate([split.pending.rows for split in splits])
        self.valid = np.zeros(self.rows.shape, dtype=bool)
        self.valid[at, nodes] = True
        trees = np.array([split.grower.index for split in splits])
        self.data_rows = forest.samples[trees[None, :], self.rows]
        # every node's candidates, padded to the most by repeating its first (never read)
        self.k = np.array([len(split.chosen) for split in splits])
        candidates = [split.chosen.tolist() for split in splits]
        self.chosen = np.array([c + c[:1] * (self.k.max() - len(c)) for c in candidates])

    def distributions(self) -> SplitDistributions:
        """The split distributions of every node's candidate features."""
        splits, m, chosen = self.splits, np.array([s.axis.size for s in self.splits]), self.chosen
        values = self.forest.X[self.data_rows[:, :, None], chosen[None]]
        labels = self.forest.y[self.data_rows]
        axis = np.full((len(splits), m.max()), 2.0)  # padding: right of every value
        axis[np.arange(m.max()) < m[:, None]] = np.concatenate([split.axis for split in splits])
        low = np.take_along_axis(np.stack([split.pending.low for split in splits]), chosen, 1)
        high = np.take_along_axis(np.stack([split.pending.high for split in splits]), chosen, 1)
        return split_distributions(normalise(values, low, high), self.valid, labels, axis, m)

    def push_children(self, features: np.ndarray, cuts: np.ndarray) -> None:
        """Split every node's rows at its cut (x < cut left), in order, and push its
        children, right then left (so the left subtree grows first)."""
        X, labels = self.forest.X[self.data_rows], self.forest.y[self.data_rows]
        below = np.take_along_axis(X, features[None, :, None], axis=2)[..., 0] < cuts
        sides = []
        for side in (self.valid & ~below, self.valid & below):
            inside = side[..., None]
            low = np.where(inside, X, np.inf).min(axis=0)
            high = np.where(inside, X, -np.inf).max(axis=0)
            ends = np.cumsum(side.sum(axis=0)).tolist()
            node, at = np.nonzero(side.T)
            flat = self.rows[at, node]
            rows = [flat[start:end] for start, end in zip([0] + ends[:-1], ends, strict=True)]
            sides.append((rows, low, high, (side & (labels == 1)).sum(axis=0).tolist(),
                          (side & (labels == -1)).sum(axis=0).tolist(),
                          (low < high).sum(axis=1).tolist()))
        for b, split in enumerate(self.splits):
            depth, stack = split.pending.depth + 1, split.grower.stack
            for is_left, (rows, low, high, anomalies, normals, varying) in enumerate(sides):
                stack.append(_Pending(rows[b], depth, split.node, bool(is_left), low[b],
                                      high[b], anomalies[b], normals[b], varying[b]))


def feature_weights(chosen: np.ndarray, k: np.ndarray, divergences: np.ndarray,
                    n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Per node (a row each), the probabilities of drawing each of the ``n_features``
    features, proportional to the KL divergences (``divergences``, (B, K)) of its ``k``
    candidates (``chosen``, (B, K), padded by repeating the first), equal over the
    candidates when these sum to 0 or less, and their cumulative sums (NaN counted 0), as
    published."""
    nodes = np.arange(len(chosen))[:, None]
    weights = np.zeros((len(chosen), n_features))
    # a padded entry repeats the first candidate and writes its divergence again
    real = np.arange(chosen.shape[1]) < k[:, None]
    weights[nodes, chosen] = np.where(real, divergences, divergences[:, :1])
    equal = np.flatnonzero(weights.sum(axis=1) <= 0)
    weights[equal[:, None], chosen[equal]] = 1
    with np.errstate(invalid="ignore", divide="ignore"):
        weights /= weights.sum(axis=1, keepdims=True)
    cumulative = np.cumsum(weights, axis=1)
    if not np.isfinite(cumulative).all():
        cumulative = np.nan_to_num(cumulative, nan=0)
    return weights, cumulative


def _size_groups(splits: list[_Split]) -> list[list[_Split]]:
    """The nodes in groups of similar size (1-3, 4-15, 16-63, ... rows), so that a batch
    padded to its largest node wastes little."""
    groups: dict[int, list[_Split]] = {}
    for split in splits:
        groups.setdefault(len(split.pending.rows).bit_length() // 2, []).append(split)
    return list(groups.values())


def grow_tree(rng: TreeRandom, X: np.ndarray, y: np.ndarray, depth_limit: int,
              n_candidates: int) -> IsolationTree:
    """One tree grown alone on (X, y) from ``rng`` (as in a forest)."""
    return ForestGrower(X, y, np.arange(len(X))[None], [rng], depth_limit,
                        n_candidates).grow()[0]


__all__ = ["EULER_GAMMA", "ForestGrower", "IsolationTree", "TreeGrower", "TreeRandom",
           "c_factor", "feature_weights", "grow_tree", "leaf_value", "leaf_value_of_counts",
           "path_lengths"]
