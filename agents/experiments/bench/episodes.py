"""Timing of BALLAD episodes: per data set wall times and peak memory, a profile by phase,
the wall time of the Q1 grid, the growth of an episode with the data's size (``scaling``),
and what the fast paths for large data sets do to the costs (``fast_path_effects``);
``ballad-env bench`` is its command line.

Episodes are played by ``agents.evaluation.run_episode`` (the project's one loop), on
environments built from ``Settings``; ``measure`` and ``measure_scaling`` are meant to run
in a fresh process (``in_fresh_process``) so that the peak memory they report is one data
set's own. They time every reset in full: the reset cache (``ballad_env.compute``) is off.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.evaluation import run_episode
from agents.experiments.bench.timing import (
    bench_dataset,
    random_play,
    synthetic_dataset,
)
from agents.experiments.grid import PAPER_AGENTS, Grid, seed_range
from agents.experiments.run import run_grid
from agents.registry import make_agent
from ballad_env.compute import set_episode_threads, set_reset_cache_size
from ballad_env.data import Dataset
from ballad_env.detectors.ssdo.model import PointScores
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


class _TimedSteps:
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
    timed = _TimedSteps(env)
    agent = make_agent("ballad", env)
    start = time.perf_counter()
    run_episode(timed, agent, seed)
    return timed.reset_seconds, time.perf_counter() - start - timed.reset_seconds


def measure(name: str, data_dir: str | None, settings: Settings, repeats: int,
            bayes_repeats: int, bayes_calls: int, threads: int) -> dict[str, Any]:
    """Episode timings and peak memory on one data set: the exact search (median of
    ``repeats`` seeds, after a warm-up) and the bayes search with ``bayes_calls``."""
    from threadpoolctl import threadpool_limits

    set_episode_threads(threads)
    set_reset_cache_size(0)
    with threadpool_limits(threads):
        env = BudgetAllocationEnv(bench_dataset(name, data_dir), data_dir=data_dir,
                                  settings=settings.replace(threshold_search="exact"))
        timed_episode(env, repeats)  # warm-up: lazy imports are not an episode's cost
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
    from threadpoolctl import threadpool_limits

    set_episode_threads(threads)
    set_reset_cache_size(0)
    with threadpool_limits(threads):
        env = BudgetAllocationEnv(bench_dataset(name, data_dir), data_dir=data_dir,
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
    grid = Grid(tuple(names), seed_range(seeds), PAPER_AGENTS,
                (settings.replace(threshold_search="exact"),))
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run_grid(grid, folder, data_dir=data_dir, n_jobs=n_jobs, progress=True)
        return time.perf_counter() - start


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
        verdict = "met" if rate >= REPLAY_TARGET_STEPS else "missed"
        lines.append(f"{phase}: {rate:10,.0f} steps/s over {row['steps']:,} steps "
                     f"({row[f'{phase}_cpu_steps_per_s']:,.0f} per CPU second; target "
                     f"{REPLAY_TARGET_STEPS:,}: {verdict})")
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
        verdict = ""
        if unit == "steps/s":
            met = "met" if np.median(values) >= REPLAY_TARGET_STEPS else "missed"
            verdict = f"  (target {REPLAY_TARGET_STEPS:,}: {met})"
        lines.append(f"{label + ':':<13}{np.median(values):10,.0f} {unit} "
                     f"({min(values):,.0f}-{max(values):,.0f}){verdict}")
    return "\n".join(lines)


def replay_report(row: dict[str, Any]) -> str:
    """``measure_replay``'s figures and the verdict against ``REPLAY_TARGET_STEPS``."""
    verdict = "met" if row["replay_steps_per_s"] >= REPLAY_TARGET_STEPS else "missed"
    return (f"store: {row['cells']} cells ({', '.join(row['datasets'])}) built in "
            f"{row['build_s']:.1f} s, {row['kb_per_cell']:.0f} kB per cell\n"
            f"live environment:   {row['live_steps_per_s']:10,.0f} steps/s (fresh seeds, "
            "resets included)\n"
            f"replay environment: {row['replay_steps_per_s']:10,.0f} steps/s "
            f"({row['ratio']:,.0f}x the live one; target {REPLAY_TARGET_STEPS:,}: {verdict})")


