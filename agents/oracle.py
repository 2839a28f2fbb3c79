"""The one-step oracle: an upper reference that peeks at test labels, never a method."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.base import AL, LR, AgentFactory
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import Episode
from ballad_env.replay.env import BudgetAllocationReplayEnv


class OracleAgent:
    """Tries both actions on forks of the bound environment's episode (or reads their costs
    from a replay environment's lattice) and takes the one with the lower next test cost
    (ties to AL). It reads test labels: a reference, not a method.

    It acts in one environment, the one it is bound to: a Gymnasium environment, or a
    vector env holding one in this process (SB3's ``DummyVecEnv`` with one environment, as
    ``evaluate_policy`` makes), whose environment it then binds to.
    """

    name = "oracle"

    def __init__(self, env: Any = None) -> None:
        self.env = _single_env(env)

    def observe_env(self, env: Any) -> None:
        """Bind to ``env``, the environment about to be played (``agents.base.play_in``, which
        ``run_episode`` calls): the oracle looks ahead where it plays."""
        self.env = _single_env(env)

    def reset(self, seed: int | None = None) -> None:
        """Nothing to forget: the oracle reads the bound environment's current state."""

    def _episode(self) -> Episode:
        if self.env is None:
            raise RuntimeError("the oracle looks ahead in the environment it acts in: play it "
                               "with run_episode(env, agent), or bind it with "
                               "make_agent('oracle', env)")
        env = self.env.unwrapped if hasattr(self.env, "unwrapped") else self.env
        if not isinstance(env, BudgetAllocationEnv) or env.episode is None:
            raise RuntimeError("OracleAgent needs a reset BudgetAllocationEnv to look ahead in")
        return env.episode

    def choose(self) -> int:
        """The action with the lower next test cost in the bound environment's episode (in a
        replay environment, read from its lattice)."""
        env = getattr(self.env, "unwrapped", self.env)
        if isinstance(env, BudgetAllocationReplayEnv) and env.lattice is not None:
            lattice, now = env.lattice, env.snapshot()
            costs = {action: float(lattice.cost[(now.n_al + (action == AL),
                                                 now.n_lr + (action == LR))])
                     for action in (AL, LR) if lattice.can_move(now.n_al, now.n_lr, action)}
            return min(costs, key=lambda a: (costs[a], a))
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


def _single_env(env: Any) -> Any:
    """The environment the oracle looks ahead in: ``env`` itself, or the one environment of a
    vector env that holds its environments in this process (``DummyVecEnv``)."""
    if env is None or not hasattr(env, "num_envs"):
        return env
    envs = getattr(env, "envs", None)
    if envs is None:
        raise ValueError(f"the oracle looks ahead in its environment, but {type(env).__name__} "
                         "runs it in another process: use a DummyVecEnv")
    if len(envs) != 1:
        raise ValueError(f"the oracle acts in one environment and this vector env has "
                         f"{len(envs)}: use n_envs=1, or bind one oracle per environment "
                         "(make_agent('oracle', vec_env.envs[i]))")
    return envs[0]


def _oracle(env: Any) -> OracleAgent:
    """The oracle, bound to ``env`` if given; ``run_episode`` binds it to the environment
    it plays in, and it refuses to act unbound."""
    return OracleAgent(env)


#: Registered names and factories.
ORACLE_AGENTS: dict[str, AgentFactory] = {"oracle": _oracle}
