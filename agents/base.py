"""The agent interface every allocator speaks: stable-baselines3's ``predict``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from ballad_env.episode import AL, LR
from ballad_env.observation import ALL_FEATURE_INDEX, FEATURE_INDEX

AgentT = TypeVar("AgentT")
_MASK_FEATURES = [FEATURE_INDEX["al_available"], FEATURE_INDEX["lr_available"]]


def mask_from_observation(observation: np.ndarray) -> np.ndarray:
    """Valid (AL, LR) actions per row, read from the observation's availability features.

    A row with no valid action (the episode is over) allows both, so it stays defined.
    """
    mask = np.atleast_2d(observation)[:, _MASK_FEATURES] > 0.5
    mask[~mask.any(axis=1)] = True
    return mask


@runtime_checkable
class Agent(Protocol):
    """What an allocation agent offers: SB3's ``predict`` and a seeded ``reset``."""

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray | int, Any]: ...

    def reset(self, seed: int | None = None) -> None: ...


#: Builds an agent for the environment it will act in (most ignore it; the oracle binds to it).
AgentFactory = Callable[[Any], Agent]


def show_info(agent: Any, info: Mapping[str, Any]) -> None:
    """Give ``agent`` the ``info`` that came with its next observation, if it takes it (an
    optional ``observe_info(info)``): a rule that compares rewards then decides on their
    float64 values, not on the observation's float32 copies, which a near-tie can flip
    (``run_episode`` and ``Lattice.replay`` call it before every ``predict``)."""
    observe = getattr(agent, "observe_info", None)
    if observe is not None:
        observe(info)


def env_settings(env: Any) -> Any:
    """The ``Settings`` in force in ``env`` (the environment under any wrappers; for a
    vector env in this process, SB3's ``DummyVecEnv`` or Gymnasium's ``SyncVectorEnv``, the
    settings its sub-environments share), or ``None`` for an environment without them
    (another library's, or sub-environments of differing settings)."""
    settings = getattr(getattr(env, "unwrapped", env), "settings", None)
    subs = getattr(env, "envs", None)
    if settings is not None or not isinstance(subs, (list, tuple)) or not subs:
        return settings
    each = [env_settings(sub) for sub in subs]
    return each[0] if all(s is not None and s == each[0] for s in each) else None


def play_in(agent: Any, env: Any) -> None:
    """Tell ``agent`` the environment it is about to play an episode in, if it listens:
    its optional ``observe_env(env)`` (an agent that looks ahead in or checks its
    environment) and ``observe_settings(settings)`` (an agent whose rule depends on the
    settings in force). ``run_episode`` calls it before every reset, so an agent takes
    these from the environment it plays in, whichever it was built with (if any)."""
    observe_env = getattr(agent, "observe_env", None)
    if observe_env is not None:
        observe_env(env)
    observe_settings = getattr(agent, "observe_settings", None)
    settings = env_settings(env)
    if observe_settings is not None and settings is not None:
        observe_settings(settings)


def built_for(agent: AgentT, env: Any) -> AgentT:
    """``agent``, told of ``env`` (``play_in``) when a builder is given one, so that it can
    act in a loop of the caller's own too; ``run_episode`` tells it again at every reset."""
    if env is not None:
        play_in(agent, env)
    return agent


