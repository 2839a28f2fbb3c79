"""How fast the natively vectorised replay environment steps.

``measure_vector`` times, in one process and on one store, random valid actions (drawn in
numpy) through the single replay environment (``gymnasium.make`` and unwrapped),
gymnasium's ``SyncVectorEnv`` over N of them (``info`` but ``queried``: it cannot stack
the indices of rounds of different sizes), and ``ReplayVectorEnv`` at each N (with its
whole ``info`` and with none); each figure the median of ``repeats`` timed runs after a
warm-up run; ``ballad-env bench --vector`` prints them. What the vector environment changes
for SB3's PPO is a study's timing (``python -m scripts.studies.timings --ppo-paths N``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import ballad_env
from agents.experiments.bench.episodes import verdict
from agents.experiments.bench.timing import random_play
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.replay.vector import INFO_KEYS, ReplayVectorEnv
from ballad_env.settings import Settings

#: The info keys SyncVectorEnv gets: all but ``queried``, which it cannot stack when the
#: cells' rounds differ in size (data sets of different sizes).
SYNC_INFO_KEYS = tuple(key for key in INFO_KEYS if key != "queried")
#: Steps a second the vector environment must reach at N = 1,024 (``docs/REPLAY.md``).
VECTOR_TARGET_STEPS = 1_000_000
VECTOR_SIZES = (1, 64, 1024)


def play_vector(env: Any, n_steps: int, rng: np.random.Generator, masks: Any) -> float:
    """Seconds to take about ``n_steps`` environment steps (whole vector steps) of random
    valid actions in a vector environment; ``masks()`` gives its (N, 2) action masks."""
    from agents.experiments.training.vec_adapter import valid  # with SB3: the 'rl' extra

    n = env.num_envs
    coins = rng.integers(2, size=(64, n))
    start = time.perf_counter()
    for step in range(max(1, n_steps // n)):
        env.step(valid(coins[step % 64], masks()))
    return time.perf_counter() - start


def _timed(run: Any, steps: int, repeats: int) -> dict[str, float]:
    """Steps a second of ``run(steps)`` (seconds): a warm-up run, then the median and range
    of ``repeats`` runs."""
    run(steps)
    rates = [steps / run(steps) for _ in range(repeats)]
    return {"steps_per_s": float(np.median(rates)), "min": min(rates), "max": max(rates)}


def measure_vector(store: str | os.PathLike, settings: Settings,
                   sizes: Sequence[int] = VECTOR_SIZES, steps: int = 200_000,
                   repeats: int = 3, short_steps: int = 20_000) -> dict[str, Any]:
    """Steps a second of each way to step the replay environment, one process, one store:
    rows of (way, N, info, median, min, max, steps per run); with the machine's load
    average. The slow ways (``SyncVectorEnv``, the vector environment below N = 16) take
    ``short_steps`` a run, the others ``steps``. ``SyncVectorEnv``'s wrapper lives with the
    training code (the 'rl' extra), so it is imported here: the rest of ``ballad-env bench``
    runs on the core install and the experiments extra."""
    from ballad_env.wrappers import KeepInfo

    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    single = gym.make(ballad_env.REPLAY_ENV_ID, store=store, settings=settings)
    single.reset(seed=0)
    for way, env in (("single, gym.make", single), ("single, unwrapped", single.unwrapped)):
        rows.append({"way": way, "n": 1, "info": "all", "run_steps": steps,
                     **_timed(lambda s, env=env: random_play(env, s, rng), steps, repeats)})
    for n in sizes:
        sync = gym.vector.SyncVectorEnv([lambda: KeepInfo(BudgetAllocationReplayEnv(
            store, settings=settings), SYNC_INFO_KEYS)] * n)
        sync.reset(seed=0)
        masks = lambda sync=sync: np.stack([e.unwrapped.action_masks()  # noqa: E731
                                            for e in sync.envs])
        rows.append({"way": "SyncVectorEnv", "n": n, "info": "all", **_timed(
            lambda s, sync=sync, masks=masks: play_vector(sync, s, rng, masks),
            short_steps, repeats), "run_steps": short_steps})
        for info, keys in (("all", None), ("none", ())):
            native = ReplayVectorEnv(n, store, settings=settings, info_keys=keys)
            native.reset(seed=0)
            run_steps = steps if n >= 16 else short_steps
            rows.append({"way": "ReplayVectorEnv", "n": n, "info": info, **_timed(
                lambda s, native=native: play_vector(native, s, rng, native.action_masks),
                run_steps, repeats), "run_steps": run_steps})
    replay: Any = single.unwrapped  # the single replay environment
    return {"store": str(store), "cells": len(replay.cells), "repeats": repeats,
            "load": os.getloadavg(), "cpus": os.cpu_count(), "rows": rows}


def vector_report(result: dict[str, Any]) -> str:
    """``measure_vector``'s rows as a table, with the load and the verdict on the target."""
    load = ", ".join(f"{x:.1f}" for x in result["load"])
    lines = [f"store {result['store']}: {result['cells']} cells; random valid actions, "
             f"median of {result['repeats']} timed runs after a warm-up run; "
             f"{result['cpus']} CPUs, load average {load} (1, 5, 15 min)",
             f"{'way':<20} {'N':>5} {'info':>5} {'steps/s':>12} {'range':>23} "
             f"{'steps a run':>12}", "-" * 82]
    for row in result["rows"]:
        lines.append(f"{row['way']:<20} {row['n']:>5} {row['info']:>5} "
                     f"{row['steps_per_s']:>12,.0f} {row['min']:>11,.0f}-{row['max']:<11,.0f} "
                     f"{row['run_steps']:>12,}")
    largest = [r for r in result["rows"] if r["way"] == "ReplayVectorEnv"
               and r["n"] == max(x["n"] for x in result["rows"])]
    for row in largest:
        lines.append(f"ReplayVectorEnv at N = {row['n']:,}, info {row['info']}: "
                     f"{row['steps_per_s']:,.0f} steps/s (target {VECTOR_TARGET_STEPS:,}: "
                     f"{verdict(row['steps_per_s'] >= VECTOR_TARGET_STEPS)})")
    return "\n".join(lines)


__all__ = ["VECTOR_SIZES", "VECTOR_TARGET_STEPS", "measure_vector", "play_vector",
           "vector_report"]
