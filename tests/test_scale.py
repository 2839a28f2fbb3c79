"""Large data sets: the reset cache, the fast paths above ``EXACT_MAX_TRAIN``, threads and
fork safety, priors by pyod name, rendering and Gymnasium's checker on every benchmark.

Speed itself is measured by ``python -m scripts.studies.timings --scaling``, not here.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_info

import ballad_env.detectors.ssdo.kernel as kernel_module
from agents import make_agent, run_episode
from agents.experiments import Grid, run_grid
from agents.experiments import run as runner
from agents.experiments.training.config import TrainConfig
from ballad_env import ENV_ID
from ballad_env.compute import (
    RESET_CACHE,
    ResetCache,
    episode_threads,
    set_episode_threads,
    set_reset_cache_size,
    thread_limit,
)
from ballad_env.data import Dataset, DataWarning, load_dataset, validate_xy
from ballad_env.detectors.ssdo.model import (
    ETA_SAMPLE_DEFAULT,
    EXACT_MAX_TRAIN,
    KernelRows,
    kernel_sums,
    kernel_width,
    prior_factory,
)
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import AL, LR, Episode
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args
from ballad_env.wrappers import SeedPool

ROOT = Path(__file__).resolve().parents[1]
MIXED = [LR, AL, AL, LR, AL, LR, AL, AL, LR, AL, LR, LR, AL, AL, LR]


def dataset(n: int = 300, d: int = 3, seed: int = 0, name: str = "syn") -> Dataset:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.zeros(n, dtype=np.int8)
    y[: n // 10] = 1
    X[y == 1] += 2.5
    return Dataset(name, *validate_xy(X, y, name))


def play(data: Dataset, settings: Settings, seed: int, actions=MIXED) -> list[dict]:
    episode = Episode(data, seed, settings)
    records = [episode.snapshot().record()]
    for action in actions:
        episode.step(action)
        records.append(episode.snapshot().record())
    return records


@pytest.fixture
def no_cache():
    """The reset cache off for the test (and emptied), then restored."""
    bound = RESET_CACHE.max_bytes
    RESET_CACHE.clear()
    set_reset_cache_size(0)
    yield
    RESET_CACHE.resize(bound)
    RESET_CACHE.clear()


# =============================================================================== reset cache
def test_results_are_identical_with_and_without_the_reset_cache(no_cache, same) -> None:
    data = dataset()
    settings = [Settings(prior=p, **extra) for p in ("knn", "iforest")
                for extra in ({}, {"reward": "cosine", "c_fn": 10.0},
                              {"budget_fraction": 0.2, "al_strategy": "random"})]
    uncached = {(s, seed): play(data, s, seed, MIXED[:10]) for s in settings for seed in (0, 1)}
    assert len(RESET_CACHE) == 0
    RESET_CACHE.clear()
    set_reset_cache_size(256)
    for _ in range(2):  # the first pass fills the cache, the second reads it
        cached = {(s, seed): play(data, s, seed, MIXED[:10]) for s in settings
                  for seed in (0, 1)}
        assert all(same(cached[key], uncached[key]) for key in uncached)
    # One label-free reset per (seed, prior): costs, rewards and searches share it.
    assert len(RESET_CACHE) == 4 and RESET_CACHE.misses == 4
    assert RESET_CACHE.hits == 2 * len(uncached) - 4


def test_cached_resets_are_read_only_and_shared_by_forks() -> None:
    data = dataset(seed=3)
    first, second = Episode(data, 5, Settings(prior="knn")), Episode(data, 5, Settings(
        prior="knn", c_fn=10.0))
    assert first.start is second.start and first.split.X_train is second.split.X_train
    with pytest.raises(ValueError, match="read-only"):
        first.split.X_train[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        first.scores.q[0] = 1.0
    fork = first.fork()
    assert fork.start is first.start and fork.scores.X is first.scores.X
    fork.step(AL)
    assert first.n_al == 0 and fork.n_al == 1


def test_the_cache_keys_on_what_the_reset_depends_on() -> None:
    data = dataset(seed=4)
    base = Episode(data, 0, Settings(prior="knn"))
    for other in (Episode(data, 1, Settings(prior="knn")),
                  Episode(data, 0, Settings(prior="iforest")),
                  Episode(data, 0, Settings(prior="knn", k=10)),
                  Episode(data, 0, Settings(prior="knn", eta_sample=50)),
                  Episode(data, 0, Settings(prior="knn", kernel_dtype="float32")),
                  Episode(dataset(seed=4), 0, Settings(prior="knn"))):  # an equal copy
        assert other.start is not base.start
    same_start = Episode(data, 0, Settings(prior="knn", alpha=1.0, reward="cost", c_fp=3.0,
                                           budget_fraction=0.1, al_strategy="random"))
    assert same_start.start is base.start


def test_lru_by_bytes() -> None:
    class Owner:
        pass

    cache, owners = ResetCache(100), [Owner()]
    computed: list[str] = []

    def value(name: str, size: int):
        return cache.get_or_compute(owners[0], name, lambda: computed.append(name) or name,
                                    lambda _: size)

    value("a", 40), value("b", 40), value("a", 40)  # noqa: B018 (a is now the most recent)
    value("c", 40)  # over 100 bytes: b, the least recently used, goes
    assert computed == ["a", "b", "c"] and cache.nbytes == 80
    value("a", 40), value("b", 40)  # noqa: B018
    assert computed == ["a", "b", "c", "b"]
    value("huge", 101)  # larger than the bound: computed, never kept
    value("huge", 101)
    assert computed.count("huge") == 2 and cache.nbytes <= 100
    del owners[0]
    gc.collect()
    assert len(cache) == 0  # entries die with their owner: a reused id never sees them


def test_the_runner_shares_one_reset_across_settings(tmp_path: Path, monkeypatch) -> None:
    data = dataset(n=200, seed=6, name="syn6")
    settings = (Settings(prior="knn", budget_fraction=0.1),
                Settings(prior="knn", budget_fraction=0.1, c_fn=10.0),
                Settings(prior="knn", budget_fraction=0.1, reward="cosine"))
    grid = Grid((data,), (0, 1), ("ballad", "all-in-al"), settings)
    tasks: list = []
    original = runner._run_task
    def spy(task: runner._Task, single_thread: bool):
        tasks.append(task)
        return original(task, single_thread)

    monkeypatch.setattr(runner, "_run_task", spy)
    RESET_CACHE.clear()
    table = run_grid(grid, tmp_path / "run", n_jobs=2, progress=False)
    # One task per (data set, seed), all in this process (the grid is too small for
    # workers), and one label-free reset each: the other settings read it from the cache.
    assert [(t.seed, len(t.cells)) for t in tasks] == [(0, 3), (1, 3)]
    assert RESET_CACHE.misses == 2 and RESET_CACHE.hits >= 4
    set_reset_cache_size(0)
    try:
        fresh = run_grid(grid, tmp_path / "fresh", n_jobs=1, progress=False)
    finally:
        set_reset_cache_size(1024)
    pd.testing.assert_frame_equal(table, fresh)


def test_training_episodes_can_draw_from_a_seed_pool() -> None:
    env = SeedPool(BudgetAllocationEnv(dataset(seed=7), prior="knn", budget_fraction=0.1), 3)
    env.reset(seed=11)  # a seeded reset passes through and seeds the pool's generator
    seeds = set()
    for _ in range(12):
        _, info = env.reset()
        seeds.add(env.unwrapped.episode.split.y_train.tobytes() + bytes(str(info["test_cost"]),
                                                                          "ascii"))
    assert len(seeds) <= 3
    with pytest.raises(ValueError, match="episode_seeds"):
        TrainConfig(episode_seeds=-1)


# =============================================================================== fast paths
def test_fast_paths_are_the_default_only_above_the_threshold() -> None:
    s = Settings()
    assert s.eta_sample_for(EXACT_MAX_TRAIN) == 0 and s.kernel_dtype_for(EXACT_MAX_TRAIN) == \
        "float64"
    assert s.eta_sample_for(EXACT_MAX_TRAIN + 1) == ETA_SAMPLE_DEFAULT
    assert s.kernel_dtype_for(EXACT_MAX_TRAIN + 1) == "float32"
    exact = Settings(eta_sample=0, kernel_dtype="float64")
    assert exact.eta_sample_for(10**6) == 0 and exact.kernel_dtype_for(10**6) == "float64"
    assert exact.name == "iforest_eta0_kernel-float64" and s.name == "iforest"
    assert Settings.from_dict(exact.to_dict()) == exact
    with pytest.raises(ValueError, match="kernel_dtype"):
        Settings(kernel_dtype="float16")
    with pytest.raises(ValueError, match="eta_sample"):
        Settings(eta_sample=-5)


def test_the_sampled_eta_is_close_and_seeded() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((6000, 4))
    exact = kernel_width(X, 30)
    sampled = [kernel_width(X, 30, sample=1500, rng=np.random.default_rng(s)) for s in (1, 2)]
    assert all(abs(s / exact - 1) < 0.03 for s in sampled) and sampled[0] != sampled[1]
    assert kernel_width(X, 30, sample=1500, rng=np.random.default_rng(1)) == sampled[0]
    assert kernel_width(X, 30, sample=len(X)) == exact  # a sample of everything is exact
    # Duplicates: the recomputed distances are exactly 0 (so all-duplicate data gives 1, as
    # in the exact path), and the sample warns that its eta may be far off.
    dup = np.repeat(rng.random((50, 3)), 40, axis=0)
    with pytest.warns(DataWarning, match="200 of them have 30 or more exact duplicates"):
        assert kernel_width(dup, 30, sample=200, rng=rng) == kernel_width(dup, 30) == 1.0


@pytest.mark.parametrize("eta", [0.003, 0.2, 1.5])
def test_float32_kernel_sums_are_within_1e_5(eta: float) -> None:
    rng = np.random.default_rng(1)
    X = rng.random((3000, 6))
    labeled = rng.choice(3000, 300, replace=False)
    y = (rng.random(300) < 0.2).astype(np.int8)
    da, dn = kernel_sums(X, X[labeled], y, eta)
    rows = KernelRows(X, eta, "float32", X.mean(axis=0))
    # A narrow kernel next to the data's spread forms its exponent in float64.
    assert rows.augmented.dtype == (np.float64 if eta < 0.01 else np.float32)
    a32, n32 = rows.sums(X[labeled], y)
    scale = 1.0 + da + dn  # the posterior score's denominator, over alpha
    assert np.max(np.abs(a32 - da) / scale) < 1e-5 and np.max(np.abs(n32 - dn) / scale) < 1e-5
    other = rows.like(rng.random((500, 6)) * 1.2)
    a, n = other.sums(X[labeled], y)
    da, dn = kernel_sums(other.X, X[labeled], y, eta)
    assert np.max(np.abs(a - da) / (1 + da + dn)) < 1e-5


def test_fast_paths_play_close_to_the_exact_episode() -> None:
    data = dataset(n=2000, d=4, seed=8)
    exact = play(data, Settings(prior="knn"), 0, [AL] * 15)
    fast = play(data, Settings(prior="knn", eta_sample=300, kernel_dtype="float32"), 0,
                [AL] * 15)
    exact_costs = np.array([r["test_cost"] for r in exact])
    fast_costs = np.array([r["test_cost"] for r in fast])
    assert np.all(np.isfinite(fast_costs))
    assert np.mean(np.abs(fast_costs - exact_costs)) < 0.01


def test_results_record_the_paths_in_force(tmp_path: Path) -> None:
    grid = Grid((dataset(n=200, seed=9, name="syn9"),), (0,), ("ballad",),
                (Settings(prior="knn", budget_fraction=0.1),
                 Settings(prior="knn", budget_fraction=0.1, kernel_dtype="float32")))
    table = run_grid(grid, tmp_path / "run", n_jobs=1, progress=False)
    by_setting = table.groupby("setting")[["eta_sample", "kernel_dtype"]].first()
    assert by_setting.loc["knn_budget0.1"].tolist() == [0, "float64"]
    assert by_setting.loc["knn_budget0.1_kernel-float32"].tolist() == [0, "float32"]


# =============================================================================== threads
def test_episodes_run_with_one_blas_thread_and_the_limit_is_restored(monkeypatch) -> None:
    from threadpoolctl import threadpool_limits

    seen: list[set[int]] = []
    original = kernel_module.kernel_sums

    def spy(*args, **kwargs):
        seen.append({lib["num_threads"] for lib in threadpool_info()})
        return original(*args, **kwargs)

    monkeypatch.setattr(kernel_module, "kernel_sums", spy)
    with threadpool_limits(2):  # what a user's process may run with
        episode = Episode(dataset(seed=10), 0, Settings(prior="knn"))
        episode.step(AL)
        assert seen and all(threads == {1} for threads in seen) and episode_threads() == 1
        assert {lib["num_threads"] for lib in threadpool_info()} == {2}  # restored
        set_episode_threads(None)  # leave the libraries alone
        try:
            seen.clear()
            Episode(dataset(seed=10), 1, Settings(prior="knn")).step(AL)
            assert seen and all(threads == {2} for threads in seen)
        finally:
            set_episode_threads(1)
    with pytest.raises(ValueError, match="threads"):
        set_episode_threads(0)


def test_thread_count_does_not_change_results(no_cache, same) -> None:
    data = load_dataset("wdbc")
    with thread_limit():
        one = play(data, Settings(), 0)
    set_episode_threads(2)
    try:
        two = play(data, Settings(), 0)
    finally:
        set_episode_threads(1)
    assert same(one, two)


@pytest.mark.slow
def test_an_async_vector_env_resets_after_an_episode_in_the_parent(tmp_path: Path) -> None:
    """Gymnasium forks its async workers on Linux; a thread pool the parent's episode left
    alive would deadlock them. Run without any thread-count variable, as a user would."""
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import gymnasium as gym
        import ballad_env
        from agents import make_agent, run_episode
        env = gym.make(ballad_env.ENV_ID, dataset="wdbc")
        run_episode(env, make_agent("ballad", env.unwrapped), seed=0)
        venv = gym.make_vec(ballad_env.ENV_ID, num_envs=2, vectorization_mode="async",
                            dataset="wdbc")
        obs, info = venv.reset(seed=0)
        print("reset", obs.shape)
        venv.close()
    """))
    environment = {k: v for k, v in os.environ.items()
                   if not k.endswith("_NUM_THREADS") and k != "OMP_THREAD_LIMIT"}
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=90, env=environment, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail("the async vector env's workers never answered reset (deadlock)")
    assert done.returncode == 0, done.stderr
    assert "reset (2, 18)" in done.stdout


