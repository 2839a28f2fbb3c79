"""Run grids of allocation agents x data sets x seeds x settings and keep tidy, resumable results.

A *cell* is one episode: (data set, seed, agent, setting). A grid is the cross product of
its four axes. ``run_grid`` plays every cell not already on disk, in parallel with joblib
(local processes, or a Dask cluster through joblib's dask backend), and returns one tidy
table: one row per data set, seed, agent, setting and round, with every scalar ``info``
figure of the environment.

Storage: ``<output>/run.json`` records the grid, a fingerprint of each data set, the
package versions and a hash of the project's source (so results of two code versions never
mix); ``<output>/cells/`` holds one Parquet file per finished cell, written to a
hidden temporary name and renamed, so a file either is complete or does not exist. Why
Parquet files per cell rather than one CSV:

* a cell is the unit of work and of completion: an interrupted run loses at most the cells
  in flight, and resuming is "skip the cells whose file exists and validates";
* Parquet keeps dtypes (NaN rewards, integer rounds, strings) exactly, so a resumed run's
  table equals an uninterrupted one bit for bit, and it is compact;
* the folder reads as one table anywhere: ``pandas.read_parquet("<output>/cells")``
  (hidden temporary files are ignored), or ``load_results(output)`` which also validates.

All of an agent's randomness and the environment's come from the integer seed passed to
``env.reset``, so results never depend on scheduling. The agents of one (data set, seed,
setting) share one reset: it is done once and copied, which the environment's common random
numbers make identical to resetting for each agent.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import os
import platform
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.evaluation import RECORD_FIELDS, run_episode
from agents.registry import agent_names, make_agent
from ballad_env.data import BUILTIN_DATASETS, Dataset, available_datasets, load_dataset
from ballad_env.detector import PRIORS
from ballad_env.env import BudgetAllocationEnv
from ballad_env.protocol import Budget

RUN_FILE = "run.json"
CELLS_DIR = "cells"
FORMAT_VERSION = 1
#: Packages whose versions are recorded in run.json and must match on resume.
VERSIONED_PACKAGES = ("ballad-env", "numpy", "scipy", "scikit-learn", "pyod", "scikit-optimize",
                      "gymnasium", "pandas")
KEY_COLUMNS = ("dataset", "setting", "agent", "seed", "round")
SETTING_COLUMNS = ("prior", "reward_type", "threshold_search", "bayes_calls", "c_fp", "c_fn",
                   "c_r", "budget_fraction", "round_fraction")
#: What each round records: the ``info`` figures of ``RECORD_FIELDS`` plus the step's reward
#: (``dataset`` and ``round`` are keys, named by the grid).
METRIC_COLUMNS = tuple(name for name in RECORD_FIELDS if name not in ("dataset", "round")
                       ) + ("reward",)
#: Every column of the tidy table, in order.
COLUMNS = (*KEY_COLUMNS, "contamination", "budget_used", *SETTING_COLUMNS, *METRIC_COLUMNS)
_SAFE = re.compile(r"[^A-Za-z0-9.=+-]+")


class RunError(RuntimeError):
    """An output directory that cannot be resumed as asked: mismatched, corrupt or incomplete."""


# ---------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Setting:
    """Environment options shared by a group of cells; ``name`` identifies it in the results.

    ``c_r=None`` is the paper's default, the data set's contamination. ``bayes_calls`` only
    matters for the ``"bayes"`` search and is normalised to 20 otherwise.
    """

    c_fp: float = 1.0
    c_fn: float = 1.0
    c_r: float | None = None
    reward: str = "entropy"
    threshold_search: str = "exact"
    bayes_calls: int = 20
    prior: str = "iforest"
    budget_fraction: float = 0.3
    round_fraction: float = 0.02

    def __post_init__(self) -> None:
        for name in ("c_fp", "c_fn", "budget_fraction", "round_fraction"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if self.c_r is not None:
            object.__setattr__(self, "c_r", float(self.c_r))
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}: use one of {PRIORS}")
        if self.threshold_search != "bayes":
            object.__setattr__(self, "bayes_calls", 20)
        object.__setattr__(self, "bayes_calls", int(self.bayes_calls))

    @property
    def name(self) -> str:
        """Stable short id: the prior, then every option that differs from the paper's default."""
        default = Setting(prior=self.prior)
        parts = [self.prior]
        if self.reward != default.reward:
            parts.append(self.reward)
        if self.threshold_search != default.threshold_search:
            parts.append(f"{self.threshold_search}{self.bayes_calls}")
        for attr, short in (("c_fp", "cfp"), ("c_fn", "cfn"), ("c_r", "cr"),
                            ("budget_fraction", "budget"), ("round_fraction", "round")):
            value = getattr(self, attr)
            if value != getattr(default, attr):
                parts.append(f"{short}{value:g}")
        return "_".join(parts)

    @property
    def n_rounds(self) -> int:
        """Rounds in an episode under this setting (the environment's budget rule; the number
        of rounds does not depend on the size of D)."""
        return Budget.from_fractions(1, self.budget_fraction, self.round_fraction).n_rounds

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword options of ``BudgetAllocationEnv`` for this setting."""
        return asdict(self)

    def to_dict(self) -> dict[str, Any]:
        """The setting's fields plus its name, for run.json."""
        return {"name": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Setting:
        """Inverse of ``to_dict`` (the name is recomputed, not trusted)."""
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


def setting_grid(**options: Sequence[Any]) -> tuple[Setting, ...]:
    """Every combination of the given option values, e.g. ``setting_grid(prior=["iforest",
    "knn"], c_fp=[1, 10])`` gives four settings; options not given keep their defaults."""
    names = list(options)
    combos: list[dict[str, Any]] = [{}]
    for name in names:
        combos = [{**combo, name: value} for combo in combos for value in options[name]]
    settings = tuple(dict.fromkeys(Setting(**combo) for combo in combos))
    return settings


# ---------------------------------------------------------------------------------- agents
def is_policy_path(spec: str) -> bool:
    """Whether an agent spec is a saved policy (a ``.zip`` file) rather than a registered name."""
    return str(spec).lower().endswith(".zip")


def agent_label(spec: str) -> str:
    """The agent's name in the results: registered names as given, ``policy:<stem>`` for paths."""
    return f"policy:{Path(spec).stem}" if is_policy_path(spec) else str(spec)


def _policy_loader() -> Callable[[str, Any], Any]:
    """The loader of saved policies, ``agents.policy.load_policy(path, env)``, once it exists."""
    try:
        from agents.policy import load_policy  # type: ignore[import-not-found]
    except ImportError as err:
        raise NotImplementedError(
            "running a saved policy (.zip) is not supported yet: it needs "
            "agents.policy.load_policy(path, env), which this version does not have") from err
    return load_policy


def check_agent(spec: str) -> None:
    """Raise a clear error now, before any cell runs, if ``spec`` cannot be built."""
    if is_policy_path(spec):
        if not Path(spec).is_file():
            raise FileNotFoundError(f"saved policy {spec!r} does not exist")
        _policy_loader()
    elif spec not in agent_names():
        raise ValueError(f"unknown agent {spec!r}: use one of {', '.join(agent_names())} "
                         "or the path of a saved policy (.zip)")


def resolve_agent(spec: str, env: BudgetAllocationEnv) -> Any:
    """The agent for ``spec``: a registered name, or a saved policy loaded for ``env``."""
    if is_policy_path(spec):
        return _policy_loader()(spec, env)
    return make_agent(spec, env)


# ---------------------------------------------------------------------------------- grid
@dataclass(frozen=True)
class Cell:
    """One episode of the grid: its results are rows ``round = 1..n_rounds`` of the table."""

    dataset: str
    seed: int
    agent: str
    setting: Setting

    @property
    def key(self) -> tuple[str, str, str, int]:
        """(data set, setting name, agent label, seed): unique within a grid."""
        return (self.dataset, self.setting.name, agent_label(self.agent), self.seed)

    @property
    def filename(self) -> str:
        """The cell's file name under ``cells/``."""
        parts = [self.setting.name, self.dataset, agent_label(self.agent), f"seed{self.seed}"]
        return "__".join(_SAFE.sub("_", part) for part in parts) + ".parquet"


@dataclass(frozen=True)
class Grid:
    """Agents x data sets x seeds x settings.

    ``datasets`` are names (built-in or file stems in ``data_dir``) or ``Dataset`` objects;
    ``agents`` are registered names or paths of saved policies; seeds are the integers given
    to ``env.reset(seed=...)``.
    """

    datasets: tuple[str | Dataset, ...]
    seeds: tuple[int, ...]
    agents: tuple[str, ...]
    settings: tuple[Setting, ...] = field(default=(Setting(),))

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", tuple(self.datasets))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "agents", tuple(str(a) for a in self.agents))
        object.__setattr__(self, "settings", tuple(self.settings))
        for axis in ("datasets", "seeds", "agents", "settings"):
            if not getattr(self, axis):
                raise ValueError(f"the grid has no {axis}")
        for axis, values in (("data set", self.dataset_names), ("seed", self.seeds),
                             ("agent", [agent_label(a) for a in self.agents]),
                             ("setting", [s.name for s in self.settings])):
            repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
            if repeated:
                raise ValueError(f"{axis} repeated in the grid: {', '.join(repeated)}")
        if any(s < 0 for s in self.seeds):
            raise ValueError("seeds must be non-negative integers")

    @property
    def dataset_names(self) -> tuple[str, ...]:
        return tuple(d.name if isinstance(d, Dataset) else str(d) for d in self.datasets)

    def cells(self) -> list[Cell]:
        """Every cell, in a fixed order (setting, data set, agent, seed)."""
        return [Cell(name, seed, agent, setting) for setting in self.settings
                for name in self.dataset_names for agent in self.agents for seed in self.seeds]

    def describe(self) -> dict[str, Any]:
        """The grid as JSON-able values, for run.json."""
        return {"datasets": list(self.dataset_names), "seeds": list(self.seeds),
                "agents": list(self.agents), "settings": [s.to_dict() for s in self.settings]}


def seed_range(n: int) -> tuple[int, ...]:
    """The seeds 0..n-1 (a repetition of the protocol per seed)."""
    if n < 1:
        raise ValueError(f"need at least one seed, got {n}")
    return tuple(range(n))


def dataset_names(names: Sequence[str], data_dir: str | os.PathLike | None = None
                  ) -> tuple[str, ...]:
    """Expand ``all`` to every data file in the data directory (built-ins excluded)."""
    if list(names) != ["all"]:
        return tuple(names)
    found = [n for n in available_datasets(data_dir) if n not in BUILTIN_DATASETS]
    if not found:
        raise FileNotFoundError("--datasets all: no data files found; pass --data-dir or set "
                                "$BALLAD_DATA_DIR")
    return tuple(found)


# ---------------------------------------------------------------------------------- data
def fingerprint(dataset: Dataset) -> dict[str, Any]:
    """Size, contamination and a content hash of a data set: resumes must see the same data."""
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(dataset.X).tobytes())
    digest.update(np.ascontiguousarray(dataset.y).tobytes())
    return {"n": dataset.n_samples, "d": dataset.n_features,
            "contamination": round(dataset.contamination, 6), "sha256": digest.hexdigest()[:16]}


