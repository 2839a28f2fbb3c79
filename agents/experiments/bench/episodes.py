"""Timing of BALLAD episodes: per data set wall times and peak memory, a profile by phase,
and the replay environment against the live one; ``ballad-env bench`` is its command line
(the scale study's timings, episodes growing with the data and the fast paths' effects,
are ``scripts.studies.timings.scaling``).

Episodes are played by ``agents.evaluation.run_episode`` (the project's one loop), on
environments built from ``Settings``; ``measure`` is meant to run
in a fresh process (``in_fresh_process``) so that the peak memory they report is one data
set's own. They time every reset in full: the reset cache (``ballad_env.compute``) is off.
"""

from __future__ import annotations

import cProfile
import pstats
import resource
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from agents.evaluation import run_episode
from agents.experiments.bench.timing import (
    bench_dataset,
    random_play,
)
from agents.registry import make_agent
from ballad_env.compute import set_episode_threads, set_reset_cache_size
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings

EPISODE_TARGET_S = 5.0
MEMORY_TARGET_MB = 2048.0
#: Phases of an episode, as (label, module path suffixes, function name) for the profile
#: (:func:`phase_seconds`).
PHASES = (
    ("reset (whole)", ("ballad_env/env.py",), "reset"),
    ("reset: split and scale", ("ballad_env/protocol.py",), "split_and_scale"),
    ("reset: fit the prior", ("pyod/models/iforest.py", "pyod/models/knn.py"), "fit"),
    ("reset: kernel width eta", ("ballad_env/detectors/ssdo/kernel.py",), "kernel_width"),
    ("reset: prior scores of V and T", ("ballad_env/detectors/ssdo/model.py",),
     "prior_probability"),
    ("steps (whole)", ("ballad_env/env.py",), "step"),
    ("AL: kernel sums for new labels", ("ballad_env/detectors/ssdo/kernel.py",), "kernel_sums"),
    ("AL: kernel sums (fast path)", ("ballad_env/detectors/ssdo/kernel.py",), "sums"),
    ("threshold search", ("ballad_env/rejection/confidence.py",), "__call__"),
    ("rewards", ("ballad_env/rewards.py",), "rewards"),
    ("test evaluation (cost, ROC AUC)", ("ballad_env/cost.py",), "evaluate"),
    ("observation", ("ballad_env/observation.py",), "encode"),
)
TABLE_HEADER = (f"{'data set':<18} {'n':>6} {'d':>5} {'exact s':>8} {'reset s':>8} "
                f"{'steps/s':>8} {'bayes s':>8} {'peak MB':>8}")


class TimedSteps:
    """An environment whose reset and every step are timed, by action."""

    def __init__(self, env: BudgetAllocationEnv) -> None:
        self.unwrapped = env
        self.reset_seconds = 0.0
        self.step_seconds: dict[int, list[float]] = {0: [], 1: []}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        start = time.perf_counter()
        result = self.unwrapped.reset(seed=seed, options=options)
        self.reset_seconds = time.perf_counter() - start
        return result

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        start = time.perf_counter()
        result = self.unwrapped.step(action)
        self.step_seconds[action].append(time.perf_counter() - start)
        return result


def timed_episode(env: BudgetAllocationEnv, seed: int) -> tuple[float, float]:
    """(reset seconds, steps seconds) of one BALLAD episode played by ``run_episode``."""
    timed = TimedSteps(env)
    agent = make_agent("ballad", env)
    start = time.perf_counter()
    run_episode(timed, agent, seed)
    return timed.reset_seconds, time.perf_counter() - start - timed.reset_seconds


@contextmanager
def exact_env(name: str, data_dir: str | None, settings: Settings, threads: int
              ) -> Iterator[BudgetAllocationEnv]:
    """An environment of data set ``name`` with the exact threshold search, every reset
    timed in full (the reset cache off), after one warm-up reset (lazy imports are not an
    episode's cost), under ``threads`` BLAS/OpenMP threads while the block runs."""
    from threadpoolctl import threadpool_limits

    set_episode_threads(threads)
    set_reset_cache_size(0)
    with threadpool_limits(threads):
        env = BudgetAllocationEnv(bench_dataset(name, data_dir), data_dir=data_dir,
                                  settings=settings.replace(threshold_search="exact"))
        env.reset(seed=1)
        yield env


