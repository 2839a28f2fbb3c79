"""The replay environment (ballad_env.replay.env) and lattice stores (ballad_env.replay.store,
agents.experiments.lattice_build): equal to the live environment, step for step."""

from __future__ import annotations

import gc
import json
import pickle
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import two_round_grid
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.vec_env import DummyVecEnv

import agents
import ballad_env
from agents.experiments.lattice_build import build_store, build_summary, store_table
from agents.experiments.stores.results import RunError
from ballad_env import AL, LR, BudgetAllocationEnv, Settings, load_dataset
from ballad_env.observation import FEATURE_INDEX, encode
from ballad_env.replay.env import (
    START,
    BudgetAllocationReplayEnv,
    CellReplay,
    state_observations,
)
from ballad_env.replay.lattice import Lattice, build_lattice
from ballad_env.replay.store import (
    LatticeStore,
    StoreError,
    load_lattice,
    pack_arrays,
    save_lattice,
    setting_key,
    unpack_arrays,
)
from ballad_env.replay.transitions import _slot
from ballad_env.rewards import REWARD_SIGNALS, SIDE_SIGNAL_NAMES, CostDecrease

REPLAY_ID = ballad_env.REPLAY_ENV_ID
SEEDS = (0, 1, 2)


def equal(a, b) -> bool:
    """Exact equality of steps, resets and records: arrays by dtype and value, numbers by
    value (the live ``info`` holds some test figures as numpy floats, the replay's are
    Python floats of the same value), NaN equal to NaN."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return (type(a) is type(b) and len(a) == len(b)
                and all(equal(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a):
        return bool(np.isnan(b))
    if isinstance(a, bool | np.bool_ | str) or isinstance(b, bool | np.bool_ | str):
        return type(a) is type(b) and a == b
    return bool(a == b)


def test_equal_tells_values_apart() -> None:
    assert equal({"x": np.float64(0.25), "y": [1, "a"]}, {"x": 0.25, "y": [1, "a"]})
    assert not equal({"x": 0.25}, {"x": 0.25 + 1e-16 * 4})
    assert not equal(np.zeros(2, np.float32), np.zeros(2))
    assert not equal((True,), (1,)) and equal(float("nan"), np.nan)


def unpadded(result: tuple) -> tuple:
    """A replay's reset or step with ``info["queried"]`` cut to what the round bought (the
    replay pads it with -1 to the store's widest round; checked here)."""
    info = dict(result[-1])
    queried = info["queried"]
    bought = queried[queried >= 0]
    assert (queried[len(bought):] == -1).all()
    info["queried"] = bought
    return (*result[:-1], info)


def compare_random_sequences(data, prior: str, store: Path, seeds: tuple[int, ...],
                             n_sequences: int, rng: np.random.Generator,
                             observation: str = "v0", **options: object) -> None:
    """``n_sequences`` random valid action sequences, the reward cycling through every
    registered reward: observations, rewards, flags, info and masks are identical
    (``options``: other settings of both)."""
    rewards = REWARD_SIGNALS.names()
    lives = {r: BudgetAllocationEnv(data, prior=prior, reward=r, observation=observation,
                                    **options) for r in rewards}
    replays = {r: gym.make(REPLAY_ID, store=store, prior=prior, reward=r,
                           observation=observation, **options) for r in rewards}
    for n in range(n_sequences):
        reward = rewards[n % len(rewards)]
        live, env = lives[reward], replays[reward].unwrapped
        seed = seeds[n % len(seeds)]
        assert equal(live.reset(seed=seed),
                     unpadded(env.reset(options={"dataset": data.name, "seed": seed})))
        done = False
        while not done:
            mask = live.action_masks()
            assert np.array_equal(mask, env.action_masks())
            action = int(rng.choice(np.flatnonzero(mask)))
            expected, got = live.step(action), unpadded(env.step(action))
            assert equal(expected, got), (reward, seed, n)
            done = expected[2]
        assert not env.action_masks().any()


