"""Query strategies: which unlabeled examples a round labels (``docs/method.md``, Allocation).

A strategy is built once per episode from its own random stream and the size of its pool
(D for AL, V for LR), and has one verb, ``select``. Register a new one in ``AL_QUERIES``
or ``LR_QUERIES`` and name it in ``Settings(al_strategy=...)`` / ``lr_strategy``.

Where the random numbers come from is ``Settings.query_rng`` (:func:`query_generators`):
by default each strategy has its own Generator (SPEC §5); ``"authors"`` gives both one
legacy ``RandomState``, as the published code's global stream.

SADAL's strategies (``docs/sadal.md``): LR ``stratified-probability`` and AL
``threshold-distance`` (and ``threshold-distance-authors``, the published code's). The
latter need the previous round's two-sided thresholds: a strategy with ``uses_context =
True`` takes a keyword ``context`` (:class:`QueryContext`) in ``select``; callers pass it
through :func:`select_with`, which leaves the other strategies' calls as they were.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ballad_env.registry import Registry
from ballad_env.rejection.confidence import confidence


class QueryStrategy(Protocol):
    """Chooses ``size`` examples among the unlabeled ones of a pool."""

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        """Indices (into the pool) to label now.

        ``probability`` holds the detector's anomaly probabilities of the whole pool,
        ``unlabeled`` the sorted indices of its unlabeled members.
        """
        ...


#: A strategy's random source: a Generator (ours), or the legacy RandomState that
#: ``query_rng="authors"`` shares between AL and LR (the calls used exist on both).
QueryRandom = np.random.Generator | np.random.RandomState
#: name -> factory(random source, pool size)
QueryFactory = Callable[[QueryRandom, int], QueryStrategy]
AL_QUERIES: Registry[QueryFactory] = Registry("AL query strategy")
LR_QUERIES: Registry[QueryFactory] = Registry("LR query strategy")


class UncertaintySampling:
    """The paper's AL queries: random in the first round (the detector has seen no label),
    then the least confident examples, C(x) = 2 |P(x) - 0.5|, ties broken at random."""

    def __init__(self, rng: QueryRandom, pool_size: int) -> None:
        self.rng = rng
        self.rounds = 0

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        if self.rounds == 0:
            chosen = self.rng.choice(unlabeled, size=size, replace=False)
        else:
            chosen = self.least_confident(probability, unlabeled, size)
        self.rounds += 1
        return chosen

    def least_confident(self, probability: np.ndarray, unlabeled: np.ndarray, size: int
                        ) -> np.ndarray:
        """The ``size`` least confident unlabeled examples (a round after the first)."""
        tie_break = self.rng.random(unlabeled.size)
        order = np.lexsort((tie_break, confidence(probability[unlabeled])))
        return unlabeled[order[:size]]


class UncertaintyArgsort(UncertaintySampling):
    """The published code's AL queries: random in the first round, then the first ``size``
    unlabeled examples of ``np.argsort`` of the confidence over the whole pool (numpy's
    default sort, so ties fall in its order). No random number after the first round."""

    def least_confident(self, probability: np.ndarray, unlabeled: np.ndarray, size: int
                        ) -> np.ndarray:
        order = np.argsort(confidence(probability))
        is_unlabeled = np.zeros(len(probability), dtype=bool)
        is_unlabeled[unlabeled] = True
        return order[is_unlabeled[order]][:size]


class RandomSampling:
    """Uniformly random unlabeled examples, drawn afresh each round: AL's ``random``, and
    LR's ``per-round`` (the published code's LR queries). On its own stream the LR draws
    depend on the earlier LR draws only, so the labels after j LR rounds do not depend on
    when they came, as with ``RandomOrder`` (but they are other labels)."""

    def __init__(self, rng: QueryRandom, pool_size: int) -> None:
        self.rng = rng

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        return self.rng.choice(unlabeled, size=size, replace=False)


class RandomOrder:
    """The paper's LR queries: one random order of the pool, drawn at the start; round j
    labels its j-th block. So the labels after j rounds do not depend on when they came."""

    def __init__(self, rng: QueryRandom, pool_size: int) -> None:
        self.order = rng.permutation(pool_size)
        self.taken = 0

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        chosen = self.order[self.taken:self.taken + size]
        self.taken += size
        return chosen


@dataclass(frozen=True)
class QueryContext:
    """What a strategy with ``uses_context = True`` may read besides the probabilities: the
    two-sided rejector's thresholds (left, right) of the previous round (None before any)."""

    thresholds: tuple[float, float] | None = None


