"""What the clients suite shares: short episodes, a lattice store of two data sets whose
rounds differ in size, and the rewards an episode gives when played directly (what each
library's loop must return)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import ballad_env

LIVE, REPLAY = ballad_env.ENV_ID, ballad_env.REPLAY_ENV_ID
#: Three rounds on the kNN prior: an episode in a fraction of a second.
FAST: dict[str, Any] = {"prior": "knn", "budget_fraction": 0.06, "round_fraction": 0.02}
#: Two bundled data sets whose rounds buy 2 and 3 labels.
MIXED = ["WBC", "wdbc"]


@pytest.fixture(scope="session")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lattice store of WBC and wdbc, seeds 0 and 1, under ``FAST``."""
    from agents.experiments.lattice_build import build_store
    from ballad_env.settings import Settings

    root = tmp_path_factory.mktemp("clients-store")
    build_store(root, MIXED, [0, 1], [Settings(**FAST)], progress=False)
    return root


def env_kwargs(env_id: str, store: Path, datasets: Sequence[str]) -> dict[str, Any]:
    """``gym.make`` keywords of the live or the replay environment over ``datasets``."""
    where = {"dataset": list(datasets)} if env_id == LIVE else \
        {"store": store, "datasets": list(datasets)}
    return {**where, **FAST}


def direct_rewards(env_id: str, kwargs: dict[str, Any], seed: int, actions: Sequence[int],
                   resets: int = 1) -> list[float]:
    """The rewards of ``actions`` played directly in ``gym.make(env_id, **kwargs)`` after
    ``reset(seed=seed)`` and ``resets - 1`` more unseeded resets (libraries that seed an
    environment and then reset it again draw the episode so), from the episode's start."""
    env = gym.make(env_id, **kwargs)
    env.reset(seed=seed)
    for _ in range(resets - 1):
        env.reset()
    return [float(env.step(int(a))[1]) for a in actions]
