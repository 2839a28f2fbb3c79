"""Build a lattice store (``ballad_env.replay.store``): data sets x seeds x settings.

The cells of one (data set, seed) are built together, in one process, so every setting
with the same prior shares the label-free reset (``ballad_env.compute``'s reset cache);
they run through the harness's executor (``executor.execute``: this process, local joblib
workers that exit with the runner, or a Dask cluster), seed after seed and the largest
data sets first within a seed, each file written as it finishes. A rerun builds only the
missing cells; a store from other environment code, package versions or data, or a stored
file that cannot be read, stops the build with an error naming it, and nothing already
built is touched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agents.experiments.executor import execute, progress_bar, worker_limits
from agents.experiments.run import load_data
from agents.experiments.stores.provenance import fingerprint, package_versions
from agents.experiments.stores.results import RunError, writable_folder
from agents.extras import require
from ballad_env.data import Dataset, dataset_name
from ballad_env.env import named_arrays
from ballad_env.files import colliding, remove_stale_temporaries
from ballad_env.replay.lattice import build_lattice, check_lattice_settings
from ballad_env.replay.store import (
    LatticeStore,
    StoreError,
    lattice_settings,
    read_header,
    save_lattice,
    setting_key,
)
from ballad_env.settings import Settings

require("pandas")  # installed or named now; imported where a table is read or built

if TYPE_CHECKING:  # pandas is imported where a table is built: training needs none
    import pandas as pd

#: The columns of :func:`cell_table` (and :func:`store_table`): one row per stored cell.
CELL_COLUMNS = ("setting", "dataset", "seed", "n_rounds", "build_seconds", "bytes")
#: Options that shape neither the label-free reset nor, under most strategies, the labels
#: bought on D: settings that differ only in these share SSIF's fits (``detectors.ssif.episode``).
SHARING_OPTIONS = frozenset({"rejector", "c_fp", "c_fn", "c_r", "cost_metric", "reward"})


def sharing_order(settings: Sequence[Settings]) -> list[Settings]:
    """``settings`` with those that differ only in rejector or costs (``SHARING_OPTIONS``)
    next to each other, otherwise in their order: one task's lattices then ask SSIF's fit
    memo for one start's fits in a row, so a small memo serves them all."""
    def shared(setting: Settings) -> tuple[str, ...]:
        return tuple(repr(getattr(setting, f.name)) for f in fields(setting)
                     if f.name not in SHARING_OPTIONS)

    first: dict[tuple[str, ...], int] = {}
    for index, setting in enumerate(settings):
        first.setdefault(shared(setting), index)
    return sorted(settings, key=lambda setting: first[shared(setting)])


@dataclass(frozen=True)
class _BuildTask:
    """The lattices of one (data set, seed), one per setting, to build into ``root`` (in
    ``sharing_order``; the data set is loaded once, so they share its reset cache entries)."""

    name: str
    dataset: str | Dataset
    data_dir: str | None
    seed: int
    settings: tuple[Settings, ...]
    root: str


def _build_task(task: _BuildTask, single_thread: bool) -> list[tuple[str, str, int]]:
    """Build and write the task's lattices; (setting, data set, seed) of each."""
    store = LatticeStore(task.root)
    done = []
    with worker_limits(single_thread):
        data = load_data(task.dataset, task.data_dir)
        for setting in task.settings:
            start = time.perf_counter()
            lattice = build_lattice(data, task.seed, setting)
            seconds = time.perf_counter() - start
            save_lattice(lattice, store.path(task.name, task.seed, setting),
                         build_seconds=round(seconds, 4))
            done.append((setting_key(setting), task.name, task.seed))
    return done


def _versions() -> dict[str, str]:
    """The package versions that shape lattices (the environment's source is checked apart)."""
    return {k: v for k, v in package_versions().items() if k != "ballad-env source"}