# ------------------------------------------------------------------ a hand-made lattice
def hand_lattice() -> Lattice:
    """Two rounds; every state reachable. Costs [i, j]: (0,0) 0.5, (0,1) 0.3, (1,0) 0.2,
    (0,2) 0.0, (1,1) 0.9, (2,0) 0.8. AL rewards (entropy) 0.05 into i = 1, 0.01 into i = 2;
    LR rewards (entropy) 0.08 for j = 1, 0.02 for (0, 2) after (0, 1), 0.07 at (1, 1)."""
    nan = np.nan
    grid = two_round_grid(50)
    i, j = np.indices((3, 3))
    grid["n_al"], grid["n_lr"] = i.astype(float), j.astype(float)
    done = i + j == 2
    grid["al_available"] = np.where(np.isnan(grid["test_cost"]), nan, ~done)
    grid["lr_available"] = grid["al_available"].copy()
    al = {s: np.array([nan, 0.05, 0.01]) for s in SIDE_SIGNAL_NAMES}
    lr = {s: np.full((3, 3, 3), nan) for s in SIDE_SIGNAL_NAMES}
    for s in SIDE_SIGNAL_NAMES:
        lr[s][0, 1, :] = lr[s][1, 1, :] = 0.08
        lr[s][0, 2, 0] = 0.02
    return Lattice("hand", 0, 2, 0.1, grid, al, lr, Settings(budget_fraction=0.04))


def test_hand_lattice_transitions_rewards_and_path_states() -> None:
    cell = CellReplay(hand_lattice(), REWARD_SIGNALS["entropy"], "entropy")
    state, obs, reward, terminated, values = cell.step(START, LR)
    info = cell.info(values)
    assert (state, reward, terminated) == ((0, 1, LR, 0, -1), 0.08, False)
    assert (info["entropy_lr"], info["lr_measured"], info["al_measured"]) == (0.08, True, False)
    state2, _, reward, terminated, _ = cell.step(state, LR)
    assert (state2, reward, terminated) == ((0, 2, LR, 0, 0), 0.02, True)
    state3, _, reward, _, values = cell.step(state, AL)  # (0, 1) -> (1, 1): AL's reward
    info = cell.info(values)
    assert (state3, reward, info["entropy_lr"], info["entropy_al"]) == (
        (1, 1, AL, 0, -1), 0.05, 0.08, 0.05)
    costs = CellReplay(hand_lattice(), REWARD_SIGNALS["cost"], "entropy")
    assert costs.step(START, AL)[2] == pytest.approx(0.5 - 0.2)
    assert costs.step(START, LR)[2] == pytest.approx(0.5 - 0.3)
    assert costs.step((0, 1, LR, 0, -1), AL)[2] == pytest.approx(0.3 - 0.9)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        cell.step(state2, AL)


# ------------------------------------------------------------------ small synthetic store
@pytest.fixture(scope="module")
def dataset(small_xy):
    return load_dataset(small_xy)


@pytest.fixture(scope="module")
def store(tmp_path_factory, dataset) -> Path:
    """Seeds 0-2 of the small synthetic data set, kNN prior."""
    root = tmp_path_factory.mktemp("store")
    build_store(root, [dataset], list(SEEDS), [Settings(prior="knn")], progress=False)
    return root


@pytest.fixture
def live(dataset) -> BudgetAllocationEnv:
    return BudgetAllocationEnv(dataset, prior="knn")


def test_random_sequences_equal_the_live_environment_for_every_reward(store, dataset
                                                                      ) -> None:
    compare_random_sequences(dataset, "knn", store, SEEDS, 24, np.random.default_rng(0))