@functools.lru_cache(maxsize=8)
def _load_named(name: str, data_dir: str | None) -> Dataset:
    """Load a data set by name once per process (workers run many cells of one data set)."""
    return load_dataset(name, data_dir=data_dir)


def _load(source: str | Dataset, data_dir: str | None) -> Dataset:
    return source if isinstance(source, Dataset) else _load_named(source, data_dir)


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape the results, and a hash of this
    project's own source (its version number does not change with every edit)."""
    versions = {"python": platform.python_version()}
    for package in VERSIONED_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    versions["ballad-env source"] = source_fingerprint()
    return versions


def source_fingerprint() -> str:
    """Hash of the ``ballad_env`` and ``agents`` sources that make results (figures excluded)."""
    import agents
    import ballad_env

    digest = hashlib.sha256()
    for package in (ballad_env, agents):
        root = Path(package.__file__).parent
        for path in sorted(root.glob("*.py")):
            if path.name != "plots.py":
                digest.update(f"{root.name}/{path.name}\n".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------------- storage
class ResultStore:
    """An output directory: ``run.json`` plus one Parquet file per finished cell."""

    def __init__(self, output: str | os.PathLike) -> None:
        self.root = Path(output)
        self.cells_dir = self.root / CELLS_DIR
        self.run_file = self.root / RUN_FILE

    # run.json -------------------------------------------------------------
    def read_manifest(self) -> dict[str, Any] | None:
        """The stored run description, ``None`` if this is a new output directory."""
        if not self.run_file.exists():
            if self.cells_dir.is_dir() and any(self.cells_dir.glob("*.parquet")):
                raise RunError(f"{self.cells_dir} holds cell files but {self.run_file} is missing:"
                               " the results cannot be checked. Delete the folder or use another"
                               " --output.")
            return None
        try:
            manifest = json.loads(self.run_file.read_text())
        except (OSError, ValueError) as err:
            raise RunError(f"{self.run_file} is unreadable ({err}). Delete it together with "
                           f"{self.cells_dir} to start over, or use another --output.") from err
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
            raise RunError(f"{self.run_file} is not a run description of format "
                           f"{FORMAT_VERSION}; use another --output.")
        return manifest

    def prepare(self, manifest: dict[str, Any]) -> None:
        """Start a new run, or check that the stored one is the same run (grid, data, versions)."""
        stored = self.read_manifest()
        if stored is None:
            self.cells_dir.mkdir(parents=True, exist_ok=True)
            _atomic_write_text(self.run_file, json.dumps(manifest, indent=2) + "\n")
            return
        problems = _manifest_differences(stored, manifest)
        if problems:
            raise RunError(f"{self.root} holds a different run, so its results cannot be mixed "
                           "with this one:\n  " + "\n  ".join(problems) + "\nUse another "
                           f"--output, or delete {self.root} to start over.")
        self.cells_dir.mkdir(parents=True, exist_ok=True)

    # cells ----------------------------------------------------------------
    def path(self, cell: Cell) -> Path:
        return self.cells_dir / cell.filename

    def read(self, cell: Cell) -> pd.DataFrame:
        """A finished cell's rows, validated against the cell; ``RunError`` names a bad file."""
        path = self.path(cell)
        try:
            frame = pd.read_parquet(path)
        except Exception as err:  # pyarrow raises several types for truncated or garbled files
            raise _corrupt(path, f"unreadable ({type(err).__name__}: {err})") from err
        problem = _cell_problem(frame, cell)
        if problem:
            raise _corrupt(path, problem)
        return frame

    def write(self, cell: Cell, frame: pd.DataFrame) -> None:
        """Write a finished cell atomically: a hidden temporary file, then a rename."""
        path = self.path(cell)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            frame.to_parquet(tmp, index=False)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def finished(self, cells: Iterable[Cell]) -> dict[Cell, pd.DataFrame]:
        """The cells already on disk, each validated (a corrupt file is an error, not a skip)."""
        return {cell: self.read(cell) for cell in cells if self.path(cell).exists()}


def _corrupt(path: Path, problem: str) -> RunError:
    return RunError(f"corrupt result file {path}: {problem}. Delete this file and run the same "
                    "command again to recompute that cell.")


def _cell_problem(frame: pd.DataFrame, cell: Cell) -> str | None:
    """What is wrong with a cell file's rows, or ``None``."""
    if tuple(frame.columns) != COLUMNS:
        missing = sorted(set(COLUMNS) - set(frame.columns))
        extra = sorted(set(frame.columns) - set(COLUMNS))
        return f"unexpected columns (missing {missing}, extra {extra})"
    n_rounds = cell.setting.n_rounds
    if len(frame) != n_rounds or list(frame["round"]) != list(range(1, n_rounds + 1)):
        return f"expected rounds 1..{n_rounds}, found {len(frame)} rows"
    expected = dict(zip(("dataset", "setting", "agent", "seed"), cell.key, strict=True))
    for column, value in expected.items():
        if set(frame[column].tolist()) != {value}:
            return f"column {column!r} should be {value!r} throughout"
    return None


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _manifest_differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Human-readable differences between two run descriptions (creation time ignored)."""
    problems = []
    for section in ("grid", "data", "versions"):
        old, new = stored.get(section, {}), wanted.get(section, {})
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                problems.append(f"{section}.{key}: stored {old.get(key)!r}, now {new.get(key)!r}")
    return problems


# ---------------------------------------------------------------------------------- playing
@dataclass(frozen=True)
class _Task:
    """The cells of one (data set, seed, setting): one reset shared by its agents."""

    name: str
    dataset: str | Dataset
    data_dir: str | None
    seed: int
    setting: Setting
    agents: tuple[str, ...]


class _ResetDone:
    """A copy of an environment already reset with ``seed``: ``reset`` hands that state back once,
    so ``run_episode`` (the project's one evaluation loop) can play from it."""

    def __init__(self, env: BudgetAllocationEnv, seed: int, obs: np.ndarray,
                 info: dict[str, Any]) -> None:
        self.unwrapped = env
        self._start: tuple[int, np.ndarray, dict[str, Any]] | None = (seed, obs, info)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        if self._start is None or seed != self._start[0]:
            raise RuntimeError("this environment copy was prepared for one reset with one seed")
        _, obs, info = self._start
        self._start = None
        return obs, info

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self.unwrapped.step(action)


def _run_task(task: _Task, single_thread: bool) -> list[tuple[Cell, pd.DataFrame]]:
    """Play every agent of ``task`` from one shared reset; one table per cell."""
    if single_thread:
        from threadpoolctl import threadpool_limits

        limits: Any = threadpool_limits(1)
    else:
        limits = nullcontext()
    with limits:
        dataset = _load(task.dataset, task.data_dir)
        env = BudgetAllocationEnv(dataset, **task.setting.env_kwargs())
        obs, info = env.reset(seed=task.seed)
        done = []
        for spec in task.agents:
            prepared = _ResetDone(copy.deepcopy(env), task.seed, obs.copy(), copy.deepcopy(info))
            agent = resolve_agent(spec, prepared.unwrapped)
            records = run_episode(prepared, agent, task.seed)
            cell = Cell(task.name, task.seed, spec, task.setting)
            done.append((cell, _frame(cell, records, prepared.unwrapped)))
    return done


def _frame(cell: Cell, records: list[dict[str, Any]], env: BudgetAllocationEnv) -> pd.DataFrame:
    """A cell's tidy rows: keys, setting columns, then every recorded ``info`` figure."""
    setting, episode = cell.setting, env.episode
    constants = {
        "dataset": cell.dataset, "setting": setting.name, "agent": agent_label(cell.agent),
        "seed": cell.seed, "contamination": episode.gamma, "prior": setting.prior,
        "reward_type": setting.reward, "threshold_search": setting.threshold_search,
        "bayes_calls": setting.bayes_calls, "c_fp": episode.costs.c_fp,
        "c_fn": episode.costs.c_fn, "c_r": episode.costs.c_r,
        "budget_fraction": setting.budget_fraction, "round_fraction": setting.round_fraction,
    }
    rows = [{**constants, **record,
             "budget_used": record["round"] * setting.round_fraction} for record in records]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return _normalise_dtypes(frame)


def _normalise_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """One dtype per column whatever the values: bool, int64, str or float64 (NaN allowed)."""
    for column in frame.columns:
        values = frame[column].tolist()
        if all(isinstance(v, bool | np.bool_) for v in values):
            frame[column] = frame[column].astype(bool)
        elif all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
                 for v in values):
            frame[column] = frame[column].astype(np.int64)
        elif all(isinstance(v, str) for v in values):
            frame[column] = frame[column].astype(str)
        else:
            frame[column] = frame[column].astype(np.float64)
    return frame


def _tasks(pending: list[Cell], sources: dict[str, str | Dataset], data_dir: str | None,
           sizes: dict[str, int]) -> list[_Task]:
    """Group pending cells by (data set, seed, setting); the largest data sets go first."""
    groups: dict[tuple[str, int, Setting], list[str]] = {}
    for cell in pending:
        groups.setdefault((cell.dataset, cell.seed, cell.setting), []).append(cell.agent)
    order = sorted(groups, key=lambda k: (-sizes[k[0]], k[0], k[2].name, k[1]))
    return [_Task(name, sources[name], data_dir, seed, setting,
                  tuple(groups[(name, seed, setting)])) for name, seed, setting in order]


def _execute(tasks: list[_Task], n_jobs: int, scheduler: str | None
             ) -> Iterator[list[tuple[Cell, pd.DataFrame]]]:
    """Yield each task's cells as it finishes: in this process, in joblib workers or on Dask."""
    if scheduler is None and n_jobs == 1:
        for task in tasks:
            yield _run_task(task, single_thread=False)
        return
    from joblib import Parallel, delayed, parallel_config

    jobs = (delayed(_run_task)(task, True) for task in tasks)
    if scheduler is None:
        yield from Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs)
        return
    from dask.distributed import Client

    with Client(scheduler) as client, parallel_config(backend="dask"):
        if sum(client.ncores().values()) < 2:
            # joblib runs a one-thread backend in this process: say so rather than surprise.
            import warnings

            warnings.warn(f"the Dask cluster at {scheduler} has a single worker thread; joblib "
                          "then runs the cells in this process", RuntimeWarning, stacklevel=3)
        yield from Parallel(n_jobs=-1, return_as="generator_unordered")(jobs)


