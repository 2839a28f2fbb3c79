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
from ballad_env.detectors import DETECTORS, DetectorStart, EpisodeScores
from ballad_env.detectors.ssdo.episode import SSDO_DETECTOR
from ballad_env.detectors.ssdo.model import SSDO
from ballad_env.protocol import (
    Budget,
    Split,
    split_and_scale,
    split_sizes,
    warn_if_test_lacks_anomalies,
)
from ballad_env.settings import Settings

#: The splits drawn by scikit-learn from an integer seed (``authors_split_seed``), not from
#: the episode's split stream: the seed is part of the reset cache's key.
SEEDED_SPLITS = ("authors", "sadal")


#: Arrays the size of X (float64) an episode derives from it besides X itself: the split, its
#: scaled copy, the kernel's rows and the prior's working copies (measured 2.5 to 3.3 times
#: X above X, on 8,000 to 40,000 rows of 200 to 900 features; ``docs/trust.md``).
EPISODE_COPIES = 4


def check_episode_bytes(dataset: Dataset) -> None:
    """A ``ValueError`` naming ``dataset`` and ``$BALLAD_MAX_ARRAY_BYTES`` if what an episode
    derives from it (:data:`EPISODE_COPIES` arrays the size of its float64 X) passes the
    ceiling a data file's arrays are held to (``ballad_env.files.array_ceiling``): a file
    under the ceiling must not make a run take many times it, before anything is derived."""
    from ballad_env.files import ARRAY_BYTES_ENV, array_ceiling

    derived = EPISODE_COPIES * dataset.X.shape[0] * dataset.X.shape[1] * 8
    ceiling = array_ceiling()
    if derived > ceiling:
        raise ValueError(f"{dataset.name}: an episode on its {dataset.X.shape[0]:,} x "
                         f"{dataset.X.shape[1]:,} features would derive about {derived:,} "
                         f"bytes of arrays (split, scaled, kernel rows), more than the "
                         f"ceiling of {ceiling:,}; set ${ARRAY_BYTES_ENV} to a larger number "
                         "of bytes if the machine has the memory")


def check_settings(dataset: Dataset, settings: Settings) -> tuple[Costs, Budget]:
    """Costs and budget of ``settings`` on ``dataset``; a clear error if either is invalid or
    an episode would derive more than the arrays' ceiling (:func:`check_episode_bytes`),
    a ``DataWarning`` if a set gets no anomaly, a ``BudgetWarning`` if rounds of less than
    half a label are rounded up to one."""
    check_episode_bytes(dataset)
    costs = Costs.for_contamination(dataset.contamination, settings.c_fp, settings.c_fn,
                                    settings.c_r, settings.cost_metric)
    n_train, n_val, _ = split_sizes(dataset.y, settings.split)
    budget = settings.budget(n_train, n_val)
    budget.check(n_train, n_val, dataset.name)
    if settings.budget_rule == "paper":
        budget.warn_if_rounded_up(n_train, settings.round_fraction, dataset.name)
    warn_if_test_lacks_anomalies(dataset.y, dataset.name)
    return costs, budget


