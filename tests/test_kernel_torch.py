"""The torch kernel backend: its kernel sums and neighbour search against numpy's, the
options that choose it, and the episode's decisions with it (on CPU torch: CI has no GPU).

Speed is measured by ``python -m scripts.studies.timings --full-size``, not here.
"""

from __future__ import annotations

import argparse
import builtins
import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from ballad_env.data import Dataset, DataWarning, validate_xy
from ballad_env.detectors.ssdo.kernel import KernelRows, kernel_width
from ballad_env.episode import Episode
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args
from scripts.studies.timings.full_size import compare_backends

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed (the torch extra)")


def relative_gap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Largest difference of two (da, dn) pairs relative to 1 + da + dn (of ``a``)."""
    scale = 1.0 + a[0] + a[1]
    return max(float(np.max(np.abs(a[i] - b[i]) / scale)) for i in range(2))


def dataset(n: int = 600, d: int = 4, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.zeros(n, dtype=np.int8)
    y[: n // 10] = 1
    X[y == 1] += 2.5
    return Dataset("syn", *validate_xy(X, y, "syn"))


# ----------------------------------------------------------------------- kernel sums
@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_sums_of_a_hand_computed_case(dtype: str) -> None:
    # w(x, z) = 2^(-|x - z|^2 / eta^2) with eta = 1; labels: (0, 0) an anomaly, (1, 0) normal.
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    labeled, y = np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([1, 0])
    rows = KernelRows(X, 1.0, dtype, X.mean(axis=0), backend="torch", device="cpu")
    da, dn = rows.sums(labeled, y)
    np.testing.assert_allclose(da, [1.0, 0.5, 2.0**-4], rtol=0, atol=1e-6)
    np.testing.assert_allclose(dn, [0.5, 1.0, 2.0**-5], rtol=0, atol=1e-6)
    other = rows.like(np.array([[2.0, 0.0]]))  # V and T's rows, prepared alike
    assert other.backend == "torch" and other.device == "cpu"
    np.testing.assert_allclose(np.concatenate(other.sums(labeled, y)), [2.0**-4, 0.5],
                               rtol=0, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("eta", [0.8, 0.05])  # 0.05: the exponent is formed in float64
@pytest.mark.parametrize("d", [3, 40])
def test_torch_sums_match_numpy_on_random_data(eta: float, d: int) -> None:
    rng = np.random.default_rng(d)
    X = rng.random((3000, d))
    labeled = X[rng.choice(len(X), 300, replace=False)] + 0.01 * rng.standard_normal((300, d))
    y = (rng.random(300) < 0.2).astype(np.int8)
    center = X.mean(axis=0)
    numpy32 = KernelRows(X, eta, "float32", center).sums(labeled, y)
    torch32 = KernelRows(X, eta, "float32", center, backend="torch", device="cpu")
    assert torch32.augmented is not None
    assert (torch32.augmented.dtype == np.float64) == (eta == 0.05)
    assert relative_gap(numpy32, torch32.sums(labeled, y)) < 1e-5
    exact = KernelRows(X, eta, "float64").sums(labeled, y)
    torch64 = KernelRows(X, eta, "float64", center, backend="torch", device="cpu")
    assert relative_gap(exact, torch64.sums(labeled, y)) < 1e-10
    assert torch64.sums(labeled[:0], y[:0])[0].tolist() == [0.0] * len(X)


@needs_torch
def test_torch_float32_clips_only_what_float32_cannot_hold() -> None:
    # Points 20 eta apart: w = 2^-400 underflows in float32 whichever way it is computed.
    X = np.array([[0.0], [20.0], [0.5]])
    rows = KernelRows(X, 1.0, "float32", X.mean(axis=0), backend="torch", device="cpu")
    da, dn = rows.sums(np.array([[0.0]]), np.array([1]))
    assert da[1] < 1e-37 and dn.tolist() == [0.0, 0.0, 0.0]
    assert da[0] == pytest.approx(1.0, abs=1e-6) and da[2] == pytest.approx(2**-0.25, abs=1e-6)


# ----------------------------------------------------------------------- eta
@needs_torch
def test_torch_neighbour_search_finds_scikit_learns_neighbours() -> None:
    from ballad_env.detectors.ssdo.kernel_torch import nearest_candidates

    rng = np.random.default_rng(1)
    X = rng.random((2500, 5))
    queries = X[rng.choice(len(X), 40, replace=False)]
    found = nearest_candidates(X, queries, 11, "cpu")
    dist, _ = NearestNeighbors(n_neighbors=11).fit(X).kneighbors(queries)
    ours = np.sort(np.linalg.norm(X[found] - queries[:, None, :], axis=2), axis=1)
    np.testing.assert_allclose(ours, dist, rtol=0, atol=1e-12)


@needs_torch
def test_sampled_eta_is_the_same_with_either_backend_and_duplicates(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ballad_env.detectors.ssdo import kernel_torch

    rng = np.random.default_rng(2)
    X = rng.random((3000, 3)).round(2)  # many exact duplicates and near-ties
    X[:40] = X[0]
    args: dict[str, Any] = {"k": 30, "sample": 500}
    searched = []
    real = kernel_torch.nearest_candidates

    def spy(*a: Any) -> np.ndarray:
        searched.append(a[3])
        return real(*a)

    monkeypatch.setattr(kernel_torch, "nearest_candidates", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # the duplicates' warning: both warn
        a = kernel_width(X, rng=np.random.default_rng(5), **args)
        on_cpu = kernel_width(X, rng=np.random.default_rng(5), backend="torch", device="cpu",
                              **args)
        assert searched == []  # on a CPU, scikit-learn's search (faster there)
        # The GPU path's search, run on the CPU ("cpu:0" is not "cpu" to kernel_width).
        b = kernel_width(X, rng=np.random.default_rng(5), backend="torch", device="cpu:0",
                         **args)
    assert searched == ["cpu:0"]
    assert a == on_cpu == b


# ----------------------------------------------------------------------- options
def test_default_backend_leaves_names_and_saved_settings_as_they_were() -> None:
    s = Settings()
    assert s.kernel_backend == "numpy" and s.kernel_device is None
    assert s.name == "iforest"
    assert "kernel_backend" not in s.to_dict() and "kernel_device" not in s.to_dict()
    assert Settings.from_dict(s.to_dict()) == s
    changed = s.replace(c_fp=2.0)
    assert changed.name == "iforest_cfp2" and "kernel_backend" not in changed.to_dict()


@needs_torch
def test_torch_backend_is_named_and_saved() -> None:
    s = Settings(kernel_backend="torch", kernel_device="cpu")
    assert s.name == "iforest_backend-torch_device-cpu"
    assert s.to_dict()["kernel_backend"] == "torch" and s.to_dict()["kernel_device"] == "cpu"
    assert Settings.from_dict(s.to_dict()) == s
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    args = parser.parse_args(["--kernel-backend", "torch", "--kernel-device", "auto"])
    assert settings_from_args(args) == (Settings(kernel_backend="torch"),)


def test_bad_backend_options_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown kernel_backend 'jax'"):
        Settings(kernel_backend="jax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="torch backend only"):
        Settings(kernel_device="cuda")


def test_torch_backend_without_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install 'ballad-env\[torch\]'"):
        Settings(kernel_backend="torch")
    from ballad_env.detectors.ssdo import kernel_torch

    real_import = builtins.__import__

    def no_torch(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(ImportError, match=r"ballad-env\[torch\]"):
        kernel_torch.require_torch()


@needs_torch
def test_an_unknown_device_is_a_clear_error() -> None:
    from ballad_env.detectors.ssdo.kernel_torch import resolve_device

    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="not a torch device"):
        resolve_device("gpu7")


def test_torch_extra_is_declared_and_not_a_core_dependency() -> None:
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    core = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "torch" not in core
    assert "\ntorch = [" in text


# ----------------------------------------------------------------------- episodes
@needs_torch
def test_episodes_with_the_torch_backend_take_the_same_decisions() -> None:
    data = dataset()
    fast = Settings(prior="knn", eta_sample=200, kernel_dtype="float32")
    for settings in (Settings(prior="knn"), fast):
        found = compare_backends(data, settings, seeds=[0, 1], agents=["ballad", "all-in-al"],
                                 device="cpu")
        assert found["episodes"] == 4 and found["rounds"] == 60
        assert found["labels_differ"] == 0 and found["outcome_differs"] == 0
        assert found["episodes_differ"] == 0 and 0 <= found["max_tau_diff"] < 1e-6
    torch_episode = Episode(data, 0, fast.replace(kernel_backend="torch"))
    numpy_episode = Episode(data, 0, fast)
    assert torch_episode.start is not numpy_episode.start  # the reset cache tells them apart
    assert torch_episode.scores.rows.device_rows is not None
    assert torch_episode.start.detector.fit.eta == numpy_episode.start.detector.fit.eta


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("name", ["Annthyroid", "PageBlocks", "SpamBase"])
def test_benchmark_decisions_agree_across_backends(benchmark_dir: Path, name: str) -> None:
    for settings in (Settings(), Settings(eta_sample=2000, kernel_dtype="float32")):
        found = compare_backends(name, settings, seeds=[0], agents=["ballad", "all-in-al"],
                                 data_dir=str(benchmark_dir), device="cpu")
        assert found["labels_differ"] == 0 and found["outcome_differs"] == 0, found


# ----------------------------------------------------------------------- the full-size bench
def test_full_size_bench_times_each_agent_from_one_reset(tmp_path: Path) -> None:
    from ballad_env.compute import RESET_CACHE, episode_threads, set_episode_threads
    from scripts.studies.timings.full_size import full_table, measure_full

    data = dataset(n=800)
    path = tmp_path / "syn.npz"
    np.savez(path, X=data.X, y=data.y)
    cache, threads = RESET_CACHE.max_bytes, episode_threads()
    try:
        rows = measure_full(str(path), "iforest", "numpy", 0, ("all-in-al", "all-in-lr"))
    finally:
        RESET_CACHE.resize(cache)
        set_episode_threads(threads)
    assert [(r["dataset"], r["agent"], r["n"], r["d"]) for r in rows] == [
        ("syn", "all-in-al", 800, 4), ("syn", "all-in-lr", 800, 4)]
    assert rows[0]["reset_s"] == rows[1]["reset_s"] > 0  # one reset, shared
    assert rows[0]["al_step_s"] > 0 and rows[0]["lr_step_s"] != rows[0]["lr_step_s"]  # NaN
    assert all(r["episode_s"] > r["reset_s"] and r["peak_mb"] > 0 for r in rows)
    assert all(0 <= r["cost"] <= 1 for r in rows)
    table = full_table(rows)
    assert table.count("| syn | 800 x 4 | iforest | numpy |") == 2
    assert "goal 60 s: met" in table
