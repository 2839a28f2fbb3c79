"""Timing of BALLAD episodes: per data set wall times and peak memory, a profile by phase,
and the wall time of the Q1 grid; ``scripts/bench.py`` is its command line.

Episodes are played by ``agents.evaluation.run_episode`` (the project's one loop), on
environments built from ``Settings``; ``measure`` is meant to run in a fresh process
(``in_fresh_process``) so that the peak memory it reports is one data set's own.
"""

from __future__ import annotations

import cProfile
import multiprocessing
import os
import pstats
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from agents.evaluation import run_episode
from agents.experiments.grid import Grid, seed_range
from agents.experiments.run import run_grid
from agents.registry import make_agent
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings

EPISODE_TARGET_S = 5.0
MEMORY_TARGET_MB = 2048.0
Q1_TARGET_S = 300.0
#: Phases of an episode, as (label, module path suffixes, function name) for the profile.
PHASES = (
    ("reset (whole)", ("ballad_env/env.py",), "reset"),
    ("reset: split and scale", ("ballad_env/protocol.py",), "split_and_scale"),
    ("reset: fit the prior", ("pyod/models/iforest.py", "pyod/models/knn.py"), "fit"),
    ("reset: kernel width eta", ("ballad_env/detector.py",), "kernel_width"),
    ("reset: prior scores of V and T", ("ballad_env/detector.py",), "prior_probability"),
    ("steps (whole)", ("ballad_env/env.py",), "step"),
    ("AL: kernel sums for new labels", ("ballad_env/detector.py",), "kernel_sums"),
    ("threshold search", ("ballad_env/rejection.py",), "__call__"),
    ("rewards", ("ballad_env/rewards.py",), "rewards"),
    ("test evaluation (cost, ROC AUC)", ("ballad_env/cost.py",), "evaluate"),
    ("observation", ("ballad_env/observation.py",), "encode"),
)
TABLE_HEADER = (f"{'data set':<18} {'n':>6} {'d':>5} {'exact s':>8} {'reset s':>8} "
                f"{'steps/s':>8} {'bayes s':>8} {'peak MB':>8}")


class _TimedReset:
    """An environment whose last ``reset`` is timed; ``run_episode`` plays through it."""

    def __init__(self, env: BudgetAllocationEnv) -> None:
        self.unwrapped = env
        self.reset_seconds = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        start = time.perf_counter()
        result = self.unwrapped.reset(seed=seed, options=options)
        self.reset_seconds = time.perf_counter() - start
        return result

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self.unwrapped.step(action)


def timed_episode(env: BudgetAllocationEnv, seed: int) -> tuple[float, float]:
    """(reset seconds, steps seconds) of one BALLAD episode played by ``run_episode``."""
    timed = _TimedReset(env)
    agent = make_agent("ballad", env)
    start = time.perf_counter()
    run_episode(timed, agent, seed)
    return timed.reset_seconds, time.perf_counter() - start - timed.reset_seconds


def measure(name: str, data_dir: str | None, settings: Settings, repeats: int,
            bayes_repeats: int, bayes_calls: int, threads: int) -> dict[str, Any]:
    """Episode timings and peak memory on one data set: the exact search (median of
    ``repeats`` seeds, after a warm-up) and the bayes search with ``bayes_calls``."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads):
        env = BudgetAllocationEnv(name, data_dir=data_dir,
                                  settings=settings.replace(threshold_search="exact"))
        timed_episode(env, repeats)  # warm-up: lazy imports are not an episode's cost
        exact = [timed_episode(env, seed) for seed in range(repeats)]
        peak_exact = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        bayes_env = BudgetAllocationEnv(name, data_dir=data_dir, settings=settings.replace(
            threshold_search="bayes", bayes_calls=bayes_calls))
        bayes = [sum(timed_episode(bayes_env, seed)) for seed in range(bayes_repeats)]
    return {"dataset": name, "n": env.dataset.n_samples, "d": env.dataset.n_features,
            "exact_s": statistics.median(r + s for r, s in exact),
            "max_exact_s": max(r + s for r, s in exact),
            "reset_s": statistics.median(r for r, _ in exact),
            "steps_per_s": settings.n_rounds / statistics.median(s for _, s in exact),
            "bayes_s": statistics.median(bayes) if bayes else float("nan"),
            "peak_mb": peak_exact}


def profile(name: str, data_dir: str | None, settings: Settings, threads: int) -> str:
    """A profile of one exact episode (after a warm-up reset), by phase and by function."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads):
        env = BudgetAllocationEnv(name, data_dir=data_dir,
                                  settings=settings.replace(threshold_search="exact"))
        env.reset(seed=1)  # warm-up: lazy imports are not an episode's cost
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        timed_episode(env, 0)
        profiler.disable()
        total = time.perf_counter() - start
    return _profile_text(pstats.Stats(profiler), name, total)


def _profile_text(stats: pstats.Stats, name: str, total: float) -> str:
    """Seconds per phase of ``PHASES``, then the functions with the most own time."""
    entries = stats.stats.items()  # type: ignore[attr-defined]
    lines = [f"Profile of one exact episode on {name} ({total:.2f} s under the profiler)",
             f"  {'phase':<36} {'seconds':>8} {'share':>6}"]
    for label, suffixes, function in PHASES:
        seconds = sum(entry[3] for (path, _, func), entry in entries
                      if func == function and path.replace("\\", "/").endswith(suffixes))
        if seconds:
            lines.append(f"  {label:<36} {seconds:8.2f} {seconds / total:6.0%}")
    lines.append("  functions with the most own time:")
    for (path, line, func), entry in sorted(entries, key=lambda item: -item[1][2])[:8]:
        short = "/".join(path.replace("\\", "/").split("/")[-2:])
        lines.append(f"    {entry[2]:7.2f} s  {func} ({short}:{line}), {entry[1]} calls")
    return "\n".join(lines)


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a new process (so its peak memory is its own)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


def timings_table(rows: Sequence[dict[str, Any]]) -> str:
    """The per data set rows of ``measure`` as a fixed-width text table."""
    lines = [TABLE_HEADER, "-" * len(TABLE_HEADER)]
    lines += [f"{r['dataset']:<18} {r['n']:>6} {r['d']:>5} {r['exact_s']:8.2f} "
              f"{r['reset_s']:8.2f} {r['steps_per_s']:8.1f} {r['bayes_s']:8.1f} "
              f"{r['peak_mb']:8.0f}" for r in rows]
    return "\n".join(lines)


def time_q1(names: Sequence[str], seeds: int, settings: Settings,
            data_dir: str | os.PathLike | None, n_jobs: int) -> float:
    """Wall time of the Q1 grid (BALLAD, All-in-AL, All-in-LR; exact search) via the harness."""
    from agents.experiments.paper import Q1_AGENTS  # not at import: it loads matplotlib

    grid = Grid(tuple(names), seed_range(seeds), Q1_AGENTS,
                (settings.replace(threshold_search="exact"),))
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run_grid(grid, folder, data_dir=data_dir, n_jobs=n_jobs, progress=True)
        return time.perf_counter() - start


__all__ = ["EPISODE_TARGET_S", "MEMORY_TARGET_MB", "PHASES", "Q1_TARGET_S", "in_fresh_process",
           "measure", "profile", "time_q1", "timed_episode", "timings_table"]
