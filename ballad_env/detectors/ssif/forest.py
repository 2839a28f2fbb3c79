"""SSIF: a semi-supervised isolation forest, SADAL's detector (``docs/sadal.md``).

Stradiotti, Perini and Davis, "Semi-Supervised Isolation Forest for Anomaly Detection"
(SDM 2024). Written from the behaviour of the published ``ssif.py`` (never copied), with
the same defaults, arithmetic and order of random draws, so that a forest grown from a
legacy ``numpy.random.RandomState(9)`` is the published ``SSIF()``'s forest.

Labels are the published convention: **-1 normal, 0 unlabeled, 1 anomaly**
(:func:`semi_supervised_labels` builds them from our 0/1 labels and a labeled mask). They
enter the trees twice:

* where to cut (``ballad_env.detectors.ssif.split``): a cut is drawn from a split distribution that
  mixes an unlabeled, Otsu-like score and the information gain on the labels;
* how deep a point is: a leaf above the depth limit counts its depth times
  (1 + normal share - anomaly share) of its labeled training examples, so labeled normals
  lengthen a path (up to twice) and labeled anomalies shorten it (down to 0).

The anomaly score is 2^(-mean path / c(sample)), scaled to [0, 1] by its minimum and maximum
on the training set; P(anomaly) = 1 - 2^(-(score / t)^2), t the training scores'
(1 - contamination) percentile, so P = 0.5 at t.
"""

from __future__ import annotations

import numpy as np

from ballad_env.detectors.ssif.grow import (
    EULER_GAMMA,
    ForestGrower,
    IsolationTree,
    c_factor,
    grow_tree,
    leaf_value,
    path_lengths,
)

#: A forest's random source: a Generator (ours; one spawned stream per tree) or a legacy
#: RandomState (the published code's: each tree seeded by ``randint(0, 100000)``).
ForestRandom = np.random.Generator | np.random.RandomState


def semi_supervised_labels(y: np.ndarray, labeled: np.ndarray) -> np.ndarray:
    """SSIF's labels from our 0/1 labels ``y``: -1 (normal) or 1 (anomaly) where ``labeled``
    (a boolean mask or indices), 0 elsewhere."""
    y = np.asarray(y)
    out = np.zeros(y.shape, dtype=np.int8)
    mask = np.zeros(y.shape, dtype=bool)
    mask[labeled] = True
    out[mask] = np.where(y[mask] == 1, 1, -1)
    return out


class SemiSupervisedIsolationForest:
    """SSIF with the published defaults (``SSIF()``): 100 trees, contamination 0.1.

    Single-threaded. Fitted attributes end in ``_``.

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
        rngs = self._tree_randoms()
        samples = np.array([rng.choice(len(X), self.sample_, replace=False) for rng in rngs])
        self.trees_: list[IsolationTree] = ForestGrower(
            X, y, samples, rngs, self.depth_limit_, self.n_candidates_).grow()
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
        paths = path_lengths(self.trees_, np.asarray(X, dtype=np.float64))
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
           "c_factor", "grow_tree", "leaf_value", "semi_supervised_labels"]