def prepare_run(grid: Grid, data_dir: str | os.PathLike | None = None
                ) -> tuple[dict[str, Any], dict[str, Dataset]]:
    """Check every agent and (data set, setting) now; return run.json's content and the data."""
    for spec in grid.agents:
        check_agent(spec)
    directory = None if data_dir is None else str(data_dir)
    loaded = {name: _load(source, directory)
              for name, source in zip(grid.dataset_names, grid.datasets, strict=True)}
    for name, dataset in loaded.items():
        for setting in grid.settings:
            try:
                BudgetAllocationEnv(dataset, **setting.env_kwargs())
            except ValueError as err:
                raise ValueError(f"data set {name}, setting {setting.name}: {err}") from err
    manifest = {"format": FORMAT_VERSION, "grid": grid.describe(),
                "data": {name: fingerprint(ds) for name, ds in loaded.items()},
                "versions": package_versions(),
                "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")}
    return manifest, loaded


def run_grid(grid: Grid, output: str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
             n_jobs: int = -1, scheduler: str | None = None, progress: bool = True,
             ) -> pd.DataFrame:
    """Play every cell of ``grid`` not yet in ``output``, writing each as it finishes.

    Parameters
    ----------
    grid : Grid
        The cells to run.
    output : path
        Results folder. Running again with the same grid skips finished cells; a different
        grid, other data or other package versions raise ``RunError``, as does a corrupt file.
    data_dir : path, optional
        Folder of data files (default ``$BALLAD_DATA_DIR``); it must exist on Dask workers too.
    n_jobs : int
        joblib processes (-1: all cores; 1: this process).
    scheduler : str, optional
        Address of a Dask scheduler: run the cells on that cluster through joblib's dask
        backend instead (``n_jobs`` is then the cluster's size).
    progress : bool
        Show a progress bar (cells done, rate, time left) on stderr.

    Returns
    -------
    pandas.DataFrame
        The tidy table of the whole grid (``COLUMNS``): cells in the grid's order (setting,
        data set, agent, seed), then rounds; the same whatever the scheduling.
    """
    manifest, loaded = prepare_run(grid, data_dir)
    store = ResultStore(output)
    store.prepare(manifest)
    cells = grid.cells()
    frames = store.finished(cells)
    pending = [cell for cell in cells if cell not in frames]
    sources = dict(zip(grid.dataset_names, grid.datasets, strict=True))
    sizes = {name: ds.n_samples for name, ds in loaded.items()}
    tasks = _tasks(pending, sources, None if data_dir is None else str(data_dir), sizes)
    bar = _progress_bar(len(cells), len(frames), progress)
    try:
        for finished in _execute(tasks, n_jobs, scheduler):
            for cell, frame in finished:
                store.write(cell, frame)
                frames[cell] = frame
            bar.update(len(finished))
    finally:
        bar.close()
    return _concat(frames[cell] for cell in cells)


