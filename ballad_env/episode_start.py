"""The label-free part of a reset (``EpisodeStart``), shared through the reset cache.

Split and scale, the detector's unlabeled fit on D, and the prior probabilities and
kernel rows of V and T: computed once per (data set, seed, label-free options), then
shared by every setting, agent and repeated episode of it (``ballad_env.compute``). Also
what a reset checks first (``check_settings``) and the seeds it derives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ballad_env.compute import RESET_CACHE
from ballad_env.cost import Costs
from ballad_env.data import Dataset
from ballad_env.detector import SSDO, KernelRows, PointScores, UnlabeledFit
from ballad_env.protocol import (
    Budget,
    Split,
    split_and_scale,
    split_sizes,
    warn_if_test_lacks_anomalies,
)
from ballad_env.settings import Settings


def check_settings(dataset: Dataset, settings: Settings) -> tuple[Costs, Budget]:
    """Costs and budget of ``settings`` on ``dataset``; a clear error if either is invalid,
    a ``DataWarning`` if the test set gets no anomaly."""
    costs = Costs.for_contamination(dataset.contamination, settings.c_fp, settings.c_fn,
                                    settings.c_r, settings.cost_metric)
    n_train, n_val, _ = split_sizes(dataset.y, settings.split)
    budget = Budget.from_fractions(n_train, settings.budget_fraction, settings.round_fraction)
    budget.check(n_train, n_val, dataset.name)
    warn_if_test_lacks_anomalies(dataset.y, dataset.name)
    return costs, budget


@dataclass(frozen=True, eq=False)
class EpisodeStart:
    """The label-free part of a reset: the scaled split, SSDO's unlabeled fit on D, and the
    prior probabilities and kernel rows of V and T (stacked in ``X_other``).

    It depends on the data set, the seed's split and prior streams, the split, the prior and
    how it scores and squashes D, k, the kernel options and the initial fit only, so every
    setting, agent and
    repeated episode of one (data set, seed) can share it. Its arrays are read-only; copies
    of an episode share it too.
    """

    split: Split
    fit: UnlabeledFit
    X_other: np.ndarray
    q_other: np.ndarray
    other_rows: KernelRows
    #: P on D and V of SSDO fitted on both without labels (``initial_fit="train-val"``).
    p_initial: np.ndarray | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> EpisodeStart:
        return self

    @property
    def nbytes(self) -> int:
        """Approximate memory held (the fitted prior estimated by its pickled size)."""
        arrays = [*vars(self.split).values(), self.fit.q_train, self.X_other, self.q_other,
                  *([] if self.p_initial is None else [self.p_initial])]
        return (sum(a.nbytes for a in arrays) + self.fit.rows.nbytes + self.other_rows.nbytes
                + _pickled_size(self.fit.prior))

    @classmethod
    def compute(cls, dataset: Dataset, streams: dict[str, np.random.SeedSequence],
                settings: Settings, split_seed: int = 0) -> EpisodeStart:
        """Split and scale, fit SSDO's label-free parts on D, score V and T with the prior.
        ``split_seed``: the authors' split's ``random_state``."""
        split = split_and_scale(dataset.X, dataset.y, np.random.default_rng(streams["split"]),
                                settings.split, split_seed)
        for array in vars(split).values():
            array.setflags(write=False)
        detector = episode_detector(dataset, streams, settings, len(split.y_train))
        detector.fit(split.X_train)
        X_other = np.vstack([split.X_val, split.X_test])
        X_other.setflags(write=False)
        scores = PointScores(detector, X_other)
        scores.q.setflags(write=False)
        p_initial = None
        if settings.initial_fit == "train-val":
            p_initial = detector.unlabeled_probability(np.vstack([split.X_train, split.X_val]))
            p_initial.setflags(write=False)
        return cls(split, detector.unlabeled_, X_other, scores.q, scores.rows, p_initial)

    def scores(self, dataset: Dataset, streams: dict[str, np.random.SeedSequence],
               settings: Settings) -> PointScores:
        """An episode's detector started from these label-free parts: its anomaly
        probabilities of D, and of V and T, kept current as training labels arrive (the one
        interface an episode reaches its detector through, ``detector.EpisodeScores``)."""
        detector = episode_detector(dataset, streams, settings, len(self.split.y_train))
        detector.fit(self.split.X_train, unlabeled=self.fit)
        return PointScores(detector, self.X_other, rows=self.other_rows, q=self.q_other)

    @property
    def shared(self) -> tuple[Any, ...]:
        """The read-only parts an episode's copies share rather than copy (the arrays, and
        the fitted prior: copying a fitted IForest costs more than the rounds taken)."""
        return (self.split, *vars(self.split).values(), self.X_other, self.q_other,
                self.fit.q_train, self.fit.prior)


def authors_split_seed(seed: int | np.random.SeedSequence,
                       streams: dict[str, np.random.SeedSequence]) -> int:
    """The authors' split's ``random_state``: the episode's seed itself when it is an integer
    (so the published code's splits come back), else a number drawn from the split stream."""
    if isinstance(seed, int | np.integer):
        return int(seed)
    return int(streams["split"].generate_state(1)[0] % (2**31 - 1))


def _prior_seed(streams: dict[str, np.random.SeedSequence]) -> int:
    return int(np.random.default_rng(streams["prior"]).integers(2**31 - 1))


def episode_detector(dataset: Dataset, streams: dict[str, np.random.SeedSequence],
              settings: Settings, n_train: int) -> SSDO:
    """The episode's (unfitted) SSDO, with the eta and kernel options in force for |D|."""
    return SSDO(dataset.contamination, settings.prior, settings.k, settings.alpha,
                random_state=_prior_seed(streams), eta_sample=settings.eta_sample_for(n_train),
                kernel_dtype=settings.kernel_dtype_for(n_train),
                train_scores=settings.prior_train_scores,
                squash_quantile=settings.squash_quantile,
                kernel_backend=settings.kernel_backend, kernel_device=settings.kernel_device)


def _pickled_size(obj: Any) -> int:
    """Bytes of ``obj`` as pickled, large arrays counted without copying them."""
    import pickle

    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    except Exception:  # an unpicklable prior: count nothing rather than fail the episode
        return 0
    return len(head) + sum(buffer.raw().nbytes for buffer in buffers)


def episode_start(dataset: Dataset, streams: dict[str, np.random.SeedSequence],
                  settings: Settings, split_seed: int = 0) -> EpisodeStart:
    """The label-free part of a reset, from the reset cache when it holds it.

    The key is what the part depends on: the data set (this object), the state of the split
    stream (and the authors' split's seed), the prior's seed, and the split, prior, D's
    scoring and squashing, k, eta and kernel options in force (the backend and device
    too). A prior given as an object is never cached (it has no stable key).
    """
    if not isinstance(settings.prior, str):
        return EpisodeStart.compute(dataset, streams, settings, split_seed)
    n_train = split_sizes(dataset.y, settings.split)[0]
    key = (tuple(int(v) for v in streams["split"].generate_state(4)), _prior_seed(streams),
           settings.prior, settings.k, settings.eta_sample_for(n_train),
           settings.kernel_dtype_for(n_train), settings.split,
           split_seed if settings.split == "authors" else None, settings.prior_train_scores,
           settings.squash_quantile, settings.initial_fit, settings.kernel_backend,
           settings.kernel_device)
    return RESET_CACHE.get_or_compute(
        dataset, key, lambda: EpisodeStart.compute(dataset, streams, settings, split_seed),
        lambda start: start.nbytes)


__all__ = ["EpisodeStart", "authors_split_seed", "check_settings", "episode_detector",
           "episode_start"]
