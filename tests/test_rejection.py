"""Tests for ballad_env.rejection.confidence: confidence, rejection probability, cost and tau
search."""

from __future__ import annotations

import numpy as np
import pytest

from ballad_env.cost import Costs
from ballad_env.rejection.confidence import (
    DEFAULT_TAU,
    ThresholdSearch,
    confidence,
    empirical_cost,
    rejection_probability,
    search_interval,
)

COSTS = Costs(1.0, 1.0, 0.1)  # c_fp = c_fn = 1, c_r = gamma = 0.1

# ------------------------------------------------------------------------ confidence


def test_confidence_by_hand() -> None:
    p = np.array([0.0, 0.25, 0.5, 0.6, 0.9, 1.0])
    # 2|p - 0.5| = [1, 0.5, 0, 0.2, 0.8, 1]
    np.testing.assert_allclose(confidence(p), [1.0, 0.5, 0.0, 0.2, 0.8, 1.0], atol=1e-15)
    assert confidence(0.3) == pytest.approx(0.4)  # scalars too


# ------------------------------------------------------------- rejection probability


def test_rejection_probability_by_hand() -> None:
    tau = 0.2
    conf = np.array([0.0, 0.1, 0.2, 0.4, 0.6])
    # 2^(-(C/tau)^2): C/tau = [0, 0.5, 1, 2, 3] -> [1, 2^-0.25, 0.5, 2^-4, 2^-9]
    # = [1, 0.840896415, 0.5, 0.0625, 0.001953125]
    expected = [1.0, 0.840896415, 0.5, 0.0625, 0.001953125]
    np.testing.assert_allclose(rejection_probability(conf, tau), expected, rtol=1e-9)


def test_rejection_probability_half_at_threshold() -> None:
    rng = np.random.default_rng(0)
    conf = rng.random(200)
    for tau in (0.05, 0.3, 0.77):
        p_rej = rejection_probability(conf, tau)
        assert rejection_probability(np.array([tau]), tau)[0] == pytest.approx(0.5)
        np.testing.assert_array_equal(p_rej >= 0.5, conf <= tau)  # >= 0.5 iff C <= tau
        assert np.all(np.diff(p_rej[np.argsort(conf)]) <= 0)  # decreasing in C


def test_rejection_probability_tau_zero() -> None:
    conf = np.array([0.0, 0.3, 1.0])
    np.testing.assert_array_equal(rejection_probability(conf, 0.0), [0.0, 0.0, 0.0])


# -------------------------------------------------------------------- empirical cost

# Six labeled validation examples.
#          idx:   0    1    2    3    4    5
CONF6 = np.array([0.05, 0.1, 0.3, 0.5, 0.8, 0.9])
PRED6 = np.array([1, 0, 1, 0, 1, 0])
Y6 = np.array([0, 1, 1, 1, 1, 0])
# mistakes: idx 0 FP (pred 1, y 0), idx 1 FN, idx 3 FN; idx 2, 4, 5 correct.


@pytest.mark.parametrize(
    ("tau", "expected"),
    [
        # tau = 0: nothing rejected: FP = 1 (0), FN = 2 (1, 3): (1 + 2) / 6 = 0.5
        (0.0, 3 / 6),
        # tau = 0.05: C < 0.05 rejects nothing (strict): same as tau = 0
        (0.05, 3 / 6),
        # tau = 0.06: rejects idx 0: FP = 0, FN = 2, R = 1: (2 + 0.1) / 6 = 0.35
        (0.06, 2.1 / 6),
        # tau = 0.2: rejects 0, 1: FN = 1 (3), R = 2: (1 + 0.2) / 6 = 0.2
        (0.2, 1.2 / 6),
        # tau = 0.5: rejects 0, 1, 2: FN = 1 (3), R = 3: (1 + 0.3) / 6
        (0.5, 1.3 / 6),
        # tau = 0.6: rejects 0-3: no mistakes accepted, R = 4: 0.4 / 6
        (0.6, 0.4 / 6),
        # tau = 1.0: rejects all six: 0.6 / 6 = 0.1
        (1.0, 0.6 / 6),
    ],
)
def test_empirical_cost_by_hand(tau: float, expected: float) -> None:
    assert empirical_cost(tau, CONF6, PRED6, Y6, COSTS) == pytest.approx(expected, abs=1e-15)