def test_observation_v1_is_replayed_too(store, dataset) -> None:
    """``observation="v1"`` (the validation-sample cost and its standard error appended)."""
    env = BudgetAllocationReplayEnv(store, prior="knn", observation="v1")
    assert env.observation_space.shape == (20,) and env.feature_names[-1] == "val_sample_se"
    assert env.reset(seed=0)[0].shape == (20,)
    compare_random_sequences(dataset, "knn", store, SEEDS, 12, np.random.default_rng(4),
                             observation="v1")
    with pytest.raises(ValueError, match="unknown observation version 'v9'"):
        BudgetAllocationReplayEnv(store, prior="knn", observation="v9")


def observed_version(agent: str, env: BudgetAllocationEnv) -> str:
    """The observation version a registered agent reads (made for ``env``, as the oracle
    needs one)."""
    return getattr(agents.make_agent(agent, env), "observation_version", "v0")


def test_a_reward_registered_later_is_replayed_too(store, dataset) -> None:
    """Rewards come from the registry: a new cost decrease needs no change to the replay."""
    REWARD_SIGNALS.register("fpr_decrease", CostDecrease("fpr_decrease", "fpr"))
    try:
        n = len(REWARD_SIGNALS)
        compare_random_sequences(dataset, "knn", store, SEEDS, n, np.random.default_rng(3))
    finally:
        REWARD_SIGNALS.unregister("fpr_decrease")


def test_every_registered_agent_plays_the_same_episode(store, dataset) -> None:
    for seed in (0, 2):
        for name in agents.agent_names():
            version = observed_version(name, BudgetAllocationEnv(dataset, prior="knn"))
            live = BudgetAllocationEnv(dataset, prior="knn", observation=version)
            replay = BudgetAllocationReplayEnv(store, seeds=[seed], prior="knn",
                                               observation=version)
            expected = agents.run_episode(live, agents.make_agent(name, live), seed,
                                          include_start=True)
            got = agents.run_episode(replay, agents.make_agent(name, replay), seed,
                                     include_start=True)
            assert equal(expected, got), (name, seed)


def test_resets_draw_cells_with_the_environment_generator(store) -> None:
    env = BudgetAllocationReplayEnv(store, prior="knn")
    assert env.cells == tuple(("arrays", s) for s in SEEDS)

    def drawn(seed: int) -> list[int]:
        env.reset(seed=seed)
        return [env.lattice.seed for _ in range(30) if env.reset() is not None]

    first = drawn(5)
    assert first == drawn(5) and set(first) == set(SEEDS)
    env.reset(options={"seed": [1]})
    assert env.lattice.seed == 1
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"prior": "iforest"})
    with pytest.raises(StoreError, match="no lattice of Glass"):
        BudgetAllocationReplayEnv(store, datasets=["Glass"], prior="knn")
    with pytest.raises(StoreError, match="holds no lattice for the setting iforest"):
        BudgetAllocationReplayEnv(store)  # the default prior was not built


def test_live_errors_are_the_replays(store, live) -> None:
    env = BudgetAllocationReplayEnv(store, prior="knn")
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(AL)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action"):
        env.step(2)
    for _ in range(env.lattice.n_rounds):
        env.step(AL)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(LR)


def test_gymnasium_and_sb3_env_checkers(store) -> None:
    """Both checkers, every render mode, warnings as errors (no allow-list needed)."""
    gc.collect()  # files an earlier test left open must not warn in here
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for mode in ("rgb_array", "ansi"):
            env = gym.make(REPLAY_ID, store=store, prior="knn", render_mode=mode)
            gym_check_env(env.unwrapped)
            env.close()
        sb3_check_env(gym.make(REPLAY_ID, store=store, prior="knn"), warn=True)


def test_render_draws_the_lattice_and_the_rounds(store) -> None:
    env = BudgetAllocationReplayEnv(store, prior="knn", render_mode="rgb_array")
    env.reset(seed=0)
    env.step(LR)
    frame = env.render()
    assert frame.shape == (400, 800, 3) and frame.std() > 0
    text = BudgetAllocationReplayEnv(store, prior="knn", render_mode="ansi")
    text.reset(seed=0)
    assert text.render().startswith("round 0/15")


