"""The crossed study's cells: its options, the lattices built through the harness, and one
cell (a factor combination, a data set, a seed) replayed into the study's results store.

Two stores under ``<out>``: ``lattices`` (a ``LatticeStore`` built by
``lattice_build.build_store``: resumable, refused when the environment's code changed) and
``paths`` (a ``ResultStore``, one ``TableCell`` per cell: every strategy's and yardstick's
path and scores). Both resume: a rerun builds the missing lattices and replays the cells
not stored yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from agents.experiments.executor import execute, progress_bar, worker_limits
from agents.experiments.lattice_build import build_store
from agents.experiments.stores.provenance import package_versions
from agents.experiments.stores.results import FORMAT_VERSION, ResultStore, TableCell
from ballad_env.data import dataset_name
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.common.lattice_paths import episode_row, reference_paths
from scripts.studies.crossed.factors import (
    FACTOR_NAMES,
    FACTORS,
    Combination,
    combinations,
    split_posable,
)

#: The allocation rules replayed on every lattice (registered agent names): the two
#: extremes, BALLAD's rule and SADAL's discounted choice.
AGENTS = ("all-in-al", "all-in-lr", "ballad", "sadal")
#: The columns that name one cell: the factors, the data set and the seed.
CELL = [*FACTOR_NAMES, "dataset", "seed"]
#: The one table each cell writes.
TABLE = "paths"


@dataclass
class StudyOptions:
    """The study's options (one command-line option each). ``levels``: factor -> the levels
    to cross (default: every level of :data:`FACTORS`)."""

    out: Path
    datasets: list[str]
    seeds: list[int]
    levels: dict[str, list[str]] = field(
        default_factory=lambda: {f: list(levels) for f, levels in FACTORS.items()})
    data_dir: str | None = None
    base: Settings = field(default_factory=Settings)
    agents: tuple[str, ...] = AGENTS
    #: Play the combinations the lattice refuses only for their path-dependent queries in
    #: live episodes (``live.py``), rather than only marking them not posable.
    live: bool = True
    n_jobs: int = 1
    scheduler: str | None = None
    progress: bool = True

    def names(self) -> list[str]:
        """The data sets by the names the stores key them by (``dataset_name``)."""
        return [dataset_name(d, self.data_dir) for d in self.datasets]

    def combinations(self) -> list[Combination]:
        """Every combination of the chosen levels."""
        return combinations(self.levels)


# ---------------------------------------------------------------------------- stores
def lattice_store(out: Path) -> LatticeStore:
    """The study's lattices, ``<out>/lattices``."""
    return LatticeStore(Path(out) / "lattices", create=True)


def paths_store(out: Path) -> ResultStore:
    """The study's replayed paths, ``<out>/paths``: one ``TableCell`` per cell."""
    return ResultStore(Path(out) / "paths")


def table_cell(combo: Combination, dataset: str, seed: int, table: str = TABLE) -> TableCell:
    """The stored file of one cell (of ``table``: the replayed paths, or the live episodes)."""
    key = (*combo.columns().items(), ("dataset", dataset), ("seed", int(seed)))
    return TableCell(table, key)


def prepare_store(store: ResultStore, options: StudyOptions, combos: Sequence[Combination],
                  study: str = "crossed") -> ResultStore:
    """``store`` with its ``run.json`` grown to this run's combinations, data sets, seeds
    and agents; ``RunError`` if it holds results of other source code or package versions
    (delete the folder: its cells are recomputed)."""
    stored = (store.read_manifest() or {}).get("grid", {})

    def grown(axis: str, values: Sequence[Any]) -> list[Any]:
        return list(dict.fromkeys([*stored.get(axis, []), *values]))

    grid = {"datasets": grown("datasets", options.names()),
            "seeds": grown("seeds", options.seeds),
            "agents": grown("agents", options.agents),
            "settings": grown("settings", [c.label for c in combos])}
    store.prepare({"format": FORMAT_VERSION, "study": study, "grid": grid,
                   "versions": package_versions(),
                   "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")})
    return store


def prepare_paths_store(options: StudyOptions) -> ResultStore:
    """The paths store, its ``run.json`` grown to this run (:func:`prepare_store`; the
    paths are recomputed from the lattices)."""
    return prepare_store(paths_store(options.out), options, options.combinations())


def cell_done(store: ResultStore, cell: TableCell, names: Sequence[str]) -> bool:
    """Whether ``cell`` is stored with a row of every name in ``names``."""
    return store.path(cell).exists() and set(names) <= set(store.read(cell).name)