def test_empirical_cost_asymmetric_costs() -> None:
    # c_fp = 10, c_fn = 2, c_r = 0.5, tau = 0: (10 * 1 + 2 * 2) / 6 = 14 / 6
    costs = Costs(10.0, 2.0, 0.5)
    assert empirical_cost(0.0, CONF6, PRED6, Y6, costs) == pytest.approx(14 / 6)
    # tau = 0.2: FN = 1, R = 2: (2 + 1) / 6 = 0.5
    assert empirical_cost(0.2, CONF6, PRED6, Y6, costs) == pytest.approx(0.5)
    assert empirical_cost(0.2, np.empty(0), np.empty(0), np.empty(0), costs) == 0.0


# ------------------------------------------------------------------- search interval


def test_search_interval_quantiles() -> None:
    conf = np.linspace(0.0, 1.0, 101)  # Q(0.01) = 0.01, Q(0.5) = 0.5 (linear interpolation)
    lo, hi = search_interval(conf)
    assert lo == pytest.approx(0.01) and hi == pytest.approx(0.5)
    conf = np.array([0.2, 0.4, 0.6])
    # Q(0.01) = 0.2 + 0.02 * (0.4 - 0.2) = 0.204; Q(0.5) = 0.4
    lo, hi = search_interval(conf)
    assert lo == pytest.approx(0.204) and hi == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        (np.array([0.3]), (0.2, 0.4)),  # one example: q = 0.3 -> [0.2, 0.4]
        (np.array([0.5, 0.5, 0.5, 0.9]), (0.4, 0.6)),  # Q(0.01) = Q(0.5) = 0.5
        (np.array([0.05, 0.05, 0.05]), (0.0, 0.15)),  # clipped below at 0
        (np.array([0.0, 0.0]), (0.0, 0.1)),
        (np.array([0.95, 0.95, 1.0]), (0.85, 1.0)),  # clipped above at 1
        (np.array([1.0, 1.0, 1.0]), (0.9, 1.0)),
    ],
)
def test_search_interval_degenerate_widening(
    conf: np.ndarray, expected: tuple[float, float]
) -> None:
    lo, hi = search_interval(conf)
    assert lo == pytest.approx(expected[0], abs=1e-12)
    assert hi == pytest.approx(expected[1], abs=1e-12)


# -------------------------------------------------------------------- exact search


def _grid_costs(grid: np.ndarray, conf: np.ndarray, pred: np.ndarray, y: np.ndarray,
                costs: Costs) -> np.ndarray:
    """M(tau) at every grid point, vectorised but straight from the definition."""
    rejected = conf[None, :] < grid[:, None]
    fp = np.sum(~rejected & ((pred == 1) & (y == 0))[None, :], axis=1)
    fn = np.sum(~rejected & ((pred == 0) & (y == 1))[None, :], axis=1)
    return (costs.c_fp * fp + costs.c_fn * fn + costs.c_r * rejected.sum(axis=1)) / conf.size


def _random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    m = int(rng.integers(1, 40))
    p = rng.random(m)
    if rng.random() < 0.5:
        p = np.round(p, 1)  # many ties in confidence, sometimes a degenerate interval
    # Labels agree with predictions more often when confident.
    agree = rng.random(m) < 0.5 + 0.5 * confidence(p)
    y = np.where(agree, p > 0.5, p <= 0.5).astype(np.int8)
    return p, y


