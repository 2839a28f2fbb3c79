"""Mixed cells in the native replay vector env (ballad_env.replay.vector_cells): each
sub-environment plays its drawn cell under that cell's own settings (costs in the rewards
and in observation v2), and one setting given as mixed cells plays as the default does."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import write_data_files
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from test_replay_vector import same, valid_random

import ballad_env
from agents.experiments.lattice_build import build_store
from agents.experiments.training.vec_adapter import make_replay_vec_env
from ballad_env import Settings
from ballad_env.observation import ALL_FEATURE_INDEX
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.replay.store import LatticeStore, StoreError, setting_key
from ballad_env.replay.vector import ReplayVectorEnv

#: The two cells' settings: equal costs, and false negatives ten times dearer.
EVEN, DEAR_FN = Settings(prior="knn"), Settings(prior="knn", c_fn=10.0)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """One 300-row data set, seed 0, at two cost levels: a two-cell store by hand."""
    data = write_data_files(tmp_path_factory.mktemp("data"), {"large": 300})
    root = tmp_path_factory.mktemp("store")
    build_store(root, ["large"], [0], [EVEN, DEAR_FN], data_dir=data, progress=False)
    return root


def two_cells() -> list[tuple[str, int, Settings]]:
    return [("large", 0, EVEN), ("large", 0, DEAR_FN)]


def seeds_playing_both(envs: ReplayVectorEnv) -> list[int]:
    """Reset seeds under which environment 0 plays the first cell and 1 the second."""
    for first in range(50):
        for second in range(50):
            envs.reset(seed=[first, second])
            if envs.playing() == list(envs.cells):
                return [first, second]
    raise AssertionError("no seeds draw the two cells apart")


def test_two_sub_envs_play_different_costs_with_each_cells_own_rewards(store) -> None:
    envs = ReplayVectorEnv(2, store, cells=two_cells(), observation="v2", reward="round_cost")
    assert envs.settings is None and envs.cells == (
        ("large", 0, setting_key(EVEN)), ("large", 0, setting_key(DEAR_FN)))
    obs, _ = envs.reset(seed=seeds_playing_both(envs))
    singles = [BudgetAllocationReplayEnv(store, settings=level, observation="v2",
                                         reward="round_cost") for level in (EVEN, DEAR_FN)]
    same(np.stack([single.reset(seed=0)[0] for single in singles]), obs, "reset")
    assert singles[0].lattice is not None
    ratio = obs[:, ALL_FEATURE_INDEX["cost_ratio"]]
    assert ratio[0] < ratio[1]  # each cell's own costs in its observation
    rng, returns = np.random.default_rng(0), np.zeros(2)
    for _ in range(singles[0].lattice.n_rounds):
        actions = valid_random(envs.action_masks(), rng)
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        for e, single in enumerate(singles):
            single_obs, reward, done, cut, _ = single.step(int(actions[e]))
            same((single_obs, reward, done, cut),
                 (obs[e], float(rewards[e]), bool(terminated[e]), bool(truncated[e])), f"{e}")
        returns += rewards
    assert terminated.all() and returns[0] != returns[1]


def test_mixed_cells_take_data_set_names_in_any_case(store) -> None:
    """A cell's data set named in another case than the store's is the store's cell (as a
    single replay environment matches names), not a missing lattice."""
    envs = ReplayVectorEnv(2, store, cells=[("LARGE", 0, EVEN), ("Large", 0, DEAR_FN)])
    assert envs.cells == (("large", 0, setting_key(EVEN)), ("large", 0, setting_key(DEAR_FN)))
    with pytest.raises(StoreError, match="no lattice for data set 'large', seed 1"):
        ReplayVectorEnv(2, store, cells=[("large", 1, EVEN)])


def test_mixed_cells_of_one_setting_play_as_the_default(store) -> None:
    cells = [(name, seed, EVEN) for name, seed in LatticeStore(store).cells(EVEN)]
    default = ReplayVectorEnv(3, store, settings=EVEN, observation="v2")
    mixed = ReplayVectorEnv(3, store, cells=cells, observation="v2")
    same(default.reset(seed=4), mixed.reset(seed=4), "reset")
    rng = np.random.default_rng(1)
    for _ in range(40):
        actions = valid_random(default.action_masks(), rng)
        same(default.step(actions), mixed.step(actions), "step")


def test_resets_with_options_choose_among_the_mixed_cells(store) -> None:
    envs = ReplayVectorEnv(2, store, cells=two_cells())
    envs.reset(seed=0, options={"dataset": "LARGE", "seed": 0})
    assert set(envs.playing()) <= set(envs.cells)
    with pytest.raises(StoreError, match="no mixed cell"):
        envs.reset(options={"seed": 7})


def test_cells_given_as_an_iterator_are_read_once(store) -> None:
    """The cells are checked, then looked up: an iterator gave the lookup nothing."""
    listed = ReplayVectorEnv(2, store, cells=two_cells())
    once = ReplayVectorEnv(2, store, cells=iter(two_cells()))  # type: ignore[arg-type]
    assert once.cells == listed.cells and len(once.cells) == len(two_cells())


def test_bad_mixed_cells_are_refused_naming_the_problem(store) -> None:
    with pytest.raises(ValueError, match="leave datasets, seeds and settings out"):
        ReplayVectorEnv(2, store, cells=two_cells(), datasets=["large"])
    with pytest.raises(StoreError, match="seed 3"):
        ReplayVectorEnv(2, store, cells=[("large", 3, EVEN)])
    with pytest.raises(ValueError, match="different rewards"):
        ReplayVectorEnv(2, store, cells=[("large", 0, EVEN.replace(reward="cost")),
                                         ("large", 0, DEAR_FN.replace(reward="round_cost"))])
    with pytest.raises(ValueError, match=r"\(data set name, seed, Settings\)"):
        ReplayVectorEnv(2, store, cells=[("large", 0)])  # type: ignore[list-item]


def test_sb3_trains_over_mixed_cells_and_the_single_env_passes_the_checkers(store) -> None:
    """SB3's adapter steps mixed cells (masks included); the single replay environment of
    each cell passes Gymnasium's and SB3's environment checkers."""
    venv = make_replay_vec_env(2, store, cells=two_cells(), observation="v2")
    venv.seed(0)
    venv.reset()
    for _ in range(30):
        masks = np.stack(venv.env_method("action_masks"))
        venv.step(masks[:, 1].astype(int))  # LR where it can, else AL
    for level in (EVEN, DEAR_FN):
        gym_check_env(gym.make(ballad_env.REPLAY_ENV_ID, store=store, settings=level,
                               observation="v2").unwrapped)  # its render modes too
        sb3_check_env(BudgetAllocationReplayEnv(store, settings=level, observation="v2"),
                      warn=True)
