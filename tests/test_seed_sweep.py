"""``ballad-env train --seeds N``: N policies in one command, each loadable, and the IQM of
their evaluation cost with its bootstrap interval."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from conftest import small_store

from agents.experiments.cli.train import main as train_main
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.seed_sweep import (
    evaluation_costs,
    seed_configs,
    summarise,
    train_seeds,
)
from agents.policy import load_policy
from agents.reports.policy_stats import interval, iqm


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
    (both, datasets), apart = (evaluation_costs(config, runs),
                               [evaluation_costs(config, [r])[0] for r in runs])
    assert both.shape == (2, 6) and np.array_equal(both, np.concatenate(apart))  # shared envs
    assert datasets == ["large"] * 6 and summary["datasets"] == ["large"]
    assert summary["mean_cost_by_seed"] == pytest.approx(both.mean(axis=1).tolist())
    alone = [*argv[:-1], "alone", "--seed", "1", "--output-dir", str(tmp_path / "b")]
    assert train_main(alone) == 0
    single = _weights(tmp_path / "b" / "alone" / "alone.zip")
    assert all(torch.equal(single[k], second[k]) for k in single)


def test_the_sweep_names_its_seeds_and_summarises_them() -> None:
    """Seeds from --seed on, runs named by seed, the sweep's size bounded; the summary's
    IQM is the IQM of the seeds x data sets matrix (each seed's episodes averaged per data
    set), within its interval; episodes and their data set names must match."""
    configs = seed_configs(TrainConfig(seed=5, run_name="r"), 3)
    assert [c.seed for c in configs] == [5, 6, 7]
    assert [c.name for c in configs] == ["r-seed5", "r-seed6", "r-seed7"]
    with pytest.raises(ValueError, match="--seeds must be between 1 and"):
        seed_configs(TrainConfig(), 0)
    costs = np.array([[0.1, 0.2, 0.3, 0.4], [0.2, 0.2, 0.5, 0.1], [0.9, 0.0, 0.3, 0.3]])
    summary = summarise([5, 6, 7], costs, ["a", "b", "a", "b"])
    by_dataset = np.array([[0.2, 0.3], [0.35, 0.15], [0.6, 0.15]])  # seeds x (a, b)
    assert summary["datasets"] == ["a", "b"]
    assert np.allclose(summary["cost_by_seed_and_dataset"], by_dataset)
    assert summary["iqm_cost"] == pytest.approx(iqm(by_dataset.reshape(-1)))
    low, high = summary["iqm_interval"]
    assert low <= summary["iqm_cost"] <= high and low < high
    assert summary["mean_cost_by_seed"] == pytest.approx(costs.mean(axis=1).tolist())
    with pytest.raises(ValueError, match="4 evaluation episodes but 3 data set names"):
        summarise([5, 6, 7], costs, ["a", "b", "a"])


def test_the_interval_spans_the_seeds_however_many_episodes_each_plays() -> None:
    """Sixteen seeds of one data set, eight near 0.025 and eight near 0.074, each evaluated
    on the same 256 episodes: the interval is over the seeds (their means resampled), so it
    is as wide as their spread says, not narrowed by the episodes' count (drawing seeds
    within each episode on its own averaged the spread away: 0.036 to 0.037)."""
    rng = np.random.default_rng(0)
    means = np.repeat([0.025, 0.074], 8)
    costs = means[:, None] + rng.normal(0.0, 0.01, size=(16, 256))
    summary = summarise(list(range(16)), costs, ["Glass"] * 256)
    expected = interval(costs.mean(axis=1, keepdims=True), np.random.default_rng(0))
    assert [summary["iqm_cost"], *summary["iqm_interval"]] == pytest.approx(list(expected))
    low, high = summary["iqm_interval"]
    assert high - low > 0.02


def test_the_interval_draws_whole_seeds_across_data_sets() -> None:
    """Three seeds whose policies cost 0.02, 0.04 and 0.06 on both data sets: a copy that
    draws the first seed three times (1 in 27) holds only 0.02, so the interval reaches down
    to it; seeds drawn within each data set on their own would mix them (0.025 to 0.055)."""
    costs = np.repeat(np.array([[0.02], [0.04], [0.06]]), 4, axis=1)
    summary = summarise([0, 1, 2], costs, ["a", "b", "a", "b"])
    assert [summary["iqm_cost"], *summary["iqm_interval"]] == pytest.approx([0.04, 0.02, 0.06])


def test_a_sweep_without_a_store_is_refused_before_it_trains(tmp_path) -> None:
    """The sweep evaluates on the replay environment: without a store it is refused before
    its first run, not after training every seed (it trained them all, then refused)."""
    trained: list[TrainConfig] = []

    def fake(config: TrainConfig) -> Any:
        trained.append(config)
        raise AssertionError("trained")

    with pytest.raises(ValueError, match="give --replay-store DIR"):
        train_seeds(TrainConfig(output_dir=str(tmp_path)), 3, train=fake)
    assert trained == []
