"""Agents take what they need from the environment they play in (``agents.base.play_in``,
which ``run_episode`` calls), never from whether their builder was given an environment:
``make_agent(name)`` and ``make_agent(name, env)`` play the same episode."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from test_authors_cosine import _check_round, _RecordedThresholds

from agents.evaluation import run_episode
from agents.registry import agent_names, make_agent
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings

FIXTURE = Path(__file__).parent / "data" / "authors_cosine_episodes.json"
#: Three rounds on the kNN prior.
FAST = {"prior": "knn", "budget_fraction": 0.06, "round_fraction": 0.02}


def _published(dataset: str, seed: int) -> dict[str, Any]:
    """The published cosine BALLAD's recorded episode on ``dataset``, ``seed``."""
    episodes = json.loads(FIXTURE.read_text())["episodes"]
    (episode,) = [e for e in episodes if (e["strategy"], e["dataset"], e["seed"]) ==
                  ("ballad-cosine", dataset, seed)]
    return episode


class _PublishedThresholds(gym.Wrapper):
    """The environment with the published episode's threshold in each round (the search,
    50 gp_minimize calls a round, replaced as ``test_authors_cosine`` does)."""

    def __init__(self, env: BudgetAllocationEnv, rounds: list[dict[str, Any]]) -> None:
        super().__init__(env)
        self.rounds = rounds

    def reset(self, **kwargs: Any) -> Any:
        result = self.env.reset(**kwargs)
        rejector = self.env.unwrapped.episode.rejector
        rejector.search = _RecordedThresholds(self.rounds, rejector.search)
        return result


def test_readme_pattern_plays_the_published_cosine_episode() -> None:
    """``make_agent(name)`` then ``run_episode(env, agent)`` under ``authors_code()``: all 15
    rounds of the published WBC seed-0 episode (actions, labels, test costs), as
    ``make_agent(name, env)`` plays them (it used to leave the published path at round 2)."""
    expected = _published("WBC", 0)["rounds"]
    env = BudgetAllocationEnv("WBC", settings=Settings.authors_code())
    for agent in (make_agent("ballad-cosine"), make_agent("ballad-cosine", env)):
        played: list[tuple[np.ndarray, dict[str, Any]]] = []
        run_episode(_PublishedThresholds(env, expected), agent, seed=0,
                    on_step=lambda obs, _a, _r, info, kept=played: kept.append((obs, info)))
        assert len(played) == len(expected) == 15
        for (obs, info), round_ in zip(played, expected, strict=True):
            _check_round(obs, info, round_, "cosine")


def _actions(env: BudgetAllocationEnv, agent: Any, seed: int = 0) -> list[str]:
    return [r["action"] for r in run_episode(env, agent, seed=seed)]


def test_the_start_comes_from_the_env_played_not_the_one_built_with() -> None:
    """Built with an environment of our cosine rule, played in one of the published rule:
    the published start (LR twice, the first LR reward being NaN); and back again."""
    ours = BudgetAllocationEnv("WBC", cosine_rule="ours", reward="cosine", **FAST)
    published = BudgetAllocationEnv("WBC", cosine_rule="authors", reward="cosine", **FAST)
    agent = make_agent("ballad-cosine", ours)
    assert _actions(published, agent)[:2] == ["LR", "LR"]
    assert _actions(ours, agent)[:2] == ["LR", "AL"]
    assert _actions(published, make_agent("ballad-cosine"))[:2] == ["LR", "LR"]


def test_an_unbound_settings_reader_refuses_to_act_in_a_loop_of_ones_own() -> None:
    """Outside ``run_episode`` the agent has not seen the settings: an error saying how to
    give them, not a silent default; given them, it plays."""
    env = BudgetAllocationEnv("WBC", cosine_rule="authors", reward="cosine", **FAST)
    obs, _ = env.reset(seed=0)
    agent = make_agent("ballad-cosine")
    with pytest.raises(RuntimeError, match="run_episode.*observe_settings"):
        agent.predict(obs)
    agent.observe_settings(env.settings)
    assert agent.predict(obs)[0] == 1


@pytest.mark.slow
def test_every_registered_agent_plays_alike_built_with_or_without_the_env() -> None:
    """Audit: each registered agent (the oracle too, which ``run_episode`` binds) plays the
    same episode from ``make_agent(name)`` as from ``make_agent(name, env)``."""
    env = BudgetAllocationEnv("WBC", settings=Settings(**FAST))
    for name in agent_names():
        alone = make_agent(name)
        env.use_observation(getattr(alone, "observation_version", "v0"))  # as play_agents
        assert _actions(env, alone) == _actions(env, make_agent(name, env)), name


def test_the_oracle_looks_ahead_in_the_env_it_plays(small_xy: Any) -> None:
    """Bound at build to one environment, played in another: it looks ahead in the one
    played (the cost it reaches is that environment's best next cost each round)."""
    elsewhere = BudgetAllocationEnv("wdbc", **FAST)
    env = BudgetAllocationEnv(small_xy, **FAST)
    assert _actions(env, make_agent("oracle", elsewhere)) == _actions(env, make_agent("oracle"))
    with pytest.raises(RuntimeError, match="run_episode"):
        make_agent("oracle").predict(env.reset(seed=0)[0])


def test_a_lattice_replay_gives_the_lattice_settings() -> None:
    """``Lattice.replay`` tells the agent the lattice's settings, as ``run_episode`` the
    environment's: a NaN first LR cosine reward under the published rule plays LR again."""
    from test_lattice import hand_lattice

    lattice = hand_lattice()
    lr_cosine = lattice.lr_reward_from["cosine"].copy()
    lr_cosine[0, 1, :] = np.nan
    lr_from = {**lattice.lr_reward_from, "cosine": lr_cosine}
    for rule, path in (("authors", (1, 1)), ("ours", (1, 0))):
        replayed = dataclasses.replace(lattice, lr_reward_from=lr_from,
                                       settings=Settings(cosine_rule=rule))
        assert replayed.replay(make_agent("ballad-cosine")) == path, rule