def _progress_bar(total: int, done: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, unit="cell", desc="cells", disable=not enabled,
                dynamic_ncols=True, smoothing=0.1)


def _concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Cells in the grid's order (so tables list agents as the grid does), rounds within."""
    return pd.concat(list(frames), ignore_index=True)


def load_results(output: str | os.PathLike, allow_partial: bool = False) -> pd.DataFrame:
    """The tidy table stored in ``output``, every file validated against ``run.json``.

    A run with cells still missing raises ``RunError`` unless ``allow_partial``.
    """
    store = ResultStore(output)
    manifest = store.read_manifest()
    if manifest is None:
        raise RunError(f"{output} holds no results (no {RUN_FILE})")
    cells = grid_from_manifest(manifest).cells()
    frames = store.finished(cells)
    if len(frames) < len(cells) and not allow_partial:
        raise RunError(f"{output} is incomplete: {len(cells) - len(frames)} of {len(cells)} cells "
                       "are missing; run the same command again to finish it")
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return _concat(frames[cell] for cell in cells if cell in frames)


def grid_from_manifest(manifest: dict[str, Any]) -> Grid:
    """The grid a run.json describes (data sets by name)."""
    grid = manifest["grid"]
    return Grid(tuple(grid["datasets"]), tuple(grid["seeds"]), tuple(grid["agents"]),
                tuple(Setting.from_dict(s) for s in grid["settings"]))


