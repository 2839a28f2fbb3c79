"""The environments a training run steps: one monitored environment per worker, drawing its
data set per episode from a list (and its seed from a pool), or the vector replay
environment, wrapped by :mod:`ballad_env.wrappers` (a valid-action fallback, a slim
``info``, a seed pool). :mod:`agents.experiments.training.sb3` runs them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

try:
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
except ModuleNotFoundError as err:  # torch & co. come with the 'rl' extra
    from agents.extras import missing_extra

    raise missing_extra(err, "policy training") from err

from agents.experiments.training.config import TrainConfig
from agents.experiments.training.vec_adapter import make_replay_vec_env
from ballad_env.env import BudgetAllocationEnv
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.wrappers import MONITOR_KEYWORDS, KeepInfo, SeedPool, ValidActionWrapper


def build_env(config: TrainConfig, monitor_file: str | None = None) -> gym.Env:
    """One monitored training environment of ``config``, drawing its data set per episode
    from ``config.datasets`` (and its seed from ``TrainConfig.episode_seed_range``, ``SeedPool``);
    with a replay store, the replay environment drawing among the store's cells of them."""
    env: gym.Env
    seeds = config.episode_seed_range
    if config.replay_store is not None:
        env = BudgetAllocationReplayEnv(config.replay_store, datasets=list(config.datasets),
                                        seeds=seeds, settings=config.settings,
                                        observation=config.observation)
    else:
        env = BudgetAllocationEnv(list(config.datasets), data_dir=config.data_dir,
                                  settings=config.settings, observation=config.observation)
        if seeds is not None:
            env = SeedPool(env, config.episode_seeds)
    return Monitor(KeepInfo(ValidActionWrapper(env)), filename=monitor_file,
                   info_keywords=MONITOR_KEYWORDS)


def make_vec_env(config: TrainConfig, monitor_dir: Path | None,
                 n_envs: int | None = None) -> VecEnv:
    """``n_envs`` workers (subprocesses, in-process, or one vector replay environment), worker
    i monitored to ``<monitor_dir>/<i>``; SB3 seeds worker i with seed + i."""
    n = config.n_envs if n_envs is None else n_envs
    if monitor_dir is not None:
        monitor_dir.mkdir(parents=True, exist_ok=True)
    if config.vec_env == "vector" and config.replay_store is not None:
        return make_replay_vec_env(
            n, config.replay_store, datasets=list(config.datasets),
            seeds=config.episode_seed_range, settings=config.settings,
            observation=config.observation,
            monitor_file=None if monitor_dir is None else str(monitor_dir / "vector"))
    files = [None if monitor_dir is None else str(monitor_dir / str(rank)) for rank in range(n)]
    # picklable constructors, one per worker (SubprocVecEnv sends them to its processes)
    fns: list[Callable[[], gym.Env]] = [functools.partial(build_env, config, f) for f in files]
    if config.vec_env == "subproc" and n > 1:
        return SubprocVecEnv(fns)
    return DummyVecEnv(fns)


__all__ = ["build_env", "make_vec_env"]
