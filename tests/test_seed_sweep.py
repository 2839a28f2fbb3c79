"""``ballad-env train --seeds N``: N policies in one command, each loadable, and the IQM of
their evaluation cost with its bootstrap interval."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import small_store

from agents.experiments.cli.train import main as train_main
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.seed_sweep import evaluation_costs, seed_configs, summarise
from agents.policy import load_policy
from agents.reports.policy_stats import iqm


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return small_store(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("store"))


def _weights(path) -> dict[str, torch.Tensor]:
    return load_policy(path).model.policy.state_dict()


@pytest.mark.slow
def test_two_seeds_write_two_policies_and_their_iqm(store, tmp_path, capsys) -> None:
    """Two policies, loadable by the safe loader, that differ; seed 1 of the sweep is the
    run ``--seed 1`` trains alone (the sweep's runs are ordinary runs); the summary's IQM
    and interval are those of the two policies' evaluation costs."""
    argv = ["--trainer", "batched", "--algo", "ppo", "--replay-store", str(store), "--prior",
            "knn", "--n-envs", "4", "--total-timesteps", "60", "--batch-size", "30",
            "--eval-episodes", "6", "--no-progress", "--run-name", "sweep"]
    assert train_main([*argv, "--seeds", "2", "--output-dir", str(tmp_path / "a")]) == 0
    runs = [tmp_path / "a" / f"sweep-seed{k}" / f"sweep-seed{k}.zip" for k in (0, 1)]
    first, second = (_weights(run) for run in runs)
    assert any(not torch.equal(first[k], second[k]) for k in first)
    summary = json.loads((tmp_path / "a" / "sweep-seeds.json").read_text())
    assert summary["seeds"] == [0, 1] and summary["episodes"] == 6
    low, high = summary["iqm_interval"]
    assert low <= summary["iqm_cost"] <= high
    assert min(summary["mean_cost_by_seed"]) - 1e-9 <= summary["iqm_cost"] \
        <= max(summary["mean_cost_by_seed"]) + 1e-9
    assert "IQM of the evaluation cost over 2 seeds" in capsys.readouterr().out
    config = TrainConfig(replay_store=str(store), datasets=("large",), eval_episodes=6,
                         algo="ppo", settings=TrainConfig().settings.replace(prior="knn"))
    both, apart = evaluation_costs(config, runs), [evaluation_costs(config, [r]) for r in runs]
    assert both.shape == (2, 6) and np.array_equal(both, np.concatenate(apart))  # shared envs
    assert summary["mean_cost_by_seed"] == pytest.approx(both.mean(axis=1).tolist())
    alone = [*argv[:-1], "alone", "--seed", "1", "--output-dir", str(tmp_path / "b")]
    assert train_main(alone) == 0
    single = _weights(tmp_path / "b" / "alone" / "alone.zip")
    assert all(torch.equal(single[k], second[k]) for k in single)


def test_the_sweep_names_its_seeds_and_summarises_them() -> None:
    """Seeds from --seed on, runs named by seed, the sweep's size bounded; the summary's
    IQM is the IQM of the seeds x episodes matrix, inside its interval."""
    configs = seed_configs(TrainConfig(seed=5, run_name="r"), 3)
    assert [c.seed for c in configs] == [5, 6, 7]
    assert [c.name for c in configs] == ["r-seed5", "r-seed6", "r-seed7"]
    with pytest.raises(ValueError, match="--seeds must be between 1 and"):
        seed_configs(TrainConfig(), 0)
    costs = np.array([[0.1, 0.2, 0.3, 0.4], [0.2, 0.2, 0.5, 0.1], [0.9, 0.0, 0.3, 0.3]])
    summary = summarise([5, 6, 7], costs)
    assert summary["iqm_cost"] == pytest.approx(iqm(costs.reshape(-1)))
    low, high = summary["iqm_interval"]
    assert low < summary["iqm_cost"] < high
    assert summary["mean_cost_by_seed"] == pytest.approx(costs.mean(axis=1).tolist())
