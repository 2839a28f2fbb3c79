"""The ``ballad`` and ``sadal`` agents decide on the float64 rewards of ``info`` (issue 30).

The observation holds the side rewards as float32; the published codes compare float64. A
near-tie (rewards 1e-10 apart) rounds to a tie in float32, or flips a sum, so a rule that
reads the observation alone can take the other action. Constructed here: BALLAD's
comparison and SADAL's discounted sums, each given the observation alone (the float32
decision) and with its ``info`` (the float64 one), directly and through ``run_episode``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from agents.base import AL, LR, show_info
from agents.evaluation import run_episode
from agents.rules import BalladAgent
from agents.sadal import SadalAgent, sadal_choice
from ballad_env.observation import FEATURE_INDEX, OBSERVATION_FEATURES


def _observation(**features: float) -> np.ndarray:
    obs = np.zeros(len(OBSERVATION_FEATURES), dtype=np.float32)
    obs[FEATURE_INDEX["al_available"]] = obs[FEATURE_INDEX["lr_available"]] = 1.0
    for name, value in features.items():
        obs[FEATURE_INDEX[name]] = value
    return obs


def _info(**rewards: float) -> dict[str, Any]:
    return {"entropy_al": 0.0, "entropy_lr": 0.0, "cosine_al": 0.0, "cosine_lr": 0.0,
            **rewards}


def test_ballads_near_tie_is_decided_in_float64() -> None:
    al, lr = 0.3, 0.3 + 1e-10  # LR larger by 1e-10: one float32 value
    assert np.float32(al) == np.float32(lr)
    obs = _observation(al_measured=1.0, lr_measured=1.0, entropy_al=al, entropy_lr=lr)
    agent = BalladAgent()
    agent.reset(0)
    assert agent.act(obs) == AL  # float32: a tie, which goes to AL
    show_info(agent, _info(entropy_al=al, entropy_lr=lr))
    assert agent.act(obs) == LR  # float64: LR's reward is larger
    assert agent.act(obs) == AL  # the info belongs to one observation only


def test_sadals_near_tie_is_decided_in_float64() -> None:
    """Round 1 LR (reward 0.3), round 2 AL (reward 0.305 + 1e-10): AL's sum
    0.5 * 0.99 + 0.3050000001 exceeds LR's 0.5 * 1 + 0.3 by 1e-10, but in float32 the
    rounding of 0.305 and 0.3 puts LR's above."""
    lr_reward, al_reward = 0.3, 0.305 + 1e-10
    assert sadal_choice([al_reward], [lr_reward]) == AL
    assert sadal_choice([float(np.float32(al_reward))], [float(np.float32(lr_reward))]) == LR
    steps = [(_observation(budget_used=0.0), _info()),
             (_observation(budget_used=0.1, prev_lr=1.0, lr_measured=1.0, entropy_lr=lr_reward),
              _info(entropy_lr=lr_reward)),
             (_observation(budget_used=0.2, prev_al=1.0, lr_measured=1.0, al_measured=1.0,
                           entropy_lr=lr_reward, entropy_al=al_reward),
              _info(entropy_lr=lr_reward, entropy_al=al_reward))]
    for shown, expected in ((False, LR), (True, AL)):
        agent = SadalAgent()
        agent.reset(0)
        actions = []
        for obs, info in steps:
            if shown:
                show_info(agent, info)
            actions.append(agent.act(obs))
        assert actions == [LR, AL, expected], shown


class _NearTie(gym.Env):
    """Three rounds whose rewards are BALLAD's near-tie: what ``run_episode`` shows."""

    observation_space = gym.spaces.Box(0, 1, (len(OBSERVATION_FEATURES),), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
        self.t = 0
        return _observation(), {**_info(), "round": 0}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        rewards = {"entropy_al": 0.3, "entropy_lr": 0.3 + 1e-10}
        obs = _observation(al_measured=1.0, lr_measured=1.0, **rewards)
        return obs, 0.0, self.t >= 3, False, {**_info(**rewards), "action": action}


def test_run_episode_shows_ballad_the_float64_rewards(monkeypatch) -> None:
    import agents.evaluation as evaluation

    monkeypatch.setattr(evaluation, "episode_record", lambda info, reward: dict(info))
    records = run_episode(_NearTie(), BalladAgent(), seed=0)
    assert [r["action"] for r in records] == [LR, LR, LR]  # LR first, then the float64 LR


def test_the_info_is_read_by_its_own_observation_only() -> None:
    """An early decision (AL not yet measured) leaves no info behind for the next
    observation, and a batch of several observations never reads one observation's info."""
    al, lr = 0.3, 0.3 + 1e-10
    tie = _observation(al_measured=1.0, lr_measured=1.0, entropy_al=al, entropy_lr=lr)
    early = _observation(lr_measured=1.0)  # AL not yet measured: AL, no reward read
    agent = BalladAgent()
    agent.reset(0)
    show_info(agent, _info(entropy_al=al, entropy_lr=lr))
    assert int(agent.predict(early)[0]) == AL
    assert int(agent.predict(tie)[0]) == AL  # float32 tie: the early row's info is gone
    show_info(agent, _info(entropy_al=al, entropy_lr=lr))
    assert agent.predict(np.stack([early, tie]))[0].tolist() == [AL, AL]
    show_info(agent, _info(entropy_al=al, entropy_lr=lr))
    assert int(agent.predict(tie)[0]) == LR  # one observation, its own info: float64
