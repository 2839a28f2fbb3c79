"""Issue 40's split allocators (agents/split_allocators.py): by hand, and live = lattice."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import v2_observation as observation

import agents
from agents.registry import make_agent
from agents.split_allocators import (
    ALL_IN_LR,
    FixedSplitByCost,
    LateSwitch,
    SafeSplit,
    feature_vector,
)
from ballad_env.data import load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import build_lattice
from ballad_env.settings import Settings


def safe(coef: list[list[list[float]]], intercept: list[list[float]], z: float = 1.0,
         margin: float = 0.0, threshold: float | None = None,
         splits: tuple[tuple[int, int], ...] = ((LR, 0), (AL, 2)),
         switch: LateSwitch | None = None) -> SafeSplit:
    """A safe split on the one feature ``tau`` (center 0, scale 1); splits (LR, 0) and
    (AL, 2) unless given; the distance check on ``tau`` around 0.5 with precision 100 (sd
    0.1)."""
    return SafeSplit(["tau"], [0.0], [1.0], coef, intercept, list(splits), z, margin,
                     {"features": ["tau"], "center": [0.5], "precision": [[100.0]],
                      "threshold": threshold}, switch=switch)


def play(agent: SafeSplit | FixedSplitByCost, costs: list[float], se: float = 0.125) -> list[int]:
    """The agent's actions over ``len(costs)`` rounds, round r observing the validation-sample
    cost ``costs[r]`` and standard error ``se`` (0 in round 0, before any V label)."""
    n = len(costs)
    return [agent.act(observation(budget_used=r / n, tau=0.5, val_sample_cost=c,
                                  val_sample_se=se if r else 0.0))
            for r, c in enumerate(costs)]


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


def lr_then_al(switch: LateSwitch | None) -> SafeSplit:
    """A safe split that plays (LR, 2): two LR rounds, then AL to the end."""
    return safe([[[0.0]]], [[0.1]], splits=((LR, 2),), switch=switch)


def test_late_switch_goes_back_to_lr_when_the_al_phase_does_not_pay() -> None:
    # the AL phase starts in round 2 at cost 0.5 (se 0.125); round 3 it fell by one se
    # (pays at 0.5 se), round 4 it is back at 0.5: fell by 0 < 0.5 se, so LR from round 4
    costs = [0.0, 0.5, 0.5, 0.375, 0.5, 0.25]
    assert play(lr_then_al(None), costs) == [LR, LR, AL, AL, AL, AL]
    agent = lr_then_al(LateSwitch(1, 0.5))
    assert play(agent, costs) == [LR, LR, AL, AL, LR, LR]  # stays on LR once switched
    assert agent.switched
    # a new episode (budget_used 0) forgets the switch; falling by a whole se pays
    assert play(agent, [0.0, 0.5, 0.5, 0.375, 0.375, 0.25]) == [LR, LR, AL, AL, AL, AL]
    assert not agent.switched


def test_late_switch_waits_its_rounds_and_reads_its_threshold() -> None:
    rising = [0.0, 0.5, 0.5, 0.625, 0.625, 0.625]  # rose by one se after the first AL round
    assert play(lr_then_al(LateSwitch(1, 0.0)), rising) == [LR, LR, AL, LR, LR, LR]
    assert play(lr_then_al(LateSwitch(2, 0.0)), rising) == [LR, LR, AL, AL, LR, LR]
    # a negative threshold stops only a rise of more than that many standard errors
    assert play(lr_then_al(LateSwitch(1, -1.5)), rising) == [LR, LR, AL, AL, AL, AL]
    assert play(lr_then_al(LateSwitch(1, -0.5)), rising) == [LR, LR, AL, LR, LR, LR]


def test_late_switch_never_cuts_an_al_phase_without_validation_labels() -> None:
    # (AL, 2) first: no V label at the AL phase's start (se 0), so nothing to measure
    agent = safe([[[0.0], [0.0]]], [[0.0, 0.1]], switch=LateSwitch(1, 10.0))
    n = 5
    played = [agent.act(observation(budget_used=r / n, tau=0.5, val_sample_cost=0.5))
              for r in range(n)]
    assert played == [AL, AL, LR, LR, LR] and agent.reference is None


def test_late_switch_entry_and_bad_input() -> None:
    entry = {"levels": [{"cost_ratio": 0.5, "split": [LR, 2]}],
             "switch": {"after": 2, "threshold": 0.25}}
    rule = FixedSplitByCost.from_entry(entry)
    assert rule.switch is not None and rule.switch.to_entry() == entry["switch"]
    assert FixedSplitByCost.from_entry({"levels": entry["levels"]}).switch is None
    bad: list[tuple[Any, float]] = [(0, 0.5), (1.5, 0.5), (1, float("nan"))]  # JSON's numbers
    for after, threshold in bad:
        with pytest.raises(ValueError, match="late switch needs"):
            LateSwitch(after, threshold)


@pytest.mark.parametrize("costs", [{}, {"c_fn": 10.0}, {"c_fp": 10.0}, {"c_fp": 3.0, "c_fn": 7.0}])
def test_split_allocators_replay_on_the_lattice_as_they_run_live(small_xy, costs) -> None:
    dataset = load_dataset(small_xy)
    lattice = build_lattice(dataset, 0, Settings(**costs))
    env = BudgetAllocationEnv(dataset, observation="v2", **costs)
    makers = {"fixed-split-by-cost": lambda: make_agent("fixed-split-by-cost"),
              "safe-split": lambda: make_agent("safe-split"),
              "hand": lambda: FixedSplitByCost({0.5: (AL, 3), 0.75: (LR, 4), 0.25: (LR, 1)}),
              # a threshold no AL round can meet: back to LR after the second AL round
              "switch": lambda: FixedSplitByCost({0.5: (LR, 2), 0.75: (LR, 2), 0.25: (LR, 2)},
                                                 LateSwitch(2, 100.0))}
    played = {}
    for name, make in makers.items():
        records = agents.run_episode(env, make(), 0)
        played[name] = tuple(AL if r["action"] == "AL" else LR for r in records)
        assert lattice.replay(make()) == played[name], name
    assert played["switch"][:5] == (LR, LR, AL, AL, LR) and AL not in played["switch"][5:]
