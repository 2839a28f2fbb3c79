"""The batched trainers' rollouts: the vector replay environment they step and one rollout of
N environments into the (T, N) tensors, the policy's forward pass given as a function (SB3's
``MlpPolicy`` in this process, the flat weights in a rollout worker's,
:mod:`agents.experiments.training.pipelined`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import ballad_env
from agents.experiments.training.vec_adapter import valid
from agents.ppo.core import Rollout
from ballad_env.settings import Settings

if TYPE_CHECKING:
    from agents.experiments.training.config import TrainConfig

#: A policy's forward pass: (observations, masks or None) -> (logits, values).
Forward = Callable[[torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]]
#: The ``info`` key the trainer reads (each episode's final test cost, for the curves).
INFO_KEYS = ("test_cost",)
#: The episodes that ended in a rollout: (returns, final test costs), one pair per vector
#: step in which some ended.
Ended = list[tuple[np.ndarray, np.ndarray]]
#: What a loop calls after each update: ``record(steps so far, the rollout's ended
#: episodes, the update's statistics)`` (``recorder.Recorder``).
Record = Callable[[int, Ended, dict[str, float]], None]


def make_envs(store: str | Path, n_envs: int, settings: Settings, datasets: Sequence[str] | None,
              seeds: Sequence[int] | None, observation: str) -> Any:
    """``n_envs`` replay episodes stepped together (``ReplayVectorEnv``, same-step autoreset,
    only the final test cost in ``info``)."""
    return gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=n_envs,
                        vectorization_mode="vector_entry_point", store=str(store),
                        datasets=None if datasets is None else list(datasets),
                        seeds=None if seeds is None else list(seeds), settings=settings,
                        observation=observation, autoreset_mode=AutoresetMode.SAME_STEP,
                        info_keys=INFO_KEYS)


def envs_arguments(config: TrainConfig, n_envs: int) -> tuple[Any, ...]:
    """:func:`make_envs`' arguments for ``n_envs`` of the config's replay episodes."""
    return (config.replay_store, n_envs, config.settings, config.datasets,
            config.episode_seed_range, config.observation)


def collect(envs: Any, forward: Forward, obs: np.ndarray, buf: Rollout, masked: bool,
            gen: torch.Generator, returns: np.ndarray, timer: dict[str, float]
            ) -> tuple[np.ndarray, Ended]:
    """One rollout of ``buf.n_steps`` vector steps into ``buf``, the policy's logits and
    values from ``forward(obs, masks or None)``; the next observations and the (returns,
    final test costs) of the episodes that ended. The replay environment ends an episode
    only by spending its budget (terminated, never truncated), so nothing past an episode's
    end is bootstrapped; an environment that truncates is refused."""
    ended: Ended = []
    device = buf.obs.device
    for t in range(buf.n_steps):
        tick = time.perf_counter()
        masks = envs.unwrapped.action_masks()
        obs_t = torch.as_tensor(obs, device=device)
        mask_t = torch.as_tensor(masks, device=device)
        with torch.inference_mode():
            logits, values = forward(obs_t, mask_t if masked else None)
            p_lr = torch.softmax(logits, dim=1)[:, 1]
            actions = (torch.rand(p_lr.shape, generator=gen, device=device) < p_lr).long()
            logp = torch.log_softmax(logits, dim=1).gather(1, actions[:, None])[:, 0]
        chosen = actions.cpu().numpy()
        if not masked:  # the environment plays the other action where this one is spent
            chosen = valid(chosen, masks)
        tock = time.perf_counter()
        obs_next, rewards, terminated, truncated, info = envs.step(chosen)
        timer["env"] += time.perf_counter() - tock
        if truncated.any():
            raise ValueError("the environment truncated an episode: the torch trainers "
                             "bootstrap none (the replay environment never truncates)")
        rewards = rewards.astype(np.float32)
        dones = terminated
        returns += rewards
        if dones.any():
            done = np.flatnonzero(dones)
            ended.append((returns[done].copy(), info["final_info"]["test_cost"][done]))
            returns[done] = 0.0
        buf.write(t, obs_t, mask_t, actions, logp, values, rewards, dones)
        obs = obs_next
        timer["rollout"] += time.perf_counter() - tick
    return obs, ended


__all__ = ["INFO_KEYS", "Ended", "Forward", "Record", "collect", "envs_arguments", "make_envs"]