def test_exact_search_matches_brute_force_grid() -> None:
    rng = np.random.default_rng(2023)
    search = ThresholdSearch("exact")
    for case in range(300):
        p, y = _random_case(rng)
        costs = [COSTS, Costs(10.0, 1.0, 0.05), Costs(1.0, 10.0, 0.3)][case % 3]
        conf, pred = confidence(p), (p > 0.5).astype(np.int8)
        lo, hi = search_interval(conf)
        tau = search(p, y, costs)
        assert lo <= tau <= hi, (case, lo, tau, hi)
        grid = np.linspace(lo, hi, 20001)
        m_grid = _grid_costs(grid, conf, pred, y, costs)
        m_tau = empirical_cost(tau, conf, pred, y, costs)
        assert m_tau <= m_grid.min() + 1e-12, case
        # Ties: every smaller tau with the same (minimal) cost rejects the same examples,
        # i.e. no smaller threshold reaches a different optimal rejection set.
        # Rejection sets {C < t} are nested, so equal sizes mean equal sets.
        smaller = grid[(grid < tau) & (m_grid <= m_tau + 1e-12)]
        n_rejected = np.sum(conf[None, :] < smaller[:, None], axis=1)
        assert np.all(n_rejected == np.sum(conf < tau)), case


def test_exact_search_by_hand() -> None:
    # CONF6 example: interval Q(0.01) = 0.05 + 0.05 * 0.05 = 0.0525, Q(0.5) = (0.3 + 0.5) / 2
    # = 0.4. Candidates: 0.0525 (rejects 0), 0.1 (rejects 0), 0.3 (rejects 0, 1), 0.4
    # (rejects 0, 1, 2). Costs: 2.1/6, 2.1/6, 1.2/6, 1.3/6 -> tau = 0.3.
    p = 0.5 + np.where(PRED6 == 1, 1, -1) * CONF6 / 2
    np.testing.assert_allclose(confidence(p), CONF6, atol=1e-15)
    tau = ThresholdSearch("exact")(p, Y6, COSTS)
    assert tau == pytest.approx(0.3)
    # confidence(p), not CONF6: tau is one of the recomputed (rounded) confidences.
    assert empirical_cost(tau, confidence(p), PRED6, Y6, COSTS) == pytest.approx(1.2 / 6)


def test_exact_search_ties_go_to_smallest() -> None:
    # All predictions correct: rejecting only adds c_r, so every tau rejecting nothing is
    # optimal; the smallest candidate is the interval's lower end.
    p = np.array([0.9, 0.1, 0.8, 0.3, 0.95, 0.05, 0.7])
    y = (p > 0.5).astype(np.int8)
    conf = confidence(p)
    lo, _ = search_interval(conf)
    tau = ThresholdSearch("exact")(p, y, COSTS)
    assert tau == lo
    assert not np.any(conf < tau)
    # Two different rejection sets with the same cost. c_r = c_fn makes rejecting a false
    # negative cost-neutral (Costs.check would refuse it; the search does not check).
    costs = Costs(1.0, 1.0, 1.0)
    p = np.array([0.4, 0.4, 0.15, 0.1, 0.05, 0.0, 0.0])  # conf 0.2, 0.2, 0.7, 0.8, 0.9, 1, 1
    y = np.array([1, 1, 0, 0, 0, 0, 0])  # pred all 0: the two conf-0.2 examples are FN
    # interval: Q(0.01) = 0.2 (between the two 0.2s), Q(0.5) = 0.8. Candidates:
    # 0.2 rejects nothing: FN = 2 -> 2/7; 0.7 rejects both 0.2s: R = 2 -> 2/7;
    # 0.8 rejects three: R = 3 -> 3/7. Tie between 0.2 and 0.7 -> smallest, 0.2.
    assert search_interval(confidence(p)) == pytest.approx((0.2, 0.8))
    assert ThresholdSearch("exact")(p, y, costs) == pytest.approx(0.2)
    # A smaller c_r breaks the tie in favour of rejecting: (0 + 0 + 0.5 * 2) / 7 < 2/7.
    assert ThresholdSearch("exact")(p, y, Costs(1.0, 1.0, 0.5)) == pytest.approx(0.7)