# --------------------------------------------------------------------------- scaling
#: The scaling mode's default sizes (rows) and dimensions, and its targets (2 cores).
SCALING_SIZES = (50_000, 100_000, 200_000, 500_000)
SCALING_DIMS = (10, 100)
SCALING_TARGETS_S = {200_000: 10.0, 500_000: 120.0}
SCALING_MEMORY_MB = 4096.0
SCALING_HEADER = (f"{'agent':<10} {'n':>7} {'d':>4} {'reset s':>8} {'AL step':>8} "
                  f"{'LR step':>8} {'episode':>8} {'peak MB':>8}  paths")


def measure_scaling(n: int, d: int, agent: str, settings: Settings, threads: int,
                    seed: int = 0) -> dict[str, Any]:
    """One episode of ``agent`` on ``synthetic_dataset(n, d)``: the reset, the median AL and
    LR step, the whole episode and the process's peak memory (after a small warm-up
    episode, so lazy imports are not counted)."""
    set_episode_threads(threads)
    set_reset_cache_size(0)
    warm = BudgetAllocationEnv(synthetic_dataset(500, d), settings=settings)
    run_episode(warm, make_agent(agent, warm), seed)
    env = BudgetAllocationEnv(synthetic_dataset(n, d), settings=settings)
    timed = _TimedSteps(env)
    start = time.perf_counter()
    run_episode(timed, make_agent(agent, env), seed)
    episode_s = time.perf_counter() - start
    al, lr = timed.step_seconds[0], timed.step_seconds[1]
    assert env.episode is not None
    return {"agent": agent, "n": n, "d": d, "reset_s": timed.reset_seconds,
            "al_step_s": statistics.median(al) if al else float("nan"),
            "lr_step_s": statistics.median(lr) if lr else float("nan"), "episode_s": episode_s,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "eta_sample": env.episode.eta_sample, "kernel_dtype": env.episode.kernel_dtype,
            "threads": threads}


def _paths(row: dict[str, Any]) -> str:
    """The paths a scaling row ran: "exact", or its eta sample and kernel precision."""
    if row["eta_sample"] == 0 and row["kernel_dtype"] == "float64":
        return "exact"
    return f"eta from {row['eta_sample'] or 'all'}, {row['kernel_dtype']} kernel"