def test_vector_envs_and_pickles(store, same) -> None:
    venv = gym.make_vec(REPLAY_ID, num_envs=2, vectorization_mode="sync", store=store,
                        prior="knn")
    obs, _ = venv.reset(seed=0)
    for _ in range(20):  # past an episode's end: autoreset
        obs, reward, terminated, _, info = venv.step(np.array([AL, LR]))
    assert obs.shape == (2, 18) and info["test_cost"].shape == (2,)
    venv.close()
    sb3 = DummyVecEnv([lambda: BudgetAllocationReplayEnv(store, prior="knn")] * 2)
    sb3.reset()
    for _ in range(15):
        _, _, dones, infos = sb3.step(np.array([AL, LR]))
    assert dones.all() and "terminal_observation" in infos[0]
    env = BudgetAllocationReplayEnv(store, prior="knn")
    env.reset(seed=3)
    env.step(LR)
    clone = pickle.loads(pickle.dumps(env))
    assert same(env.step(AL), clone.step(AL))


@pytest.mark.slow
def test_every_transition_equals_the_live_code_path(store) -> None:
    """The cached transitions (state parts once per state, path parts written by name) equal
    the ones computed from each path state's whole snapshot (encode, info, step_reward), for
    every transition of a stored cell and every registered reward."""
    lattice_store = LatticeStore(store)
    for seed in SEEDS[:1]:
        lattice = lattice_store.load("arrays", seed, Settings(prior="knn"))
        for reward in REWARD_SIGNALS.names():
            cell = CellReplay(lattice, REWARD_SIGNALS[reward], "entropy")
            frontier, seen = [START], {START}
            while frontier:
                state = frontier.pop()
                for action in (AL, LR):
                    if state[0] + state[1] >= lattice.n_rounds \
                            or not cell.masks[state[0], state[1], action]:
                        continue
                    after = cell.after(state, action)
                    got = cell.step(state, action)
                    assert equal(got, cell.reference_entry(state, after)), (seed, reward, after)
                    assert equal(cell.info(got[4]), cell.snapshot(after).info("entropy"))
                    if after not in seen:
                        seen.add(after)
                        frontier.append(after)
            assert len(cell.transitions) > 2 * lattice.n_rounds


@pytest.mark.parametrize("version", ["v0", "v1", "v2"])
def test_state_parts_made_at_load_equal_each_states_snapshot(store, version) -> None:
    """The vectorised passes at load (every state's observation, record values and mask on
    no path) equal ``encode`` and ``Snapshot.info`` of each state's snapshot: values, dtypes
    and the Python type of every record value (an int stays an int)."""
    lattice = LatticeStore(store).load("arrays", 0, Settings(prior="knn"))
    for lat in (lattice, hand_lattice()):
        cell = CellReplay(lat, REWARD_SIGNALS["cost"], "entropy", version)
        for i, j in zip(*np.nonzero(lat.reachable), strict=True):
            bare = lat.snapshot(int(i), int(j), {AL: None, LR: None}, None)
            assert equal(cell.observations[i, j], encode(bare, version)), (i, j)
            record, mask = cell.state(int(i), int(j)), cell.mask(int(i), int(j))
            assert equal(record, bare.record("entropy")), (i, j)
            assert [type(v) for v in record.values()] == [
                type(v) for v in bare.record("entropy").values()]
            assert equal(mask, bare.info("entropy")["action_mask"])
            assert cell.figures(int(i), int(j)).test_cost == bare.test_cost  # CostDecrease