def select_with(strategy: QueryStrategy, probability: np.ndarray, unlabeled: np.ndarray,
                size: int, context: QueryContext | None = None) -> np.ndarray:
    """``strategy.select(probability, unlabeled, size)``, with ``context=context`` added for
    the strategies that declare ``uses_context = True`` (the backward-compatible extension
    of the ``select`` protocol)."""
    if getattr(strategy, "uses_context", False):
        return strategy.select(probability, unlabeled, size,  # type: ignore[call-arg]
                               context=context)
    return strategy.select(probability, unlabeled, size)


def threshold_distance(probability: np.ndarray, left: float, right: float) -> np.ndarray:
    """SADAL's AL score: 2 |P - left| below 0.5, 2 |P - right| from 0.5 on (the distance to
    the nearer rejection threshold; small = near the rejection band)."""
    p = np.asarray(probability, dtype=np.float64)
    return 2 * np.where(p < 0.5, np.abs(p - left), np.abs(p - right))


class ThresholdDistance:
    """SADAL's AL queries (ours): the unlabeled examples nearest a rejection threshold of the
    previous round, skipping those that round rejected (left <= P <= right); ties by index.
    If fewer than ``size`` remain, the rejected ones follow in the same order, so a round
    always buys ``size`` labels. Before any thresholds (first round): the distance to 0.5,
    nothing skipped (the published code has no ranking then and crashes). No randomness.

    The episode passes the rejection band in force (``Episode.query_context``), set by the
    LR rounds before: the labels after i AL rounds depend on when those came
    (``depends_on_path``), so the lattice refuses this strategy."""

    uses_context = True
    depends_on_path = True
    path_reason = ("its ranking reads the previous round's rejection thresholds, which "
                   "depend on when the LR rounds came")

    def __init__(self, rng: QueryRandom, pool_size: int) -> None:
        self.pool_size = pool_size

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int,
               context: QueryContext | None = None) -> np.ndarray:
        left, right = _thresholds(context)
        p = np.asarray(probability, dtype=np.float64)[unlabeled]
        rejected = (p >= left) & (p <= right) if context and context.thresholds else \
            np.zeros(p.size, dtype=bool)
        order = np.lexsort((unlabeled, threshold_distance(p, left, right), rejected))
        return unlabeled[order[:size]]


class ThresholdDistanceAuthors(ThresholdDistance):
    """The published code's AL queries: ``np.argsort`` of the distance over the whole pool
    (ties in its order), keeping unlabeled examples not rejected by the previous round, the
    first ``size`` of them. Quirk: its rejected flag is ``np.where(..)[0]``, the flag of pool
    member 0 alone: if member 0 was rejected, no example qualifies and the round buys no
    label (an empty selection); else every unlabeled example qualifies.

    First round (no thresholds yet): no label. The published code crashes there (it has no
    ranking yet); its data flow says what the round would buy: round 1's rejected list is
    ``[]``, whose ``np.where(..)[0]`` makes every example ineligible, so none. With this fix
    the preset's All-in-AL equals the published code in every round of 6 held-out
    episodes (``docs/sadal.md``). ``threshold-distance-authors-ranked`` is the earlier fix
    (rank by 2 |P - 0.5|, nothing rejected, ``size`` labels)."""

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int,
               context: QueryContext | None = None) -> np.ndarray:
        p = np.asarray(probability, dtype=np.float64)
        if context is None or context.thresholds is None:
            return self.first_round(p, unlabeled, size)
        left, right = context.thresholds
        if left <= p[0] <= right:
            return np.zeros(0, dtype=np.intp)
        return self._ranked(p, unlabeled, size, left, right)

    def first_round(self, probability: np.ndarray, unlabeled: np.ndarray, size: int
                    ) -> np.ndarray:
        """Round 1's labels: none (the published code's empty rejected list)."""
        return np.zeros(0, dtype=np.intp)

    @staticmethod
    def _ranked(p: np.ndarray, unlabeled: np.ndarray, size: int, left: float, right: float
                ) -> np.ndarray:
        """The first ``size`` unlabeled examples of the argsort of the distance."""
        order = np.argsort(threshold_distance(p, left, right))
        is_unlabeled = np.zeros(p.size, dtype=bool)
        is_unlabeled[unlabeled] = True
        return order[is_unlabeled[order]][:size]


