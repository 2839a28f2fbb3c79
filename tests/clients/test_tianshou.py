"""Tianshou (2.0.1, in a virtualenv of its own: it pins pandas below 3, which the project's
``stats`` extra does not take): its documented discrete PPO over mixed data sets, live and
replay, a few thousand steps with no warning caused by the environment; its collector's
episodes give the environment's returns."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from clients.conftest import LIVE, MIXED, REPLAY, direct_rewards, env_kwargs

torch = pytest.importorskip("torch")
pytest.importorskip("tianshou")
from tianshou.algorithm import PPO  # noqa: E402
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy  # noqa: E402
from tianshou.algorithm.optim import AdamOptimizerFactory  # noqa: E402
from tianshou.data import Collector, CollectStats, VectorReplayBuffer  # noqa: E402
from tianshou.env import DummyVectorEnv  # noqa: E402
from tianshou.trainer import OnPolicyTrainerParams  # noqa: E402
from tianshou.utils.net.common import Net  # noqa: E402
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic  # noqa: E402


def ppo(env: gym.Env) -> PPO:
    """Tianshou's discrete PPO as its own test builds it, small."""
    shape = env.observation_space.shape
    actor = DiscreteActor(preprocess_net=Net(state_shape=shape, hidden_sizes=[16]),
                          action_shape=2)
    critic = DiscreteCritic(preprocess_net=Net(state_shape=shape, hidden_sizes=[16]))
    policy = DiscreteActorPolicy(actor=actor, dist_fn=torch.distributions.Categorical,
                                 action_space=env.action_space, deterministic_eval=True)
    return PPO(policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=3e-4))


def vector_env(env_id: str, store: Path, each: bool) -> DummyVectorEnv:
    """Two sub-environments: one data set each (``each``), or both drawing among both."""
    sets = [[name] for name in MIXED] if each else [MIXED, MIXED]
    return DummyVectorEnv([lambda s=s: gym.make(env_id, **env_kwargs(env_id, store, s))
                           for s in sets])


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
def test_ppo_over_mixed_data_sets_warns_of_nothing(env_id: str, mixed_store: Path) -> None:
    torch.manual_seed(0)
    steps = 2_000 if env_id == REPLAY else 320  # a collection step of a multiple of 2 envs
    train, test = vector_env(env_id, mixed_store, True), vector_env(env_id, mixed_store, False)
    train.seed(0)
    test.seed(1)
    algorithm = ppo(gym.make(env_id, **env_kwargs(env_id, mixed_store, MIXED)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = algorithm.run_training(OnPolicyTrainerParams(
            training_collector=Collector[CollectStats](algorithm, train,
                                                       VectorReplayBuffer(steps, len(train))),
            test_collector=Collector[CollectStats](algorithm, test), max_epochs=1,
            epoch_num_steps=steps, collection_step_num_env_steps=steps // 4,
            update_step_num_repetitions=1, batch_size=64, test_step_num_episodes=2,
            verbose=False, show_progress=False))
    assert result.train_step >= steps and result.train_episode >= steps // 3 - 2
    assert [str(w.message) for w in caught if "shape" in str(w.message)
            or "ballad_env" in w.filename] == []


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
def test_collector_returns_are_the_envs(env_id: str, mixed_store: Path) -> None:
    """Episodes collected with a seeded vector env (Tianshou seeds each sub-env, then resets
    it again): each episode's return is its actions' rewards played directly."""
    envs = vector_env(env_id, mixed_store, True)
    envs.seed([5, 6])
    algorithm = ppo(gym.make(env_id, **env_kwargs(env_id, mixed_store, MIXED)))
    buffer = VectorReplayBuffer(12, 2)
    collector = Collector[CollectStats](algorithm, envs, buffer)
    collector.reset()
    collector.collect(n_episode=2)
    for e, name in enumerate(MIXED):
        part = buffer.buffers[e]
        actions = part.act[:len(part)].tolist()
        expected = direct_rewards(env_id, env_kwargs(env_id, mixed_store, [name]), 5 + e,
                                  actions, resets=2)
        np.testing.assert_allclose(part.rew[:len(part)], expected, atol=1e-6)