def measure(name: str, data_dir: str | None, settings: Settings, repeats: int,
            bayes_repeats: int, bayes_calls: int, threads: int) -> dict[str, Any]:
    """Episode timings and peak memory on one data set: the exact search (median of
    ``repeats`` seeds, after a warm-up episode) and the bayes search with ``bayes_calls``."""
    with exact_env(name, data_dir, settings, threads) as env:
        timed_episode(env, repeats)  # warm-up
        exact = [timed_episode(env, seed) for seed in range(repeats)]
        peak_exact = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        bayes_env = BudgetAllocationEnv(env.dataset, settings=settings.replace(
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
    with exact_env(name, data_dir, settings, threads) as env:
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        timed_episode(env, 0)
        profiler.disable()
        total = time.perf_counter() - start
    return _profile_text(pstats.Stats(profiler), name, total)


def phase_seconds(stats: pstats.Stats, phases: Sequence[tuple[str, str | tuple[str, ...], str]]
                  ) -> dict[str, float]:
    """Cumulative seconds of each (label, module path suffixes, function name) phase in a
    profile: the calls of that function in a module whose path ends so."""
    entries = stats.stats.items()  # type: ignore[attr-defined]
    return {label: sum(entry[3] for (path, _, func), entry in entries
                       if func == function and path.replace("\\", "/").endswith(suffixes))
            for label, suffixes, function in phases}


def _profile_text(stats: pstats.Stats, name: str, total: float) -> str:
    """Seconds per phase of ``PHASES``, then the functions with the most own time."""
    lines = [f"Profile of one exact episode on {name} ({total:.2f} s under the profiler)",
             f"  {'phase':<36} {'seconds':>8} {'share':>6}"]
    lines += [f"  {label:<36} {seconds:8.2f} {seconds / total:6.0%}"
              for label, seconds in phase_seconds(stats, PHASES).items() if seconds]
    lines.append("  functions with the most own time:")
    entries = stats.stats.items()  # type: ignore[attr-defined]
    for (path, line, func), entry in sorted(entries, key=lambda item: -item[1][2])[:8]:
        short = "/".join(path.replace("\\", "/").split("/")[-2:])
        lines.append(f"    {entry[2]:7.2f} s  {func} ({short}:{line}), {entry[1]} calls")
    return "\n".join(lines)


def timings_table(rows: Sequence[dict[str, Any]]) -> str:
    """The per data set rows of ``measure`` as a fixed-width text table."""
    lines = [TABLE_HEADER, "-" * len(TABLE_HEADER)]
    lines += [f"{r['dataset']:<18} {r['n']:>6} {r['d']:>5} {r['exact_s']:8.2f} "
              f"{r['reset_s']:8.2f} {r['steps_per_s']:8.1f} {r['bayes_s']:8.1f} "
              f"{r['peak_mb']:8.0f}" for r in rows]
    return "\n".join(lines)


def verdict(met: bool) -> str:
    """A target's verdict as every report of the benchmark words it."""
    return "met" if met else "missed"


# --------------------------------------------------------------------------- replay
#: Environment steps a second the replay environment must reach in one process.
REPLAY_TARGET_STEPS = 50_000


def measure_replay(names: Sequence[str], data_dir: str | None, settings: Settings,
                   seeds: int, replay_steps: int, live_episodes: int) -> dict[str, Any]:
    """Steps a second of the live and the replay environment on the same data sets, in one
    run: a store of ``names`` x ``seeds`` is built first (timed); the live environment
    plays ``live_episodes`` fresh-seed episodes, the replay environment ``replay_steps``
    steps (after as many to warm its transition tables), both through ``gymnasium.make``."""
    import gymnasium as gym

    import ballad_env
    from agents.experiments.lattice_build import build_store

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        cells = build_store(root, names, list(range(seeds)), [settings], data_dir=data_dir,
                            n_jobs=1, progress=False)
        build_s = time.perf_counter() - start
        replay = gym.make(ballad_env.REPLAY_ENV_ID, store=root, settings=settings)
        replay.reset(seed=0)
        random_play(replay, replay_steps, rng)  # warm-up: each transition's first visit
        replay_rate = replay_steps / random_play(replay, replay_steps, rng)
    live = gym.make(ballad_env.ENV_ID, dataset=list(names), data_dir=data_dir,
                    settings=settings)
    live.reset(seed=0)
    live_steps = live_episodes * settings.n_rounds
    live_rate = live_steps / random_play(live, live_steps, rng)
    return {"datasets": list(names), "cells": len(cells), "build_s": build_s,
            "kb_per_cell": float(np.median(cells["bytes"])) / 1e3,
            "replay_steps_per_s": replay_rate, "live_steps_per_s": live_rate,
            "ratio": replay_rate / live_rate}


def measure_replay_store(store: str, settings: Settings, steps: int) -> dict[str, Any]:
    """Steps a second of the replay environment on an existing store, in one fresh process:
    cold (the first ``steps`` steps: every cell loaded, every transition computed on first
    visit) then warm (``steps`` more), and the process's peak memory. Each rate also per
    second of the process's CPU time: on a shared machine it moves less than wall time."""
    import gymnasium as gym

    import ballad_env

    rng = np.random.default_rng(0)
    replay = gym.make(ballad_env.REPLAY_ENV_ID, store=store, settings=settings)
    replay.reset(seed=0)
    unwrapped: Any = replay.unwrapped  # the replay environment
    row: dict[str, Any] = {"store": store, "cells": len(unwrapped.cells),
                           "steps": steps}
    for phase in ("cold", "warm"):
        cpu = time.process_time()
        row[f"{phase}_steps_per_s"] = steps / random_play(replay, steps, rng)
        row[f"{phase}_cpu_steps_per_s"] = steps / (time.process_time() - cpu)
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def replay_store_report(row: dict[str, Any]) -> str:
    """``measure_replay_store``'s figures and the verdict against ``REPLAY_TARGET_STEPS``."""
    lines = [f"store {row['store']}: {row['cells']} cells"]
    for phase in ("cold", "warm"):
        rate = row[f"{phase}_steps_per_s"]
        lines.append(f"{phase}: {rate:10,.0f} steps/s over {row['steps']:,} steps "
                     f"({row[f'{phase}_cpu_steps_per_s']:,.0f} per CPU second; target "
                     f"{REPLAY_TARGET_STEPS:,}: {verdict(rate >= REPLAY_TARGET_STEPS)})")
    lines.append(f"peak memory: {row['peak_mb']:,.0f} MB")
    return "\n".join(lines)


def replay_store_summary(rows: Sequence[dict[str, Any]]) -> str:
    """Median and range of several ``measure_replay_store`` runs (each in a fresh process):
    on a shared machine single runs spread, so the median is the figure to quote."""
    lines = [f"{len(rows)} runs on {rows[0]['store']} ({rows[0]['cells']} cells, "
             f"{rows[0]['steps']:,} steps each): median (min-max)"]
    for key, label, unit in (("cold_steps_per_s", "cold", "steps/s"),
                             ("cold_cpu_steps_per_s", "cold (CPU)", "steps per CPU second"),
                             ("warm_steps_per_s", "warm", "steps/s"),
                             ("warm_cpu_steps_per_s", "warm (CPU)", "steps per CPU second"),
                             ("peak_mb", "peak memory", "MB")):
        values = [row[key] for row in rows]
        target = "" if unit != "steps/s" else (
            f"  (target {REPLAY_TARGET_STEPS:,}: "
            f"{verdict(np.median(values) >= REPLAY_TARGET_STEPS)})")
        lines.append(f"{label + ':':<13}{np.median(values):10,.0f} {unit} "
                     f"({min(values):,.0f}-{max(values):,.0f}){target}")
    return "\n".join(lines)


def replay_report(row: dict[str, Any]) -> str:
    """``measure_replay``'s figures and the verdict against ``REPLAY_TARGET_STEPS``."""
    met = verdict(row["replay_steps_per_s"] >= REPLAY_TARGET_STEPS)
    return (f"store: {row['cells']} cells ({', '.join(row['datasets'])}) built in "
            f"{row['build_s']:.1f} s, {row['kb_per_cell']:.0f} kB per cell\n"
            f"live environment:   {row['live_steps_per_s']:10,.0f} steps/s (fresh seeds, "
            "resets included)\n"
            f"replay environment: {row['replay_steps_per_s']:10,.0f} steps/s "
            f"({row['ratio']:,.0f}x the live one; target {REPLAY_TARGET_STEPS:,}: {met})")


__all__ = ["EPISODE_TARGET_S", "MEMORY_TARGET_MB", "PHASES", "REPLAY_TARGET_STEPS", "TimedSteps",
           "exact_env", "measure", "measure_replay", "measure_replay_store", "phase_seconds",
           "profile", "replay_report", "replay_store_report", "replay_store_summary",
           "timed_episode", "timings_table", "verdict"]
