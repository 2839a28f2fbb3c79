"""stable-baselines3 on the natively vectorised replay environment (``ReplayVectorEnv``).

``ReplaySB3VecEnv`` is an SB3 ``VecEnv`` over one ``ReplayVectorEnv`` in same-step
autoreset mode, so PPO, A2C, DQN and sb3-contrib's MaskablePPO (masks through
``env_method("action_masks")``, which MaskablePPO calls on a ``VecEnv``) train on N replay
episodes stepped together in numpy instead of N single environments in a ``DummyVecEnv``.
``make_replay_vec_env`` builds one, with the training run's conventions (those of
``ballad_env.wrappers``): the invalid action replaced by the other (``ValidActionWrapper``),
and only the ``info`` keys training reads (``MONITOR_KEYWORDS``), handed out when an
episode ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

import ballad_env
from ballad_env.replay.vector import ReplayVectorEnv

#: ``info`` keys handed to SB3 when an episode ends (``ballad_env.wrappers.MONITOR_KEYWORDS``).
DONE_INFO_KEYS = ("test_cost", "dataset")


class ReplaySB3VecEnv(VecEnv):
    """SB3's ``VecEnv`` interface over a ``ReplayVectorEnv`` (same-step autoreset).

    Each step returns the observations (the next episode's first where one ended), rewards
    (float32, as ``DummyVecEnv``), dones and one ``info`` dict per environment: empty while
    an episode runs; at its end ``terminal_observation``, ``TimeLimit.truncated`` and the
    vector environment's ``info`` keys of the last step (``env.info_keys``), as
    ``DummyVecEnv`` hands out a monitored environment's. ``valid_actions=True`` replaces
    an action whose label pool is exhausted by the other one, as
    ``ballad_env.wrappers.ValidActionWrapper`` does for algorithms without masks.
    """

    def __init__(self, env: ReplayVectorEnv, valid_actions: bool = True) -> None:
        if not isinstance(env, ReplayVectorEnv):
            raise TypeError(f"ReplaySB3VecEnv wraps a ReplayVectorEnv, got {type(env).__name__}")
        if env.autoreset_mode is not AutoresetMode.SAME_STEP:
            raise ValueError(f"stable-baselines3 needs same-step autoreset; the environment has "
                             f"{env.autoreset_mode}: make it with "
                             "autoreset_mode=AutoresetMode.SAME_STEP (make_replay_vec_env does)")
        self.env = env
        self.valid_actions = valid_actions
        self._actions = np.zeros(env.num_envs, dtype=np.intp)
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    def reset(self) -> np.ndarray:
        """Reset every environment, with the seeds and options given since the last reset
        (``seed``, ``set_options``; options must be the same for every environment)."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = [o for o in self._options if o]
        if options and any(o != options[0] for o in self._options):
            raise ValueError("ReplaySB3VecEnv resets every environment with the same options; "
                             "got different ones per environment")
        obs, info = self.env.reset(seed=seeds, options=options[0] if options else None)
        self.reset_infos = _rows(info, np.arange(self.num_envs))
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        actions = self._actions
        if self.valid_actions:
            actions = valid(actions.astype(np.intp), self.env.action_masks())
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(dones)
        if ended.size:
            for e, row in zip(ended.tolist(), _rows(info["final_info"], ended), strict=True):
                row["terminal_observation"] = info["final_obs"][e]
                row["TimeLimit.truncated"] = bool(truncated[e] and not terminated[e])
                infos[e] = row
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """``action_masks`` (each environment's), or an attribute every environment shares
        (settings, spaces, feature names: the single replay environment's)."""
        envs = self._indices(indices)
        if attr_name == "action_masks":
            return [lambda e=e: self.env.action_masks()[e] for e in envs]
        return [getattr(self.env.single, attr_name)] * len(envs)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"cannot set {attr_name!r}: the environments of a "
                             "ReplayVectorEnv share their settings; make a new one")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """``action_masks`` of each environment (what MaskablePPO calls); nothing else."""
        if method_name != "action_masks":
            raise AttributeError(f"ReplaySB3VecEnv calls only action_masks on its "
                                 f"environments, not {method_name!r}")
        masks = self.env.action_masks()
        return [masks[e] for e in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper],
                       indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)


def valid(actions: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Each action, or the other one where it is masked and the other is not (the rule
    agents' fallback, ``ballad_env.wrappers.ValidActionWrapper``, for N environments at
    once): with both or neither valid the action stands, with one valid it is that one (AL
    0, LR 1)."""
    al, lr = masks[:, 0], masks[:, 1]
    return np.where(al == lr, actions, lr.astype(actions.dtype))


def _rows(info: dict[str, Any], envs: Iterable[int]) -> list[dict[str, Any]]:
    """One dict per environment in ``envs`` of a vector ``info``'s keys (masks left out),
    with Python values, as a single environment hands them out."""
    keys = [k for k in info if not k.startswith("_") and k not in ("final_obs", "final_info")]
    index = np.fromiter(envs, dtype=np.intp)
    columns = [info[k][index] if info[k].ndim > 1 else info[k][index].tolist() for k in keys]
    return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)] \
        if keys else [{} for _ in index]


def make_replay_vec_env(n_envs: int, store: str | os.PathLike, *,
                        info_keys: Sequence[str] = DONE_INFO_KEYS, valid_actions: bool = True,
                        monitor_file: str | None = None, **kwargs: Any) -> VecMonitor:
    """``n_envs`` replay episodes at once for SB3: ``ReplayVectorEnv`` (same-step autoreset,
    ``info_keys`` only) under ``ReplaySB3VecEnv`` and SB3's ``VecMonitor`` (episode return,
    length and the ``info_keys``, to ``monitor_file`` if given); ``kwargs`` are the replay
    environment's (``datasets``, ``seeds``, ``settings``, ``observation``, Settings fields)."""
    env: Any = gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=n_envs,
                            vectorization_mode="vector_entry_point", store=store,
                            autoreset_mode=AutoresetMode.SAME_STEP, info_keys=info_keys,
                            **kwargs)
    return VecMonitor(ReplaySB3VecEnv(env, valid_actions=valid_actions), monitor_file,
                      info_keywords=tuple(info_keys))


__all__ = ["DONE_INFO_KEYS", "ReplaySB3VecEnv", "make_replay_vec_env", "valid"]
