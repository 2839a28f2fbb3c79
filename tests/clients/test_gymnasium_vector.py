"""Gymnasium's own vector envs over our ids, CleanRL's loop structure: ``make_vec`` and
``SyncVectorEnv``/``AsyncVectorEnv`` over one data set and mixed data sets, live and replay;
every sub-environment's rewards equal its environment's played directly."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from clients.conftest import LIVE, MIXED, REPLAY, env_kwargs


def mirrored_loop(envs: gym.vector.VectorEnv, singles: list[gym.Env], seed: int,
                  steps: int) -> int:
    """CleanRL's loop (reset with a seed, then step on random valid actions read from
    ``info["action_mask"]``), each sub-environment mirrored by ``singles[e]`` played
    directly (reset with ``seed + e``, as vector envs seed): rewards and flags equal, and
    the autoreset step restarts the mirror. Returns the episodes finished."""
    rng = np.random.default_rng(seed)
    _, info = envs.reset(seed=seed)
    for e, single in enumerate(singles):
        single.reset(seed=seed + e)
    restart, finished = np.zeros(envs.num_envs, dtype=bool), 0
    for _ in range(steps):
        masks = info["action_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks])
        _, rewards, terminated, _, info = envs.step(actions)
        for e, single in enumerate(singles):
            if restart[e]:  # the autoreset step: the next episode's start, reward 0
                single.reset()
                assert rewards[e] == 0.0
                continue
            _, reward, done, _, _ = single.step(int(actions[e]))
            assert (rewards[e], terminated[e]) == (pytest.approx(reward), done)
        restart = terminated.copy()
        finished += int(terminated.sum())
    return finished


@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_over_mixed_data_sets(env_id: str, mode: str, mixed_store: Path) -> None:
    kwargs = env_kwargs(env_id, mixed_store, MIXED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **kwargs)
        try:
            singles = [gym.make(env_id, **kwargs) for _ in range(2)]
            assert mirrored_loop(envs, singles, seed=3, steps=12) >= 4
        finally:
            envs.close()


@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
@pytest.mark.parametrize("vector", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_one_data_set_per_sub_env(env_id: str, vector: Any, mixed_store: Path) -> None:
    """What used to fail stacking ``info["queried"]``: WBC in one sub-env, wdbc in the
    other."""
    each = [env_kwargs(env_id, mixed_store, [name]) for name in MIXED]
    envs = vector([lambda kw=kw: gym.make(env_id, **kw) for kw in each])
    try:
        singles = [gym.make(env_id, **kw) for kw in each]
        assert mirrored_loop(envs, singles, seed=0, steps=8) == 4
    finally:
        envs.close()


@pytest.mark.slow
def test_one_data_set_with_the_default_prior() -> None:
    """The paper's settings but for the budget (the isolation-forest prior): one data set."""
    kwargs = {"dataset": "WBC", "budget_fraction": 0.04, "round_fraction": 0.02}
    envs = gym.make_vec(LIVE, num_envs=2, vectorization_mode="sync", **kwargs)
    singles = [gym.make(LIVE, **kwargs) for _ in range(2)]
    assert mirrored_loop(envs, singles, seed=1, steps=3) == 2
    envs.close()

