"""Episodes of a published code in a ``ResultStore``: one table per episode (data set,
seed, strategy) with a row per round, written as each finishes, so a run resumes.

Shared by the studies that run a published code beside ours (``studies.published_code``
for BALLAD, ``studies.sadal`` for SADAL).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from agents.experiments.stores.results import (
    FORMAT_VERSION,
    ResultStore,
    TableCell,
    writable_folder,
)

#: The stored table of one episode: (dataset, seed, strategy) with a row per round.
TABLE = "published"
EPISODE_KEYS = ("dataset", "seed", "strategy")


class PublishedCodeError(RuntimeError):
    """The published code cannot run here (its file or a package it needs is missing), or
    a store holds episodes that do not compare with those asked for."""


def missing_packages(dependencies: Mapping[str, str]) -> list[str]:
    """The packages of ``dependencies`` (module name -> pip name) that this Python cannot
    import, as pip names them."""
    missing = []
    for module, package in dependencies.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    return missing


def import_file(name: str, path: str | os.PathLike) -> ModuleType:
    """The Python file at ``path`` imported as module ``name`` (a published code's file)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def episode_cell(dataset: str, seed: int, strategy: str, table: str = TABLE) -> TableCell:
    """The stored file of one episode."""
    return TableCell(table, tuple(zip(EPISODE_KEYS, (dataset, seed, strategy), strict=True)))


def grow_store(output: str | os.PathLike, datasets: Sequence[str], seeds: Sequence[int],
               strategies: Sequence[str], study: str, **header: Any) -> ResultStore:
    """The store at ``output``, its ``run.json`` grown to these data sets, seeds and
    strategies, with ``study`` and ``header`` (e.g. the stream's seed) in it."""
    store = ResultStore(writable_folder(output, "--published"))
    stored = (store.read_manifest() or {}).get("grid", {})
    grid = {axis: list(dict.fromkeys([*stored.get(axis, []), *values]))
            for axis, values in (("datasets", datasets), ("seeds", seeds),
                                 ("strategies", strategies))}
    store.prepare({"format": FORMAT_VERSION, "study": study, "grid": grid, **header,
                   "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")})
    return store


def episode_order(datasets: Sequence[str], seeds: Sequence[int], strategies: Sequence[str]
                  ) -> Iterator[tuple[str, int, str]]:
    """Seed after seed (a partial run then holds whole seeds), data sets in the order given,
    then strategies."""
    for seed in seeds:
        for dataset in datasets:
            for strategy in strategies:
                yield dataset, seed, strategy


def stored_episodes(output: str | os.PathLike, table: str = TABLE) -> list[pd.DataFrame]:
    """Every episode the store at ``output`` holds in ``table`` (one frame each, rows by
    round), seed after seed as they were played; none if there is no store."""
    store = ResultStore(output)
    grid = (store.read_manifest() or {}).get("grid", {}) if Path(output).is_dir() else {}
    keys = episode_order(grid.get("datasets", []), grid.get("seeds", []),
                         grid.get("strategies", []))
    return [store.read(cell) for cell in (episode_cell(*key, table=table) for key in keys)
            if store.path(cell).exists()]


def finished_episodes(output: str | os.PathLike, n_rounds: int) -> set[tuple[str, int, str]]:
    """The episodes the store already holds; ``PublishedCodeError`` if one of them has
    another number of rounds (its mean cost would not compare)."""
    done = set()
    for episode in stored_episodes(output):
        key = (str(episode["dataset"].iloc[0]), int(episode["seed"].iloc[0]),
               str(episode["strategy"].iloc[0]))
        if len(episode) != n_rounds:
            raise PublishedCodeError(
                f"{output}: {key} has {len(episode)} rounds, not {n_rounds}; write episodes "
                "of another length to another folder")
        done.add(key)
    return done


__all__ = ["EPISODE_KEYS", "TABLE", "PublishedCodeError", "episode_cell", "episode_order",
           "finished_episodes", "grow_store", "stored_episodes"]
