"""Play a grid: every cell not yet stored, in parallel, written as it finishes.

``run_grid`` plays every cell not already on disk, in parallel with joblib (local
processes, or a Dask cluster through joblib's dask backend), and returns one tidy table:
one row per data set, seed, agent, settings and round, with every scalar ``info`` figure of
the environment (``ballad_env.episode.RECORD_FIELDS``).

All of an agent's randomness and the environment's come from the integer seed passed to
``env.reset``, so results never depend on scheduling. The cells of one (data set, seed) run
together, in one process: the label-free part of their reset (split, prior, eta) is computed
once and shared by every setting through the environment's reset cache
(``ballad_env.compute``), and the agents of one setting share one reset, done once and
copied, which the environment's common random numbers make identical to resetting for each
agent. A grid too small to pay for starting worker processes runs in this process.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import numpy as np

from agents.evaluation import run_episode
from agents.experiments.executor import execute, progress_bar, worker_limits
from agents.experiments.grid import Cell, Grid, agent_label
from agents.experiments.stores.provenance import fingerprint, package_versions
from agents.experiments.stores.results import (
    COLUMNS,
    FORMAT_VERSION,
    ResultStore,
    RunError,
    concat_cells,
    normalise_dtypes,
)
from agents.extras import require
from agents.policy_files import policy_fingerprint
from agents.registry import agent_source, make_agent
from agents.spec import AgentSpec
from ballad_env.cost import Costs
from ballad_env.data import Dataset, load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.observation import encode
from ballad_env.plugins import ENTRY_POINT_GROUP, load_plugins, plugin_modules
from ballad_env.settings import Settings

require("pandas")  # installed or named now; imported where a table is read or built

if TYPE_CHECKING:  # pandas is imported where a table is built: training needs none
    import pandas as pd


@functools.lru_cache(maxsize=8)
def _load_named(name: str, data_dir: str | None) -> Dataset:
    """Load a data set by name once per process (workers run many cells of one data set)."""
    return load_dataset(name, data_dir=data_dir)


def load_data(source: str | Dataset, data_dir: str | None) -> Dataset:
    """``source`` itself if it is a data set, else the data set of that name (loaded once per
    process: workers run many cells of one data set)."""
    return source if isinstance(source, Dataset) else _load_named(source, data_dir)


@dataclass(frozen=True)
class _Task:
    """The cells of one (data set, seed): per setting, its agents. One label-free reset (from
    the reset cache) serves them all, so they run in one process."""

    name: str
    dataset: str | Dataset
    data_dir: str | None
    seed: int
    cells: tuple[tuple[Settings, tuple[str, ...]], ...]
    #: Load saved policies with SB3's full loader, which runs code from the file.
    trust_pickle: bool = False

    @property
    def agents(self) -> tuple[str, ...]:
        """Every agent the task plays, setting after setting."""
        return tuple(agent for _, agents in self.cells for agent in agents)


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


def _now() -> str:
    """The time now, UTC, to the second (ISO 8601), as the manifest records it."""
    import pandas as pd

    return pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")


def _run_task(task: _Task, single_thread: bool) -> list[tuple[Cell, pd.DataFrame]]:
    """Play every agent of ``task`` from one shared reset; one table per cell."""
    with worker_limits(single_thread):
        dataset = load_data(task.dataset, task.data_dir)
        done = []
        for setting, agents in task.cells:
            env = BudgetAllocationEnv(dataset, settings=setting)
            for spec, played, records in play_agents(env, task.seed, agents,
                                                     trust_pickle=task.trust_pickle):
                cell = Cell(task.name, task.seed, spec, setting)
                done.append((cell, _frame(cell, records, played)))
    return done


def play_agents(env: BudgetAllocationEnv, seed: int, specs: Sequence[str], *,
                include_start: bool = False, trust_pickle: bool = False
                ) -> list[tuple[str, BudgetAllocationEnv, list[dict[str, Any]]]]:
    """Every agent of ``specs`` from one reset of ``env`` with ``seed``: each plays its own
    copy of the reset environment, which common random numbers make identical to a fresh
    reset. Returns (spec, the environment it played, its records) per agent.
    ``trust_pickle``: saved policies load with SB3's full loader, running code from the
    file (``agents.policy.load_policy``)."""
    obs, info = env.reset(seed=seed)
    played = []
    for spec in specs:
        own = copy.deepcopy(env)
        agent = make_agent(spec, own, trust_pickle=trust_pickle)
        start = obs.copy()
        version = getattr(agent, "observation_version", own.observation_version)
        if version != own.observation_version:  # e.g. a rule that reads v1 features
            own.use_observation(version)
            start = encode(own.snapshot(), version)
        prepared = _ResetDone(own, seed, start, copy.deepcopy(info))
        records = run_episode(prepared, agent, seed, include_start=include_start)
        played.append((spec, prepared.unwrapped, records))
    return played


def _frame(cell: Cell, records: list[dict[str, Any]], env: BudgetAllocationEnv) -> pd.DataFrame:
    """A cell's tidy rows: keys, setting columns, then every recorded ``info`` figure. The
    episode's figures come from its ``Snapshot``, the one state record; the costs, eta sample
    and kernel precision in force are the settings resolved on it (c_r from the contamination
    when not given, "auto" by the training set's size)."""
    setting, snapshot = cell.setting, env.snapshot()
    costs = Costs.for_contamination(snapshot.contamination, setting.c_fp, setting.c_fn,
                                    setting.c_r, setting.cost_metric)
    values = {**{f.name: getattr(setting, f.name) for f in fields(Settings)},
              **setting.to_dict(), "kernel_pairs": setting.kernel_pairs_for(snapshot.n_train)}
    # every option, those at their default too (to_dict leaves quiet ones out), so that
    # ``df[df.rejector == "confidence"]`` finds the rows; None only where nothing is set
    options = {("reward_type" if name == "reward" else name): value
               for name, value in values.items() if name != "name"}
    constants = {
        "dataset": cell.dataset, "setting": setting.name, "agent": agent_label(cell.agent),
        "seed": cell.seed, "contamination": snapshot.contamination, **options,
        "c_fp": costs.c_fp, "c_fn": costs.c_fn, "c_r": costs.c_r,
        "eta_sample": setting.eta_sample_for(snapshot.n_train),
        "kernel_dtype": setting.kernel_dtype_for(snapshot.n_train),
    }
    rows = [{**constants, **record,
             "spent_fraction": record["round"] * setting.round_fraction} for record in records]
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return normalise_dtypes(frame)


def _tasks(pending: list[Cell], sources: dict[str, str | Dataset], data_dir: str | None,
           sizes: dict[str, int], trust_pickle: bool = False) -> list[_Task]:
    """Group pending cells by (data set, seed), then setting; the largest data sets go first."""
    groups: dict[tuple[str, int], dict[Settings, list[str]]] = {}
    for cell in pending:
        groups.setdefault((cell.dataset, cell.seed), {}).setdefault(cell.setting, []).append(
            cell.agent)
    order = sorted(groups, key=lambda k: (-sizes[k[0]], k[0], k[1]))
    return [_Task(name, sources[name], data_dir, seed,
                  tuple((setting, tuple(agents)) for setting, agents in groups[name, seed].items()),
                  trust_pickle)
            for name, seed in order]


#: Seconds it takes to start worker processes and import the project in them (measured on
#: two cores); a grid expected to take less runs in this process.
WORKER_START_S = 5.0


def _expected_seconds(tasks: list[_Task], sizes: dict[str, int]) -> float:
    """A rough in-process time for ``tasks``: a time per reset, and per cell a fixed time
    plus a time per row of the data set (constants read off the benchmark data sets'
    episodes, ``ballad-env bench``)."""
    return sum(0.2 + (0.05 + 2e-5 * sizes[task.name]) * sum(len(a) for _, a in task.cells)
               for task in tasks)


#: Top-level packages every worker process imports: this project's.
PROJECT_PACKAGES = ("agents", "ballad_env")


def _worker_packages() -> set[str]:
    """Top-level packages a worker process imports: the project's, the plugin modules' and
    the installed plugins' (entry points of ``ENTRY_POINT_GROUP``)."""
    installed = (point.module for point in entry_points(group=ENTRY_POINT_GROUP))
    modules = [*plugin_modules(), *installed]
    return {*PROJECT_PACKAGES, *(module.partition(".")[0] for module in modules)}


def check_workers_know(agents: Sequence[str]) -> None:
    """``RunError`` naming the agents whose code comes from a module worker processes never
    import: the running script (``__main__``), or a module the script imported itself rather
    than as a plugin. Workers import the project and the plugins only, so there these would
    be unknown agents; the fix is to pass that module as a plugin."""
    known = _worker_packages()
    unknown: dict[str, list[str]] = {}
    for spec in agents:
        module = AgentSpec.of(spec).module
        if module is not None and module.partition(".")[0] not in known:
            unknown.setdefault(module, []).append(spec)
    if not unknown:
        return
    module, names = next(iter(unknown.items()))
    listed = ", ".join(map(repr, names))
    if module == "__main__":
        raise RunError(f"agent(s) {listed} are registered in your script, which worker "
                       "processes do not run: move the registration into a module and pass "
                       "run_grid(..., plugins=['that_module']) (on the command line --import "
                       "that_module), or n_jobs=1 to play in this process")
    raise RunError(f"agent(s) {listed} come from module {module!r}, which worker processes do "
                   f"not import: pass run_grid(..., plugins=[\"{module}\"]) (on the command "
                   f"line --import {module}), or n_jobs=1 to play in this process")


def prepare_run(grid: Grid, data_dir: str | os.PathLike | None = None, *,
                trust_pickle: bool = False) -> tuple[dict[str, Any], dict[str, Dataset]]:
    """Check every agent and (data set, setting) now; return run.json's content and the data.

    ``grid`` is resolved (``Grid.resolve``: its data sets keyed by the names they load
    under), and each saved policy is keyed by a hash of its file, so a retrained policy is
    never taken for the old one.
    """
    if not grid.keys:
        raise ValueError("prepare_run needs a resolved grid: pass grid.resolve(data_dir)")
    for spec in grid.agent_specs:
        spec.check(trust_pickle=trust_pickle)
    directory = None if data_dir is None else str(data_dir)
    loaded = {name: load_data(source, directory)
              for name, source in zip(grid.dataset_names, grid.datasets, strict=True)}
    for name, dataset in loaded.items():
        for setting in grid.settings:
            try:
                BudgetAllocationEnv(dataset, settings=setting)
            except ValueError as err:
                raise ValueError(f"data set {name}, setting {setting.name}: {err}") from err
    manifest = {"format": FORMAT_VERSION, "grid": grid.describe(),
                "data": {name: fingerprint(ds) for name, ds in loaded.items()},
                "policies": {spec.label: {"file": spec.text,
                                          "sha256": policy_fingerprint(spec.text)}
                             for spec in grid.agent_specs if spec.is_policy},
                "agents": {spec.label: agent_source(spec.text)
                           for spec in grid.agent_specs if not spec.is_policy},
                "plugins": list(plugin_modules()),
                "versions": package_versions(),
                "created": _now()}
    return manifest, loaded


def run_grid(grid: Grid, output: str | os.PathLike, *, data_dir: str | os.PathLike | None = None,
             n_jobs: int = -1, scheduler: str | None = None, progress: bool = True,
             trust_pickle: bool = False, plugins: Sequence[str] = ()) -> pd.DataFrame:
    """Play every cell of ``grid`` not yet in ``output``, writing each as it finishes.

    Parameters
    ----------
    grid : Grid
        The cells to run.
    output : path
        Results folder. Running again with the same grid skips finished cells, and a grid
        with more data sets, seeds, agents or settings runs only the new cells. A grid that
        drops any, other data, other package versions or source, a changed saved policy or
        a corrupt file raise ``RunError``.
    data_dir : path, optional
        Folder of data files (default ``$BALLAD_DATA_DIR``); it must exist on Dask workers too.
    n_jobs : int
        joblib processes (-1: all cores; 1: this process). A grid expected to take less than
        ``WORKER_START_S`` seconds runs in this process whatever ``n_jobs`` says.
    scheduler : str, optional
        Address of a Dask scheduler: run the cells on that cluster through joblib's dask
        backend instead (``n_jobs`` is then the cluster's size). ``RunError`` if it does not
        answer within ``SCHEDULER_TIMEOUT`` seconds.
    progress : bool
        Show a progress bar (cells done, rate, time left) on stderr.
    trust_pickle : bool
        Load saved policies with stable-baselines3's full loader, which runs any code
        stored in the file; by default they load without running code from it
        (``agents.policy.load_policy``).
    plugins : sequence of str
        Modules whose import registers the user's agents, priors, detectors, ... by name
        (``ballad_env.plugins``): imported here and in every worker before its first cell,
        as ``--import MODULE`` does on the command line.

    Returns
    -------
    pandas.DataFrame
        The tidy table of the whole grid (``COLUMNS``): cells in the grid's order (setting,
        data set, agent, seed), then rounds; the same whatever the scheduling.
    """
    load_plugins(plugins)
    grid = grid.resolve(data_dir)
    manifest, loaded = prepare_run(grid, data_dir, trust_pickle=trust_pickle)
    store = ResultStore(output)
    store.prepare(manifest)
    cells = grid.cells()
    frames = store.finished(cells)
    pending = [cell for cell in cells if cell not in frames]
    sources = dict(zip(grid.dataset_names, grid.datasets, strict=True))
    sizes = {name: ds.n_samples for name, ds in loaded.items()}
    tasks = _tasks(pending, sources, None if data_dir is None else str(data_dir), sizes,
                   trust_pickle)
    if _expected_seconds(tasks, sizes) < WORKER_START_S:
        n_jobs = 1  # too small to pay for starting workers
    if n_jobs != 1 or scheduler is not None:
        check_workers_know(grid.agents)
    bar = progress_bar(len(cells), len(frames), progress)
    try:
        for finished in execute(tasks, _run_task, n_jobs, scheduler):
            for cell, frame in finished:
                store.write(cell, frame)
                frames[cell] = frame
            bar.update(len(finished))
    finally:
        bar.close()
    return concat_cells(frames[cell] for cell in cells)


__all__ = ["WORKER_START_S", "check_workers_know", "load_data", "play_agents", "prepare_run",
           "run_grid"]