# =============================================================================== priors
@pytest.mark.parametrize("name", ["ecod", "copod", "lof",
                                  pytest.param("hbos", marks=pytest.mark.slow)])  # numba JIT
def test_any_pyod_detector_is_a_prior_by_name(name: str) -> None:
    env = BudgetAllocationEnv(dataset(seed=12), prior=name, budget_fraction=0.1)
    records = run_episode(env, make_agent("ballad", env), seed=0)
    assert env.episode.scores.detector.prior_.__class__.__name__.lower() == name
    assert all(np.isfinite(r["test_cost"]) for r in records)
    assert env.settings.name == f"{name}_budget0.1"


def test_pyod_priors_that_cannot_serve_say_why() -> None:
    with pytest.raises(ValueError, match="unknown prior 'isolation': use one of .*iforest.*"
                                         "or the name of a pyod detector"):
        prior_factory("isolation")
    with pytest.raises(ValueError, match="supervised"):
        prior_factory("devnet")
    with pytest.raises(ValueError, match="cannot be built with its defaults"):
        prior_factory("lscp")


SCRIPT_PARSERS = {"agents.experiments.cli.compare": ("parse_args", ["--datasets", "x"]),
                  "agents.experiments.cli.bench": ("parse_args", []),
                  "scripts.studies.paper.__main__": ("parse_args", []),
                  "agents.experiments.cli.train": ("parse_args", []),
                  "scripts.studies.lattice.__main__": ("parse_options", ["--datasets", "toy"]),
                  "scripts.studies.crossed.__main__": ("build_parser", []),
                  "scripts.studies.policies.__main__": ("build_parser", ["train"])}