def growth_exponent(sizes: Sequence[float], seconds: Sequence[float]) -> float:
    """The slope of log(seconds) against log(size): t ~ n^slope (NaN with fewer than 2)."""
    if len(sizes) < 2:
        return float("nan")
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def scaling_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows of ``measure_scaling`` as a fixed-width table, then the growth exponent of the
    episode time per (agent, d), and each row against the targets that apply to it."""
    lines = [SCALING_HEADER, "-" * len(SCALING_HEADER)]
    for r in rows:
        lines.append(f"{r['agent']:<10} {r['n']:>7} {r['d']:>4} {r['reset_s']:8.2f} "
                     f"{r['al_step_s']:8.2f} {r['lr_step_s']:8.2f} {r['episode_s']:8.1f} "
                     f"{r['peak_mb']:8.0f}  {_paths(r)}")
    lines.append("")
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in rows:  # a growth exponent per path: the exact and fast ones grow differently
        groups.setdefault((r["agent"], r["d"], _paths(r)), []).append(r)
    for (agent, d, paths), group in groups.items():
        sizes = [r["n"] for r in group]
        if len(sizes) > 1:
            exponent = growth_exponent(sizes, [r["episode_s"] for r in group])
            lines.append(f"{agent}, d = {d}, {paths}: episode time grows as n^{exponent:.2f} "
                         f"over {', '.join(f'{n:,}' for n in sizes)} rows")
    for r in rows:
        target = SCALING_TARGETS_S.get(r["n"])
        if target is not None:
            met = r["episode_s"] <= target and r["peak_mb"] <= SCALING_MEMORY_MB
            lines.append(f"{r['agent']}, n = {r['n']:,}, d = {r['d']}: {r['episode_s']:.1f} s, "
                         f"{r['peak_mb']:.0f} MB (target {target:.0f} s, "
                         f"{SCALING_MEMORY_MB:.0f} MB: {'met' if met else 'missed'})")
    return "\n".join(lines)


# --------------------------------------------------------------------------- fast paths
#: The settings compared by ``fast_path_effects``: every exact and fast combination.
FAST_PATHS = {"exact": {"eta_sample": 0, "kernel_dtype": "float64"},
              "eta sample": {"eta_sample": 2000, "kernel_dtype": "float64"},
              "float32": {"eta_sample": 0, "kernel_dtype": "float32"},
              "both": {"eta_sample": 2000, "kernel_dtype": "float32"}}


def fast_path_effects(dataset: Dataset | str, data_dir: str | None, settings: Settings,
                      seeds: Sequence[int], agents: Sequence[str]) -> list[dict[str, Any]]:
    """Each fast path against the exact one on one data set: per (path, agent, seed) the
    relative error of eta, the mean and largest |test cost difference| over the rounds, the
    mean cost difference and whether the actions were the same."""
    set_reset_cache_size(0)
    rows = []
    for seed in seeds:
        for agent in agents:
            played = {}
            for path, options in FAST_PATHS.items():
                env = BudgetAllocationEnv(dataset, data_dir=data_dir,
                                          settings=settings.replace(**options))
                records = run_episode(env, make_agent(agent, env), seed)
                assert env.episode is not None
                scores = env.episode.scores
                assert isinstance(scores, PointScores)  # SSDO's kernel paths
                played[path] = (records, scores.detector.eta_)
            exact, exact_eta = played["exact"]
            exact_costs = np.array([r["test_cost"] for r in exact])
            for path, (records, eta) in played.items():
                costs = np.array([r["test_cost"] for r in records])
                rows.append({
                    "dataset": env.dataset.name, "n": env.dataset.n_samples,
                    "d": env.dataset.n_features, "path": path, "agent": agent, "seed": seed,
                    "eta_error": abs(eta / exact_eta - 1.0),
                    "mean_abs_cost_diff": float(np.mean(np.abs(costs - exact_costs))),
                    "max_abs_cost_diff": float(np.max(np.abs(costs - exact_costs))),
                    "mean_cost_diff": float(np.mean(costs - exact_costs)),
                    "mean_cost": float(np.mean(costs)),
                    "same_actions": [r["action"] for r in records] == [r["action"]
                                                                        for r in exact]})
    return rows


def effects_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per data set and fast path (over agents and seeds): the largest eta error, the mean
    and largest |cost difference| per round, the mean cost difference and the share of
    episodes with the exact path's actions."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    table = frame[frame.path != "exact"].groupby(["dataset", "n", "d", "path"], sort=False).agg(
        eta_error=("eta_error", "max"), mean_abs_cost_diff=("mean_abs_cost_diff", "mean"),
        max_abs_cost_diff=("max_abs_cost_diff", "max"), mean_cost_diff=("mean_cost_diff", "mean"),
        mean_cost=("mean_cost", "mean"), same_actions=("same_actions", "mean")).reset_index()
    header = (f"{'data set':<22} {'n':>7} {'d':>4} {'path':<10} {'eta err':>8} "
              f"{'|dcost|':>9} {'max':>9} {'dcost':>10} {'cost':>7} {'same':>5}")
    lines = [header, "-" * len(header)]
    lines += [f"{r.dataset:<22} {r.n:>7} {r.d:>4} {r.path:<10} {r.eta_error:8.2%} "
              f"{r.mean_abs_cost_diff:9.2e} {r.max_abs_cost_diff:9.2e} {r.mean_cost_diff:+10.2e} "
              f"{r.mean_cost:7.4f} {r.same_actions:5.0%}"
              for r in table.itertuples()]
    return "\n".join(lines)


__all__ = ["EPISODE_TARGET_S", "FAST_PATHS", "MEMORY_TARGET_MB", "PHASES", "Q1_TARGET_S",
           "REPLAY_TARGET_STEPS", "measure_replay", "measure_replay_store",
           "replay_report", "replay_store_report", "replay_store_summary",
           "SCALING_DIMS", "SCALING_MEMORY_MB", "SCALING_SIZES", "SCALING_TARGETS_S",

           "effects_table", "fast_path_effects", "growth_exponent",
           "measure", "measure_scaling", "profile", "scaling_table",
           "time_q1", "timed_episode", "timings_table"]