def test_exact_search_second_hand_case() -> None:
    costs = Costs(1.0, 1.0, 0.5)
    p = np.array([0.4, 0.3, 0.15, 0.1, 0.05, 0.0])  # conf 0.2, 0.4, 0.7, 0.8, 0.9, 1.0
    y = np.array([1, 1, 0, 0, 0, 0])  # pred all 0: the two least confident are FN
    # interval: Q(0.01) = 0.2 + 0.05 * 0.2 = 0.21, Q(0.5) = (0.7 + 0.8) / 2 = 0.75.
    # Candidates: 0.21 rejects {0.2}: (1 + 0.5) / 6; 0.4 the same set; 0.7 rejects
    # {0.2, 0.4}: (0 + 2 * 0.5) / 6 = 1/6; 0.75 rejects three: 1.5 / 6. Minimum at 0.7.
    assert ThresholdSearch("exact")(p, y, costs) == pytest.approx(0.7)
    # With c_r = 1 and only the first an FN: 0.21 and 0.4 both reject {0.2} at 1/6, the
    # larger ones cost more: the smallest candidate 0.21 wins.
    y = np.array([1, 0, 0, 0, 0, 0])
    assert ThresholdSearch("exact")(p, y, Costs(2.0, 1.0, 1.0)) == pytest.approx(0.21)


def test_threshold_search_no_labels() -> None:
    assert ThresholdSearch("exact")(np.empty(0), np.empty(0), COSTS) == 0.0
    assert ThresholdSearch("bayes", n_calls=5)(np.empty(0), np.empty(0), COSTS) == 0.0
    assert DEFAULT_TAU == 0.1


# -------------------------------------------------------------------- bayes search


def _bayes_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """Labeled sets whose optimal tau interval is wide enough for 12 GP calls."""
    rng = np.random.default_rng(99)
    cases = []
    for _ in range(2):
        conf = np.sort(rng.random(40))
        pred = rng.integers(0, 2, 40)
        # The 12 least confident are mistakes, the others correct: optimum rejects them.
        wrong = np.arange(40) < 12
        y = np.where(wrong, 1 - pred, pred)
        p = 0.5 + np.where(pred == 1, 1, -1) * conf / 2
        cases.append((p, y))
    return cases


@pytest.mark.slow
def test_bayes_search_close_to_exact_and_deterministic() -> None:
    search = ThresholdSearch("bayes", n_calls=12)
    for i, (p, y) in enumerate(_bayes_cases()):
        conf, pred = confidence(p), (p > 0.5).astype(np.int8)
        lo, hi = search_interval(conf)
        best = empirical_cost(ThresholdSearch("exact")(p, y, COSTS), conf, pred, y, COSTS)
        tau = search(p, y, COSTS, seed=3)
        assert lo <= tau <= hi
        # Within two examples' worth of misclassification cost of the true minimum.
        assert empirical_cost(tau, conf, pred, y, COSTS) <= best + 2 / len(p) + 1e-12
        if i == 0:
            assert search(p, y, COSTS, seed=3) == tau  # same seed, same tau


# ---------------------------------------------------------------------- validation


def test_threshold_search_validation() -> None:
    assert ThresholdSearch().method == "exact"
    assert ThresholdSearch().n_calls == 20
    with pytest.raises(ValueError, match="unknown threshold search 'grid'"):
        ThresholdSearch("grid")
    with pytest.raises(ValueError, match="n_calls >= 2"):
        ThresholdSearch("bayes", n_calls=1)
    with pytest.raises(ValueError, match="n_calls >= 2"):
        ThresholdSearch("bayes", n_calls=0)
    ThresholdSearch("exact", n_calls=0)  # n_calls only matters for bayes
