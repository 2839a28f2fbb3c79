"""The one-step oracle: an upper reference that peeks at test labels, never a method."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from agents.base import AL, LR
from ballad_env.env import BudgetAllocationEnv


class OracleAgent:
    """Tries both actions on copies of the bound environment's episode and takes the one with
    the lower next test cost (ties to AL). It reads test labels: a reference, not a method.
    """

    name = "oracle"

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, seed: int | None = None) -> None:
        """Nothing to forget: the oracle reads the bound environment's current state."""

    def _episode(self):
        env = self.env.unwrapped if hasattr(self.env, "unwrapped") else self.env
        if not isinstance(env, BudgetAllocationEnv) or env.episode is None:
            raise RuntimeError("OracleAgent needs a reset BudgetAllocationEnv to look ahead in")
        return env.episode

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[int, Any]:
        episode = self._episode()
        costs = {}
        for action in (AL, LR):
            if episode.available(action):
                costs[action] = copy.deepcopy(episode).step(action).evaluation.cost
        return min(costs, key=lambda a: (costs[a], a)), state
