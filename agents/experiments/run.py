"""Play a grid: every cell not yet stored, in parallel, written as it finishes.

``run_grid`` plays every cell not already on disk, in parallel with joblib (local
processes, or a Dask cluster through joblib's dask backend), and returns one tidy table:
one row per data set, seed, agent, settings and round, with every scalar ``info`` figure of
the environment (``ballad_env.episode.RECORD_FIELDS``).

All of an agent's randomness and the environment's come from the integer seed passed to
``env.reset``, so results never depend on scheduling. The agents of one (data set, seed,
settings) share one reset: it is done once and copied, which the environment's common
random numbers make identical to resetting for each agent.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from agents.evaluation import run_episode
from agents.experiments.grid import Cell, Grid, agent_label, check_agent
from agents.experiments.provenance import fingerprint, package_versions
from agents.experiments.store import (
    COLUMNS,
    FORMAT_VERSION,
    ResultStore,
    _concat,
    _normalise_dtypes,
)
from agents.registry import make_agent
from ballad_env.data import Dataset, load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings


@functools.lru_cache(maxsize=8)
def _load_named(name: str, data_dir: str | None) -> Dataset:
    """Load a data set by name once per process (workers run many cells of one data set)."""
    return load_dataset(name, data_dir=data_dir)


def _load(source: str | Dataset, data_dir: str | None) -> Dataset:
    return source if isinstance(source, Dataset) else _load_named(source, data_dir)


@dataclass(frozen=True)
class _Task:
    """The cells of one (data set, seed, setting): one reset shared by its agents."""

    name: str
    dataset: str | Dataset
    data_dir: str | None
    seed: int
    setting: Settings
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
        env = BudgetAllocationEnv(dataset, settings=task.setting)
        done = []
        for spec, played, records in play_agents(env, task.seed, task.agents):
            cell = Cell(task.name, task.seed, spec, task.setting)
            done.append((cell, _frame(cell, records, played)))
    return done


def play_agents(env: BudgetAllocationEnv, seed: int, specs: Sequence[str], *,
                include_start: bool = False
                ) -> list[tuple[str, BudgetAllocationEnv, list[dict[str, Any]]]]:
    """Every agent of ``specs`` from one reset of ``env`` with ``seed``: each plays its own
    copy of the reset environment, which common random numbers make identical to a fresh
    reset. Returns (spec, the environment it played, its records) per agent."""
    obs, info = env.reset(seed=seed)
    played = []
    for spec in specs:
        prepared = _ResetDone(copy.deepcopy(env), seed, obs.copy(), copy.deepcopy(info))
        agent = make_agent(spec, prepared.unwrapped)
        records = run_episode(prepared, agent, seed, include_start=include_start)
        played.append((spec, prepared.unwrapped, records))
    return played


def _frame(cell: Cell, records: list[dict[str, Any]], env: BudgetAllocationEnv) -> pd.DataFrame:
    """A cell's tidy rows: keys, setting columns, then every recorded ``info`` figure."""
    setting, episode = cell.setting, env.episode
    options = {("reward_type" if name == "reward" else name): value
               for name, value in setting.to_dict().items() if name != "name"}
    constants = {
        "dataset": cell.dataset, "setting": setting.name, "agent": agent_label(cell.agent),
        "seed": cell.seed, "contamination": episode.contamination, **options,
        # the costs in force: c_r resolved from the contamination when not given
        "c_fp": episode.costs.c_fp, "c_fn": episode.costs.c_fn, "c_r": episode.costs.c_r,
    }
    rows = [{**constants, **record,
             "spent_fraction": record["round"] * setting.round_fraction} for record in records]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return _normalise_dtypes(frame)


def _tasks(pending: list[Cell], sources: dict[str, str | Dataset], data_dir: str | None,
           sizes: dict[str, int]) -> list[_Task]:
    """Group pending cells by (data set, seed, setting); the largest data sets go first."""
    groups: dict[tuple[str, int, Settings], list[str]] = {}
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
                BudgetAllocationEnv(dataset, settings=setting)
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


__all__ = ["play_agents", "prepare_run", "run_grid"]