def prepare_store(root: str | os.PathLike, loaded: dict[str, Dataset],
                  settings: Sequence[Settings],
                  pairs: Iterable[tuple[str, Settings]] | None = None) -> LatticeStore:
    """Create or reopen the store at ``root`` for these data sets and settings; ``RunError``
    (naming the file) if it was built by other code, package versions or data, or if a
    setting cannot have a lattice (``check_lattice_settings``: nothing is written).

    ``pairs`` are the (data set, setting) pairs the build writes (default: every data set
    with every setting, a grid); a killed build's temporaries are removed from their folders
    alone, so a build of many tasks, each at its own costs, visits one folder per task, not
    one per task and setting."""
    for setting in settings:
        try:
            check_lattice_settings(setting)
        except ValueError as err:
            raise RunError(str(err)) from err
    folder = writable_folder(root, "--out")
    store = LatticeStore(folder, create=True)
    written = ((name, s) for name in loaded for s in settings) if pairs is None else pairs
    # One step for every process: two builds started at once never both pass the checks.
    try:
        with store.lock():
            _check_and_record(store, loaded, settings)
            # left by killed builds, in the folders this build writes (and nowhere else)
            folders = {store.path(name, 0, s).parent for name, s in written}
            remove_stale_temporaries([store.root, *sorted(folders)])
    except TimeoutError as err:  # another build keeps store.json's lock
        raise RunError(str(err)) from err
    return store


def _check_and_record(store: LatticeStore, loaded: dict[str, Dataset],
                      settings: Sequence[Settings]) -> None:
    """Check ``store.json`` against this build (versions, data) and record its data sets and
    settings (``RunError`` naming the file); the caller holds the store's lock."""
    manifest: dict[str, Any] = {}
    if store.manifest_path.exists():
        try:
            manifest = store.manifest()
        except StoreError as err:
            raise RunError(str(err)) from err
        if manifest.get("versions") != _versions():
            raise RunError(f"{store.manifest_path} was built with other package versions "
                           f"({manifest.get('versions')}, now {_versions()}): build into a new "
                           "folder")
    data = dict(manifest.get("data", {}))
    for name, dataset in loaded.items():
        found = fingerprint(dataset)
        if name in data and data[name] != found:
            raise RunError(f"{store.manifest_path} holds data set {name} with other data "
                           f"({data[name]}, now {found}): build into a new folder")
        data[name] = found
    known = dict(manifest.get("settings", {}))
    known.update({setting_key(s): lattice_settings(s).to_dict() for s in settings})
    try:
        store.write_manifest(versions=_versions(), data=data, settings=known)
    except StoreError as err:
        raise RunError(str(err)) from err


def pending_cells(store: LatticeStore, names: Sequence[str], seeds: Sequence[int],
                  settings: Sequence[Settings]) -> list[tuple[str, int, Settings]]:
    """The (data set, seed, setting) cells not stored yet. A stored file is read: one that is
    unreadable, from other code or of another data set's name is a ``RunError`` naming it
    (it is never rebuilt over)."""
    return pending_cells_of(store, [(name, seed, setting) for name in names for seed in seeds
                                    for setting in settings])


def pending_cells_of(store: LatticeStore, cells: Sequence[tuple[str, int, Settings]]
                     ) -> list[tuple[str, int, Settings]]:
    """Those of ``cells`` not stored yet (:func:`pending_cells` for any list of cells)."""
    todo = []
    for name, seed, setting in cells:
        path = store.path(name, seed, setting)
        if not path.exists():
            todo.append((name, seed, setting))
            continue
        try:
            header = read_header(path)
        except StoreError as err:
            raise RunError(str(err)) from err
        if header.get("dataset") != name:  # two names made one folder
            raise RunError(f"{path} holds data set {header.get('dataset')!r}, not "
                           f"{name!r}: the two names share a folder of the store "
                           "(rename one, or build into a new folder)")
    return todo


def build_store(root: str | os.PathLike, datasets: Sequence[str | Dataset], seeds: Sequence[int],
                settings: Sequence[Settings], *, data_dir: str | os.PathLike | None = None,
                n_jobs: int = 1, scheduler: str | None = None, progress: bool = True
                ) -> pd.DataFrame:
    """Build every missing lattice of ``datasets`` x ``seeds`` x ``settings`` into ``root``.

    ``n_jobs`` local worker processes (1: this process), or a Dask cluster at
    ``scheduler``. The reward of each setting is irrelevant (a lattice holds every reward);
    settings that differ only by it are built once. Returns :func:`cell_table` of the
    cells asked for.
    """
    datasets = named_arrays(datasets)  # several (X, y): arrays-0, arrays-1, ...
    return build_cells(root, [(d, seed, s) for d in datasets for seed in seeds for s in settings],
                       data_dir=data_dir, n_jobs=n_jobs, scheduler=scheduler, progress=progress)


