"""Tests for ballad_env.protocol: stratified split, scaling on D, budget and random streams."""

from __future__ import annotations

import numpy as np
import pytest

from ballad_env.protocol import (
    STREAMS,
    Budget,
    class_split_sizes,
    spawn_streams,
    split_and_scale,
    split_indices,
    split_sizes,
)


def _labels(n_normal: int, n_anomaly: int, seed: int = 0) -> np.ndarray:
    y = np.array([0] * n_normal + [1] * n_anomaly, dtype=np.int8)
    return np.random.default_rng(seed).permutation(y)


# ------------------------------------------------------------------------- splitting


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        # 40% rounded half up for D and V, T takes the rest.
        (100, (40, 40, 20)),
        (7, (3, 3, 1)),  # 2.8 -> 3, 2.8 -> 3, 7 - 6 = 1
        (13, (5, 5, 3)),  # 5.2 -> 5
        (9, (4, 4, 1)),  # 3.6 -> 4
        (6, (2, 2, 2)),  # 2.4 -> 2
        (1, (0, 0, 1)),  # 0.4 -> 0
        (2, (1, 1, 0)),  # 0.8 -> 1
        (0, (0, 0, 0)),
    ],
)
def test_class_split_sizes_by_hand(n: int, expected: tuple[int, int, int]) -> None:
    assert class_split_sizes(n) == expected


@pytest.mark.parametrize(("n_normal", "n_anomaly"), [(100, 7), (93, 13), (20, 9), (11, 1)])
def test_split_indices_stratified_disjoint_covering(n_normal: int, n_anomaly: int) -> None:
    y = _labels(n_normal, n_anomaly, seed=n_normal)
    train, val, test = split_indices(y, np.random.default_rng(5))
    # Per class sizes follow class_split_sizes; compare against a literal computation.
    for label, n in ((0, n_normal), (1, n_anomaly)):
        n_d = int(np.floor(0.4 * n + 0.5))
        n_v = int(np.floor(0.4 * n + 0.5))
        assert np.sum(y[train] == label) == n_d
        assert np.sum(y[val] == label) == n_v
        assert np.sum(y[test] == label) == n - n_d - n_v
    all_idx = np.concatenate([train, val, test])
    assert len(np.unique(all_idx)) == len(all_idx) == len(y)  # disjoint and covering
    np.testing.assert_array_equal(np.sort(all_idx), np.arange(len(y)))
    for part in (train, val, test):
        assert np.all(np.diff(part) > 0)  # sorted
    assert split_sizes(y) == (len(train), len(val), len(test))


def test_split_indices_example_sizes() -> None:
    y = _labels(100, 7)
    train, val, test = split_indices(y, np.random.default_rng(0))
    # normals 40/40/20, anomalies 3/3/1
    assert (len(train), len(val), len(test)) == (43, 43, 21)
    assert (y[train].sum(), y[val].sum(), y[test].sum()) == (3, 3, 1)


def test_split_indices_seeded() -> None:
    y = _labels(200, 20)
    a = split_indices(y, np.random.default_rng(42))
    b = split_indices(y, np.random.default_rng(42))
    c = split_indices(y, np.random.default_rng(43))
    for x, z in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, z)
    assert any(not np.array_equal(x, z) for x, z in zip(a, c, strict=True))


# --------------------------------------------------------------------------- scaling