def parse_with(script: str, argv: list[str]):
    """Parse ``argv`` with the job's or study's own parser, in this process."""
    import importlib

    module = importlib.import_module(script)
    function, prefix = SCRIPT_PARSERS[script]
    if function == "build_parser":
        return module.build_parser().parse_args([*prefix, *argv])
    return getattr(module, function)([*prefix, *argv])


@pytest.mark.parametrize("script", sorted(SCRIPT_PARSERS))
def test_every_script_takes_a_pyod_prior_and_refuses_unknown_ones(script: str, capsys) -> None:
    parsed = parse_with(script, ["--prior", "ECOD"])
    prior = getattr(parsed, "prior", None) or getattr(parsed, "priors", None)
    assert prior in ("ecod", ["ecod"])
    with pytest.raises(SystemExit) as exit_:
        parse_with(script, ["--prior", "nope"])
    assert exit_.value.code == 2
    assert "argument --prior: unknown prior 'nope': use one of iforest, knn" in \
        capsys.readouterr().err


def test_the_settings_options_parse_pyod_priors_and_fast_paths() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser, several=True)
    args = parser.parse_args(["--prior", "ECOD", "knn", "--eta-sample", "auto", "2000",
                              "--kernel-dtype", "float32"])
    grid = settings_from_args(args)
    assert [(s.prior, s.eta_sample, s.kernel_dtype) for s in grid] == [
        ("ecod", None, "float32"), ("ecod", 2000, "float32"), ("knn", None, "float32"),
        ("knn", 2000, "float32")]