def _name_lookup(directory: str | None) -> Callable[[str | Dataset], str]:
    """``dataset_name`` of each source, looked up once per distinct source: a grid of a
    million seeds names its few data sets a million times (each a folder's listing)."""
    names: dict[object, str] = {}

    def name_of(source: str | Dataset) -> str:
        key = source if isinstance(source, str) else id(source)
        if key not in names:
            names[key] = dataset_name(source, directory)
        return names[key]

    return name_of


def _distinct_cells(cells: Sequence[tuple[str | Dataset, int, Settings]],
                    name_of: Callable[[str | Dataset], str]
                    ) -> tuple[list[tuple[str, int, str]], dict[str, Settings]]:
    """The distinct cells asked for, (data set name, seed, setting key) in their order, and
    the stored settings (``lattice_settings``) of each key, in the order keys first occur;
    each settings object is turned into its stored form once (hashing one is slow)."""
    stored_as: dict[int, tuple[Settings, str]] = {}
    for _, _, setting in cells:
        if id(setting) not in stored_as:
            stored_as[id(setting)] = (lattice_settings(setting), setting_key(setting))
    by_key = {key: stored for stored, key in stored_as.values()}
    todo = dict.fromkeys((name_of(d), int(seed), stored_as[id(s)][1]) for d, seed, s in cells)
    return list(todo), by_key


def _build_tasks(todo: Sequence[tuple[str, int, str]], pending: set[tuple[str, int, str]],
                 by_key: dict[str, Settings], sources: dict[str, str | Dataset],
                 loaded: dict[str, Dataset], directory: str | None, root: str
                 ) -> list[_BuildTask]:
    """One task per (data set, seed) with pending cells: seed after seed (a store stopped
    early holds whole seeds), the largest data first, its settings in ``sharing_order``."""
    groups: dict[tuple[str, int], list[str]] = {}  # the setting keys of each data set and seed
    for name, seed, key in todo:
        if (name, seed, key) in pending:
            groups.setdefault((name, seed), []).append(key)
    order = sorted(groups, key=lambda key: (key[1], -loaded[key[0]].n_samples, key[0]))
    ordered: dict[tuple[str, ...], tuple[Settings, ...]] = {}  # one order per group of keys
    for keys in map(tuple, groups.values()):
        if keys not in ordered:
            ordered[keys] = tuple(sharing_order([by_key[k] for k in keys]))
    return [_BuildTask(name, sources[name], directory, seed, ordered[tuple(groups[name, seed])],
                       root) for name, seed in order]


def build_cells(root: str | os.PathLike, cells: Sequence[tuple[str | Dataset, int, Settings]], *,
                data_dir: str | os.PathLike | None = None, n_jobs: int = 1,
                scheduler: str | None = None, progress: bool = True) -> pd.DataFrame:
    """Build every missing lattice of ``cells``, (data set, seed, setting) triples, into
    ``root``: :func:`build_store` for cells that are no grid (a generated task at its own
    costs, ``ballad_env.data.tasks``). Returns :func:`cell_table` of the cells asked for,
    setting by setting (in the order they first occur), each sorted by data set and seed.

    The store's preparation, the pending check and the table visit only the (data set,
    setting) pairs that occur in ``cells``: a build of many tasks, each at its own costs,
    grows with the tasks, not with tasks x settings."""
    directory = None if data_dir is None else str(data_dir)
    name_of = _name_lookup(directory)
    sources: dict[str, str | Dataset] = {}
    for source, _, _ in cells:
        sources.setdefault(name_of(source), source)
    clashes = colliding(list(sources))
    if clashes:
        raise RunError("; ".join(f"data sets {a!r} and {b!r}" for a, b in clashes) + " would "
                       "share one folder of the store on a case-insensitive file system "
                       "(macOS, Windows): rename one")
    loaded = {name: load_data(source, directory) for name, source in sources.items()}
    todo, by_key = _distinct_cells(cells, name_of)
    written = [(name, by_key[key]) for name, key in dict.fromkeys((n, k) for n, _, k in todo)]
    store = prepare_store(root, loaded, list(by_key.values()), written)
    key_of = {id(s): key for key, s in by_key.items()}
    pending = {(n, seed, key_of[id(s)]) for n, seed, s in pending_cells_of(
        store, [(n, seed, by_key[k]) for n, seed, k in todo])}
    tasks = _build_tasks(todo, pending, by_key, sources, loaded, directory, str(store.root))
    bar = progress_bar(len(todo), len(todo) - len(pending), progress)
    try:
        for built in execute(tasks, _build_task, n_jobs, scheduler):
            bar.update(len(built))
    finally:
        bar.close()
    rank = {key: index for index, key in enumerate(by_key)}
    listed = sorted(todo, key=lambda cell: (rank[cell[2]], cell[0], cell[1]))
    return cell_table(store, [(name, seed, by_key[key]) for name, seed, key in listed])


