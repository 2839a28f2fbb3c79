"""Learned policies: train each algorithm briefly on ``toy``, save, load, act; the reward and
multi-data-set options they train on, checked by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents import run_episode
from agents.base import mask_from_observation
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.curves import read_monitor
from agents.experiments.training.sb3 import train
from agents.policy import ALGORITHMS, PolicyAgent, is_policy_path, load_policy
from ballad_env import FEATURE_INDEX, BudgetAllocationEnv
from ballad_env.data import Dataset, load_dataset
from ballad_env.settings import Settings
from ballad_env.wrappers import ValidActionWrapper

ROOT = Path(__file__).resolve().parents[1]
STEPS = 150  # ten toy episodes: enough for every algorithm to update at least once
PRIOR = "knn"  # resets 10x cheaper than IForest on toy; the policy code does not depend on it


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """One short training run per algorithm on ``toy``; the saved model path of each."""
    out = tmp_path_factory.mktemp("policies")
    paths = {}
    for algo in ALGORITHMS:
        config = TrainConfig(algo=algo, datasets=("toy",),
                             settings=Settings(reward="cost", prior=PRIOR),
                             total_timesteps=STEPS, n_envs=1, vec_env="dummy",
                             hyperparameters={"n_steps": 30, "batch_size": 30}, seed=1,
                             output_dir=str(out), progress_bar=False)
        paths[algo] = train(config).model_path
    return paths


def _actions(records: list[dict]) -> list[str]:
    return [r["action"] for r in records]


def _costs(records: list[dict]) -> list[float]:
    return [r["test_cost"] for r in records]


# --------------------------------------------------------------------------- train, save, load
@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_training_saves_model_settings_and_monitor(trained, algo):
    path = trained[algo]
    assert path.is_file() and path.suffix == ".zip"
    settings = json.loads(path.with_suffix(".json").read_text())
    assert settings["algo"] == algo
    assert settings["config"]["datasets"] == ["toy"]
    assert settings["num_timesteps"] >= STEPS
    assert settings["train_seconds"] > 0
    episodes = read_monitor(path.parent)
    assert len(episodes) == STEPS // 15
    assert set(episodes["dataset"]) == {"toy"}
    assert np.all(episodes["length"] == 15)
    assert episodes["timesteps"].iloc[-1] == STEPS


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_loaded_policy_acts_deterministically(trained, algo):
    env = BudgetAllocationEnv("toy", reward="cost", prior=PRIOR)
    agent = load_policy(trained[algo], env)
    assert isinstance(agent, PolicyAgent)
    assert agent.name == trained[algo].stem
    first, second = run_episode(env, agent, seed=5), run_episode(env, agent, seed=5)
    assert len(first) == 15
    assert _actions(first) == _actions(second)
    assert _costs(first) == _costs(second)
    assert set(_actions(first)) <= {"AL", "LR"}


@pytest.mark.slow
def test_stochastic_predictions_follow_the_agent_seed(trained):
    agent = load_policy(trained["ppo"])
    obs = np.tile(BudgetAllocationEnv("toy", prior=PRIOR).reset(seed=0)[0], (50, 1))
    agent.reset(3)
    a, _ = agent.predict(obs, deterministic=False)
    agent.reset(3)
    b, _ = agent.predict(obs, deterministic=False)
    assert a.shape == (50,) and np.array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_policy_never_chooses_an_exhausted_pool(trained, algo):
    agent = load_policy(trained[algo])
    obs, _ = BudgetAllocationEnv("toy", prior=PRIOR).reset(seed=0)
    for exhausted, expected in (("al_available", 1), ("lr_available", 0)):
        blocked = obs.copy()
        blocked[FEATURE_INDEX[exhausted]] = 0.0
        for deterministic in (True, False):
            action, _ = agent.predict(blocked, deterministic=deterministic)
            assert action == expected
        probs = agent.action_probabilities(blocked)
        assert probs[0, 1 - expected] == 0.0 and probs[0, expected] == pytest.approx(1.0)


def _start_observations(n_seeds: int = 4) -> np.ndarray:
    """Observations along toy episodes (ballad's path) where both label pools are open."""
    from agents import make_agent

    rows: list[np.ndarray] = []
    env = BudgetAllocationEnv("toy", prior=PRIOR)
    for seed in range(n_seeds):
        run_episode(env, make_agent("ballad", env), seed,
                    on_step=lambda obs, *_: rows.append(obs.copy()))
    obs = np.array(rows)
    return obs[mask_from_observation(obs).all(axis=1)]


@pytest.mark.slow
def test_dqn_probabilities_are_epsilon_greedy_with_the_final_rate(trained):
    """eps = 0.05 (the final rate, as saved): 1 - eps + eps/2 = 0.975 on the greedy action,
    eps/2 = 0.025 on the other; the initial rate (1.0) would give 0.5 / 0.5 instead."""
    import torch

    agent = load_policy(trained["dqn"])
    model = agent.model
    assert model.exploration_final_eps == 0.05 == model.exploration_rate
    assert agent.settings["algorithm_kwargs"]["exploration_final_eps"] == 0.05
    obs = _start_observations()
    assert len(obs) > 10
    with torch.no_grad():
        q = model.q_net(torch.as_tensor(obs)).numpy()
    greedy = q.argmax(axis=1)
    expected = np.where(np.arange(2) == greedy[:, None], 0.975, 0.025)
    np.testing.assert_allclose(agent.action_probabilities(obs), expected, rtol=0, atol=1e-12)
    wrong = load_policy(trained["dqn"])
    wrong.model.exploration_final_eps = wrong.model.exploration_initial_eps
    assert not np.allclose(wrong.action_probabilities(obs), expected, rtol=0, atol=1e-3)


def test_training_uses_and_records_non_default_settings(tmp_path):
    """c_fn = 10 and a 10% budget (5 rounds) reach the training env and the settings JSON."""
    settings = Settings(reward="cost", prior=PRIOR, c_fn=10.0, budget_fraction=0.1)
    config = TrainConfig(datasets=("toy",), settings=settings, total_timesteps=30,
                         hyperparameters={"gamma": 0.9, "n_steps": 10, "batch_size": 10},
                         n_envs=1, vec_env="dummy", seed=3,
                         output_dir=str(tmp_path), progress_bar=False)
    result = train(config)
    saved = json.loads(result.settings_path.read_text())
    assert saved["config"]["settings"] == settings.to_dict()
    assert saved["config"]["settings"]["name"] == "knn_cost_cfn10_budget0.1"
    assert saved["config"]["hyperparameters"]["gamma"] == 0.9
    assert saved["algorithm_kwargs"]["gamma"] == 0.9
    assert TrainConfig(**saved["config"]) == config  # the JSON reads back as the config
    episodes = read_monitor(result.run_dir)
    assert len(episodes) == 6 and np.all(episodes["length"] == 5)
    # Worker 0 first resets with the run's seed; its return is the cost decrease, so the start
    # cost it saw is the one under c_fn = 10 (not the default c_fn = 1).
    seen = episodes["return"].iloc[0] + episodes["test_cost"].iloc[0]
    start = BudgetAllocationEnv("toy", settings=settings).reset(seed=3)[1]["test_cost"]
    default = BudgetAllocationEnv("toy", settings=settings.replace(c_fn=1.0)).reset(seed=3)[1]
    assert seen == pytest.approx(start, abs=1e-5)
    assert abs(start - default["test_cost"]) > 1e-3


def test_a_run_closes_its_progress_table(tmp_path, monkeypatch):
    """SB3's logger writes ``logs/progress.csv``; the run closes it when training ends (left
    open, the file was closed whenever it was collected, as a ResourceWarning in some other
    test)."""
    from agents.experiments.training import sb3

    loggers, original = [], sb3.configure

    def configure(*args, **kwargs):
        loggers.append(original(*args, **kwargs))
        return loggers[-1]

    monkeypatch.setattr(sb3, "configure", configure)
    config = TrainConfig(datasets=("toy",), settings=Settings(reward="cost", prior=PRIOR),
                         total_timesteps=30, hyperparameters={"n_steps": 10, "batch_size": 10},
                         n_envs=1, vec_env="dummy", output_dir=str(tmp_path),
                         progress_bar=False)
    train(config)
    files = [fmt.file for fmt in loggers[0].output_formats]
    assert files and all(f.closed for f in files)


def test_mask_from_observation_allows_both_when_nothing_is_left():
    obs = np.zeros((1, len(FEATURE_INDEX)), dtype=np.float32)
    assert mask_from_observation(obs).tolist() == [[True, True]]


@pytest.mark.slow
def test_load_policy_explains_missing_or_stale_settings(trained, tmp_path):
    model = tmp_path / "copy.zip"
    model.write_bytes(trained["a2c"].read_bytes())
    with pytest.raises(FileNotFoundError, match="settings file"):
        load_policy(model)
    settings = json.loads(trained["a2c"].with_suffix(".json").read_text())
    settings["observation_features"] = settings["observation_features"][:-1]
    model.with_suffix(".json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match="retrain"):
        load_policy(model)
    with pytest.raises(FileNotFoundError, match="no saved model"):
        load_policy(tmp_path / "missing.zip")
    assert is_policy_path("results/x/run.ZIP") and not is_policy_path("ballad")


def test_valid_action_wrapper_switches_when_a_pool_runs_out():
    """The whole of D as budget: D runs out before the 15 rounds do; AL then falls back to LR."""
    env = ValidActionWrapper(BudgetAllocationEnv("toy", prior=PRIOR, budget_fraction=1.0,
                                                 round_fraction=1 / 15))
    env.reset(seed=0)
    episode = env.unwrapped.episode
    al_rounds = episode.train_labels.size // episode.budget.per_round
    assert al_rounds < episode.budget.n_rounds
    actions = [env.step(0)[4]["action"] for _ in range(episode.budget.n_rounds)]
    assert actions == ["AL"] * al_rounds + ["LR"] * (episode.budget.n_rounds - al_rounds)


# --------------------------------------------------------------------------- the script
@pytest.mark.slow
def test_train_policy_script_smoke(tmp_path):
    """The command line end to end: subprocess workers, evaluation, checkpoints, curve."""
    cmd = [sys.executable, "-m", "ballad_env", "train", "--algo", "maskable_ppo",
           "--datasets", "toy", "--prior", PRIOR, "--reward", "val_cost", "--total-timesteps", "60",
           "--n-steps", "15", "--batch-size", "30", "--n-envs", "2", "--vec-env", "subproc",
           "--eval-freq", "30", "--eval-episodes", "1", "--checkpoint-freq", "30",
           "--seed", "4", "--c-fn", "10", "--discount", "0.95", "--output-dir", str(tmp_path),
           "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / f"maskable_ppo-val_cost-toy-{PRIOR}_cfn10-s4-60steps"
    for name in (f"{run.name}.zip", f"{run.name}.json",
                 "curve.png", "monitor/0.monitor.csv", "monitor/1.monitor.csv",
                 "eval/evaluations.csv", "logs/progress.csv"):
        assert (run / name).is_file(), name
    assert len(list((run / "checkpoints").glob("*.zip"))) == 2
    evaluations = (run / "eval" / "evaluations.csv").read_text().splitlines()
    assert evaluations[0] == "timesteps,mean_return,mean_test_cost" and len(evaluations) == 3
    agent = load_policy(run / f"{run.name}.zip")
    config = agent.settings["config"]
    assert config["settings"]["reward"] == "val_cost" and config["settings"]["c_fn"] == 10.0
    assert config["settings"]["prior"] == PRIOR and config["hyperparameters"]["gamma"] == 0.95
    assert agent.model.gamma == 0.95


# --------------------------------------------------------------------------- env options
def _small_sets() -> list[Dataset]:
    """Three cheap, differently named data sets cut from ``toy``."""
    toy = load_dataset("toy")
    rows = [np.r_[np.flatnonzero(toy.y)[:8 * k], np.flatnonzero(toy.y == 0)[:150]]
            for k in (1, 2, 3)]
    return [Dataset(f"toy{k}", toy.X[r], toy.y[r]) for k, r in enumerate(rows)]


def test_multi_dataset_draw_is_seeded_and_covers_the_list():
    sets = _small_sets()
    names = {d.name for d in sets}

    def draws(seed: int, n: int = 9) -> list[str]:
        env = BudgetAllocationEnv(sets, prior=PRIOR)
        first = env.reset(seed=seed)[1]["dataset"]
        return [first] + [env.reset()[1]["dataset"] for _ in range(n - 1)]

    a, b = draws(seed=11), draws(seed=11)
    assert a == b
    assert set(a) == names


def _hand_test_cost(episode) -> float:
    """(c_fp FP + c_fn FN + c_r R) / |T| from the episode's test probabilities and tau."""
    p, y, c = episode.p_test, episode.split.y_test, episode.costs
    rejected = 2 * np.abs(p - 0.5) < episode.tau
    fp = np.sum(~rejected & (p > 0.5) & (y == 0))
    fn = np.sum(~rejected & (p <= 0.5) & (y == 1))
    return (c.c_fp * fp + c.c_fn * fn + c.c_r * rejected.sum()) / len(y)


def _hand_val_cost(episode) -> float:
    """The same cost on the labels that set tau: labeled V, else labeled D; 0 with none."""
    if episode.val_labels.count:
        idx = np.concatenate(episode.val_labels.order)
        p, y = episode.p_val[idx], episode.split.y_val[idx]
    elif episode.train_labels.count:
        idx = np.concatenate(episode.train_labels.order)
        p, y = episode.p_train[idx], episode.split.y_train[idx]
    else:
        return 0.0
    c = episode.costs
    rejected = 2 * np.abs(p - 0.5) < episode.tau
    fp = np.sum(~rejected & (p > 0.5) & (y == 0))
    fn = np.sum(~rejected & (p <= 0.5) & (y == 1))
    return (c.c_fp * fp + c.c_fn * fn + c.c_r * rejected.sum()) / len(y)


# AL first (tau on biased training labels), then LR (tau moves to V), then a mix.
ACTIONS = (0, 0, 1, 0, 1, 1)


@pytest.mark.parametrize("reward", ["cost", "val_cost"])
def test_cost_rewards_match_a_hand_computation(reward):
    env = BudgetAllocationEnv("toy", reward=reward)
    _, info = env.reset(seed=2)
    hand = {"cost": _hand_test_cost, "val_cost": _hand_val_cost}[reward]
    before = hand(env.episode)
    assert before == pytest.approx(info["test_cost" if reward == "cost" else "val_cost"])
    for action in ACTIONS:
        _, r, _, _, info = env.step(action)
        after = hand(env.episode)
        assert r == pytest.approx(before - after, abs=1e-12)
        # The info reports the test cost (and the validation estimate) whatever the reward.
        assert info["test_cost"] == pytest.approx(_hand_test_cost(env.episode))
        assert info["val_cost"] == pytest.approx(_hand_val_cost(env.episode))
        before = after


def test_run_names_tell_settings_apart() -> None:
    """Runs under other settings never share a folder; default runs keep their short name."""
    assert TrainConfig(datasets=("toy",)).name == "ppo-cost-toy-s0-3000steps"
    assert TrainConfig(algo="dqn", datasets=("a", "b"), seed=2, settings=Settings(
        reward="val_cost")).name == "dqn-val_cost-2sets-s2-3000steps"
    costly = TrainConfig(datasets=("toy",), settings=Settings(reward="cost", c_fn=10))
    assert costly.name == "ppo-cost-toy-iforest_cfn10-s0-3000steps"
    assert costly.run_dir != TrainConfig(datasets=("toy",)).run_dir
    assert TrainConfig(datasets=("toy",), total_timesteps=60).name == "ppo-cost-toy-s0-60steps"


def test_training_again_refuses_to_replace_a_finished_run(tmp_path, capsys):
    """A second ``ballad-env train`` under a finished run's name silently replaced it."""
    from agents.experiments.cli.train import main as train_main

    options = ["--algo", "ppo", "--datasets", "toy", "--prior", PRIOR, "--total-timesteps",
               "30", "--n-steps", "15", "--batch-size", "15", "--n-envs", "1", "--vec-env",
               "dummy", "--output-dir", str(tmp_path), "--no-progress"]
    assert train_main(options) == 0
    model = tmp_path / "ppo-cost-toy-knn-s0-30steps" / "ppo-cost-toy-knn-s0-30steps.zip"
    before = model.read_bytes()
    assert train_main(options) == 2
    assert "is a finished run of this name" in capsys.readouterr().err
    assert model.read_bytes() == before
    assert train_main([*options, "--overwrite"]) == 0 and model.is_file()
