"""Detectors as an extension point: ``DETECTORS`` and the interface an episode reaches its
detector through (``Settings(detector=...)``).

An episode, the reset cache, the lattice and the replay environment's lattices all reach
the detector through three objects, so a new detector is one file that registers one:

* a ``Detector`` (registered by name): what the label-free part depends on (``key``, for
  the reset cache), that part fitted on one split (``start``), and the probabilities of a
  detector fitted without labels on other data (``unlabeled_probability``, for
  ``initial_fit="train-val"``);
* its ``DetectorStart``: the label-free part of one (data set, seed), read-only and shared
  by every episode that starts from it; ``scores`` starts an episode's detector;
* the episode's ``EpisodeScores``: the anomaly probabilities of D, and of V and T stacked,
  kept current as training labels arrive (``add_training_labels``), and of any other
  points (``anomaly_probability``, for ``render``).

A detector draws its randomness from the episode's streams (``protocol.spawn_streams``):
SSDO from ``"prior"``, SSIF from ``"detector"``. For the lattice to hold, the probabilities
after a round must be a function of the training labels bought so far (not of the order of
the rounds): SSDO adds the labels' kernel sums, SSIF refits from the same seed.

Built in: ``"ssdo"`` (``ballad_env.detectors.ssdo.episode``, BALLAD's, the default) and ``"ssif"``
(``ballad_env.detectors.ssif.episode``, SADAL's semi-supervised isolation forest).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ballad_env.detectors.ssdo.episode import SSDO_DETECTOR
from ballad_env.detectors.ssdo.model import EpisodeScores
from ballad_env.detectors.ssif.episode import SSIF_DETECTOR
from ballad_env.registry import Registry

if TYPE_CHECKING:
    from ballad_env.protocol import Split
    from ballad_env.settings import Settings

Streams = dict[str, np.random.SeedSequence]


class DetectorStart(Protocol):
    """A detector's label-free part on one split: read-only, kept in the reset cache."""

    @property
    def nbytes(self) -> int:
        """Approximate memory held (the cache's budget counts it)."""

    @property
    def shared(self) -> tuple[Any, ...]:
        """The parts an episode's forks share rather than copy."""

    def scores(self, settings: Settings, streams: Streams) -> EpisodeScores:
        """An episode's detector started from this part, with no labels yet."""


class Detector(Protocol):
    """A kind of detector, as ``DETECTORS`` holds it."""

    def key(self, settings: Settings, streams: Streams, n_train: int) -> tuple[Hashable, ...]:
        """Everything besides the split that ``start`` depends on (seeds, options)."""

    def start(self, split: Split, X_other: np.ndarray, contamination: float,
              settings: Settings, streams: Streams) -> DetectorStart:
        """The label-free part on ``split`` (D; ``X_other``: V and T stacked)."""

    def unlabeled_probability(self, X: np.ndarray, contamination: float, settings: Settings,
                              streams: Streams) -> np.ndarray:
        """P on X of this detector fitted on X without labels."""


DETECTORS: Registry[Detector] = Registry("detector")
DETECTORS.register("ssdo", SSDO_DETECTOR)
DETECTORS.register("ssif", SSIF_DETECTOR)

__all__ = ["DETECTORS", "Detector", "DetectorStart", "EpisodeScores", "Streams"]
