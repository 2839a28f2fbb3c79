"""Tests for SADAL's query strategies in ballad_env.queries: the stratified draw of validation
labels and the threshold-distance ranking of training labels, by hand."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ballad_env.queries import (
    AL_QUERIES,
    LR_QUERIES,
    QueryContext,
    RandomOrder,
    StratifiedProbability,
    ThresholdDistance,
    ThresholdDistanceAuthors,
    select_with,
    threshold_distance,
)


class Scripted:
    """A random source whose uniforms are given in advance (the hand-computed draws)."""

    def __init__(self, values: list[float]) -> None:
        self.values: Iterator[float] = iter(values)

    def uniform(self, low: float, high: float) -> float:
        return next(self.values)


def test_registered() -> None:
    assert LR_QUERIES["stratified-probability"] is StratifiedProbability
    assert AL_QUERIES["threshold-distance"] is ThresholdDistance
    assert AL_QUERIES["threshold-distance-authors"] is ThresholdDistanceAuthors


def test_stratified_draw_by_hand() -> None:
    p = np.array([0.1, 0.4, 0.45, 0.9, 0.95])
    strategy = StratifiedProbability(Scripted([0.42, 0.42, 0.99]), 5)  # type: ignore[arg-type]
    # u = 0.42: nearest 0.4 (distance 0.02, index 1); again 0.42: 0.45 (0.03, index 2) as
    # index 1 is now labeled; u = 0.99: 0.95 (index 4).
    np.testing.assert_array_equal(strategy.select(p, np.arange(5), 3), [1, 2, 4])


def test_stratified_draw_skips_labeled_and_breaks_ties_by_pool_order() -> None:
    p = np.array([0.25, 0.75, 0.5])
    # Index 2 (0.5, distance 0) is labeled; 0.25 and 0.75 are both 0.25 from u = 0.5: the
    # first in pool order (0) wins.
    strategy = StratifiedProbability(Scripted([0.5]), 3)  # type: ignore[arg-type]
    np.testing.assert_array_equal(strategy.select(p, np.array([0, 1]), 1), [0])


def test_stratified_draw_is_reproducible_from_its_stream() -> None:
    p = np.linspace(0, 1, 30)
    a = StratifiedProbability(np.random.default_rng(4), 30).select(p, np.arange(30), 5)
    b = StratifiedProbability(np.random.default_rng(4), 30).select(p, np.arange(30), 5)
    np.testing.assert_array_equal(a, b)
    assert len(set(a.tolist())) == 5


# Training probabilities and the previous round's thresholds (0.25, 0.6): the band rejects
# 0.32, 0.44 and 0.57 (indices 2, 3, 4). Distances 2 |P - 0.25| below 0.5, 2 |P - 0.6| above:
# [0.4, 0.1, 0.14, 0.38, 0.06, 0.08, 0.6]. Index 1 is labeled.
P_TRAIN = np.array([0.05, 0.2, 0.32, 0.44, 0.57, 0.64, 0.9])
UNLABELED = np.array([0, 2, 3, 4, 5, 6])
CONTEXT = QueryContext(thresholds=(0.25, 0.6))


def test_threshold_distance_by_hand() -> None:
    np.testing.assert_allclose(threshold_distance(P_TRAIN, 0.25, 0.6),
                               [0.4, 0.1, 0.14, 0.38, 0.06, 0.08, 0.6], atol=1e-12)


def test_threshold_distance_skips_the_rejected_example() -> None:
    strategy = ThresholdDistance(np.random.default_rng(0), 7)
    # Not rejected and unlabeled: 0 (0.4), 5 (0.08), 6 (0.6). Index 4 is nearest (0.06) but
    # was rejected, so it is skipped: [5, 0]. With 4 labels the rejected follow: [5, 0, 6, 4].
    np.testing.assert_array_equal(strategy.select(P_TRAIN, UNLABELED, 2, context=CONTEXT),
                                  [5, 0])
    np.testing.assert_array_equal(strategy.select(P_TRAIN, UNLABELED, 4, context=CONTEXT),
                                  [5, 0, 6, 4])


def test_threshold_distance_before_any_threshold_is_least_confidence() -> None:
    strategy = ThresholdDistance(np.random.default_rng(0), 7)
    # Distance to 0.5: |P - 0.5| = [0.45, 0.3, 0.18, 0.06, 0.07, 0.14, 0.4] -> 3, 4, 5.
    np.testing.assert_array_equal(strategy.select(P_TRAIN, UNLABELED, 3), [3, 4, 5])


def test_published_threshold_distance_and_its_rejected_flag() -> None:
    strategy = ThresholdDistanceAuthors(np.random.default_rng(0), 7)
    # Pool member 0 (0.05) was not rejected, so every unlabeled example qualifies, the
    # rejected index 4 included: argsort of the distances [4, 5, 1, 2, ...] less index 1.
    np.testing.assert_array_equal(strategy.select(P_TRAIN, UNLABELED, 2, context=CONTEXT),
                                  [4, 5])
    # Member 0 inside the band (0.3): no example qualifies and the round buys nothing.
    p = P_TRAIN.copy()
    p[0] = 0.3
    assert strategy.select(p, UNLABELED, 2, context=CONTEXT).size == 0


def test_select_with_passes_context_only_where_used() -> None:
    al = ThresholdDistance(np.random.default_rng(0), 7)
    np.testing.assert_array_equal(select_with(al, P_TRAIN, UNLABELED, 2, CONTEXT), [5, 0])
    lr = RandomOrder(np.random.default_rng(0), 7)
    expected = RandomOrder(np.random.default_rng(0), 7).select(P_TRAIN, UNLABELED, 2)
    np.testing.assert_array_equal(select_with(lr, P_TRAIN, UNLABELED, 2, CONTEXT), expected)