# ---------------------------------------------------------------------------------- summaries
def _dataset_means(results: pd.DataFrame, by: Sequence[str], metric: str) -> pd.Series:
    """Mean of ``metric`` over seeds (and any other rows) per ``by`` + data set."""
    return results.groupby([*by, "dataset"], sort=False)[metric].mean()


def _agent_order(results: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(results["agent"]))


def summary_table(results: pd.DataFrame, metric: str = "test_cost") -> pd.DataFrame:
    """Mean ``metric`` (over seeds and rounds) per setting and data set, one column per agent,
    with the winner (lowest mean; ``tie`` if the best two are equal), its margin over the
    runner-up (relative) and in how many seeds it was best. A row ``mean`` per setting averages
    the data sets."""
    agents = _agent_order(results)
    seed_means = (results.groupby(["setting", "dataset", "seed", "agent"], sort=False)[metric]
                  .mean().unstack("agent")[agents])
    means = seed_means.groupby(level=["setting", "dataset"], sort=False).mean()
    pieces = []
    for setting, block in means.groupby(level="setting", sort=False):
        block = block.droplevel("setting")
        block.loc["mean"] = block.mean()
        pieces.append(pd.concat({setting: block}, names=["setting"]))
    table = pd.concat(pieces)
    table.index.names = ["setting", "dataset"]
    if len(agents) < 2:
        return table
    values = table[agents].to_numpy()
    ordered = np.sort(values, axis=1)
    best, runner_up = ordered[:, 0], ordered[:, 1]
    winner = np.array(agents, dtype=object)[np.argmin(values, axis=1)]
    tie = np.isclose(best, runner_up, rtol=1e-12, atol=0.0)
    table["winner"] = np.where(tie, "tie", winner)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["margin"] = np.where(runner_up > 0, (runner_up - best) / runner_up, 0.0)
    table["seeds_won"] = [_seeds_won(seed_means, key, w) for key, w in
                          zip(table.index, table["winner"], strict=True)]
    return table


