"""SSDO as an episode's detector, ``DETECTORS["ssdo"]`` (the default; ``ballad_env.detectors``).

BALLAD's detector (``ballad_env.detectors.ssdo.model``) behind the interface of
``ballad_env.detectors``:
its label-free part (the prior's fit on D, its squashing threshold, eta, and the prior
probabilities and kernel rows of V and T) is ``SSDOStart``, kept in the reset cache; an
episode's ``PointScores`` start from it and add each round's labels incrementally. Seeded
from the episode's ``"prior"`` stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ballad_env.detectors.ssdo.model import SSDO, KernelRows, PointScores, UnlabeledFit


def prior_seed(streams: dict[str, np.random.SeedSequence]) -> int:
    """SSDO's seed in an episode: one number drawn from the episode's ``"prior"`` stream."""
    return int(np.random.default_rng(streams["prior"]).integers(2**31 - 1))


def _pickled_size(obj: Any) -> int:
    """Bytes of ``obj`` as pickled, large arrays counted without copying them."""
    import pickle

    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    except Exception:  # an unpicklable prior: count nothing rather than fail the episode
        return 0
    return len(head) + sum(buffer.raw().nbytes for buffer in buffers)


@dataclass(frozen=True, eq=False)
class SSDOStart:
    """SSDO's label-free part on one split: the unlabeled fit on D, and the prior
    probabilities and kernel rows of V and T (``X_other``). Read-only."""

    X_train: np.ndarray
    fit: UnlabeledFit
    X_other: np.ndarray
    q_other: np.ndarray
    other_rows: KernelRows
    contamination: float

    def __deepcopy__(self, memo: dict[int, Any]) -> SSDOStart:
        return self

    @property
    def nbytes(self) -> int:
        """Approximate memory held (the fitted prior estimated by its pickled size)."""
        return (self.fit.q_train.nbytes + self.q_other.nbytes + self.fit.rows.nbytes
                + self.other_rows.nbytes + _pickled_size(self.fit.prior))

    @property
    def shared(self) -> tuple[Any, ...]:
        """The arrays and the fitted prior (copying a fitted IForest costs more than the
        rounds taken from a fork)."""
        return (self.q_other, self.fit.q_train, self.fit.prior)

    def scores(self, settings: Any, streams: dict[str, np.random.SeedSequence]) -> PointScores:
        """An episode's SSDO started from this part (alpha from ``settings``)."""
        detector = SSDO_DETECTOR.build(self.contamination, settings, streams, len(self.X_train))
        detector.fit(self.X_train, unlabeled=self.fit)
        return PointScores(detector, self.X_other, rows=self.other_rows, q=self.q_other)


class SSDODetector:
    """SSDO as an episode's detector, ``DETECTORS["ssdo"]`` (``ballad_env.detectors``):
    seeded from the ``"prior"`` stream; its options are the settings' prior, k, alpha, eta
    and kernel options (the backend and device too), D's scoring and squashing."""

    def build(self, contamination: float, settings: Any,
              streams: dict[str, np.random.SeedSequence], n_train: int) -> SSDO:
        """The episode's (unfitted) SSDO, with the eta and kernel options in force for |D|."""
        return SSDO(contamination, settings.prior, settings.k, settings.alpha,
                    random_state=prior_seed(streams),
                    eta_sample=settings.eta_sample_for(n_train),
                    kernel_dtype=settings.kernel_dtype_for(n_train),
                    train_scores=settings.prior_train_scores,
                    squash_quantile=settings.squash_quantile,
                    squash_formula=settings.squash_formula,
                    label_terms=settings.label_terms,
                    kernel_backend=settings.kernel_backend, kernel_device=settings.kernel_device,
                    kernel_pairs=settings.kernel_pairs_for(n_train))

    def key(self, settings: Any, streams: dict[str, np.random.SeedSequence],
            n_train: int) -> tuple[Any, ...]:
        """The seed and the options the unlabeled fit depends on (not alpha: labels only)."""
        return (prior_seed(streams), settings.prior, settings.k,
                settings.eta_sample_for(n_train), settings.kernel_dtype_for(n_train),
                settings.prior_train_scores, settings.squash_quantile, settings.kernel_backend,
                settings.kernel_device, settings.kernel_pairs_for(n_train),
                settings.squash_formula)

    def start(self, split: Any, X_other: np.ndarray, contamination: float, settings: Any,
              streams: dict[str, np.random.SeedSequence]) -> SSDOStart:
        """Fit the label-free parts on D; score V and T with the prior."""
        detector = self.build(contamination, settings, streams, len(split.y_train))
        detector.fit(split.X_train)
        scores = PointScores(detector, X_other)
        scores.q.setflags(write=False)
        return SSDOStart(split.X_train, detector.unlabeled_, X_other, scores.q, scores.rows,
                         contamination)

    def unlabeled_probability(self, X: np.ndarray, contamination: float, settings: Any,
                              streams: dict[str, np.random.SeedSequence]) -> np.ndarray:
        """P on X of SSDO fitted on X without labels (``SSDO.unlabeled_probability``)."""
        return self.build(contamination, settings, streams, len(X)).unlabeled_probability(X)


SSDO_DETECTOR = SSDODetector()


__all__ = ["SSDO_DETECTOR", "SSDODetector", "SSDOStart", "prior_seed"]
