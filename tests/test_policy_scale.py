"""The policy study at scale (scripts.studies.policy_scale.study): training on a replay store,
exact lattice evaluation on unseen cells, and its report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import write_data_files

from agents.evaluation import run_episode
from agents.experiments.lattice_build import build_store
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.record import algorithm_kwargs
from agents.experiments.training.sb3 import train
from agents.policy import load_policy, observation_version
from ballad_env import BudgetAllocationEnv, Settings
from ballad_env.observation import OBSERVATIONS
from ballad_env.replay.store import LatticeStore
from ballad_env.wrappers import KeepInfo
from scripts.studies.common.policy_runs import RUN_PATTERN, StudyError, load_rounds, model_path
from scripts.studies.policy_scale import study as scale

SETTINGS = Settings()


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """Two small data sets: Alpha for training (seeds 100-101 in the training store), Beta
    held out; the evaluation store holds seeds 0-1 of both."""
    root = tmp_path_factory.mktemp("scale")
    data = write_data_files(root / "data", {"Alpha": 120, "Beta": 150})
    split = root / "split.json"
    split.write_text(json.dumps({"train": ["Alpha"], "held_out": ["Beta"]}))
    build_store(root / "train", ["Alpha"], [100, 101], [SETTINGS], data_dir=data,
                progress=False)
    build_store(root / "eval", ["Alpha", "Beta"], [0, 1], [SETTINGS], data_dir=data,
                progress=False)
    return {"root": root, "data": data, "split": split, "train": root / "train",
            "eval": root / "eval"}


def test_train_configs_are_seed_major_replay_runs(stores) -> None:
    runs = (*scale.DEFAULT_RUNS, ("maskable_ppo", "cost", "v1"))
    plan = scale.ScalePlan(stores["train"], stores["split"], runs=runs, train_seeds=2,
                           episodes=1000)
    configs = scale.train_configs(plan, Path("study"))
    names = list(configs)
    assert names[:4] == ["maskable_ppo-cost-v0-train1-s0", "ppo-cost-v0-train1-s0",
                         "dqn-cost-v0-train1-s0", "maskable_ppo-cost-v1-train1-s0"]
    assert len(names) == 8 and all(re.fullmatch(RUN_PATTERN, n) for n in names)
    config = configs["maskable_ppo-cost-v1-train1-s0"]
    assert config.total_timesteps == 1000 * SETTINGS.n_rounds
    assert config.replay_store == str(stores["train"])
    assert config.observation == "v1" and config.datasets == ("Alpha",)
    assert config.settings == SETTINGS.replace(reward="cost")
    costly = scale.train_configs(scale.ScalePlan(stores["train"], stores["split"],
                                                 settings=Settings(c_fn=10.0)), Path("s"))
    assert next(iter(costly.values())).settings.c_fn == 10.0  # the plan's settings reach it


def test_training_options_reach_the_algorithms() -> None:
    ppo = algorithm_kwargs(TrainConfig(algo="ppo", hyperparameters={"n_epochs": 3}))
    dqn = algorithm_kwargs(TrainConfig(algo="dqn", hyperparameters={"train_freq": 4,
                                                                    "gradient_steps": 2}))
    assert ppo["n_epochs"] == 3
    assert (dqn["train_freq"], dqn["gradient_steps"]) == (4, 2)
    with pytest.raises(ValueError, match="unknown observation version 'v9'"):
        TrainConfig(observation="v9")
    with pytest.raises(ValueError, match="n_epochs .* must be a whole number from 1"):
        TrainConfig(hyperparameters={"n_epochs": 0})
    assert TrainConfig(observation="v1").name.endswith("-v1-s0-3000steps")


def test_keep_info_keeps_only_what_training_reads(small_xy) -> None:
    env = KeepInfo(BudgetAllocationEnv(small_xy), keys=("test_cost", "dataset"))
    _, info = env.reset(seed=0)
    assert set(info) == {"test_cost", "dataset"}
    full = BudgetAllocationEnv(small_xy)
    full.reset(seed=0)
    assert full.step(1)[4]["test_cost"] == env.step(1)[4]["test_cost"]


def test_observation_version_from_saved_features() -> None:
    assert observation_version(OBSERVATIONS["v0"]) == "v0"
    assert observation_version(list(OBSERVATIONS["v1"])) == "v1"
    with pytest.raises(ValueError, match="old.zip was trained on observation features"):
        observation_version(["i", "j"], "old.zip")


def test_evaluation_seeds_must_be_unseen(stores) -> None:
    scale.check_unseen(stores["train"], stores["eval"], SETTINGS)  # disjoint: no error
    with pytest.raises(StudyError, match="4 evaluation cells were trained on"):
        scale.check_unseen(stores["eval"], stores["eval"], SETTINGS)


def test_rules_and_yardsticks_are_evaluated_once_and_reported(stores, tmp_path) -> None:
    study = tmp_path / "study"
    added = scale.evaluate(study, stores["eval"], stores["split"], stores["train"],
                           progress=False)
    assert added == 4 * 6  # 4 cells x (optimal, optimal-final, oracle, 3 rules)
    assert scale.evaluate(study, stores["eval"], stores["split"], stores["train"],
                          progress=False) == 0
    rounds = load_rounds(study)
    assert len(rounds) == 4 * 6 * SETTINGS.n_rounds
    assert set(rounds.groupby("dataset")["split"].first().items()) == {
        ("Alpha", "train-unseen-seeds"), ("Beta", "held-out")}
    lattice = LatticeStore(stores["eval"]).load("Beta", 1, SETTINGS)
    lr = rounds[(rounds.dataset == "Beta") & (rounds.seed == 1) & (rounds.agent == "all-in-lr")]
    assert np.allclose(lr["test_cost"], lattice.costs_along([1] * SETTINGS.n_rounds))
    assert scale.evaluate(study, stores["eval"], stores["split"], stores["train"],
                          seen_seeds=1, progress=False) == 6  # Alpha seed 100
    seen = load_rounds(study).query("split == 'training-cells'")
    assert set(zip(seen.dataset, seen.seed, strict=True)) == {("Alpha", 100)}
    frames = scale.write_report(study, tmp_path / "tables", tmp_path / "figures")
    table = frames["summary"].set_index(["split", "agent"])
    assert np.allclose(table.xs("optimal", level="agent")["regret"], 0.0)
    assert np.allclose(table.xs("optimal-final", level="agent")["final_regret"], 0.0)
    assert (table[["regret", "final_regret"]] >= -1e-12).all().all()
    assert np.allclose(table.xs("all-in-lr", level="agent")["vs_all_in_lr_pct"], 0.0)
    lines = frames["headline"].set_index(["split", "agent"])
    assert (lines.xs("all-in-lr", level="agent")["vs All-in-LR"] == "+0.0%").all()
    assert (tmp_path / "tables" / "policy_scale_summary.md").exists()
    assert (tmp_path / "figures" / "policy_scale_cost_by_round.png").exists()


@pytest.mark.slow
def test_a_v1_policy_trained_on_the_store_replays_its_live_episodes(stores, tmp_path) -> None:
    """A MaskablePPO policy reading observation v1, trained on the replay store, plays the
    same episodes through ``Lattice.replay`` as through the live environment."""
    study = tmp_path / "study"
    name = "maskable_ppo-cost-v1-train1-s0"
    config = TrainConfig(algo="maskable_ppo", datasets=("Alpha",),
                         settings=Settings(reward="cost"), total_timesteps=120, n_envs=2,
                         vec_env="dummy", hyperparameters={"n_steps": 30, "batch_size": 30},
                         observation="v1",
                         replay_store=str(stores["train"]), run_name=name,
                         output_dir=str(study / "policies"), progress_bar=False)
    train(config)
    agent = load_policy(model_path(study, name))
    assert agent.observation_version == "v1"
    lattice = LatticeStore(stores["eval"]).load("Beta", 0, SETTINGS)
    env = gym.make("ballad_env/BudgetAllocation-v0", dataset="Beta",
                   data_dir=str(stores["data"]), observation="v1").unwrapped
    live = tuple(1 if r["action"] == "LR" else 0 for r in run_episode(env, agent, 0))
    assert lattice.replay(agent) == live
    scale.evaluate(study, stores["eval"], stores["split"], stores["train"], progress=False)
    frames = scale.write_report(study, tmp_path / "tables", tmp_path / "figures")
    assert set(frames["by_run"]["agent"]) == {"maskable_ppo-cost-v1"}
    assert frames["training_time"]["episodes"].iloc[0] == 8
