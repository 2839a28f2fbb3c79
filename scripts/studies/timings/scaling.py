"""The scale study's episode timings: an episode's growth with the data's size on
synthetic data (``measure_scaling``, the exponent of the growth), what the fast paths for
large data sets do to the costs (``fast_path_effects``) and the wall time of the paper's
Q1 grid through the harness (``time_q1``). Each ``measure_scaling`` runs in a fresh
process (``in_fresh_process``), so the peak memory it reports is its own; the reset cache
is off, so every reset is timed in full.
"""

from __future__ import annotations

import os
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.evaluation import run_episode
from agents.experiments.bench.episodes import TimedSteps
from agents.experiments.bench.timing import synthetic_dataset
from agents.experiments.grid import PAPER_AGENTS, Grid, seed_range
from agents.experiments.run import run_grid
from agents.registry import make_agent
from ballad_env.compute import set_episode_threads, set_reset_cache_size
from ballad_env.data import Dataset
from ballad_env.detectors.ssdo.model import PointScores
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings

#: The Q1 grid's wall-time target on two cores.
Q1_TARGET_S = 300.0


def time_q1(names: Sequence[str], seeds: int, settings: Settings,
            data_dir: str | os.PathLike | None, n_jobs: int) -> float:
    """Wall time of the Q1 grid (BALLAD, All-in-AL, All-in-LR; exact search) via the harness."""
    grid = Grid(tuple(names), seed_range(seeds), PAPER_AGENTS,
                (settings.replace(threshold_search="exact"),))
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run_grid(grid, folder, data_dir=data_dir, n_jobs=n_jobs, progress=True)
        return time.perf_counter() - start


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
    timed = TimedSteps(env)
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


__all__ = ["FAST_PATHS", "Q1_TARGET_S", "SCALING_DIMS", "SCALING_MEMORY_MB", "SCALING_SIZES",
           "SCALING_TARGETS_S", "effects_table", "fast_path_effects", "growth_exponent",
           "measure_scaling", "scaling_table", "time_q1"]
