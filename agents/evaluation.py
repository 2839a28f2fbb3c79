"""The one episode loop: an agent plays an environment from a seeded reset to the end.

Every place that plays episodes (the experiment runner, the policy study, the benchmark,
user code) goes through :func:`run_episode`, which calls ``predict`` as SB3's
``evaluate_policy`` does: the recurrent ``state`` threaded from call to call and
``episode_start`` true on the first step only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from agents.base import play_in, show_info
from ballad_env.episode import RECORD_FIELDS


def run_episode(env: Any, agent: Any, seed: int, *, include_start: bool = False,
                deterministic: bool = True,
                on_step: Callable[[np.ndarray, int, float, dict[str, Any]], None] | None = None,
                options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Play one episode of ``agent`` from ``env.reset(seed=seed, options=options)``; one
    record per round (``options``: the reset's, e.g. the replay environment's cell).

    Records carry every scalar ``info`` figure (``RECORD_FIELDS``) plus the step's reward.
    With ``include_start`` the state before any label comes first, as round 0 (reward NaN).
    ``on_step(observation, action, reward, info)`` sees every step, for callers that need
    more than the records (the observations, say).
    """
    play_in(agent, env)  # an agent reads the settings of the environment it plays in
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(seed)
    show_info(agent, info)
    records = [episode_record(info, reward=np.nan)] if include_start else []
    state: Any = None
    episode_start = np.ones((1,), dtype=bool)
    done = False
    while not done:
        choice, state = agent.predict(obs, state=state, episode_start=episode_start,
                                      deterministic=deterministic)
        action = int(np.asarray(choice).item())
        obs, reward, terminated, truncated, info = env.step(action)
        show_info(agent, info)
        done = bool(terminated or truncated)
        episode_start = np.array([done])
        records.append(episode_record(info, reward))
        if on_step is not None:
            on_step(obs, action, float(reward), info)
    return records


def episode_record(info: dict[str, Any], reward: float) -> dict[str, Any]:
    """One round's record: the scalar ``info`` figures and the step's reward."""
    record = {name: info[name] for name in RECORD_FIELDS}
    record["reward"] = float(reward)
    return record


__all__ = ["RECORD_FIELDS", "episode_record", "run_episode"]
