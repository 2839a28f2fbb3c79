"""SB3's PPO timed on the replay environment, with where its time went (cProfile): today's
path (``DummyVecEnv`` over monitored single replay environments) against the vector
replay environment, at the policy study's sizes."""

from __future__ import annotations

import cProfile
import os
import pstats
import time
from collections.abc import Sequence
from typing import Any

from ballad_env.settings import Settings

#: The PPO functions whose cumulative seconds say where a run's time went (cProfile).
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


def ppo_report(rows: Sequence[dict[str, Any]]) -> str:
    """``time_ppo``'s rows side by side, with where the time went."""
    lines = [f"{'path':<8} {'envs':>5} {'n_steps':>7} {'steps':>9} {'seconds':>8} "
             f"{'steps/s':>8}  rollouts  env steps  updates  load(1 min)", "-" * 86]
    for r in rows:
        parts = r.get("parts", {})
        cells = "  ".join(f"{parts.get(label, float('nan')):8.1f}" for label in PPO_PARTS)
        lines.append(f"{r['path']:<8} {r['n_envs']:>5} {r['n_steps']:>7} {r['steps']:>9,} "
                     f"{r['seconds']:>8.1f} {r['steps_per_s']:>8,.0f}  {cells}  "
                     f"{r['load'][0]:.1f}")
    return "\n".join(lines)


__all__ = ["PPO_PARTS", "ppo_report", "time_ppo"]
