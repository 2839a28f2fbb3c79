"""The natively vectorised replay environment (ballad_env.replay.vector): equal to N single
replay environments under gymnasium's SyncVectorEnv, step for step, in both autoreset modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import write_data_files
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import batch_space

import ballad_env
from agents.experiments.lattice_build import build_store
from ballad_env import Settings
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.replay.vector import INFO_KEYS, ReplayVectorEnv
from ballad_env.replay.vector_tables import DRAW_BLOCK, CellDraws, lr_paths
from ballad_env.snapshot import QUERIED_WIDTH

REPLAY_ID = ballad_env.REPLAY_ENV_ID
SEEDS = (0, 1, 2)
MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Two data sets of different round sizes (1 and 2 labels a round) x seeds 0-2, kNN."""
    data = write_data_files(tmp_path_factory.mktemp("data"), {"small": 150, "large": 300})
    root = tmp_path_factory.mktemp("store")
    build_store(root, ["small", "large"], list(SEEDS), [Settings(prior="knn")],
                data_dir=data, progress=False)
    return root


def same(a: Any, b: Any, where: str = "") -> None:
    """Exact equality (which is within 1e-12 and more): dicts by keys, arrays by dtype,
    shape and value (object arrays element by element), NaN equal to NaN."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, set(a) ^ set(b))
        for key in a:
            same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), where
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{n}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (where, a.dtype, b.dtype, a.shape,
                                                          b.shape)
        if a.dtype == object:
            for n, (x, y) in enumerate(zip(a, b, strict=True)):
                same(x, y, f"{where}[{n}]")
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
            if a.dtype.kind == "f":
                assert np.allclose(a, b, rtol=0, atol=1e-12, equal_nan=True), where
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def valid_random(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random valid action per environment (AL where none is valid: that one resets)."""
    coins = rng.integers(2, size=len(masks))
    allowed = masks[np.arange(len(masks)), coins]
    return np.where(allowed | ~masks.any(axis=1), coins, 1 - coins)


def play_both(sync: Any, native: Any, steps: int, rng: np.random.Generator) -> None:
    """``steps`` random valid steps in both: masks, then every output, identical."""
    for _ in range(steps):
        masks = np.stack([env.action_masks() for env in sync.envs])
        same(masks, native.action_masks(), "masks")
        actions = valid_random(masks, rng)
        same(sync.step(actions), native.step(actions), "step")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("reward", "observation"),
                         [("cost", "v0"), ("entropy", "v1"), ("round_cost", "v0"),
                          ("cosine", "v0")])
def test_equals_sync_vector_env_of_single_replay_envs(store, mode, reward, observation
                                                      ) -> None:
    """Five environments, 64 steps (four episodes each, autoresets drawing new cells):
    observations, rewards, flags, info (final_obs and final_info too) and masks equal."""
    kwargs = {"store": store, "datasets": ["large"], "prior": "knn", "reward": reward,
              "observation": observation}
    sync = SyncVectorEnv([lambda: BudgetAllocationReplayEnv(**kwargs)] * 5,
                         autoreset_mode=mode)
    native = gym.make_vec(REPLAY_ID, num_envs=5, vectorization_mode="vector_entry_point",
                          autoreset_mode=mode, **kwargs)
    same(sync.reset(seed=7), native.reset(seed=7), "reset")
    play_both(sync, native, 64, np.random.default_rng(0))


