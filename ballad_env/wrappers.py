"""Gymnasium wrappers for the allocation environments, usable with any training library.

- :class:`ValidActionWrapper`: an action whose label pool is exhausted becomes the other one
  (the rule agents' fallback), so algorithms without action masks never end an episode on an
  invalid choice.
- :class:`KeepInfo`: only the ``info`` keys a training run reads (:data:`MONITOR_KEYWORDS`),
  so vector environments that copy every worker's ``info`` each step stay fast.
- :class:`SeedPool`: resets without a seed draw one of ``n`` seeds, so a worker replays ``n``
  repetitions of the protocol and their label-free resets come from the reset cache.

They need gymnasium and numpy only (no stable-baselines3)::

    env = SeedPool(ValidActionWrapper(gym.make("ballad_env/BudgetAllocation-v0")), n=10)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

#: Written by Monitor at each episode's end: the final test cost, and which data set it was.
MONITOR_KEYWORDS = ("test_cost", "dataset")


class ValidActionWrapper(gym.ActionWrapper):
    """Replace an action whose label pool is exhausted by the other one (the rule agents'
    fallback), so algorithms without masks never crash the episode on an invalid choice.
    """

    def action(self, action: Any) -> int:
        chosen = int(np.asarray(action).item())
        mask = self.env.get_wrapper_attr("action_masks")()
        return chosen if mask[chosen] or not mask.any() else 1 - chosen


class KeepInfo(gym.Wrapper):
    """Keep only the ``info`` keys training reads (``MONITOR_KEYWORDS``): SB3's DummyVecEnv
    deep-copies every worker's info at every step, which on the replay environment took
    ~40% of a PPO run's time with the full ``info``."""

    def __init__(self, env: gym.Env, keys: Sequence[str] = MONITOR_KEYWORDS) -> None:
        super().__init__(env)
        self.keys = tuple(keys)

    def _slim(self, info: dict[str, Any]) -> dict[str, Any]:
        return {k: info[k] for k in self.keys if k in info}

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, self._slim(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._slim(info)


class SeedPool(gym.Wrapper):
    """Resets without a seed draw one from 0..n-1 (with a generator seeded by the first seeded
    reset), so a worker replays n repetitions of the protocol and their label-free resets
    come from the reset cache. A reset with a seed passes it on unchanged."""

    def __init__(self, env: gym.Env, n: int) -> None:
        super().__init__(env)
        self.n = n
        self.rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        else:
            seed = int(self.rng.integers(self.n))
        return self.env.reset(seed=seed, options=options)


__all__ = ["MONITOR_KEYWORDS", "KeepInfo", "SeedPool", "ValidActionWrapper"]