def test_state_observations_follow_the_scalar_formulas() -> None:
    """Hand-computed features of the hand lattice's state (1, 0) with a few figures set:
    what ``observation.state_features`` gives, and clipping to [0, 1]."""
    lat = hand_lattice()
    lat.grid["n_labeled_train"][1, 0] = 2.0  # of 50
    lat.grid["n_anomalies_found"][1, 0] = 3.0  # expected: max(1, 0.1 * 100) = 10
    lat.grid["val_cost"][1, 0] = 2.5  # over max_cost 1: clipped to 1
    lat.grid["tau"][1, 0] = 0.25
    lat.grid["al_available"][1, 0], lat.grid["lr_available"][1, 0] = 1.0, 0.0
    obs = state_observations(lat)[1, 0]
    index = FEATURE_INDEX
    assert obs.dtype == np.float32 and obs[index["budget_used"]] == np.float32(0.5)
    assert obs[index["labeled_train"]] == np.float32(0.04)
    assert obs[index["anomalies_found"]] == np.float32(0.3)
    assert obs[index["val_cost"]] == 1.0 and obs[index["tau"]] == np.float32(0.25)
    assert obs[index["contamination"]] == np.float32(0.1)
    assert (obs[index["al_available"]], obs[index["lr_available"]]) == (1.0, 0.0)
    assert obs[index["prev_al"]] == obs[index["al_measured"]] == obs[index["entropy_al"]] == 0


def test_path_features_are_written_through_slices_when_evenly_spaced() -> None:
    assert _slot([0, 2, 4]) == slice(0, 5, 2) and _slot([1]) == slice(1, 2, 1)
    assert np.array_equal(np.arange(6)[_slot([1, 3, 5])], [1, 3, 5])
    assert _slot([1, 2, 5]) == [1, 2, 5] and _slot([3, 1]) == [3, 1]


def test_cells_kept_are_bounded_by_bytes(store, monkeypatch) -> None:
    from ballad_env.replay import env as replay

    monkeypatch.setattr(replay, "_CELLS", replay.OrderedDict())
    env = BudgetAllocationReplayEnv(store, prior="knn")
    env.reset(seed=0, options={"seed": 0})
    one_cell = next(iter(replay._CELLS.values())).nbytes
    monkeypatch.setattr(replay, "CACHE_BYTES", 2 * one_cell + 1)
    for seed in (1, 2, 0, 1):
        env.reset(options={"seed": seed})
    kept = [key[3] for key in replay._CELLS]
    assert kept == [0, 1]  # seed 2 the least recently used: dropped when 1 came back
    assert sum(cell.nbytes for cell in replay._CELLS.values()) <= replay.CACHE_BYTES


def test_the_bound_on_cells_kept_sees_their_growth(store, monkeypatch) -> None:
    """Loads count the cells kept only when an upper bound may pass the limit; the bound
    grows with every state and transition made, so a cell that grew is dropped in time."""
    from ballad_env.replay import env as replay

    monkeypatch.setattr(replay, "_CELLS", replay.OrderedDict())
    monkeypatch.setattr(replay, "_KEPT", replay._KeptBytes())
    env = BudgetAllocationReplayEnv(store, prior="knn")
    env.reset(seed=0, options={"seed": 0})
    fresh = replay._KEPT.counted
    assert fresh == next(iter(replay._CELLS.values())).nbytes and replay._KEPT.grown == 0
    monkeypatch.setattr(replay, "CACHE_BYTES", 2 * fresh + 1)  # two cells, as loaded
    done = False
    while not done:
        done = env.step(int(np.flatnonzero(env.action_masks())[0]))[2]
    cell = next(iter(replay._CELLS.values()))
    assert replay._KEPT.grown == cell.nbytes - fresh > 0  # its states and transitions
    env.reset(options={"seed": 1})  # counted: the grown cell 0 and cell 1 pass the limit
    assert [key[3] for key in replay._CELLS] == [1]
    assert (replay._KEPT.counted, replay._KEPT.grown) == (fresh, 0)


