"""Action masks where users look for them (through Gymnasium's wrappers, sb3-contrib's
``get_action_masks``), and for learners without masks the choice at ``gym.make``:
``unavailable_action="other"`` plays the other action, ``info`` saying so."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from ballad_env import ENV_ID
from ballad_env.env import played_action
from ballad_env.replay.vector import ReplayVectorEnv

REPLAY_ID = "ballad_env/BudgetAllocationReplay-v0"
#: wdbc in 4 rounds of 25% of D: D holds 3 of them, so a 4th AL round is unavailable.
TIGHT = {"prior": "knn", "budget_fraction": 1.0, "round_fraction": 0.25}


@pytest.fixture(scope="module")
def tight_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agents.experiments.lattice_build import build_store
    from ballad_env.settings import Settings

    root = tmp_path_factory.mktemp("tight-store")
    build_store(root, ["wdbc"], [0], [Settings(**TIGHT)], progress=False)
    return root


def made(env_id: str, store: Path, **kwargs: object) -> gym.Env:
    """The live (``ENV_ID``) or the replay environment on wdbc, ``TIGHT``."""
    where = {"dataset": "wdbc"} if env_id == ENV_ID else {"store": store}
    return gym.make(env_id, **where, **TIGHT, **kwargs)


@pytest.mark.parametrize("env_id", [ENV_ID, REPLAY_ID])
def test_masks_through_the_wrappers(env_id: str, tight_store: Path) -> None:
    env = made(env_id, tight_store)
    env.reset(seed=0)
    masks = env.get_wrapper_attr("action_masks")
    for _ in range(3):
        env.step(0)
    assert masks().tolist() == [False, True]
    with pytest.raises(ValueError, match="action AL is unavailable"):  # the default
        env.step(0)


@pytest.mark.parametrize("env_id", [ENV_ID, REPLAY_ID])
def test_other_action_is_played_and_told(env_id: str, tight_store: Path) -> None:
    """A learner without masks (all AL here): the 4th round plays LR, ``info`` says so; the
    episode is the one of the actions played, and every info has the key."""
    env = made(env_id, tight_store, unavailable_action="other")
    _, info = env.reset(seed=0)
    assert info["action_replaced"] is False
    steps = [env.step(0) for _ in range(4)]
    assert [s[4]["action"] for s in steps] == ["AL", "AL", "AL", "LR"]
    assert [s[4]["action_replaced"] for s in steps] == [False, False, False, True]
    assert steps[-1][2] is True
    plain = made(env_id, tight_store)
    plain.reset(seed=0)
    expected = [plain.step(a) for a in (0, 0, 0, 1)]
    assert [s[1] for s in steps] == [e[1] for e in expected]
    assert np.array_equal(steps[-1][0], expected[-1][0])


def test_the_choice_is_checked_and_the_native_vector_env_refuses_it(tight_store: Path) -> None:
    with pytest.raises(ValueError, match="unknown unavailable_action 'skip': use one of raise"):
        gym.make(ENV_ID, dataset="toy", unavailable_action="skip")
    with pytest.raises(ValueError, match="leave unavailable_action at 'raise'"):
        ReplayVectorEnv(2, tight_store, unavailable_action="other", **TIGHT)
    assert played_action(0, np.array([False, False]), "other") == (0, False)  # the end
    assert played_action(1, np.array([True, False]), "raise") == (1, False)


@pytest.mark.slow
def test_sb3_contribs_get_action_masks_on_a_vec_env() -> None:
    """sb3-contrib's helper reaches through SB3's Monitor and Gymnasium's wrappers."""
    pytest.importorskip("sb3_contrib")
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(ENV_ID, n_envs=2, env_kwargs={"dataset": "wdbc", **TIGHT})
    venv.seed(0)
    venv.reset()
    for _ in range(3):
        venv.step(np.zeros(2, dtype=int))
    assert get_action_masks(venv).tolist() == [[False, True]] * 2
    venv.close()