@dataclass(frozen=True, eq=False)
class EpisodeStart:
    """The label-free part of a reset: the scaled split, V and T stacked (``X_other``) and
    the detector's label-free part on them (``detector``: for SSDO its unlabeled fit on D
    and the prior probabilities and kernel rows of V and T; for SSIF the forest without
    labels).

    It depends on the data set, the seed's split stream, the split, the initial fit, and
    the detector's seed and options (``Detector.key``) only, so every setting, agent and
    repeated episode of one (data set, seed) can share it. Its arrays are read-only;
    copies of an episode share it too.
    """

    split: Split
    detector: DetectorStart
    X_other: np.ndarray
    #: P on D and V of the detector fitted on both without labels (``initial_fit="train-val"``).
    p_initial: np.ndarray | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> EpisodeStart:
        return self

    @property
    def nbytes(self) -> int:
        """Approximate memory held."""
        arrays = [*vars(self.split).values(), self.X_other,
                  *([] if self.p_initial is None else [self.p_initial])]
        return sum(a.nbytes for a in arrays) + self.detector.nbytes

    @classmethod
    def compute(cls, dataset: Dataset, streams: dict[str, np.random.SeedSequence],
                settings: Settings, split_seed: int = 0) -> EpisodeStart:
        """Split and scale, fit the detector's label-free parts on D (and score V and T).
        ``split_seed``: the authors' split's ``random_state``."""
        split = split_and_scale(dataset.X, dataset.y, np.random.default_rng(streams["split"]),
                                settings.split, split_seed, settings.scaling)
        for array in vars(split).values():
            array.setflags(write=False)
        X_other = np.vstack([split.X_val, split.X_test])
        X_other.setflags(write=False)
        kind = DETECTORS[settings.detector]
        start = kind.start(split, X_other, dataset.contamination, settings, streams)
        p_initial = None
        if settings.initial_fit == "train-val":
            p_initial = kind.unlabeled_probability(np.vstack([split.X_train, split.X_val]),
                                                   dataset.contamination, settings, streams)
            p_initial.setflags(write=False)
        return cls(split, start, X_other, p_initial)

    def scores(self, settings: Settings, streams: dict[str, np.random.SeedSequence]
               ) -> EpisodeScores:
        """An episode's detector started from these label-free parts: its anomaly
        probabilities of D, and of V and T, kept current as training labels arrive (the one
        interface an episode reaches its detector through, ``detectors.EpisodeScores``)."""
        return self.detector.scores(settings, streams)

    @property
    def shared(self) -> tuple[Any, ...]:
        """The read-only parts an episode's copies share rather than copy (the arrays, and
        the detector's fitted parts: copying a fitted IForest costs more than the rounds
        taken)."""
        return (self.split, *vars(self.split).values(), self.X_other, self.detector,
                *self.detector.shared)


def authors_split_seed(seed: int | np.random.SeedSequence,
                       streams: dict[str, np.random.SeedSequence]) -> int:
    """The authors' split's ``random_state``: the episode's seed itself when it is an integer
    (so the published code's splits come back), else a number drawn from the split stream."""
    if isinstance(seed, int | np.integer):
        return int(seed)
    return int(streams["split"].generate_state(1)[0] % (2**31 - 1))


def episode_detector(dataset: Dataset, streams: dict[str, np.random.SeedSequence],
                     settings: Settings, n_train: int) -> SSDO:
    """The episode's (unfitted) SSDO, with the eta and kernel options in force for |D|."""
    return SSDO_DETECTOR.build(dataset.contamination, settings, streams, n_train)


def episode_start(dataset: Dataset, streams: dict[str, np.random.SeedSequence],
                  settings: Settings, split_seed: int = 0) -> EpisodeStart:
    """The label-free part of a reset, from the reset cache when it holds it.

    The key is what the part depends on: the data set (this object), the state of the split
    stream (and the authors' split's seed), the split, the initial fit, the detector and
    its seeds and options (``Detector.key``: for SSDO the prior's seed, the prior, D's
    scoring and squashing, k, eta and kernel options, the kernel's backend and device). A
    prior given as an object is never cached (it has no stable key).
    """
    if not isinstance(settings.prior, str) and settings.detector == "ssdo":
        return EpisodeStart.compute(dataset, streams, settings, split_seed)
    n_train = split_sizes(dataset.y, settings.split)[0]
    key = (tuple(int(v) for v in streams["split"].generate_state(4)), settings.split,
           split_seed if settings.split in SEEDED_SPLITS else None, settings.initial_fit,
           *(() if settings.scaling == "standard-minmax" else (settings.scaling,)),
           settings.detector, *DETECTORS[settings.detector].key(settings, streams, n_train))
    return RESET_CACHE.get_or_compute(
        dataset, key, lambda: EpisodeStart.compute(dataset, streams, settings, split_seed),
        lambda start: start.nbytes)


__all__ = ["EpisodeStart", "authors_split_seed", "check_settings", "episode_detector",
           "episode_start"]