class ExactRewards:
    """The float64 side rewards of the latest ``info`` (``observe_info``), each read once:
    :meth:`exact` gives the reward of a side if the info of this observation holds it,
    else the observation's value. Mixed into the rules that compare rewards."""

    _info: Mapping[str, Any] | None = None

    def observe_info(self, info: Mapping[str, Any]) -> None:
        """Keep ``info`` for the next decision (it came with the next observation)."""
        self._info = info

    def exact(self, observation: np.ndarray, name: str) -> float:
        """Feature ``name`` (a side's reward, ``entropy_al``) at float64 from the kept info,
        else from the observation."""
        info = self._info
        if info is not None and isinstance(info.get(name), float | np.floating):
            return float(info[name])
        return feature(observation, name)

    def forget_info(self) -> None:
        """Drop the kept info (it belongs to one observation)."""
        self._info = None

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray | int, Any]:
        """The mixed-in agent's ``predict``, the kept info read by this one observation only:
        dropped after the decision whichever way ``act`` returned, and never read by a
        batch of several observations (it came with one)."""
        if np.ndim(observation) > 1 and len(observation) > 1:
            self.forget_info()
        try:
            return super().predict(  # type: ignore[misc]
                observation, state, episode_start, deterministic)
        finally:
            self.forget_info()


class RuleAgent:
    """Base for hand-written agents: ``act`` on one observation; ``predict`` handles batches.

    Rules read named features (``FEATURE_INDEX``) and fall back to the other action
    when their choice's pool is exhausted.
    """

    name = "rule"

    def reset(self, seed: int | None = None) -> None:
        """Forget episode state; seed any randomness."""

    def act(self, observation: np.ndarray) -> int:
        raise NotImplementedError

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray | int, Any]:
        """Action(s) for one observation or a batch (as SB3's vectorised evaluation passes)."""
        obs = np.asarray(observation)
        if obs.ndim == 1:
            return self._available(obs, self.act(obs)), state
        return np.array([self._available(o, self.act(o)) for o in obs]), state

    @staticmethod
    def _available(obs: np.ndarray, action: int) -> int:
        """``action`` if its pool has labels left, else the other one."""
        return action if mask_from_observation(obs)[0, action] else 1 - action

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class EpisodeStateAgent(RuleAgent):
    """A rule that keeps state within an episode, so it plays one environment at a time."""

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray | int, Any]:
        """As ``RuleAgent.predict``, for one observation (or a batch of one) only."""
        obs = np.asarray(observation)
        if obs.ndim > 1 and obs.shape[0] != 1:
            raise ValueError(f"{type(self).__name__} keeps one episode's state: "
                             "pass one observation at a time")
        return super().predict(observation, state, episode_start, deterministic)


class ProbeThenDecide(EpisodeStateAgent):
    """A rule that plays its ``probe`` (a tuple of actions) at the start of each episode,
    then decides once, from the observation after the probe (``decide``), and plays by that
    decision to the end (``after_probe``: the k-th round after the probe, k = 1, 2, ...)."""

    probe: tuple[int, ...] = ()

    def reset(self, seed: int | None = None) -> None:
        """Forget the episode."""
        self.rounds = 0
        self.decision: Any = None

    def decide(self, observation: np.ndarray) -> Any:
        """The decision, read once after the probe."""
        raise NotImplementedError

    def after_probe(self, k: int, decision: Any) -> int:
        """The action of the k-th round after the probe (default: the decision itself)."""
        return int(decision)

    def act(self, observation: np.ndarray) -> int:
        if feature(observation, "budget_used") == 0.0:
            self.reset()
        self.rounds += 1
        if self.rounds <= len(self.probe):
            return self.probe[self.rounds - 1]
        if self.decision is None:
            self.decision = self.decide(observation)
        return self.after_probe(self.rounds - len(self.probe), self.decision)


def feature(obs: np.ndarray, name: str) -> float:
    """The named observation feature (of any version: v1's come after v0's)."""
    index = ALL_FEATURE_INDEX[name]
    if index >= np.shape(obs)[-1]:
        raise ValueError(f"feature {name!r} is not in this {np.shape(obs)[-1]}-feature "
                         "observation: the agent needs a later observation version "
                         "(observation='v1')")
    return float(obs[index])


__all__ = ["AL", "LR", "Agent", "ExactRewards", "ProbeThenDecide", "RuleAgent", "built_for",
           "env_settings", "feature", "mask_from_observation", "play_in", "show_info"]
