"""Tests for ballad_env.rejection.two_sided: SADAL's two thresholds, their costs and searches, its
soft
rejection and its entropy reward, each with a case computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ballad_env.cost import Costs
from ballad_env.rejection.two_sided import (
    TWO_SIDED_SEARCHES,
    TwoSidedThresholds,
    binary_entropy,
    entropy_change,
    fit_two_sided,
    side_cost,
    side_problem,
)

# Ten validation probabilities, all labeled: five below 0.5 (one anomaly, at 0.3) and five
# at or above (anomalies at 0.6, 0.8, 0.9).
P = np.array([0.05, 0.1, 0.2, 0.3, 0.4, 0.55, 0.6, 0.7, 0.8, 0.9])
Y = np.array([0, 0, 0, 1, 0, 0, 1, 0, 1, 1])
ALL = np.ones(10, dtype=bool)


def test_side_costs_by_hand() -> None:
    costs = Costs(1.0, 1.0, 0.1)
    high, y_high = P[5:], Y[5:]
    # Right, accepted iff P > t: t = 0.55 rejects {0.55}, accepts the normal at 0.7:
    # (1 FP + 0.1 * 1 R) / 5 = 0.22; t = 0.7 rejects 3 and accepts no normal: 0.3 / 5 = 0.06.
    assert side_cost(0.55, high, y_high, costs, "right", 5) == pytest.approx(0.22)
    assert side_cost(0.7, high, y_high, costs, "right", 5) == pytest.approx(0.06)
    # Left, accepted iff P < t: t = 0.4 rejects {0.4}, accepts the anomaly at 0.3:
    # (1 FN + 0.1) / 5 = 0.22; the denominator counts the side's validation examples, here 8.
    assert side_cost(0.4, P[:5], Y[:5], costs, "left", 5) == pytest.approx(0.22)
    assert side_cost(0.4, P[:5], Y[:5], costs, "left", 8) == pytest.approx(1.1 / 8)


def test_right_first_at_equal_costs_by_hand() -> None:
    """c_fp = c_fn: the right side first, with at most int(0.5 * 10) = 5 rejections.

    Right: k = min(5 - 1, 5) = 4, interval [(0.5 + 0.55) / 2, Q_0.8(high)] = [0.525, 0.82]
    (Q_0.8: index 3.2, 0.8 + 0.2 * 0.1). Costs at 0.525, 0.55, 0.6, 0.7, 0.8, 0.82:
    0.4, 0.22, 0.24, 0.06, 0.08, 0.08, so right = 0.7; it rejects 3, leaving 2.
    Left: k = 2, interval [Q_0.6(low), (0.5 + 0.4) / 2] = [0.24, 0.45] (Q_0.6: index 2.4,
    0.2 + 0.4 * 0.1). Costs at 0.24, 0.3, 0.4, 0.45: 0.04, 0.04, 0.22, 0.2; the tie goes to
    the threshold that rejects fewest (the larger), 0.3. The band [0.3, 0.7] rejects 5.
    """
    thresholds = fit_two_sided(P, ALL, Y, Costs(1.0, 1.0, 0.1))
    assert (thresholds.left, thresholds.right) == pytest.approx((0.3, 0.7))
    assert thresholds.reject(P).sum() == 5


def test_left_first_when_false_negatives_cost_more_by_hand() -> None:
    """c_fn = 10 > c_fp: left first. k = 4, interval [Q_0.2(low), 0.45] = [0.09, 0.45];
    costs (10 FN + 0.1 R) / 5 at 0.09, 0.1, 0.2, 0.3, 0.4, 0.45: 0.08, 0.08, 0.06, 0.04,
    2.02, 2.0, so left = 0.3, rejecting 2 and leaving 3. Right: k = 3, interval
    [0.525, Q_0.6(high) = 0.74]; costs 0.4, 0.22, 0.24, 0.06, 0.06 at 0.525, 0.55, 0.6,
    0.7, 0.74: the tie goes to the smaller, 0.7."""
    costs = Costs(1.0, 10.0, 0.1)
    assert side_problem("left", P, P, Y, costs, 5, 50).low == pytest.approx(0.09)  # type: ignore[union-attr]
    thresholds = fit_two_sided(P, ALL, Y, costs)
    assert (thresholds.left, thresholds.right) == pytest.approx((0.3, 0.7))
    right = side_problem("right", P, P, Y, costs, 3, 50)
    assert right is not None and right.high == pytest.approx(0.74)


def test_one_probability_above_half_does_not_crash() -> None:
    """Exactly one validation probability >= 0.5: the right interval's top (its 0 quantile,
    the overall maximum, replaced by the largest probability below it, 0.3) falls under its
    bottom (0.55), where the published search crashes; it shrinks to 0.55, rejecting no
    validation example on the right. Left: nothing labeled, every threshold costs 0, so
    the one rejecting fewest, the top of [Q_1/3, 0.4], is taken."""
    p = np.array([0.1, 0.2, 0.3, 0.6])
    thresholds = fit_two_sided(p, np.zeros(4, dtype=bool), np.zeros(4, dtype=int),
                               Costs(1.0, 1.0, 0.1))
    assert (thresholds.left, thresholds.right) == pytest.approx((0.4, 0.55))


def test_an_empty_side_keeps_half() -> None:
    p = np.array([0.1, 0.2, 0.3])
    thresholds = fit_two_sided(p, np.ones(3, dtype=bool), np.array([0, 1, 0]),
                               Costs(1.0, 1.0, 0.1))
    assert thresholds.right == 0.5
    assert side_problem("right", p, p, np.zeros(3), Costs(), 1, 30) is None


def test_authors_search_stays_in_its_interval_and_exact_is_no_worse() -> None:
    costs = Costs(1.0, 1.0, 0.1)
    problem = side_problem("right", P, P, Y, costs, 5, 12)
    assert problem is not None
    found = TWO_SIDED_SEARCHES["authors-bayes"](problem, 3)
    best = TWO_SIDED_SEARCHES["exact"](problem, 0)
    assert problem.low <= found <= problem.high
    assert problem.cost(np.array([best]))[0] <= problem.cost(np.array([found]))[0]


def test_rejection_probability_by_hand() -> None:
    t = TwoSidedThresholds(0.2, 0.8)
    # 0.1: 1 - 2^-(0.1/0.2)^2 = 1 - 2^-0.25 = 0.1591036; 0.9: (0.1/0.2)^2 likewise;
    # at a threshold 0.5; 0.5 counts on the right: 1 - 2^-(0.5/0.2)^2 = 1 - 2^-6.25
    # = 1 - 0.0131390 = 0.9868610.
    np.testing.assert_allclose(t.rejection_probability(np.array([0.1, 0.2, 0.5, 0.8, 0.9])),
                               [0.1591036, 0.5, 0.9868610, 0.5, 0.1591036], atol=1e-7)
    np.testing.assert_array_equal(t.reject(np.array([0.1, 0.2, 0.5, 0.8, 0.9])),
                                  [False, True, True, True, False])


def test_entropy_reward_by_hand() -> None:
    # H(0.5) = 1, H(0.25) = 0.25 * 2 + 0.75 * 0.4150375 = 0.8112781, H(0) = H(1) = 0.
    np.testing.assert_allclose(binary_entropy(np.array([0.5, 0.25, 0.0, 1.0])),
                               [1.0, 0.8112781, 0.0, 0.0], atol=1e-7)
    # mean(|1 - 0.8112781|, |0.8112781 - 0|) = (0.1887219 + 0.8112781) / 2 = 0.5
    assert entropy_change(np.array([0.5, 0.25]), np.array([0.25, 0.0])) == pytest.approx(0.5)
