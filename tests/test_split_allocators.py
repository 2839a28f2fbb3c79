"""Issue 40's split allocators (agents/split_allocators.py): by hand, and live = lattice."""

from __future__ import annotations

import pytest
from conftest import v2_observation as observation

import agents
from agents.registry import make_agent
from agents.split_allocators import ALL_IN_LR, FixedSplitByCost, SafeSplit, feature_vector
from ballad_env.data import load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import build_lattice
from ballad_env.settings import Settings


def safe(coef: list[list[list[float]]], intercept: list[list[float]], z: float = 1.0,
         margin: float = 0.0, threshold: float | None = None) -> SafeSplit:
    """A safe split on the one feature ``tau`` (center 0, scale 1); splits (LR, 0) and
    (AL, 2); the distance check on ``tau`` around 0.5 with precision 100 (sd 0.1)."""
    return SafeSplit(["tau"], [0.0], [1.0], coef, intercept, [(LR, 0), (AL, 2)], z, margin,
                     {"features": ["tau"], "center": [0.5], "precision": [[100.0]],
                      "threshold": threshold})


def test_fixed_split_plays_its_level_split() -> None:
    rule = FixedSplitByCost({0.5: (LR, 2), 0.75: (AL, 1), 0.25: ALL_IN_LR})
    played = [rule.act(observation(budget_used=r / 5, cost_ratio=0.5)) for r in range(5)]
    assert played == [LR, LR, AL, AL, AL] and rule.split == (LR, 2)
    played = [rule.act(observation(budget_used=r / 5, cost_ratio=0.8)) for r in range(5)]
    assert played == [AL, LR, LR, LR, LR]  # a new episode (budget_used 0): the c_fn level
    assert [rule.act(observation(budget_used=r / 3, cost_ratio=0.3)) for r in range(3)] == [LR] * 3
    with pytest.raises(ValueError, match="split is"):
        FixedSplitByCost({0.5: (2, 1)})


def test_safe_split_takes_the_best_split_only_when_its_lower_bound_is_positive() -> None:
    # two members; at tau = t: split (LR, 0) gains (t, 3t) -> mean 2t, sd t;
    # split (AL, 2) gains (0.1, 0.1) -> mean 0.1, sd 0
    agent = safe([[[1.0], [0.0]], [[3.0], [0.0]]], [[0.0, 0.1], [0.0, 0.1]], z=1.0)
    split, lower, _ = agent.choose(observation(tau=0.5))
    assert split == (LR, 0) and lower == pytest.approx(1.0 - 0.5)  # mean 1.0, sd 0.5
    agent = safe([[[1.0], [0.0]], [[3.0], [0.0]]], [[0.0, -0.1], [0.0, -0.1]], z=3.0)
    split, lower, _ = agent.choose(observation(tau=0.5))
    assert split == ALL_IN_LR and lower == pytest.approx(1.0 - 1.5)  # bound below 0: LR
    agent = safe([[[0.0], [0.0]]], [[-0.2, -0.1]])  # every split predicted to lose
    assert agent.choose(observation(tau=0.5))[0] == ALL_IN_LR
    assert safe([[[0.0], [0.0]]], [[0.0, 0.1]], margin=0.2).choose(
        observation(tau=0.5))[0] == ALL_IN_LR


def test_safe_split_falls_back_far_from_the_training_tasks() -> None:
    # distance of tau from 0.5 in units of sd 0.1: 0.7 -> 2, 0.9 -> 4
    agent = safe([[[0.0], [0.0]]], [[0.0, 0.1]], threshold=3.0)
    assert agent.distance(observation(tau=0.7)) == pytest.approx(2.0, rel=1e-5)
    assert agent.choose(observation(tau=0.7))[0] == (AL, 2)
    assert agent.choose(observation(tau=0.9))[0] == ALL_IN_LR
    played = [agent.act(observation(budget_used=r / 4, tau=0.7)) for r in range(4)]
    assert played == [AL, AL, LR, LR]


def test_feature_products_and_bad_shapes() -> None:
    obs = observation(tau=0.5, cost_ratio=0.75)
    assert feature_vector(obs, ["tau", "tau*cost_ratio"]) == pytest.approx([0.5, 0.375])
    with pytest.raises(ValueError, match="coef must be"):
        safe([[[1.0]]], [[0.0]])


@pytest.mark.parametrize("costs", [{}, {"c_fn": 10.0}, {"c_fp": 10.0}, {"c_fp": 3.0, "c_fn": 7.0}])
def test_split_allocators_replay_on_the_lattice_as_they_run_live(small_xy, costs) -> None:
    dataset = load_dataset(small_xy)
    lattice = build_lattice(dataset, 0, Settings(**costs))
    env = BudgetAllocationEnv(dataset, observation="v2", **costs)
    makers = {"fixed-split-by-cost": lambda: make_agent("fixed-split-by-cost"),
              "safe-split": lambda: make_agent("safe-split"),
              "hand": lambda: FixedSplitByCost({0.5: (AL, 3), 0.75: (LR, 4), 0.25: (LR, 1)})}
    for name, make in makers.items():
        records = agents.run_episode(env, make(), 0)
        played = tuple(AL if r["action"] == "AL" else LR for r in records)
        assert lattice.replay(make()) == played, name