# =============================================================================== data
def test_features_too_large_to_standardise_are_refused_at_construction() -> None:
    X, y = dataset().X, dataset().y
    with pytest.raises(ValueError, match=r"feature 0 reaches .*e\+200, too large to standardise"):
        BudgetAllocationEnv((X * 1e200, y))
    BudgetAllocationEnv((X * 1e150, y), prior="knn").reset(seed=0)  # large, but fine


# =============================================================================== rendering
@pytest.mark.slow
def test_gymnasium_check_env_with_render_checks_on_every_benchmark(benchmark_dir: Path) -> None:
    """The checker's render checks make a new environment per render mode and render it; the
    fast ``ecod`` prior keeps its dozen resets quick (its questions do not depend on it)."""
    from gymnasium.utils.env_checker import check_env

    names = sorted(p.stem for p in benchmark_dir.glob("*.npz"))
    assert len(names) >= 18
    shapes = set()
    for name in names:
        env = gym.make(ENV_ID, dataset=name, data_dir=str(benchmark_dir), prior="ecod",
                       render_mode="rgb_array")
        check_env(env.unwrapped)
        env.reset(seed=0)
        env.step(LR)
        frame = env.render()
        shapes.add(frame.shape)
        assert frame.dtype == np.uint8 and frame.std() > 0
        env.close()
    assert len(shapes) == 1


# =============================================================================== bench
def test_the_scaling_bench_measures_and_fits_the_growth() -> None:
    from agents.experiments.bench.timing import synthetic_dataset
    from scripts.studies.timings.scaling import growth_exponent, measure_scaling, scaling_table

    data = synthetic_dataset(1000, 3, contamination=0.05)
    assert data.name == "synthetic:1000x3" and data.contamination == 0.05
    assert growth_exponent([1e3, 1e4, 1e5], [1.0, 100.0, 10000.0]) == pytest.approx(2.0)
    bound = RESET_CACHE.max_bytes
    try:
        row = measure_scaling(600, 3, "ballad", Settings(prior="knn"), threads=1)
    finally:
        RESET_CACHE.resize(bound)
    assert row["n"] == 600 and row["reset_s"] > 0 and row["al_step_s"] > 0
    assert row["kernel_dtype"] == "float64" and row["peak_mb"] > 0
    text = scaling_table([row, {**row, "n": 200_000, "episode_s": 9.0}])
    assert "episode time grows as n^" in text and "target 10 s, 4096 MB: met" in text