def _seeds_won(seed_means: pd.DataFrame, key: tuple[str, str], winner: str) -> str:
    """'k/n': seeds in which ``winner`` had the strictly lowest mean (blank for the mean row)."""
    setting, dataset = key
    if dataset == "mean" or winner == "tie":
        return ""
    block = seed_means.loc[(setting, dataset)]
    others = block.drop(columns=winner).min(axis=1)
    return f"{int((block[winner] < others).sum())}/{len(block)}"


def win_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """How many data sets each agent wins per setting (the ``mean`` rows left out)."""
    rows = summary[summary.index.get_level_values("dataset") != "mean"]
    return rows.groupby(level="setting", sort=False)["winner"].value_counts().unstack(fill_value=0)


def per_round_table(results: pd.DataFrame, metric: str = "test_cost",
                    spread: bool = False) -> pd.DataFrame:
    """Mean ``metric`` per round (rows) and agent (columns), per setting.

    Data sets weigh equally: seeds are averaged within a data set first. With ``spread``
    each agent also gets the standard deviation across data sets (the paper's Table 2).
    """
    per_dataset = _dataset_means(results, ["setting", "agent", "round"], metric)
    grouped = per_dataset.groupby(level=["setting", "agent", "round"], sort=False)
    table = grouped.agg(["mean", "std"]) if spread else grouped.mean().to_frame("mean")
    wide = table.unstack("agent")
    wide.columns = wide.columns.swaplevel(0, 1) if spread else wide.columns.droplevel(0)
    agents = _agent_order(results)
    if spread:
        wide = wide[[(a, stat) for a in agents for stat in ("mean", "std")]]
    else:
        wide = wide[agents]
    return wide.sort_index(level=["setting", "round"], sort_remaining=False)


