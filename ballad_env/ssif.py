"""SSIF: a semi-supervised isolation forest, SADAL's detector (``docs/sadal.md``).

Stradiotti, Perini and Davis, "Semi-Supervised Isolation Forest for Anomaly Detection"
(SDM 2024). Written from the behaviour of the published ``ssif.py`` (never copied), with
the same defaults, arithmetic and order of random draws, so that a forest grown from a
legacy ``numpy.random.RandomState(9)`` is the published ``SSIF()``'s forest.

Labels are the published convention: **-1 normal, 0 unlabeled, 1 anomaly**
(:func:`semi_supervised_labels` builds them from our 0/1 labels and a labeled mask). They
enter the trees twice:

* where to cut (``ballad_env.ssif_split``): a cut is drawn from a split distribution that
  mixes an unlabeled, Otsu-like score and the information gain on the labels;
* how deep a point is: a leaf above the depth limit counts its depth times
  (1 + normal share - anomaly share) of its labeled training examples, so labeled normals
  lengthen a path (up to twice) and labeled anomalies shorten it (down to 0).

The anomaly score is 2^(-mean path / c(sample)), scaled to [0, 1] by its minimum and maximum
on the training set; P(anomaly) = 1 - 2^(-(score / t)^2), t the training scores'
(1 - contamination) percentile, so P = 0.5 at t.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ballad_env.ssif_split import candidate_axis, normalise, refine_axes, split_distributions

#: The published code's Euler-Mascheroni constant, to its ten digits.
EULER_GAMMA = 0.5772156649
#: A forest's random source: a Generator (ours; one spawned stream per tree) or a legacy
#: RandomState (the published code's: each tree seeded by ``randint(0, 100000)``).
ForestRandom = np.random.Generator | np.random.RandomState


def c_factor(n: int) -> float:
    """Average path length of an unsuccessful search in a binary search tree of n points,
    2 (ln(n - 1) + gamma) - 2 (n - 1) / n, with n < 2 taken as 2 (so c(0) = c(1) = c(2))."""
    n = max(n, 2)
    return 2.0 * (np.log(n - 1) + EULER_GAMMA) - (2.0 * (n - 1.0) / (n * 1.0))


def semi_supervised_labels(y: np.ndarray, labeled: np.ndarray) -> np.ndarray:
    """SSIF's labels from our 0/1 labels ``y``: -1 (normal) or 1 (anomaly) where ``labeled``
    (a boolean mask or indices), 0 elsewhere."""
    y = np.asarray(y)
    out = np.zeros(y.shape, dtype=np.int8)
    mask = np.zeros(y.shape, dtype=bool)
    mask[labeled] = True
    out[mask] = np.where(y[mask] == 1, 1, -1)
    return out


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
        feature, threshold = np.asarray(self.feature), np.asarray(self.threshold)
        left, right, value = np.asarray(self.left), np.asarray(self.right), np.asarray(self.value)
        node = np.zeros(len(X), dtype=np.intp)
        inner = left[node] >= 0
        while inner.any():
            rows, at = np.flatnonzero(inner), node[inner]
            goes_left = X[rows, feature[at]] < threshold[at]
            node[rows] = np.where(goes_left, left[at], right[at])
            inner = left[node] >= 0
        return value[node]


class TreeGrower:
    """Grows one tree on a sample (X, y) with its own random source (draws in the published
    order: depth first, left subtree before right). A node scores its candidate features
    together (``ssif_split.split_distributions``)."""

    def __init__(self, rng: ForestRandom, depth_limit: int, n_candidates: int) -> None:
        self.rng, self.depth_limit, self.n_candidates = rng, depth_limit, n_candidates
        self.tree = IsolationTree()

    def grow(self, X: np.ndarray, y: np.ndarray, depth: int = 0) -> int:
        """Add the subtree of (X, y) at ``depth``; its root's index."""
        node = self.tree.add()
        if depth >= self.depth_limit or not np.any(y != 1):
            self.tree.value[node] = self.leaf_value(y, depth)
            return node
        low, high = X.min(axis=0), X.max(axis=0)
        varying = np.flatnonzero(low < high)
        if varying.size == 0:  # all rows equal
            self.tree.value[node] = self.leaf_value(y, depth)
            return node
        feature, cut = self.choose_cut(X, y, low, high, varying)
        goes_left = X[:, feature] < cut
        goes_right = ~goes_left
        self.tree.feature[node], self.tree.threshold[node] = feature, cut
        self.tree.left[node] = self.grow(X[goes_left], y[goes_left], depth + 1)
        self.tree.right[node] = self.grow(X[goes_right], y[goes_right], depth + 1)
        return node

    def leaf_value(self, y: np.ndarray, depth: int) -> float:
        """A leaf's path length: depth (1 + normal share - anomaly share) above the limit,
        depth + c(leaf size) at it (no label adjustment there). A leaf at the root gives 0
        (the published code divides by the depth there and crashes)."""
        if depth >= self.depth_limit:
            return depth + c_factor(y.size)
        anomaly = np.count_nonzero(y == 1) / y.size if y.size else 0.0
        normal = np.count_nonzero(y == -1) / y.size if y.size else 0.0
        return depth * (1 + normal - anomaly)

    def candidates(self, X: np.ndarray, y: np.ndarray, low: np.ndarray, high: np.ndarray,
                   varying: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The features to score and the candidate cut points: the ``varying`` features
        (``low`` and ``high`` the columns' extremes); with a labeled anomaly, only those on
        which one lies outside the others' range (all that vary if none does); at most
        ``n_candidates`` of them, drawn without replacement."""
        axis = candidate_axis(len(X))
        pool = varying
        if np.any(y == 1):
            useful, axis = refine_axes(axis, X, y, low, high, varying)
            if useful.size:
                pool = useful
        return self.rng.choice(pool, min(self.n_candidates, len(pool)), replace=False), axis

    def choose_cut(self, X: np.ndarray, y: np.ndarray, low: np.ndarray, high: np.ndarray,
                   varying: np.ndarray) -> tuple[int, float]:
        """The feature, drawn with probability proportional to its split distribution's KL
        divergence from uniform (equal weights when all are 0), and the cut, a draw from
        that distribution mapped back to the feature's range."""
        chosen, axis = self.candidates(X, y, low, high, varying)
        distributions = split_distributions(
            normalise(X[:, chosen], low[chosen], high[chosen]), y, axis)
        weights = np.zeros(X.shape[1])
        weights[chosen] = distributions.divergences()
        if weights.sum() <= 0:
            weights[chosen] = 1
        with np.errstate(invalid="ignore", divide="ignore"):
            weights /= weights.sum()
        cumulative = np.nan_to_num(np.cumsum(weights), nan=0)
        u = self.rng.uniform(0, 1)
        rows = {int(k): row for row, k in enumerate(chosen)}
        if sum(cumulative) != 0:
            feature = int(np.searchsorted(cumulative, u))
            if feature not in rows:  # u above a rounded total: published KeyError
                feature = int(np.flatnonzero(weights > 0)[-1])
        else:  # weights not finite
            feature = int(self.rng.choice(list(rows), 1, replace=False)[0])
        cut = distributions.quantile(rows[feature], self.rng.uniform(0, 1))
        return feature, float(cut * (high[feature] - low[feature]) + low[feature])


class SemiSupervisedIsolationForest:
    """SSIF with the published defaults (``SSIF()``): 100 trees, contamination 0.1.

    Parameters
    ----------
    n_trees : int
        Trees in the forest.
    contamination : float
        Share of training examples with P(anomaly) >= 0.5 (sets the probability's scale t).
    sample : float or None
        Share of the training set each tree sees; None: min(max(128, n / 3), n) examples.
    n_candidates : int or None
        Features scored at each node; None: min(d, max(3, d / 5)).
    depth_factor : float or None
        The depth limit is ceil(factor 2 max(log2(sample), 2)); None: factor 1.
    random_state : int, Generator or RandomState
        An int seeds a Generator. A Generator gives each tree a spawned stream (and is
        consumed by ``fit``). A legacy ``RandomState(seed)`` repeats the published code's
        draws, so ``RandomState(9)`` grows the published ``SSIF()``'s forest.

    Single-threaded. Fitted attributes end in ``_``.
    """

    def __init__(self, n_trees: int = 100, contamination: float = 0.1,
                 sample: float | None = None, n_candidates: int | None = None,
                 depth_factor: float | None = None,
                 random_state: int | ForestRandom = 0) -> None:
        if n_trees < 1:
            raise ValueError(f"n_trees must be >= 1, got {n_trees}")
        if not 0 < contamination < 1:
            raise ValueError(f"contamination must lie in (0, 1), got {contamination}")
        self.n_trees, self.contamination, self.sample = n_trees, contamination, sample
        self.n_candidates, self.depth_factor = n_candidates, depth_factor
        self.random_state = random_state

    def _sizes(self, n: int, d: int) -> tuple[int, int, int]:
        """(examples per tree, depth limit, features scored per node) for n x d data."""
        sample = (min(max(128, int(n / 3)), n) if self.sample is None
                  else min(n, max(1, int(self.sample * n))))
        factor = 1.0 if self.depth_factor is None else self.depth_factor
        limit = int(np.ceil(factor * 2 * max(np.log2(sample), 2)))
        n_candidates = (min(d, max(3, int(d / 5))) if self.n_candidates is None
                        else int(max(1, self.n_candidates)))
        return sample, limit, n_candidates

    def _tree_randoms(self) -> list[ForestRandom]:
        rng = self.random_state
        if isinstance(rng, np.random.RandomState):
            return [np.random.RandomState(rng.randint(0, 100000)) for _ in range(self.n_trees)]
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        return list(rng.spawn(self.n_trees))

    def fit(self, X: np.ndarray, y: np.ndarray) -> SemiSupervisedIsolationForest:
        """Grow the forest on X with labels y in {-1 (normal), 0 (unlabeled), 1 (anomaly)}."""
        X, y = _check_data(X, y)
        self.sample_, self.depth_limit_, self.n_candidates_ = self._sizes(*X.shape)
        self.c_ = c_factor(self.sample_)
        self.trees_: list[IsolationTree] = []
        for rng in self._tree_randoms():
            rows = rng.choice(len(X), self.sample_, replace=False)
            grower = TreeGrower(rng, self.depth_limit_, self.n_candidates_)
            grower.grow(X[rows], y[rows])
            self.trees_.append(grower.tree)
        raw = self.score_samples(X)
        self.min_score_, self.max_score_ = float(raw.min()), float(raw.max())
        if not self.max_score_ > self.min_score_:
            raise ValueError("every training example has the same anomaly score, so SSIF's "
                             "probabilities are undefined: use data whose rows differ")
        self.decision_scores_ = (raw - self.min_score_) / (self.max_score_ - self.min_score_)
        self.threshold_ = float(np.percentile(self.decision_scores_,
                                              q=int((1.0 - self.contamination) * 100)))
        return self

    def score_samples(self, X: np.ndarray) -> np.ndarray:
        """Raw anomaly scores 2^(-mean path length / c(sample)), in (0, 1]."""
        X = np.asarray(X, dtype=np.float64)
        paths = np.empty((len(X), len(self.trees_)))
        for j, tree in enumerate(self.trees_):
            paths[:, j] = tree.path_lengths(X)
        return np.power(2.0, -np.mean(paths, axis=1) / self.c_)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(P(normal), P(anomaly)) per row: the score scaled by the training minimum and
        maximum and clipped to [0, 1], then P(anomaly) = 1 - 2^(-(score / t)^2)."""
        scores = np.clip((self.score_samples(X) - self.min_score_)
                         / (self.max_score_ - self.min_score_), 0, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = 1.0 - np.exp(np.log(0.5) * np.power(scores / self.threshold_, 2))
        return np.column_stack([1 - p, p])


def _check_data(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X as a finite 2-d float array and y as labels in {-1, 0, 1} of the same length."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    if X.ndim != 2 or len(X) < 2:
        raise ValueError(f"X must be a 2-d array of at least 2 rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinite values: impute or drop them first")
    if y.shape != (len(X),):
        raise ValueError(f"y must have one label per row of X ({len(X)}), got shape {y.shape}")
    if not np.all(np.isin(y, (-1, 0, 1))):
        raise ValueError("SSIF labels must be -1 (normal), 0 (unlabeled) or 1 (anomaly); "
                         "build them from 0/1 labels with semi_supervised_labels(y, labeled)")
    return X, y.astype(np.int8)


__all__ = ["EULER_GAMMA", "ForestRandom", "IsolationTree", "SemiSupervisedIsolationForest",
           "TreeGrower", "c_factor", "semi_supervised_labels"]
