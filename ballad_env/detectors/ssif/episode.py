"""SSIF as an episode's detector, ``DETECTORS["ssif"]`` (``Settings(detector="ssif")``).

SADAL's detector (``ballad_env.detectors.ssif.forest``, ``docs/sadal.md``) behind the interface of
``ballad_env.detectors``. After every AL round the forest is refitted from scratch on D
with the labels bought so far, always from the same seed, as the published code does
(seed 9 for every fit): a fit is then a function of the labels alone, so the detector at
state (i, j) does not depend on the path and the lattice stays valid. The forest without
labels (the detector before any AL round) is label-free and kept in the reset cache. Our
0/1 labels become SSIF's -1 / 1 (0 unlabeled) here (``ssif.semi_supervised_labels``).
Fits are single-threaded.

Options (``Settings``): ``ssif_trees``; ``ssif_seed``: ``"episode"`` (default: one seed
drawn once per episode from the episode's own ``"detector"`` stream) or ``"authors"`` (a
fresh ``RandomState(9)`` for every fit, the published ``SSIF()``'s, the same in every
episode); ``ssif_contamination``: ``"data"`` (default: the data set's) or a number (the
published ``SSIF()``'s 0.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ballad_env.compute import ResetCache
from ballad_env.detectors.ssif.forest import SemiSupervisedIsolationForest, semi_supervised_labels

#: The seed of the published ``SSIF()``'s legacy ``RandomState`` (``ssif_seed="authors"``).
AUTHORS_SSIF_SEED = 9
#: The fit memo's bound in MB: about 48 fits of 100 trees at |D| = 2,000 (5 MB each), so a
#: budget's whole AL chain of fits at that size.
FIT_MEMO_MB = 256


def detector_seed(streams: dict[str, np.random.SeedSequence]) -> int:
    """SSIF's seed in an episode: one number drawn from the episode's ``"detector"`` stream."""
    return int(np.random.default_rng(streams["detector"]).integers(2**31 - 1))


def fit_seed(settings: Any, streams: dict[str, np.random.SeedSequence]) -> int | None:
    """What every SSIF fit of an episode grows from: the episode's seed
    (``ssif_seed="episode"``), or None for the published code's fresh ``RandomState(9)``
    per fit (``"authors"``)."""
    return None if settings.ssif_seed == "authors" else detector_seed(streams)


def forest_random(seed: int | None) -> int | np.random.RandomState:
    """A fit's random source: the seed itself, or for None a fresh ``RandomState(9)``."""
    return np.random.RandomState(AUTHORS_SSIF_SEED) if seed is None else seed


def ssif_contamination(settings: Any, contamination: float) -> float:
    """SSIF's contamination: the data's (``ssif_contamination="data"``) or the option's."""
    value = settings.ssif_contamination
    return contamination if value == "data" else float(value)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class FittedForest:
    """One SSIF fit and its probabilities of D and of the other points (read-only)."""

    forest: SemiSupervisedIsolationForest
    p_train: np.ndarray
    p_other: np.ndarray

    @classmethod
    def fit(cls, X_train: np.ndarray, X_other: np.ndarray, labels: np.ndarray,
            contamination: float, n_trees: int, seed: int | None) -> FittedForest:
        """Grow a forest on D with SSIF's labels from ``seed`` (None: a fresh
        ``RandomState(9)``); score D and the others."""
        forest = SemiSupervisedIsolationForest(n_trees, contamination,
                                               random_state=forest_random(seed))
        forest.fit(X_train, labels)
        p_other = (forest.predict_proba(X_other)[:, 1] if len(X_other)
                   else np.empty(0))
        return cls(forest, _read_only(forest.predict_proba(X_train)[:, 1]),
                   _read_only(p_other))

    def __deepcopy__(self, memo: dict[int, Any]) -> FittedForest:
        return self

    @property
    def nbytes(self) -> int:
        """Approximate memory held: the probabilities and the trees' nodes (5 numbers each)."""
        nodes = sum(len(tree.left) for tree in self.forest.trees_)
        return self.p_train.nbytes + self.p_other.nbytes + 40 * nodes


#: The process's SSIF fits, per start (the owner: entries go with it) and SSIF label array.
FIT_MEMO = ResetCache(FIT_MEMO_MB * 2**20)


