"""The environments a training run steps: one monitored environment per worker, drawing its
data set per episode from a list (and its seed from a pool), or the vector replay
environment, wrapped by :mod:`ballad_env.wrappers` (a valid-action fallback, a slim
``info``, a seed pool). :mod:`agents.experiments.training.sb3` runs them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
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
from ballad_env.settings import Settings
from ballad_env.wrappers import MONITOR_KEYWORDS, KeepInfo, SeedPool, ValidActionWrapper


def build_env(datasets: Sequence[str], data_dir: str | None, settings: Settings,
              monitor_file: str | None = None, episode_seeds: int = 0,
              replay_store: str | None = None, observation: str = "v0") -> gym.Env:
    """One monitored training environment drawing its data set per episode from ``datasets``
    (and its seed from ``episode_seeds`` seeds when that is positive, ``SeedPool``); with
    ``replay_store``, the replay environment drawing among the store's cells of them."""
    env: gym.Env
    if replay_store is not None:
        seeds = range(episode_seeds) if episode_seeds > 0 else None
        env = BudgetAllocationReplayEnv(replay_store, datasets=list(datasets), seeds=seeds,
                                        settings=settings, observation=observation)
    else:
        env = BudgetAllocationEnv(list(datasets), data_dir=data_dir, settings=settings,
                                  observation=observation)
        if episode_seeds > 0:
            env = SeedPool(env, episode_seeds)
    return Monitor(KeepInfo(ValidActionWrapper(env)), filename=monitor_file,
                   info_keywords=MONITOR_KEYWORDS)


def env_factory(config: TrainConfig, rank: int, monitor_dir: Path | None
                ) -> Callable[[], gym.Env]:
    """A picklable constructor of worker ``rank``'s environment (for SubprocVecEnv)."""
    monitor_file = str(monitor_dir / str(rank)) if monitor_dir is not None else None
    return functools.partial(build_env, config.datasets, config.data_dir, config.settings,
                             monitor_file, config.episode_seeds, config.replay_store,
                             config.observation)


def make_vec_env(config: TrainConfig, monitor_dir: Path | None,
                 n_envs: int | None = None) -> VecEnv:
    """``n_envs`` workers (subprocesses, in-process, or one vector replay environment); SB3
    seeds worker i with seed + i."""
    n = config.n_envs if n_envs is None else n_envs
    if monitor_dir is not None:
        monitor_dir.mkdir(parents=True, exist_ok=True)
    if config.vec_env == "vector" and config.replay_store is not None:
        seeds = range(config.episode_seeds) if config.episode_seeds > 0 else None
        return make_replay_vec_env(
            n, config.replay_store, datasets=list(config.datasets), seeds=seeds,
            settings=config.settings, observation=config.observation,
            monitor_file=None if monitor_dir is None else str(monitor_dir / "vector"))
    fns = [env_factory(config, rank, monitor_dir) for rank in range(n)]
    if config.vec_env == "subproc" and n > 1:
        return SubprocVecEnv(fns)
    return DummyVecEnv(fns)


__all__ = ["build_env", "env_factory", "make_vec_env"]
