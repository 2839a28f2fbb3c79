"""The allocation study's second round: the fallback rules by hand, the candidates' feature
sets, the choice rule, and every new registered agent live = lattice."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import v2_observation as observation

import agents
from agents.allocation import ConfidentPolicy, ImitationPolicy, LevelPolicies, packaged_params
from agents.registry import make_agent
from ballad_env.data import load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import AL, LR
from ballad_env.observation import OBSERVATIONS
from ballad_env.replay.lattice import build_lattice
from ballad_env.settings import Settings
from scripts.studies.allocation import fit as F
from scripts.studies.allocation.second_round import imitation_features
from scripts.studies.allocation.second_round_report import CURRENT, choose

NEW = ("split-rule-2", "imitation-2", "maskable-ppo-confident")



class Fixed:
    """A policy stand-in with fixed (AL, LR) probabilities."""

    observation_version = "v2"

    def __init__(self, p_al: float) -> None:
        self.p_al, self.seeds = p_al, list[int | None]()

    def action_probabilities(self, obs):
        return np.array([[self.p_al, 1.0 - self.p_al]])

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        return np.array(AL if self.p_al >= 0.5 else LR), state

    def reset(self, seed=None) -> None:
        self.seeds.append(seed)


def test_imitation_threshold_by_hand() -> None:
    # score = 1 + 0 * tau = 1: P(AL) = 1 / (1 + e^-1) = 0.731
    tau_model = {"cost_ratio": 0.5, "features": ["tau"], "center": [0.0], "scale": [1.0],
                 "coef": [[0.0]], "intercept": [1.0]}
    assert ImitationPolicy([tau_model]).act(observation()) == AL  # 0.731 > 0.5
    assert ImitationPolicy([tau_model], 0.7).act(observation()) == AL  # 0.731 > 0.7
    assert ImitationPolicy([tau_model], 0.75).act(observation()) == LR  # 0.731 < 0.75
    assert ImitationPolicy([tau_model], 0.8).min_score == pytest.approx(np.log(4.0))
    with pytest.raises(ValueError, match="probability in"):
        ImitationPolicy([tau_model], 1.0)


def test_confident_policy_takes_al_only_above_the_threshold() -> None:
    assert ConfidentPolicy(Fixed(0.7), 0.5).act(observation()) == AL
    assert ConfidentPolicy(Fixed(0.7), 0.7).act(observation()) == AL  # at the threshold
    assert ConfidentPolicy(Fixed(0.7), 0.8).act(observation()) == LR
    assert ConfidentPolicy(Fixed(0.5), 0.5).act(observation()) == AL  # ties to AL
    # LR's pool exhausted: AL whatever the threshold
    assert ConfidentPolicy(Fixed(0.1), 0.9).predict(observation(lr_available=0.0))[0] == AL
    inner = Fixed(0.9)
    ConfidentPolicy(inner, 0.6).reset(4)
    assert inner.seeds == [4]


def test_level_policies_give_the_nearest_levels_probabilities() -> None:
    levels = LevelPolicies({0.25: Fixed(0.2), 0.75: Fixed(0.9)})
    assert levels.action_probabilities(observation(cost_ratio=0.3))[0, AL] == 0.2
    assert ConfidentPolicy(levels, 0.8).act(observation(cost_ratio=0.7)) == AL
    assert ConfidentPolicy(levels, 0.95).act(observation(cost_ratio=0.7)) == LR


def test_imitation_feature_sets() -> None:
    assert imitation_features("all") == F.IMITATION_FEATURES
    no_data = imitation_features("-data")
    assert not set(F.FEATURE_GROUPS["data"]) & set(no_data)
    assert set(F.FEATURE_GROUPS["prior"]) <= set(no_data)
    assert not set(F.FEATURE_GROUPS["prior"]) & set(imitation_features("-data-prior"))
    v1 = imitation_features("v1")
    assert set(v1) <= set(OBSERVATIONS["v1"]) and "train_shift" not in v1
    with pytest.raises(ValueError, match="unknown imitation feature set"):
        imitation_features("-costs")


def test_choice_ships_a_candidate_only_if_it_beats_the_current_allocator() -> None:
    summary = pd.DataFrame({"candidate": ["imitation", CURRENT, "split-rule"],
                            "cv min": [0.30, 0.20, 0.10]})
    assert choose(summary) == "imitation"
    tie = pd.DataFrame({"candidate": ["imitation", CURRENT], "cv min": [0.2, 0.2]})
    assert choose(tie) == CURRENT


@pytest.mark.parametrize("costs", [{}, {"c_fn": 10.0}, {"c_fp": 10.0}])
def test_new_agents_replay_on_the_lattice_as_they_run_live(small_xy, costs) -> None:
    # the allocator the second round chose, and any second-round family it packaged
    families = packaged_params()["families"]
    names = [*(n for n in NEW if n in families), "allocator"]
    if "maskable-ppo" in (packaged_params()["allocator"], *names):
        pytest.importorskip("sb3_contrib")
    dataset = load_dataset(small_xy)
    lattice = build_lattice(dataset, 0, Settings(**costs))
    env = BudgetAllocationEnv(dataset, observation="v2", **costs)
    for name in names:
        records = agents.run_episode(env, make_agent(name), 0)
        played = tuple(AL if r["action"] == "AL" else LR for r in records)
        assert lattice.replay(make_agent(name)) == played, name


def test_threshold_table_scores_each_column_by_hand() -> None:
    from scripts.studies.allocation.rl_cv import threshold_table

    records = pd.DataFrame({"level": ["default", "cfp10"], "dataset": ["a", "a"],
                            "seed": [0, 0], "all-in-lr": [1.0, 2.0], "optimal": [0.0, 1.0]})
    costs = pd.DataFrame({"greedy": [0.5, 2.5], "t0.9": [0.8, 1.8]})
    table = threshold_table(records, costs)
    # greedy: default (1 - 0.5) / 1 = 0.5, cfp10 (2 - 2.5) / 1 = -0.5; t0.9: 0.2 and 0.2
    assert table.threshold.iloc[0] == 0.9 and np.isnan(table.threshold.iloc[1])
    assert table["cv min"].tolist() == pytest.approx([0.2, -0.5])
    assert table["cv default"].tolist() == pytest.approx([0.2, 0.5])


def test_update_params_keeps_the_allocator_when_the_winner_is_a_first_round_fit(
        tmp_path) -> None:
    """A cross-validation winner whose fit equals a first-round family's was already ranked
    beside the allocator on the held-out cells: the allocator stays. A new fit replaces it."""
    import json

    from scripts.studies.allocation.second_round_report import SecondRound, update_params

    entry = {"models": [1], "splits": [0, 2], "probe": [], "margin": 0.005}
    path = tmp_path / "params.json"
    path.write_text(json.dumps({"allocator": CURRENT, "families": {"split-rule": entry}}))
    r2 = SecondRound(cv={}, summary=pd.DataFrame(), entries={"split-rule": dict(entry)},
                allocator="split-rule", held=pd.DataFrame())
    assert update_params(path, r2) == CURRENT
    assert json.loads(path.read_text())["families"] == {"split-rule": entry}
    r2.entries["split-rule"]["margin"] = 0.01  # a different fit: a new name
    assert update_params(path, r2) == "split-rule-2"
    assert json.loads(path.read_text())["allocator"] == "split-rule-2"
    r2.allocator = CURRENT
    assert update_params(path, r2) == CURRENT


def test_the_batched_trainer_takes_any_data_set_name(tmp_path) -> None:
    """The reserved sets are the allocation studies' rule, not the library's: the batched
    trainer names no reserved set (here it stops at the missing store instead)."""
    pytest.importorskip("torch")
    from agents.experiments.training import train
    from agents.experiments.training.config import TrainConfig

    with pytest.raises(ValueError, match="not a lattice store") as refused:
        train(TrainConfig(trainer="batched", replay_store=str(tmp_path),
                          datasets=("Pima", "adbench/cardio@500"), settings=Settings(),
                          output_dir=str(tmp_path)))
    assert "reserved" not in str(refused.value)
