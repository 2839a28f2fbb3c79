"""Tests for ballad_env.cost: the cost inequality, per-example cost and the test evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from ballad_env.cost import Costs, evaluate, roc_auc

# ------------------------------------------------------------------------ Costs.check


@pytest.mark.parametrize("gamma", [0.01, 0.05, 0.1, 0.3, 0.49])
def test_check_default_costs_pass(gamma: float) -> None:
    # c_fp = c_fn = 1, c_r = gamma: bound = min(1 - gamma, gamma) = gamma for gamma < 0.5.
    Costs(1.0, 1.0, gamma).check(gamma)


def test_check_rejects_c_r_above_bound() -> None:
    # gamma = 0.1: bound = min(1 * 0.9, 1 * 0.1) = 0.1.
    with pytest.raises(ValueError, match="invalid costs"):
        Costs(1.0, 1.0, 0.1001).check(0.1)
    # gamma = 0.6 > 0.5: bound = min(1 * 0.4, 1 * 0.6) = 0.4, so c_r = gamma fails.
    with pytest.raises(ValueError, match="invalid costs"):
        Costs(1.0, 1.0, 0.6).check(0.6)
    Costs(1.0, 1.0, 0.4).check(0.6)


def test_check_uses_the_minimum_of_both_terms() -> None:
    gamma = 0.1
    # c_fn = 10: bound = min(1 * 0.9, 10 * 0.1) = 0.9.
    Costs(1.0, 10.0, 0.9).check(gamma)
    with pytest.raises(ValueError, match="invalid costs"):
        Costs(1.0, 10.0, 0.91).check(gamma)
    # c_fp = 10: bound = min(10 * 0.9, 1 * 0.1) = 0.1.
    Costs(10.0, 1.0, 0.1).check(gamma)
    with pytest.raises(ValueError, match="invalid costs"):
        Costs(10.0, 1.0, 0.5).check(gamma)
    # c_fp = 0.5, c_fn = 10, gamma = 0.3: bound = min(0.5 * 0.7, 10 * 0.3) = 0.35.
    Costs(0.5, 10.0, 0.35).check(0.3)
    with pytest.raises(ValueError, match="invalid costs"):
        Costs(0.5, 10.0, 0.36).check(0.3)


@pytest.mark.parametrize("field", ["c_fp", "c_fn", "c_r"])
@pytest.mark.parametrize("bad", [0.0, -0.05, -1.0, math.nan, math.inf, -math.inf])
def test_check_rejects_non_positive_or_non_finite(field: str, bad: float) -> None:
    values = {"c_fp": 1.0, "c_fn": 1.0, "c_r": 0.05}
    values[field] = bad
    with pytest.raises(ValueError, match="invalid costs"):
        Costs(**values).check(0.1)


def test_check_accepts_numpy_numbers() -> None:
    Costs(np.int64(10), 1.0, 0.05).check(0.1)
    Costs(1.0, 1.0, np.float32(0.05)).check(0.1)


def test_for_contamination_defaults_and_checks() -> None:
    costs = Costs.for_contamination(0.07)
    assert (costs.c_fp, costs.c_fn, costs.c_r) == (1.0, 1.0, 0.07)  # c_r = gamma
    costs = Costs.for_contamination(0.07, c_fn=10.0)
    assert (costs.c_fp, costs.c_fn, costs.c_r) == (1.0, 10.0, 0.07)
    costs = Costs.for_contamination(0.07, c_r=0.02)
    assert costs.c_r == 0.02
    # c_fp = 1, gamma = 0.07: bound = min(0.93, 0.07) = 0.07 < 0.2.
    with pytest.raises(ValueError, match="invalid costs"):
        Costs.for_contamination(0.07, c_r=0.2)
    # gamma = 0.7: default c_r = 0.7 > min(0.3, 0.7) = 0.3.
    with pytest.raises(ValueError, match="invalid costs"):
        Costs.for_contamination(0.7)


def test_per_example_scalar_and_array() -> None:
    costs = Costs(2.0, 3.0, 0.1)
    # (2 * 2 + 3 * 3 + 0.1 * 4) / 10 = (4 + 9 + 0.4) / 10 = 1.34
    assert costs.per_example(2, 3, 4, 10) == pytest.approx(1.34)
    # Elementwise: [(0 + 0 + 0) / 5, (2 + 3 + 0.1) / 5, (0 + 6 + 0.5) / 5] = [0, 1.02, 1.3]
    out = costs.per_example(np.array([0, 1, 0]), np.array([0, 1, 2]), np.array([0, 1, 5]), 5)
    np.testing.assert_allclose(out, [0.0, 1.02, 1.3])
    # n = 0: no division by zero.
    assert costs.per_example(0, 0, 0, 0) == 0.0
    assert costs.max_cost == 3.0


# --------------------------------------------------------------------------- evaluate

# idx:        0     1     2     3     4     5     6     7
P8 = np.array([0.9, 0.8, 0.3, 0.6, 0.1, 0.45, 0.7, 0.2])
Y8 = np.array([1, 0, 1, 0, 0, 0, 1, 0])
REJ8 = np.array([False, True, False, False, False, True, False, False])
# pred = p > 0.5 = [1, 1, 0, 1, 0, 0, 1, 0]
# accepted: 0 TP, 2 FN, 3 FP, 4 TN, 6 TP, 7 TN; rejected: 1 (would be FP), 5 (would be TN)
# FP = 1 (idx 3), FN = 1 (idx 2), R = 2; normals {1,3,4,5,7} = 5, anomalies {0,2,6} = 3.


def test_evaluate_by_hand() -> None:
    ev = evaluate(P8, Y8, REJ8, Costs(2.0, 3.0, 0.25))
    assert ev.cost == pytest.approx((2 * 1 + 3 * 1 + 0.25 * 2) / 8)  # 5.5 / 8 = 0.6875
    assert ev.fpr == pytest.approx(1 / 5)
    assert ev.fnr == pytest.approx(1 / 3)
    assert ev.rejection_rate == pytest.approx(2 / 8)
    # AUC by hand: anomalies 0.9, 0.3, 0.7 vs normals 0.8, 0.6, 0.1, 0.45, 0.2:
    # 0.9 beats 5, 0.3 beats 2 (0.1, 0.2), 0.7 beats 4 (all but 0.8): 11 / 15.
    assert ev.auc == pytest.approx(11 / 15)
    assert ev.auc == pytest.approx(roc_auc_score(Y8, P8))


def test_evaluate_without_rejection() -> None:
    ev = evaluate(P8, Y8, np.zeros(8, dtype=bool), Costs(2.0, 3.0, 0.25))
    # Now idx 1 is an accepted FP too: FP = 2, FN = 1, R = 0: (2 * 2 + 3 * 1) / 8 = 7 / 8.
    assert ev.cost == pytest.approx(7 / 8)
    assert ev.fpr == pytest.approx(2 / 5)
    assert ev.fnr == pytest.approx(1 / 3)
    assert ev.rejection_rate == 0.0
    assert ev.auc == pytest.approx(11 / 15)  # AUC ignores rejection


def test_evaluate_all_rejected() -> None:
    ev = evaluate(P8, Y8, np.ones(8, dtype=bool), Costs(2.0, 3.0, 0.25))
    assert ev.cost == pytest.approx(0.25)  # 8 * 0.25 / 8
    assert ev.fpr == 0.0 and ev.fnr == 0.0 and ev.rejection_rate == 1.0


def test_evaluate_random_against_sklearn() -> None:
    rng = np.random.default_rng(3)
    p = rng.random(200)
    y = (rng.random(200) < 0.2).astype(np.int8)
    rej = rng.random(200) < 0.1
    costs = Costs(1.0, 1.0, 0.2)
    ev = evaluate(p, y, rej, costs)
    fp = sum(1 for i in range(200) if not rej[i] and p[i] > 0.5 and y[i] == 0)
    fn = sum(1 for i in range(200) if not rej[i] and p[i] <= 0.5 and y[i] == 1)
    assert ev.cost == pytest.approx((fp + fn + 0.2 * rej.sum()) / 200)
    assert ev.fpr == pytest.approx(fp / np.sum(y == 0))
    assert ev.fnr == pytest.approx(fn / np.sum(y == 1))
    assert ev.auc == pytest.approx(roc_auc_score(y, p))


@pytest.mark.parametrize("label", [0, 1])
def test_evaluate_auc_nan_with_one_class(label: int) -> None:
    y = np.full(8, label)
    ev = evaluate(P8, y, REJ8, Costs(1.0, 1.0, 0.1))
    assert math.isnan(ev.auc)
    assert math.isfinite(ev.cost)
    if label == 0:
        # accepted with p > 0.5: idx 0, 3, 6 -> FP = 3; R = 2: (3 + 0.1 * 2) / 8 = 0.4
        assert ev.cost == pytest.approx(0.4)
        assert ev.fpr == pytest.approx(3 / 8) and ev.fnr == 0.0  # 8 normals
    else:
        # accepted with p <= 0.5: idx 2, 4, 7 -> FN = 3: (3 + 0.2) / 8 = 0.4
        assert ev.cost == pytest.approx(0.4)
        assert ev.fnr == pytest.approx(3 / 8) and ev.fpr == 0.0  # 8 anomalies


def test_evaluate_probability_one_half_is_normal() -> None:
    # Prediction is anomaly iff P > 0.5 (SPEC §2): P = 0.5 is a normal prediction.
    p = np.array([0.5, 0.5, 0.9, 0.1])
    y = np.array([0, 1, 1, 0])
    ev = evaluate(p, y, np.zeros(4, dtype=bool), Costs(1.0, 2.0, 0.1))
    # idx 0: pred 0, y 0 -> TN; idx 1: pred 0, y 1 -> FN. Cost (0 + 2 * 1) / 4 = 0.5.
    assert ev.cost == pytest.approx(0.5)
    assert ev.fpr == 0.0 and ev.fnr == pytest.approx(1 / 2)


def test_roc_auc_equals_sklearn_with_ties() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(3, 60))
        y = rng.integers(0, 2, n)
        y[:2] = (0, 1)
        score = np.round(rng.random(n), 1)  # rounding makes many ties
        assert roc_auc(y, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)
    # Hand case: positives score 0.9 and 0.5, negatives 0.5 and 0.1: pairs (0.9>0.5, 0.9>0.1,
    # 0.5=0.5 counts 1/2, 0.5>0.1) -> 3.5 / 4.
    assert roc_auc(np.array([1, 1, 0, 0]), np.array([0.9, 0.5, 0.5, 0.1])) == 3.5 / 4