class SSIFScores:
    """SSIF's anomaly probabilities of D, and of V and T stacked, for one episode: refitted
    from scratch on D, from the episode's seed, after every round that labels D."""

    def __init__(self, start: SSIFStart, seed: int | None) -> None:
        self.start, self.seed = start, seed
        self.y = np.zeros(len(start.X_train), dtype=np.int8)
        self.labeled = np.zeros(len(start.X_train), dtype=bool)
        self.fitted = start.unlabeled

    @property
    def forest(self) -> SemiSupervisedIsolationForest:
        """The current forest."""
        return self.fitted.forest

    def add_training_labels(self, indices: np.ndarray, y_new: np.ndarray) -> None:
        """Label the training examples at ``indices`` (0/1 labels) and refit the forest, or
        take the fit on these labels from the fit memo (``FIT_MEMO``)."""
        self.y[indices] = y_new
        self.labeled[indices] = True
        start, seed = self.start, self.seed
        labels = semi_supervised_labels(self.y, self.labeled)
        self.fitted = FIT_MEMO.get_or_compute(
            start, (seed, labels.dtype.str, labels.tobytes()),
            lambda: FittedForest.fit(start.X_train, start.X_other, labels,
                                     start.contamination, start.n_trees, seed),
            lambda fitted: fitted.nbytes)

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Anomaly probabilities (training set, other points)."""
        return self.fitted.p_train, self.fitted.p_other

    def anomaly_probability(self, X: np.ndarray) -> np.ndarray:
        """P(anomaly) of any points under the current forest."""
        return self.forest.predict_proba(np.asarray(X, dtype=np.float64))[:, 1]


@dataclass(frozen=True, eq=False)
class SSIFStart:
    """SSIF's label-free part on one split: the forest fitted on D without labels, from the
    episode's seed (None: a fresh ``RandomState(9)`` per fit), and its probabilities of D
    and of V and T (``X_other``); ``contamination`` is SSIF's (``ssif_contamination``)."""

    X_train: np.ndarray
    X_other: np.ndarray
    contamination: float
    n_trees: int
    seed: int | None
    unlabeled: FittedForest

    def __deepcopy__(self, memo: dict[int, Any]) -> SSIFStart:
        return self

    @property
    def nbytes(self) -> int:
        """Approximate memory held: the unlabeled fit (the fit memo is bounded apart)."""
        return self.unlabeled.nbytes

    @property
    def shared(self) -> tuple[Any, ...]:
        """Nothing beyond this read-only object itself."""
        return (self.unlabeled,)

    def scores(self, settings: Any, streams: dict[str, np.random.SeedSequence]) -> SSIFScores:
        """An episode's SSIF, without labels: the cached unlabeled forest."""
        return SSIFScores(self, self.seed)


class SSIFDetector:
    """SSIF as an episode's detector: seeded from the ``"detector"`` stream (or as
    published); its options are ``Settings.ssif_trees`` (the published code's 100 by
    default), ``ssif_seed`` and ``ssif_contamination``."""

    def key(self, settings: Any, streams: dict[str, np.random.SeedSequence],
            n_train: int) -> tuple[Any, ...]:
        """The seed (None: the published RandomState(9)), the trees and the contamination
        option."""
        return (fit_seed(settings, streams), settings.ssif_trees, settings.ssif_contamination)

    def start(self, split: Any, X_other: np.ndarray, contamination: float, settings: Any,
              streams: dict[str, np.random.SeedSequence]) -> SSIFStart:
        """The forest fitted on D without labels, and its probabilities."""
        seed, contamination = fit_seed(settings, streams), ssif_contamination(settings,
                                                                              contamination)
        unlabeled = FittedForest.fit(split.X_train, X_other,
                                     np.zeros(len(split.X_train), dtype=np.int8),
                                     contamination, settings.ssif_trees, seed)
        return SSIFStart(split.X_train, X_other, contamination, settings.ssif_trees, seed,
                         unlabeled)

    def unlabeled_probability(self, X: np.ndarray, contamination: float, settings: Any,
                              streams: dict[str, np.random.SeedSequence]) -> np.ndarray:
        """P on X of SSIF fitted on X without labels (from the episode's seed)."""
        return FittedForest.fit(X, X[:0], np.zeros(len(X), dtype=np.int8),
                                ssif_contamination(settings, contamination),
                                settings.ssif_trees, fit_seed(settings, streams)).p_train


SSIF_DETECTOR = SSIFDetector()

__all__ = ["AUTHORS_SSIF_SEED", "FIT_MEMO", "FIT_MEMO_MB", "SSIF_DETECTOR", "FittedForest",
           "SSIFDetector", "SSIFScores", "SSIFStart", "detector_seed", "fit_seed",
           "forest_random", "ssif_contamination"]
