"""The batched trainer (agents.experiments.training.torch_trainer, agents.ppo.core): SB3's PPO loss
pieces by hand, the run folder of the SB3 path, and a policy that is an ordinary SB3 agent
(the safe loader, the live environment, compare's grid and evaluate_policy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import train_replay, write_data_files
from sb3_contrib.common.maskable.distributions import MaskableCategoricalDistribution
from stable_baselines3.common.evaluation import evaluate_policy

import ballad_env
from agents.evaluation import run_episode
from agents.experiments.cli.train import main as train_main
from agents.experiments.grid import Grid
from agents.experiments.lattice_build import build_store, store_settings
from agents.experiments.run import run_grid
from agents.experiments.stores.results import RunError
from agents.experiments.training import train
from agents.experiments.training.config import Hyperparameters, TrainConfig
from agents.experiments.training.curves import read_monitor
from agents.experiments.training.record import record_dict
from agents.experiments.training.recorder import greedy_costs, policy_act
from agents.experiments.training.rollouts import envs_arguments, make_envs
from agents.policy import load_policy
from agents.ppo import core
from agents.ppo.core import Rollout, gae, policy_outputs
from agents.registry import make_agent
from ballad_env.env import BudgetAllocationEnv
from ballad_env.observation import OBSERVATIONS
from ballad_env.settings import Settings

SETTINGS = Settings(prior="knn", reward="cost")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_data_files(tmp_path_factory.mktemp("data"), {"large": 300})


@pytest.fixture(scope="module")
def store(tmp_path_factory, data) -> Path:
    root = tmp_path_factory.mktemp("store")
    build_store(root, ["large"], [0, 1, 2], [Settings(prior="knn")], data_dir=data,
                progress=False)
    return root


@pytest.fixture(scope="module")
def run(store, tmp_path_factory) -> Path:
    """A MaskablePPO run of 8 environments x 2 rollouts, evaluated after each rollout."""
    return train_replay(store, algo="maskable_ppo", n_envs=8, total_timesteps=240,
                        eval_freq=120, eval_episodes=4, output_dir=tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def compiled_run(store, tmp_path_factory) -> Path:
    """The same run with the compiled trainer (its fused step, eager in the suite) and the
    rollouts played by a worker process one update ahead."""
    return train_replay(store, algo="maskable_ppo", n_envs=8, total_timesteps=240,
                        eval_freq=120, eval_episodes=4, output_dir=tmp_path_factory.mktemp("runs"),
                        trainer="compiled", schedule="pipelined", checkpoint_freq=200)


def test_gae_by_hand() -> None:
    """Two environments, three steps, gamma 0.5, lambda 0.5: the first ends its episode
    at step 1, so step 1 bootstraps nothing and step 0 only step 1's value and advantage."""
    buf = Rollout(3, 2, 1, gamma=0.5, device="cpu")
    buf.values[:] = torch.tensor([[1.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    buf.rewards[:] = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    buf.dones[:] = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    advantages, targets = gae(buf, torch.tensor([8.0, 2.0]), gae_lambda=0.5)
    # env 0: step 2: 1 + 0.5*8 - 4 = 1; step 1 (ended): 1 - 2 = -1;
    # step 0: delta 1 + 0.5*2 - 1 = 1, plus 0.25 * (-1) = 0.75
    # env 1 (values 0): step 2: 1 + 0.5*2 = 2; step 1: 1 + 0.25*2 = 1.5; step 0: 1 + 0.375
    expected = torch.tensor([[0.75, 1.375], [-1.0, 1.5], [1.0, 2.0]])
    assert torch.allclose(advantages, expected)
    assert torch.allclose(targets, expected + buf.values)


def test_the_rollouts_forward_pass_finds_the_layers_once(monkeypatch) -> None:
    """``policy_forward`` walks the policy's modules once, not every step, and still reads
    the weights as they are at each call (updated in place, as an update does)."""
    from agents.experiments.training.torch_trainer import build_model

    hp = Hyperparameters.of("batched", "ppo", {})
    model = build_model("ppo", gym.spaces.Box(0, 1, (5,)), 4, hp, seed=3, device="cpu")
    walks: list[Any] = []
    real = core.policy_layers

    def counted(policy: Any) -> Any:
        walks.append(policy)
        return real(policy)

    monkeypatch.setattr(core, "policy_layers", counted)
    forward = core.policy_forward(model.policy)
    obs = torch.rand(6, 5, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = forward(obs, None)[0].clone()
        model.policy.action_net.bias.add_(1.0)
        after = forward(obs, None)[0]
    assert len(walks) == 1
    assert torch.allclose(after, before + 1.0)
    assert torch.equal(after, policy_outputs(model.policy, obs, None)[0])


def test_masked_log_probabilities_and_entropy_are_sb3_contribs() -> None:
    """The loss's log-probabilities and entropy from masked logits equal those of
    sb3-contrib's MaskableCategorical (what MaskablePPO's loss reads)."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 2, generator=gen)
    masks = torch.tensor([[1, 1], [1, 0], [0, 1], [1, 1], [1, 0], [0, 1]], dtype=torch.bool)
    actions = torch.tensor([0, 0, 1, 1, 0, 1])
    masked = torch.where(masks, logits, torch.full_like(logits, -1e8))
    log_probs = torch.log_softmax(masked, dim=1)
    reference = MaskableCategoricalDistribution(2).proba_distribution(logits)
    reference.apply_masking(masks.numpy())
    assert torch.allclose(log_probs.gather(1, actions[:, None])[:, 0],
                          reference.log_prob(actions))
    assert torch.allclose(-(log_probs.exp() * log_probs).sum(dim=1), reference.entropy())


def test_hyperparameters_refuse_unknown_names_and_bad_values() -> None:
    """The torch trainers' defaults under the given values; bad ones refused by name."""
    hp = Hyperparameters.of("batched", "ppo", {"n_epochs": 3})
    assert (hp.n_epochs, hp.n_steps, hp.batch_size) == (3, 15, 1024)
    assert Hyperparameters.of("compiled", "ppo", {}) == Hyperparameters.of("batched", "ppo", {})
    assert Hyperparameters.of("sb3", "ppo", {}) == Hyperparameters()
    with pytest.raises(ValueError, match=r"unknown hyperparameters \['epochs'\]"):
        TrainConfig(hyperparameters={"epochs": 3})
    with pytest.raises(ValueError, match="batch_size must be at least 2"):
        TrainConfig(hyperparameters={"batch_size": 1})
    with pytest.raises(ValueError, match="gamma and gae_lambda"):
        Hyperparameters(gamma=1.5)


def test_the_run_folder_is_the_sb3_paths(run) -> None:
    """Settings JSON (steps, seconds, settings, features), the model zip, one monitor row
    per rollout that read_monitor counts, the progress log and the evaluations."""
    record = json.loads((run / f"{run.name}.json").read_text())
    assert record["algo"] == "maskable_ppo" and record["trainer"] == "batched"
    assert run.name == "batched-maskable_ppo-cost-large-knn-replay-s0-240steps"
    assert record["num_timesteps"] == 240 and record["train_seconds"] > 0
    assert Settings.from_dict(record["config"]["settings"]) == SETTINGS
    # one layout for every trainer (the SB3 trainer's keys), and the config reads back
    assert set(record) == set(record_dict(TrainConfig(), num_timesteps=0, seconds=0.0))
    config = TrainConfig(**record["config"])
    assert (config.trainer, config.name, config.hp.batch_size) == ("batched", run.name, 32)
    assert record["observation_features"] == list(OBSERVATIONS["v0"])
    assert (run / f"{run.name}.zip").is_file()
    curve = read_monitor(run)
    assert list(curve["timesteps"]) == [120, 240] and list(curve["episodes"]) == [8, 8]
    assert len((run / "logs" / "progress.csv").read_text().splitlines()) == 3
    evaluations = (run / "eval" / "evaluations.csv").read_text().splitlines()
    assert evaluations[0] == "timesteps,mean_return,mean_test_cost" and len(evaluations) == 3


def test_the_best_evaluated_model_is_kept_as_sb3_keeps_it(store, tmp_path) -> None:
    """``eval/best_model.zip``, as SB3's ``EvalCallback`` writes it for the SB3 trainer: the
    model at the evaluation of the highest mean return (the first of equals), which the
    safe loader reads; its weights are the checkpoint's of the same steps."""
    run = train_replay(store, n_envs=8, total_timesteps=360, eval_freq=120, eval_episodes=4,
                       checkpoint_freq=120, output_dir=tmp_path)
    rows = [line.split(",") for line in
            (run / "eval" / "evaluations.csv").read_text().splitlines()[1:]]
    returns = [float(r[1]) for r in rows]
    best = int(rows[returns.index(max(returns))][0])
    assert [int(r[0]) for r in rows] == [120, 240, 360]
    kept = load_policy(run / "eval" / "best_model.zip").model
    assert kept.num_timesteps == best
    checkpoint = load_policy(run / "checkpoints" / f"{run.name}_{best}_steps.zip").model
    weights = checkpoint.policy.state_dict()
    assert all(torch.equal(t, weights[k]) for k, t in kept.policy.state_dict().items())


@pytest.mark.parametrize("algo", ["ppo", "maskable_ppo"])
def test_the_sb3_trainer_on_a_store_evaluates_as_the_torch_trainers(algo, store,
                                                                     tmp_path) -> None:
    """On a replay store the SB3 trainer's evaluation is the torch trainers' (and the seed
    sweep's): the cost and return it records are those of the same replay episodes played
    greedily by the policy it had (its checkpoint of the same steps), and it keeps the best
    model. SB3's own EvalCallback played other episodes, so the trainers' evaluations did
    not compare."""
    config = TrainConfig(algo=algo, datasets=("large",), replay_store=str(store),
                         settings=SETTINGS, vec_env="vector", n_envs=4, total_timesteps=240,
                         hyperparameters={"n_steps": 15, "batch_size": 30, "n_epochs": 1},
                         eval_freq=60, eval_episodes=6, checkpoint_freq=120,
                         progress_bar=False, output_dir=str(tmp_path))
    result = train(config)
    rows = {int(r.split(",")[0]): r.split(",")[1:] for r in
            (result.run_dir / "eval" / "evaluations.csv").read_text().splitlines()[1:]}
    assert sorted(rows) == [60, 120, 180, 240]
    checkpoint = result.run_dir / "checkpoints" / f"{config.name}_120_steps.zip"
    masked = algo == "maskable_ppo"
    returns, costs = greedy_costs(policy_act(load_policy(checkpoint).model.policy, masked),
                                  make_envs(*envs_arguments(config, 6)), config.eval_seed)
    assert rows[120] == [f"{returns.mean():.6f}", f"{costs.mean():.6f}"]
    assert (result.run_dir / "eval" / "best_model.zip").is_file()


@pytest.mark.parametrize("trainer", ["batched", "compiled"])
def test_the_saved_policy_loads_safely_and_acts_as_trained(trainer, request, store) -> None:
    """The safe loader rebuilds the network with the trained weights: its greedy actions,
    SB3's own predict with masks and the trainer's masked argmax agree on every state
    of replayed episodes (the compiled trainer's too, whose parameters lived in one flat
    vector while it trained)."""
    run = request.getfixturevalue("run" if trainer == "batched" else "compiled_run")
    agent = load_policy(run / f"{run.name}.zip")
    env = gym.make(ballad_env.REPLAY_ENV_ID, store=store, settings=SETTINGS)
    replay: Any = env.unwrapped  # the replay env, whose action_masks Env does not declare
    rows, masks = [], []
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        for action in [0, 1] * 7 + [0]:
            rows.append(obs)
            masks.append(replay.action_masks())
            mask = replay.action_masks()
            obs, *_ = env.step(action if mask[action] else 1 - action)
    obs, mask = np.array(rows), np.array(masks)
    logits, _ = policy_outputs(agent.model.policy, torch.as_tensor(obs), torch.as_tensor(mask))
    trained = logits.argmax(dim=1).numpy()
    assert np.array_equal(agent.predict(obs)[0], trained)
    assert np.array_equal(agent.model.predict(obs, deterministic=True, action_masks=mask)[0],
                          trained)


def test_the_compiled_run_folder_records_its_update(compiled_run) -> None:
    """The compiled trainer writes the batched trainer's folder, its name and the update's
    setup (eager here: the suite sets BALLAD_NO_COMPILE), the overlapped loop's wait, and a
    saved Adam state of SB3's shape (one step count per parameter: 2 rollouts x 2 epochs x
    4 minibatches of 32 from 120 rows = 16 steps), and a checkpoint at the first rollout
    past 200 steps that the safe loader reads."""
    record = json.loads((compiled_run / f"{compiled_run.name}.json").read_text())
    assert record["trainer"] == "compiled" and compiled_run.name.startswith("compiled-")
    assert record["update"]["compiled"] is False and record["update"]["schedule"] == "pipelined"
    assert "overlapped" not in record["update"]  # the schedule says it, once
    assert record["num_timesteps"] == 240 and set(record["seconds"]) == {
        "env", "rollout", "update", "wait"}
    assert list(read_monitor(compiled_run)["episodes"]) == [8, 8]
    model = load_policy(compiled_run / f"{compiled_run.name}.zip", trust_pickle=True).model
    state = model.policy.optimizer.state_dict()["state"]
    assert len(state) == len(list(model.policy.parameters()))
    assert {float(s["step"]) for s in state.values()} == {16.0}
    checkpoint = compiled_run / "checkpoints" / f"{compiled_run.name}_240_steps.zip"
    assert [p.name for p in (compiled_run / "checkpoints").iterdir()] == [checkpoint.name]
    weights = load_policy(checkpoint).model.policy.state_dict()
    final = model.policy.state_dict()
    assert all(torch.equal(weights[k], final[k]) for k in final)  # the last update's


def test_the_policy_plays_the_live_env_compare_and_evaluate_policy(run, data, tmp_path) -> None:
    path = str(run / f"{run.name}.zip")
    live = BudgetAllocationEnv(["large"], data_dir=data, settings=SETTINGS)
    records = run_episode(live, make_agent(path), seed=0)
    assert len(records) == 15
    with pytest.warns(UserWarning, match="Monitor"):
        _, lengths = evaluate_policy(load_policy(path).model, live, n_eval_episodes=1,
                                     return_episode_rewards=True)
    assert lengths == [15]
    table = run_grid(Grid(("large",), (0,), (path, "all-in-lr"), (SETTINGS,)), tmp_path,
                     data_dir=data, n_jobs=1, progress=False)
    assert set(table["agent"]) == {f"policy:{run.name}", "all-in-lr"}


def test_ppo_observation_v1_and_reproducible(store, tmp_path) -> None:
    """PPO on observation v1: the network reads the vector env's 20 features; the same seed
    gives the same weights."""
    kwargs = {"algo": "ppo", "n_envs": 4, "total_timesteps": 60, "observation": "v1",
              "output_dir": tmp_path}
    first = train_replay(store, run_name="a", **kwargs)
    second = train_replay(store, run_name="b", **kwargs)
    a, b = (load_policy(d / f"{d.name}.zip") for d in (first, second))
    assert a.observation_version == "v1"
    assert a.model.observation_space.shape == (len(OBSERVATIONS["v1"]),)
    for key, value in a.model.policy.state_dict().items():
        assert torch.equal(value, b.model.policy.state_dict()[key])


def test_a_finished_batched_run_is_replaced_only_with_overwrite(store, tmp_path) -> None:
    """As the SB3 path: the same run name again is refused, and --overwrite replaces it."""
    kwargs = {"algo": "ppo", "n_envs": 4, "total_timesteps": 60, "output_dir": tmp_path,
              "run_name": "again"}
    first = train_replay(store, **kwargs)
    with pytest.raises(RunError, match="Pass --overwrite"):
        train_replay(store, **kwargs)
    assert train_replay(store, overwrite=True, **kwargs) == first
    assert (first / "again.zip").is_file()
    argv = ["--trainer", "batched", "--replay-store", str(store), "--algo", "ppo", "--prior",
            "knn", "--n-envs", "4", "--total-timesteps", "60", "--batch-size", "30",
            "--output-dir", str(tmp_path), "--run-name", "again", "--no-progress"]
    assert train_main(argv) == 2  # refused, with the hint
    assert train_main([*argv, "--overwrite"]) == 0


def test_store_settings_and_bad_options(store, tmp_path) -> None:
    assert store_settings(store, None, None) == SETTINGS
    assert store_settings(store, None, "entropy") == SETTINGS.replace(reward="entropy")
    with pytest.raises(ValueError, match="not 'dqn': train A2C or DQN with --trainer sb3"):
        train_replay(store, algo="dqn", output_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown observation version 'v9'"):
        train_replay(store, observation="v9", output_dir=tmp_path)


def test_the_command_line_trains_batched(store, tmp_path, capsys) -> None:
    argv = ["--trainer", "batched", "--algo", "maskable_ppo", "--replay-store", str(store),
            "--prior", "knn", "--n-envs", "4", "--total-timesteps", "60", "--batch-size", "30",
            "--output-dir", str(tmp_path), "--run-name", "cli", "--no-progress"]
    assert train_main(argv) == 0
    record = json.loads((tmp_path / "cli" / "cli.json").read_text())
    assert record["algorithm_kwargs"]["batch_size"] == 30
    compiled = [*argv[2:-3], "--trainer", "compiled", "--no-overlap", "--run-name", "cli2",
                "--no-progress"]
    assert train_main(compiled) == 0
    record = json.loads((tmp_path / "cli2" / "cli2.json").read_text())
    assert record["trainer"] == "compiled" and record["update"]["schedule"] == "sequential"
    assert record["algorithm_kwargs"]["n_epochs"] == 4  # the torch trainers' default
    assert TrainConfig(**record["config"]).hp.batch_size == 30
    assert (tmp_path / "cli" / "curve.png").is_file()
    assert train_main(["--trainer", "batched", "--output-dir", str(tmp_path)]) == 2
    assert "give --replay-store" in capsys.readouterr().err


def test_the_learning_check_replays_a_groups_policies(store, tmp_path) -> None:
    """``timings --quality-runs``: a group's greedy policies replayed on every cell, beside
    the yardsticks; no path beats the hindsight optimum of the final cost."""
    from scripts.studies.timings.training import quality_table, run_groups

    run = train_replay(store, n_envs=4, total_timesteps=60, output_dir=tmp_path,
                       run_name="g-s0")
    assert run_groups(tmp_path) == {"g": [run]}
    rows = {r["policy"]: r for r in quality_table({"g": [run]}, store, SETTINGS)}
    assert set(rows) == {"optimal-final", "optimal", "oracle", "all-in-lr", "all-in-al", "g"}
    best = rows["optimal-final"]["final_cost"]
    assert all(r["final_cost"] >= best - 1e-12 for r in rows.values())
    assert rows["g"]["range"][0] == rows["g"]["range"][1] == rows["g"]["final_cost"]
    assert rows["g"]["seconds"] > 0


def test_the_training_timings_need_a_store_and_moved_from_the_bench(capsys) -> None:
    """The studies' timings run as ``python -m scripts.studies.timings``; ``ballad-env
    bench --training`` says so in one line."""
    from agents.experiments.cli.bench import main as bench_main
    from scripts.studies.timings.__main__ import main as timings_main

    assert timings_main(["--training"]) == 2
    assert "--training and --ppo-paths need --replay-store" in capsys.readouterr().err
    assert timings_main(["--quality-runs", "."]) == 2
    assert "--quality-runs needs --eval-store" in capsys.readouterr().err
    assert bench_main(["--training", "--replay-store", "s"]) == 2
    assert "python -m scripts.studies.timings --training" in capsys.readouterr().err


def test_a_rollout_refuses_an_environment_that_truncates() -> None:
    """The trainers bootstrap nothing past an episode's end: the replay environment never
    truncates (its vector env equals single replay envs, tests/test_replay_vector.py), and
    one that did would be refused, not trained on with a wrong return."""
    from types import SimpleNamespace

    from agents.experiments.training.rollouts import collect

    class Truncating:
        num_envs = 2
        unwrapped = SimpleNamespace(action_masks=lambda: np.ones((2, 2), dtype=bool))

        def step(self, actions):
            return (np.zeros((2, 3), np.float32), np.zeros(2), np.array([False, False]),
                    np.array([True, False]), {})

    def forward(obs, masks):
        return torch.zeros(len(obs), 2), torch.zeros(len(obs))

    buf = Rollout(2, 2, 3, gamma=1.0, device="cpu")
    with pytest.raises(ValueError, match="truncated an episode"):
        collect(Truncating(), forward, np.zeros((2, 3), np.float32), buf, False,
                torch.Generator().manual_seed(0), np.zeros(2), {"env": 0.0, "rollout": 0.0})


def test_the_replay_vector_env_never_truncates(store) -> None:
    """What the rollout relies on: two whole episodes of 4 environments end terminated,
    never truncated (so nothing is bootstrapped past an episode's end)."""
    from agents.experiments.training.rollouts import make_envs

    envs = make_envs(store, 4, SETTINGS, ["large"], None, "v0")
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(2 * SETTINGS.n_rounds):
        masks = envs.unwrapped.action_masks()  # a random action among the valid ones
        actions = np.where(masks.all(axis=1), rng.integers(0, 2, 4), masks[:, 1].astype(int))
        _, _, terminated, truncated, _ = envs.step(actions)
        assert not truncated.any()
        ended += int(terminated.sum())
    envs.close()
    assert ended == 8