def cell_table(store: LatticeStore, cells: Sequence[tuple[str, int, Settings]]
               ) -> pd.DataFrame:
    """One row per stored cell of ``cells``, (data set, seed, setting) triples, in their
    order: its build time and file size (``CELL_COLUMNS``). Each cell's file is found by
    its path, so the work grows with the cells named, never with the store's listing."""
    rows = []
    for name, seed, setting in cells:
        path = store.path(name, seed, setting)
        if not path.exists():
            continue
        header = read_header(path)
        rows.append({"setting": setting_key(setting), "dataset": name, "seed": seed,
                     "n_rounds": header["n_rounds"],
                     "build_seconds": header.get("build_seconds", np.nan),
                     "bytes": path.stat().st_size})
    import pandas as pd

    return pd.DataFrame(rows, columns=list(CELL_COLUMNS))


def store_table(store: LatticeStore, settings: Sequence[Settings],
                datasets: Sequence[str] | None = None, seeds: Sequence[int] | None = None
                ) -> pd.DataFrame:
    """One row per stored cell of these settings (and data sets and seeds): its build time
    and file size (:func:`cell_table` of the store's listing, setting after setting)."""
    names = None if datasets is None else set(datasets)
    kept = None if seeds is None else set(seeds)
    return cell_table(store, [(name, seed, setting) for setting in settings
                              for name, seed in store.cells(setting)
                              if (names is None or name in names)
                              and (kept is None or seed in kept)])


def build_summary(cells: pd.DataFrame, n_seeds: int = 100) -> pd.DataFrame:
    """Per setting and data set: cells built, median build seconds and kB per cell, and the
    time and size of ``n_seeds`` seeds extrapolated from the median (one process)."""
    grouped = cells.groupby(["setting", "dataset"], sort=True)
    table = grouped.agg(cells=("seed", "size"), median_seconds=("build_seconds", "median"),
                        median_kb=("bytes", lambda b: float(np.median(b)) / 1e3)).reset_index()
    table[f"hours_{n_seeds}_seeds"] = table["median_seconds"] * n_seeds / 3600
    table[f"mb_{n_seeds}_seeds"] = table["median_kb"] * n_seeds / 1e3
    return table


def store_settings(store: str | Path, settings: Settings | None, reward: str | None
                   ) -> Settings:
    """The settings to replay: ``settings`` (its reward replaced by ``reward`` when given), or
    the store's only setting with ``reward`` (default ``cost``, the SB3 path's)."""
    if settings is None:
        stored = LatticeStore(store).manifest().get("settings", {})
        if len(stored) != 1:
            raise ValueError(f"the store {store} holds {len(stored)} settings "
                             f"({sorted(stored)}): pass settings= (--prior, --c-fn, ...) to "
                             "say which to replay")
        settings = Settings.from_dict(next(iter(stored.values()))).replace(
            reward=reward or "cost")
    elif reward is not None:
        settings = settings.replace(reward=reward)
    return settings


def store_datasets(store: str | Path, settings: Settings) -> list[str]:
    """Every data set the lattice store holds under ``settings`` (what a replay run trains
    on when no data set is named); ``ValueError`` when it holds none."""
    names = sorted({name for name, _ in LatticeStore(store).cells(settings)})
    if not names:
        raise ValueError(f"the store {store} has no lattice of setting {settings.name}: "
                         "build one with ballad-env lattices, or pass the setting it holds "
                         "(--prior, --c-fn, ...)")
    return names


__all__ = ["CELL_COLUMNS", "SHARING_OPTIONS", "build_cells", "build_store", "build_summary",
           "cell_table", "pending_cells", "pending_cells_of", "prepare_store", "sharing_order",
           "store_datasets", "store_settings", "store_table"]