# ------------------------------------------------------------------ files and stores
def test_lattice_files_round_trip_exactly(store, dataset) -> None:
    settings = Settings(prior="knn")
    loaded = LatticeStore(store).load("arrays", 1, settings)
    built = build_lattice(dataset, 1, settings)
    assert loaded.settings == built.settings and loaded.n_rounds == built.n_rounds
    mine, theirs = loaded.to_arrays(), built.to_arrays()
    assert mine.keys() == theirs.keys()
    for name in mine:
        assert np.array_equal(mine[name], theirs[name], equal_nan=True), name
        assert mine[name].dtype == theirs[name].dtype, name


def test_packed_arrays_round_trip_with_their_dtypes_and_shapes() -> None:
    arrays = {"b": np.array([True, False, True]), "x": np.arange(5.0),
              "i": np.arange(6, dtype=np.int32).reshape(2, 3), "e": np.empty((0, 3))}
    layout, packed = pack_arrays(arrays)
    assert [entry[3] for entry in layout] == [0, 8, 48, 72]  # offsets 8-byte aligned
    assert packed.dtype == np.uint8 and packed.size == 72
    back = unpack_arrays(layout, packed)
    for name, value in arrays.items():
        assert back[name].dtype == value.dtype and np.array_equal(back[name], value), name


def copy_store(store: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(store, tmp_path / "store"))


def test_stale_and_corrupt_files_are_refused_by_name(store, tmp_path, dataset) -> None:
    root = copy_store(store, tmp_path)
    settings = Settings(prior="knn")
    path = LatticeStore(root).path("arrays", 2, settings)
    lattice = load_lattice(path)
    with np.load(path) as data:
        arrays = dict(data)
    header = json.loads(str(arrays["header"]))
    arrays["header"] = np.array(json.dumps({**header, "source": "0123456789abcdef"}))
    np.savez_compressed(path, **arrays)
    with pytest.raises(StoreError, match=f"{path}.*other environment code"):
        load_lattice(path)
    env = BudgetAllocationReplayEnv(root, seeds=[2], prior="knn")
    with pytest.raises(StoreError, match=str(path)):
        env.reset(seed=0)
    save_lattice(lattice, path)
    path.write_bytes(path.read_bytes()[:500])  # a truncated file
    with pytest.raises(StoreError, match=f"lattice file {path} cannot be read"):
        load_lattice(path)
    before = {p: p.read_bytes() for p in root.rglob("*.npz")}
    with pytest.raises(RunError, match=str(path)):
        build_store(root, [dataset], list(SEEDS), [settings], progress=False)
    assert before == {p: p.read_bytes() for p in root.rglob("*.npz")}  # nothing lost
    arrays["header"] = np.array(json.dumps({**header, "format": 1}))
    np.savez_compressed(path, **arrays)
    with pytest.raises(StoreError, match=f"{path} has format 1, this code reads format 2"):
        load_lattice(path)
    with pytest.raises(StoreError, match="holds seed 1, not 2"):
        load_lattice(LatticeStore(root).path("arrays", 1, settings), seed=2)


def test_a_store_of_other_code_or_no_store_is_refused(store, tmp_path, dataset) -> None:
    with pytest.raises(StoreError, match="is not a lattice store"):
        BudgetAllocationReplayEnv(tmp_path)
    root = copy_store(store, tmp_path)
    manifest = json.loads((root / "store.json").read_text())
    (root / "store.json").write_text(json.dumps({**manifest, "source": "old"}))
    with pytest.raises(StoreError, match="other environment code"):
        BudgetAllocationReplayEnv(root, prior="knn")
    with pytest.raises(RunError, match="other environment code"):
        build_store(root, [dataset], [0], [Settings(prior="knn")], progress=False)


