"""GatedPolicy: a learned policy that acts only where the split family's fallback leaves
All-in-LR (agents.gated_policy)."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.base import AL, LR
from agents.gated_policy import GatedPolicy
from agents.split_allocators import SafeSplit
from ballad_env.observation import ALL_FEATURE_INDEX, OBSERVATIONS


class LeansAL:
    """A stand-in policy: 0.8 of its probability on AL, always."""

    def __init__(self) -> None:
        self.resets = 0

    def reset(self, seed: int | None = None) -> None:
        self.resets += 1

    def action_probabilities(self, observation: np.ndarray) -> np.ndarray:
        return np.array([[0.8, 0.2]])


def gate(gain: float, threshold: float | None = None) -> SafeSplit:
    """A one-split gate whose two members both predict ``gain`` (no spread), its distance
    check on ``cost_ratio`` at ``threshold``."""
    ood: dict[str, Any] = {"features": ["cost_ratio"], "center": [0.5], "precision": [[1.0]],
                           "threshold": threshold}
    return SafeSplit(["cost_ratio"], [0.0], [1.0], np.zeros((2, 1, 1)), np.full((2, 1), gain),
                     [[AL, 3]], z=0.5, margin=0.0, ood=ood)


def observation(budget_used: float = 0.0, cost_ratio: float = 0.5) -> np.ndarray:
    obs = np.zeros(len(OBSERVATIONS["v2"]), dtype=np.float32)
    obs[ALL_FEATURE_INDEX["al_available"]] = obs[ALL_FEATURE_INDEX["lr_available"]] = 1.0
    obs[ALL_FEATURE_INDEX["budget_used"]] = budget_used
    obs[ALL_FEATURE_INDEX["cost_ratio"]] = cost_ratio
    return obs


def play(agent: GatedPolicy, start: np.ndarray) -> list[int]:
    agent.reset(0)
    return [agent.act(start)] + [agent.act(observation(budget_used=r / 4)) for r in (1, 2, 3)]


def test_the_policy_acts_only_where_the_gate_leaves_all_in_lr() -> None:
    assert play(GatedPolicy(gate(0.1), LeansAL()), observation()) == [AL] * 4
    assert play(GatedPolicy(gate(-0.1), LeansAL()), observation()) == [LR] * 4


def test_the_trait_check_and_the_threshold_fall_back_to_lr() -> None:
    far = observation(cost_ratio=0.9)  # distance 0.4 from the training center
    assert play(GatedPolicy(gate(0.1, threshold=0.3), LeansAL()), far) == [LR] * 4
    assert play(GatedPolicy(gate(0.1, threshold=0.5), LeansAL()), far) == [AL] * 4
    assert play(GatedPolicy(gate(0.1), LeansAL(), threshold=0.9), observation()) == [LR] * 4


def test_each_episode_decides_again() -> None:
    agent = GatedPolicy(gate(-0.1), LeansAL())
    assert play(agent, observation()) == [LR] * 4
    agent.gate = gate(0.1)
    assert agent.act(observation()) == AL  # a new episode's first observation
