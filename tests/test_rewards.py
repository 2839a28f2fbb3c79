"""Tests for ballad_env.rewards: the one-term entropy, the entropy and cosine rewards, and the
cost signals."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from ballad_env.rewards import (
    REWARD_SIGNALS,
    SIDE_SIGNALS,
    CostDecrease,
    CostPenalty,
    SideOutput,
    cosine_reward,
    decisions,
    entropy,
    entropy_reward,
)

# ------------------------------------------------------------------------- entropy


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.0, 0.0),  # H(0) = 0 by convention (limit of -p log2 p)
        (0.5, 0.5),  # -0.5 * log2(0.5) = -0.5 * -1 = 0.5
        (1.0, 0.0),  # -1 * log2(1) = 0
        (0.25, 0.5),  # -0.25 * log2(0.25) = -0.25 * -2 = 0.5
        (0.125, 0.375),  # -0.125 * -3 = 0.375
        (1 / math.e, 1 / (math.e * math.log(2))),  # -(1/e) * log2(1/e) = (1/e) / ln 2 = 0.53074
    ],
)
def test_entropy_by_hand(p: float, expected: float) -> None:
    assert entropy(np.array([p]))[0] == pytest.approx(expected, abs=1e-15)


def test_entropy_is_elementwise_and_base_2() -> None:
    p = np.array([0.0, 0.5, 0.25, 1.0])
    np.testing.assert_allclose(entropy(p), [0.0, 0.5, 0.5, 0.0], atol=1e-15)
    # Maximum of -p log2 p is at p = 1/e: a natural-log entropy would give 1/e = 0.3679 there.
    grid = np.linspace(0, 1, 10001)
    h = entropy(grid)
    assert grid[np.argmax(h)] == pytest.approx(1 / math.e, abs=1e-4)
    assert h.max() == pytest.approx(1 / (math.e * math.log(2)), abs=1e-8)
    assert np.all(np.isfinite(h)) and np.all(h >= 0)


# ------------------------------------------------------------------ entropy reward


def test_entropy_reward_by_hand() -> None:
    # H(new) = [H(0.5), H(0.25), H(1)] = [0.5, 0.5, 0]; H(old) = [H(0), H(0.5), H(0.5)]
    # = [0, 0.5, 0.5]; |diff| = [0.5, 0, 0.5]; mean = 1/3.
    new = np.array([0.5, 0.25, 1.0])
    old = np.array([0.0, 0.5, 0.5])
    assert entropy_reward(new, old) == pytest.approx(1 / 3, abs=1e-15)
    assert entropy_reward(old, new) == pytest.approx(1 / 3, abs=1e-15)  # symmetric


def test_entropy_reward_by_hand_second_case() -> None:
    # H(0.125) = 0.375, H(1/e) = 1/(e ln 2) = 0.530737845, H(0.75) = -0.75 log2 0.75 = 0.311278124
    # H(0.25) = 0.5, H(0.5) = 0.5, H(0) = 0
    # |0.375 - 0.5| = 0.125; |0.530737845 - 0.5| = 0.030737845; |0.311278124 - 0| = 0.311278124
    # mean = (0.125 + 0.030737845 + 0.311278124) / 3 = 0.155671990
    new = np.array([0.125, 1 / math.e, 0.75])
    old = np.array([0.25, 0.5, 0.0])
    assert entropy_reward(new, old) == pytest.approx(0.155671990, abs=1e-9)


def test_entropy_reward_zero_when_unchanged_and_empty() -> None:
    p = np.random.default_rng(0).random(50)
    assert entropy_reward(p, p) == 0.0
    assert entropy_reward(np.empty(0), np.empty(0)) == 0.0


def test_entropy_reward_is_not_a_difference_of_probabilities() -> None:
    # p = 0.25 -> 0.5 moves the probability by 0.25 but the one-term entropy not at all
    # (H(0.25) = H(0.5) = 0.5): the reward is about entropy, not probability.
    assert entropy_reward(np.array([0.5]), np.array([0.25])) == pytest.approx(0.0, abs=1e-15)


# ------------------------------------------------------------------ cosine reward


def test_cosine_reward_identical_is_zero() -> None:
    v = np.array([1, 0, 1, 1, 0])
    assert cosine_reward(v, v) == pytest.approx(0.0, abs=1e-12)


def test_cosine_reward_orthogonal_is_one() -> None:
    assert cosine_reward(np.array([1, 0, 0, 1]), np.array([0, 1, 1, 0])) == pytest.approx(1.0)


def test_cosine_reward_45_degrees() -> None:
    # cos([1, 0], [1, 1]) = 1 / sqrt(2) = 0.70710678; reward = 1 - 0.70710678 = 0.29289322
    assert cosine_reward(np.array([1, 0]), np.array([1, 1])) == pytest.approx(
        1 - 1 / math.sqrt(2), abs=1e-15)


def test_cosine_reward_by_hand_four_elements() -> None:
    # new = [1, 1, 0, 1], old = [1, 0, 1, 1]: dot = 2, |new| = |old| = sqrt(3); cos = 2/3;
    # reward = 1/3.
    assert cosine_reward(np.array([1, 1, 0, 1]), np.array([1, 0, 1, 1])) == pytest.approx(
        1 / 3, abs=1e-15)


def test_cosine_reward_zero_vectors() -> None:
    zero, one = np.zeros(4), np.array([0.0, 1.0, 0.0, 1.0])
    assert cosine_reward(zero, zero) == 0.0  # both zero: nothing changed
    assert cosine_reward(zero, one) == 1.0  # one zero: maximal change (not NaN)
    assert cosine_reward(one, zero) == 1.0


def _cosine(new: list[float], old: list[float], rule: str) -> float:
    """The cosine side signal between two outputs with these decisions, under ``rule``."""
    (signal,) = [s for s in SIDE_SIGNALS if s.name == "cosine"]
    p = np.full(len(new), 0.5)
    return signal(SideOutput(p, np.array(new, float), cosine_rule=rule),
                  SideOutput(p, np.array(old, float), cosine_rule=rule))


def test_published_cosine_over_signed_predictions_by_hand() -> None:
    # The published AL side compares anomatools' -1/+1 labels: new = [1, -1, -1, 1],
    # old = [1, 1, -1, 1]: dot = 1 - 1 + 1 + 1 = 2, |new| |old| = 2 * 2 = 4, cos = 1/2, so
    # 1/2. The same change in 0/1 coding ([1, 0, 0, 1] against [1, 1, 0, 1]): dot 2,
    # sqrt(2 * 3), 1 - 2 / sqrt(6) = 0.18350342.
    assert _cosine([1, -1, -1, 1], [1, 1, -1, 1], "authors") == 0.5
    assert _cosine([1, 0, 0, 1], [1, 1, 0, 1], "ours") == pytest.approx(
        1 - 2 / math.sqrt(6), abs=1e-15)
    # one flipped label of n = 4: 2 k / n = 1/2 (above); none: exactly 0
    assert _cosine([1, -1, -1, 1], [1, -1, -1, 1], "authors") == 0.0


def test_published_cosine_of_a_zero_vector_is_nan() -> None:
    """The published code's scipy cosine divides 0 by 0 where a vector is all zero (its LR
    side's initial output, or a round that rejects nothing): NaN, with one zero vector or
    two; ours gives 1 and 0 there."""
    zero, some = [0, 0, 0, 0], [0, 1, 0, 1]
    for new, old in ((zero, some), (some, zero), (zero, zero)):
        assert math.isnan(_cosine(new, old, "authors"))
    assert _cosine(zero, some, "ours") == 1.0 and _cosine(zero, zero, "ours") == 0.0
    assert _cosine(some, [1, 1, 0, 1], "authors") == _cosine(some, [1, 1, 0, 1], "ours")
    # the summary marks the zero vector only (the lattice caches summaries)
    p = np.zeros(4)
    assert np.isnan(decisions(SideOutput(p, np.zeros(4), cosine_rule="authors"))).all()
    np.testing.assert_array_equal(decisions(SideOutput(p, np.zeros(4))), np.zeros(4))


def test_cosine_reward_never_nan_and_in_range() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        density = rng.random(2)  # many all-zero vectors when the density is small
        new = (rng.random(n) < density[0] * 0.5).astype(np.float64)
        old = (rng.random(n) < density[1] * 0.5).astype(np.float64)
        r = cosine_reward(new, old)
        assert not math.isnan(r)
        assert -1e-12 <= r <= 1.0 + 1e-12  # 0/1 vectors: cos in [0, 1]


def test_cosine_reward_identical_is_exactly_zero() -> None:
    for k in range(1, 20):
        v = np.ones(k)
        assert cosine_reward(v, v) == 0.0, k


# -------------------------------------------------------------------- cost signals


def test_cost_signals_by_hand() -> None:
    # Test costs 0.30 -> 0.20 -> 0.25 over two steps:
    # cost (decrease):       0.30 - 0.20 = 0.10, then 0.20 - 0.25 = -0.05; return 0.05
    # round_cost (penalty): -0.20, then -0.25; return -0.45 = -2 x the mean cost 0.225
    states = [SimpleNamespace(test_cost=c) for c in (0.30, 0.20, 0.25)]
    decrease, penalty = REWARD_SIGNALS["cost"], REWARD_SIGNALS["round_cost"]
    assert isinstance(decrease, CostDecrease) and isinstance(penalty, CostPenalty)
    steps = list(zip(states, states[1:], strict=False))
    assert [decrease(a, b) for a, b in steps] == pytest.approx([0.10, -0.05], abs=1e-15)
    assert [penalty(a, b) for a, b in steps] == [-0.20, -0.25]
    assert sum(penalty(a, b) for a, b in steps) == pytest.approx(-2 * 0.225, abs=1e-15)
