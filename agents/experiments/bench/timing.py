"""What the benchmark studies share (``studies.bench``, ``studies.bench_full``,
``studies.vector_bench``, ``studies.training_bench``): data sets made to size, a function
run in a fresh process (so its peak memory is its own), random play timed, and SB3 PPO
timed on the replay environment with where its time went (cProfile)."""

from __future__ import annotations

import cProfile
import multiprocessing
import os
import pstats
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from ballad_env.data import Dataset, validate_xy
from ballad_env.settings import Settings

#: The name of a data set made to size: ``synthetic:<rows>x<features>``.
SYNTHETIC_PREFIX = "synthetic:"


def random_play(env: Any, n_steps: int, rng: np.random.Generator) -> float:
    """Seconds to take ``n_steps`` steps (whole episodes, resets included) of random valid
    actions in ``env`` (a coin per step; the other action when the pool is exhausted)."""
    coins = rng.integers(2, size=n_steps + 64).tolist()
    masks = env.unwrapped.action_masks
    start = time.perf_counter()
    taken = 0
    while taken < n_steps:
        env.reset()
        done = False
        while not done:
            action = coins[taken % len(coins)]
            if not masks()[action]:
                action = 1 - action
            done = env.step(action)[2]
            taken += 1
    return time.perf_counter() - start


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a new process (so its peak memory is its own)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


def synthetic_dataset(n: int, d: int, contamination: float = 0.05, seed: int = 0) -> Dataset:
    """n rows in d dimensions with a known contamination: standard normal normals, and
    anomalies shifted by 3 / sqrt(d) per feature (3 standard deviations away in all)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.zeros(n, dtype=np.int8)
    y[:max(1, round(contamination * n))] = 1
    signs = rng.choice([-1.0, 1.0], size=(int(y.sum()), d))
    X[y == 1] += 3.0 / np.sqrt(d) * signs
    return Dataset(f"{SYNTHETIC_PREFIX}{n}x{d}", *validate_xy(X, y, "synthetic"))


def bench_dataset(name: str, data_dir: str | None) -> Dataset | str:
    """A data set by name: ``synthetic:<n>x<d>`` makes one (``synthetic_dataset``); any other
    name is left to the environment's loader."""
    if not name.startswith(SYNTHETIC_PREFIX):
        return name
    try:
        n, d = (int(part) for part in name[len(SYNTHETIC_PREFIX):].split("x"))
    except ValueError:
        raise ValueError(f"{name!r}: write a synthetic data set as synthetic:<rows>x<features>, "
                         "e.g. synthetic:200000x10") from None
    return synthetic_dataset(n, d)


PPO_PARTS = {"rollouts (policy and environment)": "collect_rollouts",
             "environment steps": "step_wait", "updates": "train"}


def time_ppo(store: str | os.PathLike, datasets: Sequence[str], path: str,
             total_timesteps: int, n_envs: int = 16, n_steps: int = 64, seed: int = 0,
             profile: bool = True, settings: Settings | None = None, *, batch_size: int,
             n_epochs: int, learning_rate: float) -> dict[str, Any]:
    """Seconds of PPO at the policy study's sizes (``batch_size``, ``n_epochs``,
    ``learning_rate``: the command line gives ``policy_scale.ScalePlan``'s) on ``path``:
    ``"dummy"`` (today's: ``DummyVecEnv`` over monitored single replay environments) or
    ``"vector"`` (``make_replay_vec_env``), and the seconds of ``PPO_PARTS`` (cProfile)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.envs import make_vec_env
    from agents.experiments.training.record import algorithm_kwargs
    from agents.experiments.training.vec_adapter import make_replay_vec_env

    config = TrainConfig(algo="ppo", datasets=tuple(datasets),
                         settings=settings or Settings(reward="cost"), n_envs=n_envs,
                         vec_env="dummy",
                         hyperparameters={"n_steps": n_steps, "batch_size": batch_size,
                                          "n_epochs": n_epochs, "learning_rate": learning_rate},
                         replay_store=str(store), total_timesteps=total_timesteps, seed=seed)
    torch.set_num_threads(config.torch_threads)
    if path == "dummy":
        env = make_vec_env(config, monitor_dir=None)
    elif path == "vector":
        env = make_replay_vec_env(n_envs, store, datasets=list(datasets),
                                  settings=config.settings)
    else:
        raise ValueError(f"unknown path {path!r}: use 'dummy' or 'vector'")
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", **algorithm_kwargs(config))
    model.set_logger(Logger(folder=None, output_formats=[]))  # no log folder left in /tmp
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    model.learn(total_timesteps=total_timesteps)
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - start
    row = {"path": path, "n_envs": n_envs, "n_steps": n_steps, "steps": model.num_timesteps,
           "seconds": seconds, "steps_per_s": model.num_timesteps / seconds,
           "load": os.getloadavg()}
    if profiler is not None:
        row["parts"] = _parts(pstats.Stats(profiler))
    return row


def _parts(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds of each ``PPO_PARTS`` function (the outermost call of that name)."""
    entries = stats.stats  # type: ignore[attr-defined]
    parts = {}
    for label, name in PPO_PARTS.items():
        times = [entry[3] for (path, _, func), entry in entries.items() if func == name
                 and ("stable_baselines3" in path or "vec_env" in path or "vec_adapter" in path)]
        parts[label] = max(times, default=0.0)
    return parts


__all__ = ["PPO_PARTS", "SYNTHETIC_PREFIX", "bench_dataset", "in_fresh_process", "random_play",
           "synthetic_dataset", "time_ppo"]
