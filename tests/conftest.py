"""Shared fixtures for the environment, agent and property tests.

Most tests run on a small synthetic data set (200 rows, 2-D, 10% anomalies) with the kNN
prior: a reset then costs a few hundredths of a second, where the default IForest prior
costs most of a second. The tests that are about the default prior say so.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import ballad_env
from ballad_env.data import DATA_DIR_ENV
from ballad_env.data.bundled import BUNDLED_DIR

ENV_ID = ballad_env.ENV_ID
# The compiled trainer's step runs eagerly in the suite (compiling it takes tens of seconds
# cold); tests/test_fused_training.py compiles one small step, marked slow.
os.environ.setdefault("BALLAD_NO_COMPILE", "1")


def load_job(module: str) -> ModuleType:
    """The module of a job's command line (``agents.experiments.cli.compare``, or a study's
    ``scripts.studies.<study>.__main__``), imported."""
    return importlib.import_module(module)


def write_data_files(folder: Path, sizes: dict[str, int]) -> Path:
    """Small benchmark-style ``<name>.npz`` files (3 features, 10% anomalies shifted by 3)
    and their ``manifest.json``, for the scripts' and studies' tests."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for k, (name, n) in enumerate(sizes.items()):
        rng = np.random.default_rng(k)
        X = rng.normal(size=(n, 3))
        X[: n // 10] += 3.0
        np.savez(folder / f"{name}.npz", X=X, y=(np.arange(n) < n // 10).astype(np.int8))
        manifest[name] = {"n": n, "d": 3}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def small_store(data_folder: Path, root: Path) -> Path:
    """A lattice store at ``root`` of one 300-row data set (``large``, written to
    ``data_folder``), seeds 0 and 1, the kNN prior: what the trainers' tests train on."""
    from agents.experiments.lattice_build import build_store
    from ballad_env.settings import Settings

    data = write_data_files(data_folder, {"large": 300})
    build_store(root, ["large"], [0, 1], [Settings(prior="knn")], data_dir=data,
                progress=False)
    return root


#: Tiny minibatches for the trainers' tests.
TINY = {"batch_size": 32, "n_epochs": 2}


def train_replay(store: Path, **options: Any) -> Path:
    """A run of a torch trainer (``batched`` unless ``trainer`` is given) on
    :func:`small_store`'s store, with :data:`TINY` minibatches unless given; its folder."""
    from agents.experiments.training import train
    from agents.experiments.training.config import TrainConfig
    from ballad_env.settings import Settings

    defaults = {"trainer": "batched", "datasets": ("large",), "replay_store": str(store),
                "settings": Settings(prior="knn", reward="cost"), "hyperparameters": TINY,
                "progress_bar": False}
    return train(TrainConfig(**{**defaults, **options})).run_dir


def two_round_grid(n_labels: int) -> dict[str, np.ndarray]:
    """The per-state grid of a hand-made two-round lattice (every ``STATE_FIELDS`` entry 0
    but these), n_labels training and validation examples. Test costs [i, j]: (0,0) 0.5,
    (0,1) 0.3, (1,0) 0.2, (0,2) 0.0, (1,1) 0.9, (2,0) 0.8."""
    from ballad_env.replay.lattice import STATE_FIELDS

    nan = np.nan
    cost = np.array([[0.5, 0.3, 0.0], [0.2, 0.9, nan], [0.8, nan, nan]])
    i, j = np.indices(cost.shape)
    grid = {name: np.where(np.isnan(cost), nan, 0.0) for name in STATE_FIELDS}
    grid["test_cost"] = cost
    grid["round"] = np.where(np.isnan(cost), nan, i + j)
    for name, value in (("n_rounds", 2), ("n_train", n_labels), ("n_val", n_labels),
                        ("max_cost", 1.0), ("contamination", 0.1), ("c_fp", 1.0),
                        ("c_fn", 1.0), ("c_r", 0.1), ("n_features", 2), ("per_round", 1)):
        grid[name] = np.where(np.isnan(cost), nan, value)
    return grid


def make_xy(n: int = 200, n_anomalies: int = 20, d: int = 2,
            seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian normals around the origin, anomalies shifted away; anomalies come first."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:n_anomalies] += 3.0 * rng.choice([-1.0, 1.0], size=(n_anomalies, d))
    y = np.zeros(n, dtype=np.int8)
    y[:n_anomalies] = 1
    return X, y


@pytest.fixture(autouse=True)
def _plugins_of_this_test_only() -> Iterator[None]:
    """The plugin modules a test imports by name stay that test's: the process's list
    (``ballad_env.plugins.plugin_modules``, which a run records and a resume compares) is
    restored after it, as each command starts in a process of its own."""
    from ballad_env import plugins

    before = dict(plugins._modules)
    yield
    plugins._modules.clear()
    plugins._modules.update(before)


@pytest.fixture(scope="session")
def xy_maker() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """``xy_maker(n, n_anomalies, d, seed)``: see :func:`make_xy`."""
    return make_xy


@pytest.fixture(scope="session")
def small_xy() -> tuple[np.ndarray, np.ndarray]:
    """200 rows, 2 features, 20 anomalies: |D| = |V| = 80, |T| = 40, b = 2 labels a round."""
    return make_xy()


@pytest.fixture(scope="session")
def tiny_xy() -> tuple[np.ndarray, np.ndarray]:
    """62 rows, 5 anomalies: |D| = |V| = 25 (23 normals + 2 anomalies each), |T| = 12."""
    return make_xy(n=62, n_anomalies=5, seed=1)


@pytest.fixture
def make_env(small_xy: tuple[np.ndarray, np.ndarray]) -> Iterator[Callable[..., gym.Env]]:
    """``make_env(**kwargs)``: ``gym.make`` on the small data set with the kNN prior.

    Keyword arguments override the defaults (``dataset=``, ``prior=`` included); every
    environment made is closed at teardown.
    """
    made: list[gym.Env] = []

    def factory(**kwargs: Any) -> gym.Env:
        kwargs.setdefault("dataset", small_xy)
        kwargs.setdefault("prior", "knn")
        env = gym.make(ENV_ID, **kwargs)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()


@pytest.fixture(scope="session")
def benchmark_dir() -> Path:
    """The folder of benchmark ``.npz`` files: ``$BALLAD_DATA_DIR``, else the paper's 18
    bundled with the package."""
    configured = os.environ.get(DATA_DIR_ENV)
    path = Path(configured) if configured else BUNDLED_DIR
    if not path.is_dir():
        pytest.skip(f"benchmark folder {path} is absent")
    return path


# --------------------------------------------------------------------------- trajectories


def run_actions(env: gym.Env, actions: Sequence[int], seed: int | None = None
                ) -> list[tuple[Any, ...]]:
    """Reset (with ``seed``) and take ``actions``; the reset's (obs, info) comes first."""
    steps: list[tuple[Any, ...]] = [env.reset(seed=seed)]
    for action in actions:
        steps.append(env.step(action))
    return steps


def continue_actions(env: gym.Env, actions: Sequence[int]) -> list[tuple[Any, ...]]:
    """Take ``actions`` from the current state (no reset)."""
    return [env.step(action) for action in actions]


def same_data(a: Any, b: Any) -> bool:
    """Exact equality of observations, rewards and infos; NaN equals NaN, types must match."""
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(same_data(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same_data(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if type(a) is not type(b):
        return False
    if isinstance(a, float | np.floating) and math.isnan(a):
        return bool(math.isnan(b))
    return bool(a == b)


@pytest.fixture
def rollout() -> Callable[..., list[tuple[Any, ...]]]:
    """``rollout(env, actions, seed)``: see :func:`run_actions`."""
    return run_actions


@pytest.fixture
def proceed() -> Callable[..., list[tuple[Any, ...]]]:
    """``proceed(env, actions)``: see :func:`continue_actions`."""
    return continue_actions


def crossed_hand_paths(queries: str = "ours", with_lattice: bool = True) -> Any:
    """The crossed study's stored rows of one hand-made cell: two data sets (A, B), seed 0,
    combination ssdo/confidence/<queries>/default/ours, mean costs chosen by hand (without
    the lattice's oracle and optimum when ``with_lattice`` is False, as a live cell)."""
    import pandas as pd

    from scripts.studies.crossed.factors import FACTOR_NAMES

    costs = {"A": {"all-in-al": 0.50, "all-in-lr": 0.30, "ballad": 0.20, "sadal": 0.40,
                   "oracle": 0.25, "optimal": 0.10, "fixed-lr00": 0.50, "fixed-lr01": 0.15},
             "B": {"all-in-al": 0.60, "all-in-lr": 0.50, "ballad": 0.50, "sadal": 0.70,
                   "oracle": 0.45, "optimal": 0.30, "fixed-lr00": 0.60, "fixed-lr01": 0.35}}
    kinds = {"oracle": "reference", "optimal": "reference", "fixed-lr00": "fixed",
             "fixed-lr01": "fixed"}
    levels = ("ssdo", "confidence", queries, "default", "ours")
    rows = [{**dict(zip(FACTOR_NAMES, levels, strict=True)), "dataset": dataset, "seed": 0,
             "name": name, "kind": kinds.get(name, "agent"),
             "path": "AL" if name == "optimal" else "LL", "mean_cost": cost,
             "final_cost": cost, "n_al": 1 if name == "optimal" else 0}
            for dataset, by_name in costs.items() for name, cost in by_name.items()
            if with_lattice or name not in ("oracle", "optimal")]
    return pd.DataFrame(rows)


@pytest.fixture
def same() -> Callable[[Any, Any], bool]:
    """``same(a, b)``: see :func:`same_data`."""
    return same_data


def v2_observation(**values: float) -> np.ndarray:
    """A v2 observation with the named features set (the rest 0; cost_ratio 0.5; both
    actions available)."""
    from ballad_env.observation import ALL_FEATURE_INDEX, OBSERVATIONS

    obs = np.zeros(len(OBSERVATIONS["v2"]), dtype=np.float32)
    obs[ALL_FEATURE_INDEX["cost_ratio"]] = 0.5
    obs[ALL_FEATURE_INDEX["al_available"]] = obs[ALL_FEATURE_INDEX["lr_available"]] = 1.0
    for name, value in values.items():
        obs[ALL_FEATURE_INDEX[name]] = value
    return obs