class ThresholdDistanceAuthorsRanked(ThresholdDistanceAuthors):
    """``threshold-distance-authors`` with the earlier round-1 fix: rank the pool by
    2 |P - 0.5| (the distance to 0.5), nothing rejected, and buy ``size`` labels (what
    ``python -m scripts.studies.sadal_published --al-first-round rank`` does to the published
    code)."""

    def first_round(self, probability: np.ndarray, unlabeled: np.ndarray, size: int
                    ) -> np.ndarray:
        return self._ranked(probability, unlabeled, size, 0.5, 0.5)


def _thresholds(context: QueryContext | None) -> tuple[float, float]:
    """The context's thresholds, or (0.5, 0.5) before any."""
    if context is None or context.thresholds is None:
        return 0.5, 0.5
    return context.thresholds


class StratifiedProbability:
    """SADAL's LR queries: for each label, u ~ U(0, 1) and the unlabeled example whose
    probability is nearest u (the first in pool order on ties), so the labels spread over
    the range of probabilities rather than its bulk near 0. The labels depend on the
    probabilities, so on the AL rounds before each LR round: the labels after j LR rounds
    depend on the path (``depends_on_path``)."""

    depends_on_path = True
    path_reason = ("its labels follow the detector's probabilities, so the AL rounds before "
                   "each LR round")

    def __init__(self, rng: QueryRandom, pool_size: int) -> None:
        self.rng = rng

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        p = np.asarray(probability, dtype=np.float64)
        remaining = np.asarray(unlabeled)
        chosen = []
        for _ in range(min(size, remaining.size)):
            u = self.rng.uniform(0, 1)
            k = int(np.argmin(np.abs(p[remaining] - u)))
            chosen.append(remaining[k])
            remaining = np.delete(remaining, k)
        return np.asarray(chosen, dtype=np.intp)


AL_QUERIES.register("uncertainty", UncertaintySampling)
AL_QUERIES.register("uncertainty-argsort", UncertaintyArgsort)
AL_QUERIES.register("random", RandomSampling)
LR_QUERIES.register("random", RandomOrder)
LR_QUERIES.register("per-round", RandomSampling)
AL_QUERIES.register("threshold-distance", ThresholdDistance)
AL_QUERIES.register("threshold-distance-authors", ThresholdDistanceAuthors)
AL_QUERIES.register("threshold-distance-authors-ranked", ThresholdDistanceAuthorsRanked)
LR_QUERIES.register("stratified-probability", StratifiedProbability)

#: Where the query strategies' random numbers come from (``Settings.query_rng``).
QUERY_RNGS = ("streams", "authors")


def query_generators(query_rng: str, al_stream: np.random.SeedSequence,
                     lr_stream: np.random.SeedSequence, authors_seed: int
                     ) -> tuple[QueryRandom, QueryRandom]:
    """The AL and LR strategies' random sources.

    ``"streams"`` (the default, SPEC §5): a Generator each, from the episode's AL and LR
    streams, so the labels after i AL and j LR rounds do not depend on their order and
    every strategy of a seed sees the same random labels (common random numbers).
    ``"authors"``: ONE legacy ``numpy.random.RandomState(authors_seed)`` shared by both,
    as the published code's ``np.random.seed`` followed by ``np.random.choice`` in the
    order of the rounds (``authors_seed``: ``Settings.query_seed_for``, the split seed or
    ``query_seed``; the published loader seeds 331). It is the project's only use of the
    legacy generator: the published labels cannot be drawn from another, and it is a
    local object, never numpy's global state. The labels then depend on the order of the rounds.
    """
    if query_rng == "streams":
        return np.random.default_rng(al_stream), np.random.default_rng(lr_stream)
    if query_rng == "authors":
        shared = np.random.RandomState(authors_seed)
        return shared, shared
    raise ValueError(f"unknown query_rng {query_rng!r}: use one of {', '.join(QUERY_RNGS)}")


__all__ = ["AL_QUERIES", "LR_QUERIES", "QUERY_RNGS", "QueryContext", "QueryRandom",
           "QueryStrategy", "RandomOrder", "RandomSampling", "StratifiedProbability",
           "ThresholdDistance", "ThresholdDistanceAuthors", "UncertaintyArgsort",
           "UncertaintySampling", "query_generators", "select_with", "threshold_distance"]