def action_shares(results: pd.DataFrame, first_round: int = 1) -> pd.DataFrame:
    """Share of AL choices per setting and agent, over rounds from ``first_round`` on."""
    rows = results[results["round"] >= first_round]
    share = (rows["action"] == "AL").groupby([rows["setting"], rows["agent"]], sort=False).mean()
    return share.unstack("agent")[_agent_order(rows)]


def reward_differences(results: pd.DataFrame, agent: str = "ballad", reward: str = "entropy"
                       ) -> pd.DataFrame:
    """AL minus LR ``reward`` of ``agent``'s rounds once both sides are measured, per setting.

    These are the latest rewards after each round, the values BALLAD compares next.
    """
    rows = results[(results["agent"] == agent)].copy()
    rows["al"], rows["lr"] = rows[f"{reward}_al"], rows[f"{reward}_lr"]
    if {"al_measured", "lr_measured"} <= set(rows.columns):
        rows = rows[rows["al_measured"] & rows["lr_measured"]]
    else:  # older records: unmeasured rewards were NaN
        rows = rows[rows["al"].notna() & rows["lr"].notna()]
    rows["difference"] = rows["al"] - rows["lr"]
    return rows[["setting", "dataset", "seed", "round", "al", "lr", "difference"]]


def reward_difference_stats(differences: pd.DataFrame) -> pd.DataFrame:
    """Median and spread of the AL - LR reward differences, and each side's std, per setting."""
    def stats(block: pd.DataFrame) -> pd.Series:
        return pd.Series({"rounds": len(block), "median": block["difference"].median(),
                          "mean": block["difference"].mean(),
                          "std_difference": block["difference"].std(),
                          "share_lr_higher": float((block["difference"] < 0).mean()),
                          "std_al": block["al"].std(), "std_lr": block["lr"].std()})

    return pd.DataFrame({setting: stats(block) for setting, block
                         in differences.groupby("setting", sort=False)}).T


