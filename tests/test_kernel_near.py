"""Kernel sums over the near pairs (``kernel_pairs="near"``,
``ballad_env.detectors.ssdo.kernel_near``):
the leaves, a hand-computed case, equality to the dense sums on random data, the option's
default and its errors, and the benchmark default left as it was.

Speed is measured by ``python -m scripts.studies.timings --full-size --kernel-pairs near
all``, not here.
"""

from __future__ import annotations

import copy
import importlib.util

import numpy as np
import pytest

from ballad_env.data import Dataset, validate_xy
from ballad_env.detectors.ssdo.episode import SSDO_DETECTOR, prior_seed
from ballad_env.detectors.ssdo.kernel import EXACT_MAX_TRAIN, KernelRows, kernel_sums
from ballad_env.detectors.ssdo.kernel_near import (
    NearRows,
    box_gaps,
    leaf_boxes,
    median_order,
    near_exponent,
)
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings


def relative_gap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Largest difference of two (da, dn) pairs relative to 1 + da + dn (of ``a``)."""
    scale = 1.0 + a[0] + a[1]
    return max(float(np.max(np.abs(a[i] - b[i]) / scale)) for i in range(2))


# ----------------------------------------------------------------------- the leaves
def test_median_order_makes_leaves_of_bounded_size_whose_boxes_hold_them() -> None:
    rng = np.random.default_rng(0)
    points = np.vstack([rng.normal(size=(700, 3)), np.zeros((300, 3))])  # 300 duplicates
    order, starts = median_order(points, 64)
    assert np.array_equal(np.sort(order), np.arange(1000))
    sizes = np.diff(starts)
    assert starts[0] == 0 and starts[-1] == 1000
    assert sizes.max() <= 64 and sizes.min() >= 32
    lo, hi = leaf_boxes(points[order], starts)
    leaf_of = np.repeat(np.arange(len(sizes)), sizes)
    assert np.all(points[order] >= lo[leaf_of]) and np.all(points[order] <= hi[leaf_of])


def test_box_gaps_are_the_smallest_squared_distances_between_boxes() -> None:
    lo_a, hi_a = np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]])
    lo_b = np.array([[3.0, 0.5], [0.5, 0.5], [4.0, 5.0]])
    hi_b = np.array([[4.0, 0.6], [2.0, 2.0], [5.0, 6.0]])
    # 2 apart along x; overlapping; 3 along x and 4 along y.
    np.testing.assert_array_equal(box_gaps(lo_a, hi_a, lo_b, hi_b), [[4.0, 0.0, 25.0]])


def test_float32_exp_is_zero_below_the_skipped_exponent() -> None:
    # The near path's one premise: a skipped pair is one the dense path's exp makes 0.
    for dtype in (np.float32, np.float64):
        floor = near_exponent(np.dtype(dtype))
        assert np.exp(np.array([floor + 5.0], dtype=dtype))[0] == 0.0
    assert np.exp(np.float32(-103.98)) == 0.0 and np.exp(np.float32(-103.9)) > 0.0


# ----------------------------------------------------------------------- kernel sums
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_near_sums_of_a_hand_computed_case(dtype: str) -> None:
    # eta = 1, w = 2^(-|x - z|^2). Labels: 0 an anomaly, 30 a normal. Rows 0, 1, 2 see the
    # anomaly with 1, 1/2 and 1/16, 30 and 31 the normal with 1 and 1/2; the far pairs
    # weigh 2^-784 to 2^-961: 0 in float32 (exp's exponent below -104), as they are in
    # float64 (up to 2^-900, exponent -624, kept; float64's floor is -760).
    X = np.array([[0.0], [1.0], [2.0], [30.0], [31.0]])
    labeled, y = np.array([[0.0], [30.0]]), np.array([1, 0])
    rows = KernelRows(X, 1.0, dtype, X.mean(axis=0), pairs="near")
    da, dn = rows.sums(labeled, y)
    far = 1.0 if dtype == "float64" else 0.0
    np.testing.assert_allclose(da, [1.0, 0.5, 2.0**-4, far * 2.0**-900, far * 2.0**-961],
                               rtol=1e-6, atol=0)
    np.testing.assert_allclose(dn, [far * 2.0**-900, far * 2.0**-841, far * 2.0**-784, 1.0,
                                    0.5], rtol=1e-6, atol=0)
    assert rows.near is not None and rows.augmented is None


def test_far_blocks_are_skipped_by_hand() -> None:
    # Leaves of 2 rows, groups of 1 label, eta = 1: the leaf {30, 31} is 30 or more from
    # the label at 0 (exponent -624 < -110: skipped) and 0 from the label at 30 (kept).
    X = np.array([[0.0], [1.0], [2.0], [30.0], [31.0]])
    labeled = np.array([[0.0], [30.0]])
    rows = NearRows(X, np.zeros((5, 3)), leaf=2)
    order, starts, near = rows.near_blocks(labeled, -np.log(2.0), np.dtype(np.float32),
                                           group=1)
    groups = [float(labeled[order[a], 0]) for a in starts[:-1]]
    for i, (a, b) in enumerate(zip(rows.starts[:-1], rows.starts[1:], strict=True)):
        members = sorted(X[rows.order[a:b], 0])
        if members == [30.0, 31.0]:
            assert near[i].tolist() == [g == 30.0 for g in groups]
        else:  # {0, 1} and {2}: within 2 of the label at 0
            assert near[i, groups.index(0.0)]


def clustered(n: int, d: int, rng: np.random.Generator, duplicates: int = 0) -> np.ndarray:
    """Points in 40 tight clusters spread over [0, 10]^d, with exact duplicates."""
    centres = rng.uniform(0, 10, size=(40, d))
    X = centres[rng.integers(40, size=n)] + rng.normal(scale=0.05, size=(n, d))
    if duplicates:
        X[-duplicates:] = X[0]
    return X


@pytest.mark.parametrize(("d", "eta", "dtype"), [
    (2, 0.02, "float32"), (5, 0.05, "float32"), (20, 0.1, "float32"),  # narrow
    (3, 3.0, "float32"), (10, 30.0, "float32"),  # wide: every block near
    (4, 0.05, "float64"), (4, 5.0, "float64")])
def test_near_sums_equal_the_dense_ones_up_to_summation_order(d: int, eta: float,
                                                              dtype: str) -> None:
    rng = np.random.default_rng(d)
    X = clustered(3000, d, rng, duplicates=200)
    other = clustered(1000, d, rng)
    dense = KernelRows(X, eta, dtype, X.mean(axis=0))
    near = KernelRows(X, eta, dtype, X.mean(axis=0), pairs="near")
    exact = KernelRows(X, eta, "float64")
    bound = 1e-5 if dtype == "float32" else 1e-10
    for labels in (rng.choice(3000, 300, replace=False), np.arange(2800, 3000)):
        y = (rng.random(len(labels)) < 0.3).astype(np.int8)
        for a, b, c in ((dense, near, exact),
                        (dense.like(other), near.like(other), exact.like(other))):
            found = b.sums(X[labels], y)
            assert relative_gap(a.sums(X[labels], y), found) < bound
            assert relative_gap(c.sums(X[labels], y), found) < bound
    if eta < 1.0:  # the narrow kernels do skip blocks
        assert near.near is not None
        _, _, blocks = near.near.near_blocks(X[:300] - near.center, -np.log(2.0) / eta**2,
                                             np.dtype(np.float32))
        assert blocks.mean() < 0.5


def test_near_rows_are_read_only_and_shared_by_copies() -> None:
    X = clustered(600, 3, np.random.default_rng(1))
    rows = KernelRows(X, 0.05, "float32", X.mean(axis=0), pairs="near")
    assert rows.near is not None and not rows.near.rows.flags.writeable
    assert copy.deepcopy(rows) is rows and rows.like(X[:10]).pairs == "near"
    assert rows.nbytes >= rows.near.rows.nbytes > 0
    before = rows.near.rows.copy()
    rows.sums(X[:50], np.zeros(50, dtype=np.int8))
    np.testing.assert_array_equal(rows.near.rows, before)


def test_no_labels_give_zero_sums() -> None:
    X = clustered(500, 2, np.random.default_rng(2))
    rows = KernelRows(X, 0.05, "float32", X.mean(axis=0), pairs="near")
    da, dn = rows.sums(np.empty((0, 2)), np.empty(0, dtype=np.int8))
    assert not da.any() and not dn.any() and da.shape == (500,)
    np.testing.assert_array_equal(kernel_sums(X, np.empty((0, 2)), np.empty(0), 0.05)[0], da)


# ----------------------------------------------------------------------- the option
def test_kernel_pairs_default_is_all_up_to_the_exact_size_and_near_above() -> None:
    settings = Settings()
    assert settings.kernel_pairs is None
    assert settings.kernel_pairs_for(EXACT_MAX_TRAIN) == "all"
    assert settings.kernel_pairs_for(EXACT_MAX_TRAIN + 1) == "near"
    assert Settings(kernel_pairs="all").kernel_pairs_for(10**6) == "all"
    assert Settings(kernel_pairs="near").kernel_pairs_for(10) == "near"
    # Quiet: existing names and run.json stay; a value set is named.
    assert "kernel_pairs" not in settings.to_dict() and settings.name == "iforest"
    assert Settings(kernel_pairs="near").name == "iforest_pairs-near"
    assert Settings.from_dict(Settings(kernel_pairs="near").to_dict()).kernel_pairs == "near"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_backend_keeps_all_pairs_and_refuses_near() -> None:
    assert Settings(kernel_backend="torch").kernel_pairs_for(10**6) == "all"
    with pytest.raises(ValueError, match="kernel_pairs='near' runs on the numpy backend only"):
        Settings(kernel_backend="torch", kernel_pairs="near")


def test_bad_kernel_pairs_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown kernel pairs 'far': use one of all, near"):
        Settings(kernel_pairs="far")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="numpy backend only"):
        KernelRows(np.zeros((3, 2)), 1.0, "float32", pairs="near", backend="torch")


def test_kernel_pairs_are_part_of_the_reset_cache_key() -> None:
    streams = {"prior": np.random.SeedSequence(0)}
    keys = {SSDO_DETECTOR.key(Settings(kernel_pairs=pairs), streams, 500)  # type: ignore[arg-type]
            for pairs in (None, "all", "near")}
    assert len(keys) == 2  # None resolves to all at this size
    assert prior_seed(streams) in next(iter(keys))


# ----------------------------------------------------------------------- episodes
def test_benchmark_default_is_the_dense_path(benchmark_dir: object) -> None:
    # Below EXACT_MAX_TRAIN the default is all pairs, float64: the episode is the one it
    # was, bit for bit (checked against the code before the option existed: docs/scale.md).
    from pathlib import Path

    data = np.load(Path(str(benchmark_dir)) / "Glass.npz")
    dataset = Dataset("Glass", *validate_xy(data["X"], data["y"], "Glass"))
    runs = {}
    for pairs in (None, "all", "near"):
        env = BudgetAllocationEnv(dataset, settings=Settings(kernel_pairs=pairs))  # type: ignore[arg-type]
        obs, _ = env.reset(seed=3)
        steps = [obs] + [env.step(a)[0] for a in (0, 1, 0, 0)]
        runs[pairs] = (np.stack(steps), env.unwrapped.episode.scores.probabilities())
    assert np.array_equal(runs[None][0], runs["all"][0])
    assert all(np.array_equal(a, b) for a, b in zip(runs[None][1], runs["all"][1], strict=True))
    # near (float64 sums here): the same up to rounding.
    np.testing.assert_allclose(runs["near"][0], runs["all"][0], rtol=0, atol=1e-9)


# ----------------------------------------------------------------------- the bench's tables
def test_bench_compares_decisions_across_pairs_and_averages_seeds() -> None:
    from scripts.studies.timings.full_size import pairs_agreement, seeds_table

    def row(pairs: str, seed: int, decisions: str, cost: float, cpu: float) -> dict[str, object]:
        return {"dataset": "syn", "n": 900, "d": 3, "prior": "iforest", "backend": "numpy",
                "pairs": pairs, "agent": "all-in-al", "seed": seed, "reset_s": 1.0,
                "reset_cpu_s": 1.0, "al_step_s": 0.5, "lr_step_s": float("nan"),
                "al_step_cpu_s": 0.4, "lr_step_cpu_s": float("nan"), "episode_s": cpu,
                "episode_cpu_s": cpu, "peak_mb": 100.0 + seed, "cost": cost,
                "decisions": decisions}

    rows = [row("all", 0, "a", 0.1, 10.0), row("near", 0, "a", 0.1, 4.0),
            row("all", 1, "b", 0.2, 12.0), row("near", 1, "c", 0.3, 5.0)]
    text = pairs_agreement(rows)
    assert text.startswith("kernel pairs all vs near: 2 episodes compared, 1 queried the "
                           "same labels every round, 1 ended with the same cost")
    assert "differ: syn iforest all-in-al seed 1" in text
    table = seeds_table(rows)
    assert "| syn | 900 x 3 | iforest | numpy | near | all-in-al | 2 | 1.0 | 0.40 | - | " \
           "4.5 (5.0) | 101 | 0.2000 |" in table
    assert "slowest episode: 12.0 CPU s" in table and "goal 60 s: met" in table


def test_near_sums_are_the_same_with_two_threads() -> None:
    from ballad_env.compute import episode_threads, set_episode_threads

    rng = np.random.default_rng(5)
    X = clustered(2000, 3, rng)
    rows = KernelRows(X, 0.05, "float32", X.mean(axis=0), pairs="near")
    labels, y = X[:150], (rng.random(150) < 0.2).astype(np.int8)
    one = rows.sums(labels, y)
    threads = episode_threads()
    try:
        set_episode_threads(2)
        two = rows.sums(labels, y)
    finally:
        set_episode_threads(threads)
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))
