"""stable-baselines3 on the natively vectorised replay environment
(agents.experiments.training.vec_adapter): the same episodes as DummyVecEnv, and PPO and MaskablePPO
train on it."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import write_data_files
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv

import ballad_env
from agents.experiments.lattice_build import build_store
from agents.experiments.training.vec_adapter import ReplaySB3VecEnv, make_replay_vec_env, valid
from ballad_env import Settings
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.replay.vector import ReplayVectorEnv
from ballad_env.wrappers import ValidActionWrapper


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    data = write_data_files(tmp_path_factory.mktemp("data"), {"large": 300})
    root = tmp_path_factory.mktemp("store")
    build_store(root, ["large"], [0, 1, 2], [Settings(prior="knn")], data_dir=data,
                progress=False)
    return root


def test_the_adapter_plays_dummy_vec_envs_episodes(store) -> None:
    """Same seeds, same actions (invalid ones replaced as ValidActionWrapper does):
    observations, rewards, dones, terminal observations and the kept info keys equal."""
    n, kwargs = 3, {"prior": "knn", "reward": "cost"}
    dummy = DummyVecEnv([lambda: ValidActionWrapper(BudgetAllocationReplayEnv(store, **kwargs))]
                        * n)
    native = make_replay_vec_env(n, store, **kwargs).venv  # without VecMonitor
    dummy.seed(11)
    native.seed(11)
    assert np.array_equal(dummy.reset(), native.reset())
    rng, ended = np.random.default_rng(0), 0
    for _ in range(40):
        actions = rng.integers(2, size=n)
        expected, got = dummy.step(actions), native.step(actions)
        for a, b in zip(expected[:3], got[:3], strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        for e in np.flatnonzero(expected[2]):
            ended += 1
            assert np.array_equal(expected[3][e]["terminal_observation"],
                                  got[3][e]["terminal_observation"])
            for key in ("test_cost", "dataset", "TimeLimit.truncated"):
                assert expected[3][e][key] == got[3][e][key]
    assert ended == 2 * n


def test_maskable_ppo_reads_the_masks_and_both_algorithms_train(store) -> None:
    env = make_replay_vec_env(4, store, prior="knn", reward="cost")
    env.seed(0)
    env.reset()
    assert is_masking_supported(env)
    masks = get_action_masks(env)
    assert masks.shape == (4, 2) and np.array_equal(masks, env.venv.env.action_masks())
    for algo in (PPO, MaskablePPO):
        model = algo("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0,
                     policy_kwargs={"net_arch": [8]})
        model.set_logger(Logger(folder=None, output_formats=[]))  # no folder left in /tmp
        model.learn(total_timesteps=256)
        assert model.num_timesteps == 256
        episodes = list(model.ep_info_buffer)
        assert len(episodes) >= 12 and all(e["l"] == 15 for e in episodes)
        assert {e["dataset"] for e in episodes} == {"large"}
        assert all(0.0 <= e["test_cost"] <= 1.0 for e in episodes)


def test_training_runs_on_the_vector_env(store, tmp_path) -> None:
    """``TrainConfig(vec_env="vector")``: the run's monitor file holds its episodes, each a
    stored cell of the seeds kept."""
    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.curves import read_monitor
    from agents.experiments.training.sb3 import train

    config = TrainConfig(algo="maskable_ppo", datasets=("large",), total_timesteps=120,
                         settings=Settings(reward="cost", prior="knn"), n_envs=2,
                         vec_env="vector", hyperparameters={"n_steps": 30, "batch_size": 30},
                         episode_seeds=2,
                         replay_store=str(store), output_dir=str(tmp_path), progress_bar=False)
    episodes = read_monitor(train(config).run_dir)
    assert len(episodes) == 8 and np.all(episodes["length"] == 15)
    starts = [BudgetAllocationReplayEnv(store, prior="knn", seeds=[s]).reset()[1]["test_cost"]
              for s in (0, 1)]
    for start in episodes["return"] + episodes["test_cost"]:
        assert min(abs(start - s) for s in starts) < 1e-5
    with pytest.raises(ValueError, match="give replay_store"):
        TrainConfig(vec_env="vector")


def test_valid_replaces_masked_actions_only() -> None:
    masks = np.array([[True, True], [True, False], [False, True], [False, False]])
    assert valid(np.array([1, 1, 0, 1]), masks).tolist() == [1, 0, 1, 1]


def test_the_adapter_refuses_next_step_autoreset(store) -> None:
    env = gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=2, store=store, prior="knn")
    with pytest.raises(ValueError, match="same-step autoreset"):
        ReplaySB3VecEnv(env)
    with pytest.raises(TypeError, match="wraps a ReplayVectorEnv"):
        ReplaySB3VecEnv(gym.make(ballad_env.REPLAY_ENV_ID, store=store, prior="knn"))
    same_step = ReplaySB3VecEnv(ReplayVectorEnv(2, store, prior="knn",
                                                autoreset_mode="same_step"))
    with pytest.raises(AttributeError, match="only action_masks"):
        same_step.env_method("render")