def test_split_and_scale_fits_on_training_set_only() -> None:
    rng = np.random.default_rng(7)
    n = 150
    X = np.column_stack([
        rng.normal(5.0, 3.0, n),
        rng.exponential(2.0, n),
        np.full(n, 4.0),  # constant column
        rng.uniform(-10.0, 10.0, n),
    ])
    y = _labels(135, 15, seed=1)
    split = split_and_scale(X, y, np.random.default_rng(11))
    train, val, test = split_indices(y, np.random.default_rng(11))  # same seed: same split
    np.testing.assert_array_equal(split.y_train, y[train])
    np.testing.assert_array_equal(split.y_val, y[val])
    np.testing.assert_array_equal(split.y_test, y[test])

    # D's varying columns span exactly [0, 1]; the constant column maps to 0.
    varying = [0, 1, 3]
    np.testing.assert_allclose(split.X_train[:, varying].min(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(split.X_train[:, varying].max(axis=0), 1.0, atol=1e-12)
    np.testing.assert_array_equal(split.X_train[:, 2], 0.0)
    # Standard then min-max scaling is affine per column: for non-constant columns it equals
    # (x - min_D) / (max_D - min_D), with min and max taken over D only.
    lo, hi = X[train].min(axis=0), X[train].max(axis=0)
    for idx, part in ((train, split.X_train), (val, split.X_val), (test, split.X_test)):
        expected = (X[idx][:, varying] - lo[varying]) / (hi[varying] - lo[varying])
        np.testing.assert_allclose(part[:, varying], expected, atol=1e-12)
        np.testing.assert_array_equal(part[:, 2], 0.0)
        assert part.flags.c_contiguous
    # V and T were not used to fit: with 60 points each, some fall outside D's range.
    outside = np.concatenate([split.X_val[:, varying], split.X_test[:, varying]])
    assert outside.min() < 0.0 or outside.max() > 1.0


# ---------------------------------------------------------------------------- budget


@pytest.mark.parametrize(
    ("n_train", "per_round"),
    [
        (10, 1),  # 0.2 -> 0 -> max(1, 0) = 1
        (24, 1),  # 0.48 -> 0 -> 1
        (49, 1),  # 0.98 -> 1
        (74, 1),  # 1.48 -> 1
        (76, 2),  # 1.52 -> 2
        (160, 3),  # 3.2 -> 3
        (1000, 20),  # 20
        (1234, 25),  # 24.68 -> 25
        (20000, 400),
    ],
)
def test_budget_paper_fractions(n_train: int, per_round: int) -> None:
    budget = Budget.from_fractions(n_train)
    assert budget.n_rounds == 15  # 30% / 2%
    assert budget.per_round == per_round == max(1, round(0.02 * n_train))
    assert budget.total == 15 * per_round


def test_budget_other_fractions() -> None:
    # 20% in rounds of 5% of 200: 4 rounds of 10.
    budget = Budget.from_fractions(200, budget_fraction=0.2, round_fraction=0.05)
    assert (budget.n_rounds, budget.per_round, budget.total) == (4, 10, 40)


@pytest.mark.parametrize(
    ("budget_fraction", "round_fraction"),
    [(0.3, 0.0), (0.3, -0.02), (0.01, 0.02), (1.5, 0.02), (0.3, float("nan"))],
)
def test_budget_bad_fractions(budget_fraction: float, round_fraction: float) -> None:
    with pytest.raises(ValueError, match="budget fractions"):
        Budget.from_fractions(100, budget_fraction, round_fraction)


def test_budget_check() -> None:
    budget = Budget(n_rounds=15, per_round=2)  # needs 30 labels in whole rounds of 2
    budget.check(16, 14)  # 8 + 7 = 15 rounds: enough
    with pytest.raises(ValueError, match="too few examples in tiny"):
        budget.check(15, 14, name="tiny")  # 7 + 7 = 14 rounds (odd leftovers are not a round)
    with pytest.raises(ValueError, match="too few examples"):
        Budget.from_fractions(10).check(4, 4)  # 15 rounds of 1 label, only 8 examples


# --------------------------------------------------------------------------- streams


def _draw(seq: np.random.SeedSequence, n: int = 8) -> np.ndarray:
    return np.random.default_rng(seq).random(n)


def test_spawn_streams_keys_and_reproducible() -> None:
    a, b = spawn_streams(123), spawn_streams(123)
    assert set(a) == set(STREAMS) >= {"split", "prior", "al", "lr"}
    for name in STREAMS:
        np.testing.assert_array_equal(_draw(a[name]), _draw(b[name]))
    # A SeedSequence input is the same as its integer seed.
    c = spawn_streams(np.random.SeedSequence(123))
    for name in STREAMS:
        np.testing.assert_array_equal(_draw(a[name]), _draw(c[name]))


def test_spawn_streams_independent() -> None:
    streams = spawn_streams(7)
    draws = {name: _draw(streams[name], 1000) for name in STREAMS}
    names = list(STREAMS)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            assert not np.array_equal(draws[first], draws[second])
            corr = np.corrcoef(draws[first], draws[second])[0, 1]
            assert abs(corr) < 0.15  # 1000 uniforms: |corr| ~ N(0, 0.03)
    # Consuming one stream does not shift another: a fresh set gives the same LR draws
    # whether or not the AL stream was used first.
    again = spawn_streams(7)
    _draw(again["al"], 10_000)
    np.testing.assert_array_equal(_draw(again["lr"], 1000), draws["lr"])
    # Different episode seeds give different streams.
    other = spawn_streams(8)
    for name in STREAMS:
        assert not np.array_equal(_draw(other[name], 1000), draws[name])
