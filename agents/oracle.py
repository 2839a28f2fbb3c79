"""The one-step oracle: an upper reference that peeks at test labels, never a method."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.base import AL, LR
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import Episode


class OracleAgent:
    """Tries both actions on forks of the bound environment's episode and takes the one with
    the lower next test cost (ties to AL). It reads test labels: a reference, not a method.

    It acts in one environment, the one it is bound to; with SB3's ``evaluate_policy`` bind
    it to the single environment of the vector env (``make_agent("oracle", vec_env.envs[0])``).
    """

    name = "oracle"

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, seed: int | None = None) -> None:
        """Nothing to forget: the oracle reads the bound environment's current state."""

    def _episode(self) -> Episode:
        env = self.env.unwrapped if hasattr(self.env, "unwrapped") else self.env
        if not isinstance(env, BudgetAllocationEnv) or env.episode is None:
            raise RuntimeError("OracleAgent needs a reset BudgetAllocationEnv to look ahead in")
        return env.episode

    def choose(self) -> int:
        """The action with the lower next test cost in the bound environment's episode."""
        episode = self._episode()
        costs = {action: episode.fork().step(action).evaluation.cost
                 for action in (AL, LR) if episode.available(action)}
        return min(costs, key=lambda a: (costs[a], a))

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray | int, Any]:
        """The oracle's action: an int for one observation, an array of one for a batch of one."""
        action = self.choose()
        if np.asarray(observation).ndim > 1:
            return np.array([action]), state
        return action, state