def test_build_resumes_grows_and_summarises(store, tmp_path, dataset) -> None:
    root = copy_store(store, tmp_path)
    knn = Settings(prior="knn")
    stamps = {p: p.stat().st_mtime_ns for p in root.rglob("*.npz")}
    table = build_store(root, [dataset], [0, 1, 2, 3], [knn, knn.replace(reward="cost")],
                        progress=False)
    assert list(table["seed"]) == [0, 1, 2, 3]  # one setting: the reward is not a key
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # not rebuilt
    assert setting_key(knn.replace(reward="cost")) == "knn"
    summary = build_summary(store_table(LatticeStore(root), [knn]), n_seeds=10)
    row = summary.iloc[0]
    assert row["cells"] == 4
    assert row["hours_10_seeds"] == pytest.approx(row["median_seconds"] * 10 / 3600)
    assert row["median_kb"] > 0


def test_lattice_snapshot_queries_match_the_live_info(store, live) -> None:
    """The queries a round labels are stored: AL's by i, LR's by j."""
    lattice = LatticeStore(store).load("arrays", 0, Settings(prior="knn"))
    live.reset(seed=0)
    for action, (i, j) in zip([LR, AL, AL, LR], [(0, 1), (1, 1), (2, 1), (2, 2)], strict=True):
        info = live.step(action)[4]
        assert np.array_equal(info["queried"], lattice.queried(i, j, action))
    assert lattice.queried(0, 0, None).size == 0


# ------------------------------------------------------------------ benchmark data
@pytest.mark.slow
@pytest.mark.parametrize("prior", ["iforest", "knn"])
def test_benchmarks_random_sequences_and_agents_equal_the_live_environment(
        benchmark_dir, tmp_path_factory, prior) -> None:
    """Three small benchmarks, both priors: 50 random sequences each (every reward in turn)
    and every registered agent on one seed."""
    root = tmp_path_factory.mktemp(f"bench-{prior}")
    names = ["Glass", "WBC", "WDBC"]
    seeds = (0, 1)
    build_store(root, names, list(seeds), [Settings(prior=prior)], data_dir=benchmark_dir,
                progress=False)
    rng = np.random.default_rng(1)
    for name in names:
        data = load_dataset(name, data_dir=benchmark_dir)
        compare_random_sequences(data, prior, root, seeds, 50, rng)
        for agent in agents.agent_names():
            version = observed_version(agent, BudgetAllocationEnv(data, prior=prior))
            live = BudgetAllocationEnv(data, prior=prior, observation=version)
            env = BudgetAllocationReplayEnv(root, datasets=[name], seeds=[1], prior=prior,
                                            observation=version)
            expected = agents.run_episode(live, agents.make_agent(agent, live), 1)
            assert equal(expected, agents.run_episode(env, agents.make_agent(agent, env), 1))



# ------------------------------------------------------------------ training
@pytest.mark.slow
def test_training_on_the_replay_store(store, tmp_path) -> None:
    """PPO trains on the replay environment; its episodes are stored cells of seeds 0-1."""
    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.curves import read_monitor
    from agents.experiments.training.sb3 import train

    settings = Settings(reward="cost", prior="knn")
    config = TrainConfig(datasets=("arrays",), settings=settings, total_timesteps=120,
                         n_envs=2, vec_env="dummy", seed=2,
                         hyperparameters={"n_steps": 30, "batch_size": 30},
                         episode_seeds=2, replay_store=store, output_dir=str(tmp_path),
                         progress_bar=False)
    assert config.name == "ppo-cost-arrays-knn-replay-s2-120steps"
    result = train(config)
    saved = json.loads(result.settings_path.read_text())
    assert TrainConfig(**saved["config"]) == config
    episodes = read_monitor(result.run_dir)
    assert len(episodes) == 8 and np.all(episodes["length"] == 15)
    assert set(episodes["dataset"]) == {"arrays"}
    # The return is the whole cost decrease: return + final cost is a seed 0 or 1 start cost.
    starts = [LatticeStore(store).load("arrays", s, settings).cost[0, 0] for s in (0, 1)]
    for start in episodes["return"] + episodes["test_cost"]:
        assert min(abs(start - s) for s in starts) < 1e-5
    with pytest.raises(StoreError, match="no lattice of Glass"):
        train(TrainConfig(datasets=("Glass",), settings=settings, replay_store=store,
                          output_dir=str(tmp_path), progress_bar=False))