@pytest.mark.parametrize("mode", MODES)
def test_cells_of_other_round_sizes_equal_each_single_env(store, mode) -> None:
    """Data sets of 1 and 2 labels a round (SyncVectorEnv cannot stack their queries): every
    environment's values equal its single environment's, ``queried`` padded with -1."""
    n = 4
    singles = [BudgetAllocationReplayEnv(store, prior="knn", reward="cost") for _ in range(n)]
    native = ReplayVectorEnv(n, store, prior="knn", reward="cost", autoreset_mode=mode)
    starts = [env.reset(seed=3 + e) for e, env in enumerate(singles)]
    obs, info = native.reset(seed=3)
    for e, (single_obs, single_info) in enumerate(starts):
        same(single_obs, obs[e])
        same_row(single_info, info, e)
    rng, restart = np.random.default_rng(1), np.zeros(n, dtype=bool)
    widths, sizes = set(), set()
    for _ in range(40):
        actions = valid_random(native.action_masks(), rng)
        obs, rewards, terminated, truncated, info = native.step(actions)
        widths.add(info["queried"].shape[1])
        sizes.update((info["queried"] >= 0).sum(axis=1).tolist())
        for e, env in enumerate(singles):
            if mode is AutoresetMode.NEXT_STEP and restart[e]:
                first, first_info = env.reset()
                expected = (first, 0.0, False, False, first_info)
            else:
                expected = env.step(int(actions[e]))
                if mode is AutoresetMode.SAME_STEP and expected[2]:
                    same(expected[0], info["final_obs"][e])
                    same_row(expected[4], info["final_info"], e)
                    first, first_info = env.reset()
                    expected = (first, *expected[1:4], first_info)
            same(expected[0], obs[e])
            assert (expected[1], expected[2], expected[3]) == (
                rewards[e], terminated[e], truncated[e])
            same_row(expected[4], info, e)
        restart = terminated.copy()
    assert widths == {QUERIED_WIDTH}  # one width, whatever the rounds bought
    assert {1, 2} <= sizes  # rounds of both sizes were met


def same_row(single: dict[str, Any], info: dict[str, Any], e: int) -> None:
    """A single environment's ``info`` equals environment e's entries of a vector ``info``
    (its keys, with masks set; ``queried`` up to its -1 padding)."""
    for key, value in single.items():
        assert info[f"_{key}"][e], key
        got = info[key][e]
        if key == "queried":
            assert np.all(got[len(value):] == -1)
            got = got[:len(value)]
        if isinstance(value, np.ndarray):
            same(value, got, key)
        else:
            assert type(got.item() if isinstance(got, np.generic) else got) is type(value)
            assert got == value or (value != value and got != got), key


def test_resets_with_options_and_seed_lists_draw_as_single_envs(store) -> None:
    """``reset(options=...)`` draws among the chosen cells in each environment's stream and
    later autoresets continue it; a list of seeds seeds each environment."""
    kwargs = {"store": store, "datasets": ["large"], "prior": "knn", "reward": "cost"}
    sync = SyncVectorEnv([lambda: BudgetAllocationReplayEnv(**kwargs)] * 3)
    native = ReplayVectorEnv(3, **kwargs)
    same(sync.reset(seed=[5, 11, 9]), native.reset(seed=[5, 11, 9]))
    rng = np.random.default_rng(2)
    play_both(sync, native, 20, rng)
    options = {"dataset": "large", "seed": [0, 2]}  # one round size: Sync can stack them
    same(sync.reset(options=options), native.reset(options=options))
    play_both(sync, native, 40, rng)
    same(sync.reset(options={"dataset": "small", "seed": 1}),
         native.reset(options={"dataset": "small", "seed": 1}))  # a cell loaded on demand
    play_both(sync, native, 20, rng)


def test_cell_draws_in_blocks_equal_single_draws() -> None:
    """A block of draws, a draw among other cells in between and a reseed: the stream of a
    generator drawing one cell per reset."""
    draws = CellDraws(2, 7)
    draws.seed([4, 5])
    reference = [np.random.default_rng(4), np.random.default_rng(5)]
    got, expected = [], []
    for n in range(DRAW_BLOCK + 10):
        if n == 30:
            got.append(draws.draw_among(0, 3))
            expected.append(int(reference[0].integers(3)))
        got.append(int(draws.draw(np.array([0, 1]))[0]))
        expected.append(int(reference[0].integers(7)))
        reference[1].integers(7)
    assert got == expected
    draws.seed([None, 8])
    assert int(draws.draw(np.array([1]))[0]) == int(np.random.default_rng(8).integers(7))


def test_lr_paths_keep_those_an_episode_can_take() -> None:
    """k = 1 (K = 2): (i of the last LR round, j, i of the one before) with i0 <= i and
    i + j <= 1 are (0,0,0), (0,1,0), (1,0,0), (1,0,1): rows 0, 2, 4, 5 of the K^3; every
    other path is looked up as the first."""
    paths, index = lr_paths(1)
    assert paths.tolist() == [0, 2, 4, 5]
    assert index.tolist() == [0, 0, 1, 0, 2, 3, 0, 0]
    assert len(lr_paths(15)[0]) == 16 * 17 * 18 // 6  # (k+1)(k+2)(k+3)/6 of 4,096


