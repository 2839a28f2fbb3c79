"""Damaged copies of the files the project reads, and what reading them does.

Every file kind the project reads (a data file: ``.npz``, ``.mat``, ``.arff``, ``.csv``; a
lattice file, a store's ``store.json``, a result cell's Parquet file, a run's ``run.json``, a
saved policy's ``.zip``) is damaged one way at a time, a single byte changed or the file cut
short, and read again the way the project reads it (:class:`FileKind`): each damaged copy
must either give exactly what the intact file gives or raise an error whose message names
the file. Anything else (a different result, an error that does not say which file, a
hang) is a failure, except that a format with no checksum (``.mat``, ``.arff``, ``.csv``)
may read a changed digit as other valid data, which no reader can tell.
``tests/test_file_faults.py`` and ``tests/test_data_fuzz.py`` damage a sample of each
kind; ``python -m scripts.studies.robustness --files`` damages every byte (:func:`fuzz_files`).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ballad_env.data import Dataset


@dataclass(frozen=True)
class Damage:
    """One change to a file: ``"flip"`` XORs the byte at ``offset`` with ``mask`` (1-255),
    ``"truncate"`` keeps the first ``offset`` bytes."""

    kind: str
    offset: int
    mask: int = 0xFF

    def apply(self, data: bytes) -> bytes:
        if self.kind == "truncate":
            return data[:self.offset]
        return data[:self.offset] + bytes([data[self.offset] ^ self.mask]) + \
            data[self.offset + 1:]

    def __str__(self) -> str:
        if self.kind == "truncate":
            return f"cut to {self.offset} bytes"
        return f"byte {self.offset} XOR {self.mask:#04x}"


def damages(size: int, n_flips: int | None = None, n_truncations: int | None = None,
            seed: int = 0) -> list[Damage]:
    """Flips and truncations of a ``size``-byte file: every offset (``None``) or a seeded
    sample of ``n_flips`` and ``n_truncations`` offsets, each flip with a random mask."""
    rng = np.random.default_rng(seed)

    def offsets(n: int | None, high: int) -> list[int]:
        if n is None or n >= high:
            return list(range(high))
        return sorted(int(i) for i in rng.choice(high, n, replace=False))

    flips = [Damage("flip", i, int(rng.integers(1, 256))) for i in offsets(n_flips, size)]
    return flips + [Damage("truncate", i) for i in offsets(n_truncations, size)]


@dataclass(frozen=True)
class FileKind:
    """A file the project reads: ``read()`` reads it as the project does, ``same(a, b)`` tells
    whether two results are equal."""

    name: str
    path: Path
    read: Callable[[], Any]
    same: Callable[[Any, Any], bool]
    #: Whether the format detects a changed byte; without, other valid data is no failure.
    checksummed: bool = True


@dataclass
class Outcome:
    """How the damaged copies of one file kind ended: counts, and the failures in words."""

    kind: str
    counts: collections.Counter[str]
    failures: list[str]


class Change(Protocol):
    """A change to a file's bytes (a :class:`Damage`, or a whole rewrite), said in words."""

    def apply(self, data: bytes) -> bytes: ...


def check_damages(kind: FileKind, changes: Sequence[Change]) -> Outcome:
    """Read ``kind``'s file once per damage (the intact file is restored after each)."""
    original = kind.path.read_bytes()
    expected = kind.read()
    counts: collections.Counter[str] = collections.Counter()
    failures = []
    try:
        for damage in changes:
            kind.path.write_bytes(damage.apply(original))
            try:
                result = kind.read()
            except Exception as err:  # any type will do, as long as it names the file
                if str(kind.path) in str(err):
                    counts["refused, naming the file"] += 1
                else:
                    failures.append(f"{kind.name}, {damage}: {type(err).__name__} without "
                                    f"the file's name: {err}")
                continue
            if kind.same(result, expected):
                counts["read identically"] += 1
            elif not kind.checksummed:
                counts["read as other valid data (no checksum)"] += 1
            else:
                failures.append(f"{kind.name}, {damage}: read without an error, but differs")
    finally:
        kind.path.write_bytes(original)
    return Outcome(kind.name, counts, failures)