def test_replay_report_states_the_ratio_and_the_target() -> None:
    from agents.experiments.bench.episodes import REPLAY_TARGET_STEPS, replay_report

    row = {"datasets": ["Glass"], "cells": 3, "build_s": 2.5, "kb_per_cell": 17.0,
           "replay_steps_per_s": 60_000.0, "live_steps_per_s": 30.0, "ratio": 2_000.0}
    text = replay_report(row)
    assert "3 cells (Glass)" in text and "60,000 steps/s" in text
    assert "2,000x the live one" in text and "target 50,000: met" in text
    slow = replay_report({**row, "replay_steps_per_s": REPLAY_TARGET_STEPS - 1.0})
    assert "target 50,000: missed" in slow


def test_replay_store_summary_gives_the_median_and_range_of_runs() -> None:
    from agents.experiments.bench.episodes import replay_store_summary

    rows = [{"store": "s", "cells": 100, "steps": 150_000, "cold_steps_per_s": cold,
             "cold_cpu_steps_per_s": 2 * cold, "warm_steps_per_s": warm,
             "warm_cpu_steps_per_s": 2 * warm, "peak_mb": mb}
            for cold, warm, mb in ((40_000.0, 60_000.0, 300.0), (52_000.0, 55_000.0, 320.0),
                                   (61_000.0, 70_000.0, 310.0))]
    lines = replay_store_summary(rows).splitlines()
    assert lines[0] == "3 runs on s (100 cells, 150,000 steps each): median (min-max)"
    assert "52,000 steps/s (40,000-61,000)  (target 50,000: met)" in lines[1]
    assert "104,000 steps per CPU second (80,000-122,000)" in lines[2]
    assert "60,000 steps/s (55,000-70,000)" in lines[3]
    assert "310 MB (300-320)" in lines[5] and "target" not in lines[5]
    rows[1]["cold_steps_per_s"] = 45_000.0
    assert "target 50,000: missed" in replay_store_summary(rows).splitlines()[1]


def test_the_stored_form_of_settings_is_made_once_and_for_unhashable_priors_too() -> None:
    from pyod.models.hbos import HBOS

    from ballad_env.replay.store import lattice_settings

    knn = lattice_settings(Settings(prior="knn", reward="cost"))
    assert knn is lattice_settings(Settings(prior="knn", reward="cost"))  # made once
    assert knn == Settings(prior="knn") and setting_key(Settings(prior="knn")) == "knn"

    class Unhashable(HBOS):
        __hash__ = None  # type: ignore[assignment]

    settings = Settings(prior=Unhashable(), reward="cost")
    with pytest.raises(TypeError):
        hash(settings)
    assert setting_key(settings) == settings.replace(reward="entropy").name
    assert lattice_settings(settings) == settings.replace(reward="entropy")


def test_replay_store_report_gives_both_rates_and_the_verdicts() -> None:
    from agents.experiments.bench.episodes import replay_store_report

    row = {"store": "s", "cells": 100, "steps": 150_000, "cold_steps_per_s": 40_000.0,
           "cold_cpu_steps_per_s": 45_000.0, "warm_steps_per_s": 60_000.0,
           "warm_cpu_steps_per_s": 66_000.0, "peak_mb": 330.0}
    cold, warm, memory = replay_store_report(row).splitlines()[1:]
    assert cold == ("cold:     40,000 steps/s over 150,000 steps (45,000 per CPU second; "
                    "target 50,000: missed)")
    assert warm.endswith("(66,000 per CPU second; target 50,000: met)")
    assert memory == "peak memory: 330 MB"