def test_gymnasium_vector_conventions(store) -> None:
    """make_vec returns it (the id's vector entry point, also by default); batched spaces;
    the autoreset mode in metadata; gymnasium's vector wrappers run on it."""
    env = gym.make_vec(REPLAY_ID, num_envs=3, store=store, prior="knn")
    assert isinstance(env, ReplayVectorEnv) and env.spec.id == REPLAY_ID
    single = BudgetAllocationReplayEnv(store, prior="knn")
    assert env.single_observation_space == single.observation_space
    assert env.single_action_space == single.action_space == gym.spaces.Discrete(2)
    assert env.observation_space == batch_space(single.observation_space, 3)
    assert env.action_space == gym.spaces.MultiDiscrete([2, 2, 2])
    assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space and set(info) == {
        *INFO_KEYS, *(f"_{key}" for key in INFO_KEYS)}
    same_step = ReplayVectorEnv(3, store, prior="knn", autoreset_mode="same_step")
    assert same_step.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    stats = gym.wrappers.vector.RecordEpisodeStatistics(same_step)
    stats.reset(seed=1)
    for _ in range(15):
        *_, info = stats.step(np.zeros(3, dtype=int))
    assert info["episode"]["l"].tolist() == [15, 15, 15]


def test_info_keys_keeps_only_those(store) -> None:
    full = ReplayVectorEnv(2, store, prior="knn")
    slim = ReplayVectorEnv(2, store, prior="knn", info_keys=["test_cost", "dataset"])
    bare = ReplayVectorEnv(2, store, prior="knn", info_keys=())
    for env in (full, slim, bare):
        env.reset(seed=4)
    results = [env.step(np.array([1, 0])) for env in (full, slim, bare)]
    same(results[0][:4], results[1][:4])
    assert set(results[1][4]) == {"dataset", "_dataset", "test_cost", "_test_cost"}
    same(results[1][4]["test_cost"], results[0][4]["test_cost"])
    assert results[2][4] == {}


def test_bad_arguments_are_refused_with_clear_errors(store) -> None:
    for n in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="num_envs must be a positive integer"):
            ReplayVectorEnv(n, store, prior="knn")
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        gym.make_vec(REPLAY_ID, num_envs=0, store=store, prior="knn")
    with pytest.raises(ValueError, match="unsupported autoreset_mode"):
        ReplayVectorEnv(2, store, prior="knn", autoreset_mode=AutoresetMode.DISABLED)
    with pytest.raises(ValueError, match="unknown info key"):
        ReplayVectorEnv(2, store, prior="knn", info_keys=["cost"])
    with pytest.raises(ValueError, match="does not render"):
        ReplayVectorEnv(2, store, prior="knn", render_mode="rgb_array")
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        ReplayVectorEnv(2, store, prior="knn", colour="red")
    env = ReplayVectorEnv(2, store, prior="knn", datasets=["large"])
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(np.zeros(2, dtype=int))
    env.reset(seed=0)
    for actions, message in (([0], "shape"), ([0, 2], "invalid actions"),
                             ([0.5, 0], "invalid actions")):
        with pytest.raises(ValueError, match=message):
            env.step(np.array(actions))
    with pytest.raises(ValueError, match="num_envs=2 seeds"):
        env.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"prior": "iforest"})
    env.tables.arrays["mask"][:, 1] = False  # as if V had run dry everywhere
    with pytest.raises(ValueError, match=r"unavailable in environment\(s\) \[0, 1\]"):
        env.step(np.ones(2, dtype=int))


def test_bench_times_every_way_and_states_the_target(store) -> None:
    """``ballad-env bench --vector``'s measuring, tiny: a row per way and N, a verdict."""
    from agents.experiments.bench.vector import measure_vector, vector_report

    result = measure_vector(store, Settings(prior="knn"), sizes=(2,), steps=300, repeats=1,
                            short_steps=60)
    ways = [(row["way"], row["n"], row["info"]) for row in result["rows"]]
    assert ways == [("single, gym.make", 1, "all"), ("single, unwrapped", 1, "all"),
                    ("SyncVectorEnv", 2, "all"), ("ReplayVectorEnv", 2, "all"),
                    ("ReplayVectorEnv", 2, "none")]
    assert all(row["steps_per_s"] > 0 for row in result["rows"])
    report = vector_report(result)
    assert "ReplayVectorEnv at N = 2, info none" in report and "target 1,000,000" in report