# --------------------------------------------------------------------------- sample files
def sample_data(n: int = 80, seed: int = 0) -> Dataset:
    """A small data set (normals, a few anomalies shifted away) for the sample files."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[:8] += 3.0
    y = np.zeros(n, dtype=np.int8)
    y[:8] = 1
    return Dataset("fuzz", X, y)


def write_npz(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    np.savez(path, X=X, y=y)


def write_npz_compressed(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    np.savez_compressed(path, X=X, y=y)


def write_mat(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    import scipy.io

    scipy.io.savemat(path, {"X": X, "y": y.reshape(-1, 1)})


def _rows(X: np.ndarray, labels: list[str]) -> str:
    return "\n".join(",".join(map(str, row)) + f",{label}"
                     for row, label in zip(X.tolist(), labels, strict=True)) + "\n"


def write_arff(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    header = "".join(f"@ATTRIBUTE x{j} NUMERIC\n" for j in range(X.shape[1]))
    path.write_text("@RELATION fuzz\n" + header + "@ATTRIBUTE outlier {no,yes}\n@DATA\n"
                    + _rows(X, ["yes" if label else "no" for label in y.tolist()]))


def write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    header = ",".join(f"x{j}" for j in range(X.shape[1])) + ",label\n"
    path.write_text(header + _rows(X, [str(label) for label in y.tolist()]))


#: Data formats by name: (file ending, writer, whether a changed byte is always detected).
DATA_FORMATS: dict[str, tuple[str, Callable[[Path, np.ndarray, np.ndarray], None], bool]] = {
    "npz": (".npz", write_npz, True),
    "npz-compressed": (".npz", write_npz_compressed, True),
    "mat": (".mat", write_mat, False),
    "arff": (".arff", write_arff, False),
    "csv": (".csv", write_csv, False),
}


def data_kinds(folder: Path) -> list[FileKind]:
    """The sample data written in every data format in ``folder``, each read as a data set
    is loaded (``load_dataset``)."""
    import warnings

    from ballad_env.data import DataWarning, load_dataset

    data = sample_data()
    X = np.round(data.X, 4)
    kinds = []
    for name, (ending, write, checksummed) in DATA_FORMATS.items():
        path = folder / f"data-{name}{ending}"
        write(path, X, data.y)

        def read(path: Path = path) -> dict[str, Any]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DataWarning)
                loaded = load_dataset(path)
            return {"X": loaded.X, "y": loaded.y}

        kinds.append(FileKind(f"data {name}", path, read, _equal_arrays, checksummed))
    return kinds


def _equal_arrays(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
                return False
        elif not (x == y or (isinstance(x, float) and isinstance(y, float)
                             and math.isnan(x) and math.isnan(y))):
            return False
    return True


def _lattice_values(lattice: Any) -> dict[str, Any]:
    return {**lattice.to_arrays(), "dataset": lattice.dataset, "seed": lattice.seed,
            "n_rounds": lattice.n_rounds, "contamination": lattice.contamination,
            "settings": lattice.settings}


def lattice_kinds(folder: Path) -> list[FileKind]:
    """A one-cell lattice store in ``folder``: its lattice file and its ``store.json`` (read
    as the replay opens a store and a rebuild checks it)."""
    from agents.experiments.lattice_build import build_store, prepare_store
    from ballad_env.replay.store import LatticeStore, load_lattice
    from ballad_env.settings import Settings

    data, setting = sample_data(), Settings(prior="knn", budget_fraction=0.1)
    root = folder / "store"
    build_store(root, [data], [0], [setting], progress=False)
    path = LatticeStore(root).path(data.name, 0, setting)

    def open_store() -> dict[str, Any]:
        prepare_store(root, {data.name: data}, [setting])  # what a rebuild checks
        return _lattice_values(LatticeStore(root).load(data.name, 0, setting))

    return [FileKind("lattice file", path, lambda: _lattice_values(load_lattice(path)),
                     _equal_arrays),
            FileKind("store.json", root / "store.json", open_store, _equal_arrays)]


def result_kinds(folder: Path) -> list[FileKind]:
    """A one-cell results folder in ``folder``: its cell's Parquet file (read as a resumed
    run reads it) and its ``run.json`` (read by ``load_results``)."""
    from agents.experiments.grid import Grid
    from agents.experiments.run import run_grid
    from agents.experiments.stores.results import ResultStore, load_results
    from ballad_env.settings import Settings

    grid = Grid((sample_data(),), (0,), ("ballad",), (Settings(prior="knn",
                                                                budget_fraction=0.1),))
    output = folder / "run"
    run_grid(grid, output, n_jobs=1, progress=False)
    cell = grid.resolve().cells()[0]
    store = ResultStore(output)

    def same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
        return bool(a.equals(b)) and list(a.dtypes) == list(b.dtypes)

    return [FileKind("result cell", store.path(cell), lambda: store.read(cell), same),
            FileKind("run.json", store.run_file, lambda: load_results(output), same)]


def policy_kind(folder: Path) -> FileKind:
    """A saved policy (a short PPO run on the sample data), read as ``make_agent`` reads a
    ``.zip`` and played on a fixed episode: the same actions, or an error naming the file."""
    from agents.evaluation import run_episode
    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.sb3 import train
    from agents.registry import make_agent
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.settings import Settings

    setting = Settings(prior="knn", budget_fraction=0.1)
    config = TrainConfig(algo="ppo", datasets=("toy",), settings=setting, total_timesteps=20,
                         n_envs=1, vec_env="dummy", seed=1,
                         hyperparameters={"n_steps": 10, "batch_size": 10},
                         output_dir=str(folder / "policies"), progress_bar=False)
    path = train(config).model_path
    env = BudgetAllocationEnv("toy", settings=setting)

    def play() -> list[str]:
        agent = make_agent(str(path), env)
        return [r["action"] for r in run_episode(env, agent, 0)]

    return FileKind("policy zip", path, play, lambda a, b: a == b)


def sample_kinds(folder: Path, policy: bool = True) -> Iterator[FileKind]:
    """Every file kind, made in ``folder`` (the policy only if ``policy``: it needs the
    ``rl`` extra and trains for a few seconds)."""
    yield from data_kinds(folder)
    yield from lattice_kinds(folder)
    yield from result_kinds(folder)
    if policy:
        yield policy_kind(folder)


def fuzz_files(folder: Path, max_damages: int | None = None, policy_damages: int = 2000,
               policy: bool = True, seed: int = 0) -> Iterator[Outcome]:
    """Damage every file kind made in ``folder``: every byte flipped and every truncation
    (at most ``max_damages`` of each, sampled), the policy zip's ``policy_damages`` of each
    (every byte of ~160 kB would take hours). One :class:`Outcome` per kind, as each ends."""
    for kind in sample_kinds(folder, policy):
        cap = policy_damages if kind.name == "policy zip" else max_damages
        yield check_damages(kind, damages(kind.path.stat().st_size, cap, cap, seed))


__all__ = ["DATA_FORMATS", "Change", "Damage", "FileKind", "Outcome", "check_damages", "damages",
           "data_kinds", "fuzz_files", "lattice_kinds", "policy_kind", "result_kinds",
           "sample_data", "sample_kinds", "write_arff", "write_csv", "write_mat", "write_npz",
           "write_npz_compressed"]