def fresh_rewards(results: pd.DataFrame, signal: str = "entropy") -> pd.Series:
    """The ``signal`` reward each round measured for the side it chose (AL or LR)."""
    chose_al = results["action"] == "AL"
    return results[f"{signal}_al"].where(chose_al, results[f"{signal}_lr"])


def operating_points(results: pd.DataFrame,
                     metrics: Sequence[str] = ("test_cost", "fpr", "fnr", "rejection_rate",
                                               "auc", "tau")) -> pd.DataFrame:
    """Mean of each metric per setting and agent (data sets weigh equally, seeds first)."""
    per_dataset = results.groupby(["setting", "agent", "dataset"], sort=False)[list(metrics)]
    return per_dataset.mean().groupby(level=["setting", "agent"], sort=False).mean()


def relative_gain(table: pd.DataFrame, agent: str, baseline: str) -> pd.Series:
    """1 - cost(agent) / cost(baseline) per row of a table with one column per agent."""
    return 1.0 - table[agent] / table[baseline]


# ---------------------------------------------------------------------------------- text
def markdown_table(frame: pd.DataFrame, digits: int = 4, index: bool = True) -> str:
    """A GitHub Markdown table of ``frame`` (floats with ``digits`` decimals)."""
    frame = frame.reset_index() if index else frame
    header = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell_text(v, digits) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _cell_text(value: Any, digits: int) -> str:
    if isinstance(value, float | np.floating):
        return "" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


__all__ = ["COLUMNS", "KEY_COLUMNS", "Cell", "Grid", "ResultStore", "RunError", "Setting",
           "action_shares", "agent_label", "check_agent", "dataset_names", "fresh_rewards",
           "load_results", "markdown_table", "operating_points", "per_round_table",
           "prepare_run", "relative_gain", "resolve_agent",
           "reward_difference_stats", "reward_differences", "run_grid", "seed_range",
           "setting_grid", "summary_table", "win_counts"]
