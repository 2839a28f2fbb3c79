"""Stable-Baselines3 and sb3-contrib (the ``rl`` extra) as ``docs/clients.md`` shows them:
MaskablePPO over mixed data sets reaching ``action_masks()`` through SB3's Monitor, and plain
PPO where a pool runs out, with ``unavailable_action="other"``."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from clients.conftest import LIVE, MIXED, REPLAY, env_kwargs

pytest.importorskip("sb3_contrib")
from sb3_contrib import MaskablePPO  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
def test_maskable_ppo_over_mixed_data_sets(env_id: str, mixed_store: Path) -> None:
    venv = make_vec_env(env_id, n_envs=2, seed=0,
                        env_kwargs=env_kwargs(env_id, mixed_store, MIXED))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = MaskablePPO("MlpPolicy", venv, n_steps=32, batch_size=32, seed=0).learn(64)
    assert model.num_timesteps == 64
    venv.close()


@pytest.mark.slow
def test_plain_ppo_where_a_pool_runs_out() -> None:
    """wdbc in 4 rounds of 25%: D holds 3; PPO (no masks) trains through the exhausted pool."""
    tight = {"dataset": "wdbc", "prior": "knn", "budget_fraction": 1.0,
             "round_fraction": 0.25, "unavailable_action": "other"}
    venv = make_vec_env(LIVE, n_envs=2, seed=0, env_kwargs=tight)
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=32, seed=0).learn(64)
    assert model.num_timesteps == 64
    venv.close()