def stored_cells(store: ResultStore, options: StudyOptions, combos: Sequence[Combination],
                 table: str = TABLE) -> pd.DataFrame:
    """Every stored cell's rows among ``combos`` and the options' data sets and seeds
    (cells not computed yet are absent)."""
    frames = [store.read(cell) for combo in combos for name in options.names()
              for seed in options.seeds
              if store.path(cell := table_cell(combo, name, seed, table)).exists()]
    if not frames:
        return pd.DataFrame(columns=[*CELL, "name", "kind", "path", "mean_cost"])
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------- one cell
def replay_rows(lattice: Any, agents: Sequence[str]) -> list[dict[str, Any]]:
    """Every agent's replayed path and every yardstick path (``lattice_paths``), scored."""
    from agents.registry import make_agent

    paths = {name: ("agent", lattice.replay(make_agent(name))) for name in agents}
    paths.update(reference_paths(lattice))
    return [episode_row(lattice, name, kind, actions) for name, (kind, actions) in paths.items()]


def replay_work(task: tuple[Path, Combination, Settings, str, int, tuple[str, ...]],
                single_thread: bool = True) -> tuple[TableCell, pd.DataFrame]:
    """One cell's table: its lattice loaded from the store, the agents replayed on it and
    the yardsticks scored; every row carries the cell's columns."""
    out, combo, settings, dataset, seed, agents = task
    with worker_limits(single_thread):
        lattice = lattice_store(out).load(dataset, seed, settings)
        keys = {**combo.columns(), "dataset": dataset, "seed": int(seed)}
        rows = [{**keys, **row} for row in replay_rows(lattice, agents)]
    return table_cell(combo, dataset, seed), pd.DataFrame(rows)


# ---------------------------------------------------------------------------- driver
def build_lattices(options: StudyOptions, posed: dict[Combination, Settings]) -> pd.DataFrame:
    """Every missing lattice of the posed combinations, data sets and seeds
    (``lattice_build.build_store``: resumable, through the executor, a progress bar)."""
    unique = list(dict.fromkeys(posed.values()))
    return build_store(Path(options.out) / "lattices", options.datasets, options.seeds, unique,
                       data_dir=options.data_dir, n_jobs=options.n_jobs,
                       scheduler=options.scheduler, progress=options.progress)


def pending_cells(options: StudyOptions, store: ResultStore,
                  posed: dict[Combination, Settings]
                  ) -> list[tuple[Path, Combination, Settings, str, int, tuple[str, ...]]]:
    """The replay tasks of the cells not stored yet, or stored without some agent."""
    tasks = []
    for combo, settings in posed.items():
        for name in options.names():
            for seed in options.seeds:
                if cell_done(store, table_cell(combo, name, seed), options.agents):
                    continue
                tasks.append((Path(options.out), combo, settings, name, seed,
                              tuple(options.agents)))
    return tasks


def write_cells(store: ResultStore, tasks: Sequence[Any], work: Any, options: StudyOptions,
                total: int, desc: str) -> None:
    """Compute ``tasks`` through the executor (``work(task, single_thread)`` gives a cell
    and its table), writing each cell as it finishes, with a progress bar over ``total``
    cells of which those not in ``tasks`` are done."""
    bar = progress_bar(total, total - len(tasks), options.progress, desc=desc)
    try:
        for cell, frame in execute(tasks, work, options.n_jobs, options.scheduler):
            store.write(cell, frame)
            bar.update(1)
    finally:
        bar.close()


def replay_study(options: StudyOptions, posed: dict[Combination, Settings]) -> None:
    """Build the posed combinations' lattices and replay every pending cell into the paths
    store (each written as it finishes)."""
    if not posed:
        return
    build_lattices(options, posed)
    store = prepare_paths_store(options)
    tasks = pending_cells(options, store, posed)
    total = len(posed) * len(options.names()) * len(options.seeds)
    write_cells(store, tasks, replay_work, options, total, "replays")


def stored_paths(options: StudyOptions) -> pd.DataFrame:
    """Every stored cell's rows among the options' posable combinations, data sets and
    seeds (cells not computed yet are absent)."""
    posed, _ = split_posable(options.combinations(), options.base)
    return stored_cells(paths_store(options.out), options, list(posed))


__all__ = ["AGENTS", "CELL", "TABLE", "StudyOptions", "build_lattices", "cell_done",
           "lattice_store", "paths_store", "pending_cells", "prepare_paths_store",
           "prepare_store", "replay_rows", "replay_study", "replay_work", "stored_cells",
           "stored_paths", "table_cell", "write_cells"]
