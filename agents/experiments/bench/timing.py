"""What the benchmark's modes share (``ballad-env bench`` and the timings study,
``scripts.studies.timings``): data sets made to size, a function run in a fresh process (so
its peak memory is its own) and random play timed."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from agents.experiments import dataset_names
from ballad_env.data import Dataset, validate_xy

#: The name of a data set made to size: ``synthetic:<rows>x<features>``.
SYNTHETIC_PREFIX = "synthetic:"


def random_play(env: Any, n_steps: int, rng: np.random.Generator) -> float:
    """Seconds to take ``n_steps`` steps (whole episodes, resets included) of random valid
    actions in ``env`` (a coin per step; the other action when the pool is exhausted)."""
    coins = rng.integers(2, size=n_steps + 64).tolist()
    masks = env.unwrapped.action_masks
    start = time.perf_counter()
    taken = 0
    while taken < n_steps:
        env.reset()
        done = False
        while not done:
            action = coins[taken % len(coins)]
            if not masks()[action]:
                action = 1 - action
            done = env.step(action)[2]
            taken += 1
    return time.perf_counter() - start


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a new process (so its peak memory is its own)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


def synthetic_dataset(n: int, d: int, contamination: float = 0.05, seed: int = 0) -> Dataset:
    """n rows in d dimensions with a known contamination: standard normal normals, and
    anomalies shifted by 3 / sqrt(d) per feature (3 standard deviations away in all)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.zeros(n, dtype=np.int8)
    y[:max(1, round(contamination * n))] = 1
    signs = rng.choice([-1.0, 1.0], size=(int(y.sum()), d))
    X[y == 1] += 3.0 / np.sqrt(d) * signs
    return Dataset(f"{SYNTHETIC_PREFIX}{n}x{d}", *validate_xy(X, y, "synthetic"))


def bench_dataset(name: str, data_dir: str | None) -> Dataset | str:
    """A data set by name: ``synthetic:<n>x<d>`` makes one (``synthetic_dataset``); any other
    name is left to the environment's loader."""
    if not name.startswith(SYNTHETIC_PREFIX):
        return name
    try:
        n, d = (int(part) for part in name[len(SYNTHETIC_PREFIX):].split("x"))
    except ValueError:
        raise ValueError(f"{name!r}: write a synthetic data set as synthetic:<rows>x<features>, "
                         "e.g. synthetic:200000x10") from None
    return synthetic_dataset(n, d)


def bench_names(datasets: list[str], data_dir: str | None) -> list[str]:
    """The data sets to measure: files (or 'all') checked in the data folder, then any
    ``synthetic:<n>x<d>`` names as given."""
    synthetic = [name for name in datasets if name.startswith(SYNTHETIC_PREFIX)]
    files = [name for name in datasets if not name.startswith(SYNTHETIC_PREFIX)]
    return [*(dataset_names(files, data_dir) if files else ()), *synthetic]



__all__ = ["SYNTHETIC_PREFIX", "bench_dataset", "bench_names", "in_fresh_process", "random_play",
           "synthetic_dataset"]
