"""skrl (2.1.1, beside torch 2.13): its documented PPO (a categorical policy, a value
model, a random memory, the sequential trainer) over Gymnasium's vector env of mixed data
sets, live and replay, with no warning caused by the environment: 150 steps live, 400 on
replay (over a hundred three-round episodes, each data set and seed many times)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from clients.conftest import LIVE, MIXED, REPLAY, env_kwargs

torch = pytest.importorskip("torch")
skrl = pytest.importorskip("skrl")
from skrl.agents.torch.ppo import PPO, PPO_CFG  # noqa: E402
from skrl.envs.wrappers.torch import wrap_env  # noqa: E402
from skrl.memories.torch import RandomMemory  # noqa: E402
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model  # noqa: E402
from skrl.trainers.torch import SequentialTrainer  # noqa: E402


class Policy(CategoricalMixin, Model):
    """Logits of (AL, LR) from the observation."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space)
        CategoricalMixin.__init__(self, unnormalized_log_prob=True)
        self.net = torch.nn.Sequential(torch.nn.Linear(self.num_observations, 16),
                                       torch.nn.Tanh(), torch.nn.Linear(16, 2))

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[Any, dict]:
        return self.net(inputs["observations"]), {}


class Value(DeterministicMixin, Model):
    """The state's value."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space)
        DeterministicMixin.__init__(self)
        self.net = torch.nn.Sequential(torch.nn.Linear(self.num_observations, 16),
                                       torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[Any, dict]:
        return self.net(inputs["observations"]), {}


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
def test_ppo_over_mixed_data_sets_warns_of_nothing(env_id: str, mixed_store: Path) -> None:
    torch.manual_seed(0)
    steps = 400 if env_id == REPLAY else 150
    skrl.logger.setLevel(logging.WARNING)  # its info lines outlive pytest's capture
    vector = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync",
                          **env_kwargs(env_id, mixed_store, MIXED))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = wrap_env(vector, wrapper="gymnasium")
        models = {"policy": Policy(env.observation_space, env.action_space),
                  "value": Value(env.observation_space, env.action_space)}
        agent = PPO(models=models, memory=RandomMemory(memory_size=16, num_envs=2),
                    observation_space=env.observation_space, action_space=env.action_space,
                    cfg=PPO_CFG(rollouts=16, learning_epochs=2, mini_batches=2))
        trainer = SequentialTrainer(env=env, agents=agent, cfg={
            "timesteps": steps // 2, "headless": True, "disable_progressbar": True})
        trainer.train()
    env.close()
    assert [str(w.message) for w in caught if "shape" in str(w.message)
            or "ballad_env" in w.filename] == []
