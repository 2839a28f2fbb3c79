"""Query strategies: which unlabeled examples a round labels (``docs/method.md``, Allocation).

A strategy is built once per episode from its own random stream and the size of its pool
(D for AL, V for LR), and has one verb, ``select``. Register a new one in ``AL_QUERIES``
or ``LR_QUERIES`` and name it in ``Settings(al_strategy=...)`` / ``lr_strategy``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from ballad_env.registry import Registry
from ballad_env.rejection import confidence


class QueryStrategy(Protocol):
    """Chooses ``size`` examples among the unlabeled ones of a pool."""

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        """Indices (into the pool) to label now.

        ``probability`` holds the detector's anomaly probabilities of the whole pool,
        ``unlabeled`` the sorted indices of its unlabeled members.
        """
        ...


#: name -> factory(random generator, pool size)
QueryFactory = Callable[[np.random.Generator, int], QueryStrategy]
AL_QUERIES: Registry[QueryFactory] = Registry("AL query strategy")
LR_QUERIES: Registry[QueryFactory] = Registry("LR query strategy")


class UncertaintySampling:
    """The paper's AL queries: random in the first round (the detector has seen no label),
    then the least confident examples, C(x) = 2 |P(x) - 0.5|, ties broken at random."""

    def __init__(self, rng: np.random.Generator, pool_size: int) -> None:
        self.rng = rng
        self.rounds = 0

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        if self.rounds == 0:
            chosen = self.rng.choice(unlabeled, size=size, replace=False)
        else:
            tie_break = self.rng.random(unlabeled.size)
            order = np.lexsort((tie_break, confidence(probability[unlabeled])))
            chosen = unlabeled[order[:size]]
        self.rounds += 1
        return chosen


class RandomSampling:
    """Uniformly random unlabeled examples, drawn afresh each round."""

    def __init__(self, rng: np.random.Generator, pool_size: int) -> None:
        self.rng = rng

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        return self.rng.choice(unlabeled, size=size, replace=False)


class RandomOrder:
    """The paper's LR queries: one random order of the pool, drawn at the start; round j
    labels its j-th block. So the labels after j rounds do not depend on when they came."""

    def __init__(self, rng: np.random.Generator, pool_size: int) -> None:
        self.order = rng.permutation(pool_size)
        self.taken = 0

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        chosen = self.order[self.taken:self.taken + size]
        self.taken += size
        return chosen


AL_QUERIES.register("uncertainty", UncertaintySampling)
AL_QUERIES.register("random", RandomSampling)
LR_QUERIES.register("random", RandomOrder)

__all__ = ["AL_QUERIES", "LR_QUERIES", "QueryStrategy", "RandomOrder", "RandomSampling",
           "UncertaintySampling"]
