"""Stores and manifests against hostile or careless files (issue 30).

A mistyped or deeply nested ``run.json`` or ``store.json`` is refused by name; a grid's
duplicate check is linear; every cell gets a file of its own (names that sanitise alike,
``adbench/cover`` beside a user's ``adbench_cover``, names differing only in case); a FIFO
in place of a lattice file, a manifest or a data file is refused instead of blocking.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_xy

from agents.experiments.grid import Cell, Grid
from agents.experiments.lattice_build import build_store, prepare_store
from agents.experiments.run import run_grid
from agents.experiments.stores.results import ResultStore, RunError, TableCell, load_results
from ballad_env.data import Dataset, load_dataset
from ballad_env.replay.store import MANIFEST_FILE, LatticeStore, StoreError
from ballad_env.settings import Settings

AGENT = "all-in-lr"


def _dataset(name: str, seed: int = 0) -> Dataset:
    return load_dataset(Dataset(name, *make_xy(n=120, n_anomalies=10, seed=seed)))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A tiny finished run: one data set, one seed, one agent."""
    out = tmp_path_factory.mktemp("run")
    run_grid(Grid((_dataset("small"),), (0,), (AGENT,)), out, n_jobs=1, progress=False)
    return out


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("change", [
    {"data": ["toy"]}, {"versions": 5}, {"policies": [1]}, {"policies": {"x": 3}},
    {"grid": "x"}, {"grid": {"datasets": ["small"], "seeds": [0], "agents": [AGENT],
                             "settings": [1]}},
    {"data": json.loads(_nested(50))}, "nested"])
def test_a_mistyped_run_json_is_refused_by_name(finished_run, tmp_path, change) -> None:
    out = tmp_path / "copy"
    shutil.copytree(finished_run, out)
    run_file = out / "run.json"
    if change == "nested":
        run_file.write_text(_nested(100_000))
    else:
        run_file.write_text(json.dumps({**json.loads(run_file.read_text()), **change}))
    with pytest.raises(RunError, match="run.json") as info:
        run_grid(Grid((_dataset("small"),), (0,), (AGENT,)), out, n_jobs=1, progress=False)
    assert str(run_file) in str(info.value)
    with pytest.raises(RunError, match="run.json"):
        load_results(out)


@pytest.mark.parametrize("change", [
    {"data": ["toy"]}, {"versions": 5}, {"settings": [1]}, {"settings": {"k": 3}},
    {"data": {"small": [1]}}, "nested"])
def test_a_mistyped_store_json_is_refused_by_name(tmp_path, change) -> None:
    store = LatticeStore(tmp_path / "store", create=True)
    store.write_manifest(versions={}, data={}, settings={})
    manifest = json.loads(store.manifest_path.read_text())
    if change == "nested":
        store.manifest_path.write_text(_nested(100_000))
    else:
        store.manifest_path.write_text(json.dumps({**manifest, **change}))
    with pytest.raises(StoreError, match=MANIFEST_FILE) as info:
        LatticeStore(tmp_path / "store")
    assert str(store.manifest_path) in str(info.value)
    with pytest.raises(RunError, match=MANIFEST_FILE):
        prepare_store(tmp_path / "store", {"small": _dataset("small")}, [Settings(prior="knn")])


class Counted(str):
    """A string that counts the equality tests made on it (a quadratic check makes n^2)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_grid_checks_duplicates_in_linear_time() -> None:
    n = 3000
    Counted.compared = 0
    Grid(tuple(f"d{i}" for i in range(n)), (0,), (AGENT,),
         keys=tuple(Counted(f"d{i}") for i in range(n)))
    assert Counted.compared < 10 * n
    with pytest.raises(ValueError, match="data set repeated in the grid: d7"):
        Grid(("a", "b"), (0,), (AGENT,), keys=("d7", "d7"))
    with pytest.raises(ValueError, match="seed repeated in the grid: 3"):
        Grid(("a",), tuple(range(10_000)) + (3,), (AGENT,))


def test_cell_names_are_injective() -> None:
    names = ["a b", "a_b", "a__b", "a/b", "a:b", "adbench/cover", "adbench_cover", "x_",
             "_x", ".", "..", "", "a~b", "Glass@100:1", "Glass@100_1"]
    files = {Cell(name, 0, AGENT, Settings()).filename for name in names}
    assert len(files) == len(names)
    assert Cell("Glass", 3, AGENT, Settings(prior="knn")).filename == (
        "knn__Glass__all-in-lr__seed3.parquet")
    tables = {TableCell("t", (("dataset", name),)).filename for name in names}
    assert len(tables) == len(names)
    from ballad_env.files import safe_name

    for name in names:
        part = safe_name(name)
        assert "/" not in part and part not in (".", "..", "") and "__" not in part
        assert not part.startswith("_") and not part.endswith("_")


def test_data_sets_whose_names_sanitise_alike_keep_their_results(tmp_path) -> None:
    grid = Grid((_dataset("a b", 0), _dataset("a_b", 1)), (0,), (AGENT,))
    table = run_grid(grid, tmp_path / "out", n_jobs=1, progress=False)
    assert sorted(table.dataset.unique()) == ["a b", "a_b"]
    again = load_results(tmp_path / "out")
    assert sorted(again.dataset.unique()) == ["a b", "a_b"]
    assert len(list((tmp_path / "out" / "cells").glob("*.parquet"))) == 2


def test_adbench_names_never_share_a_file_with_a_users_file(tmp_path) -> None:
    cover = Cell("adbench/cover", 0, AGENT, Settings())
    user = Cell("adbench_cover", 0, AGENT, Settings())
    assert cover.filename != user.filename


def test_a_grid_whose_cells_would_collide_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'Foo' and 'foo'.*one file"):
        Grid((_dataset("Foo"), _dataset("foo")), (0,), (AGENT,)).resolve()
    with pytest.raises(ValueError, match=r"'Foo' and 'foo'.*one file"):
        Grid(("a", "b"), (0,), (AGENT,), keys=("Foo", "foo"))  # keyed: checked at once


def test_lattice_store_paths_are_injective_and_listed_back(tmp_path) -> None:
    names = ["a b", "a_b", "Glass@100:1", "adbench/cover", "adbench_cover"]
    store = LatticeStore(tmp_path / "store", create=True)
    paths = {store.path(name, 0, Settings()) for name in names}
    assert len(paths) == len(names)
    assert all(p.is_relative_to(tmp_path / "store") for p in paths)
    assert store.path("adbench/cover", 2, Settings()).relative_to(tmp_path / "store").parts[1:] \
        == ("adbench", "cover", "seed2.npz")
    with pytest.raises(RunError, match=r"'Foo' and 'foo'"):
        build_store(tmp_path / "two", [_dataset("Foo"), _dataset("foo")], [0],
                    [Settings(prior="knn")], progress=False)


def test_lattices_of_names_that_sanitise_alike_are_built_and_listed(tmp_path) -> None:
    build_store(tmp_path / "s", [_dataset("a b", 0), _dataset("a_b", 1)], [0],
                [Settings(prior="knn")], progress=False)
    store = LatticeStore(tmp_path / "s")
    assert store.cells(Settings(prior="knn")) == [("a b", 0), ("a_b", 0)]
    assert store.load("a b", 0, Settings(prior="knn")).dataset == "a b"


def _in_thread(call: Any, timeout: float = 5.0) -> BaseException | None:
    """Run ``call`` in a daemon thread; its exception, or a failure if it blocks."""
    caught: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as err:  # noqa: BLE001 - returned for the assertion
            caught.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"{call} blocked on a FIFO")
    return caught[0] if caught else None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened(tmp_path) -> None:
    build_store(tmp_path / "s", [_dataset("small")], [0, 1], [Settings(prior="knn")],
                progress=False)
    store = LatticeStore(tmp_path / "s")
    lattice = store.path("small", 1, Settings(prior="knn"))
    lattice.unlink()
    os.mkfifo(lattice)
    err = _in_thread(lambda: store.load("small", 1, Settings(prior="knn")))
    assert isinstance(err, StoreError) and "not a regular file" in str(err)
    err = _in_thread(lambda: build_store(tmp_path / "s", [_dataset("small")], [0, 1],
                                         [Settings(prior="knn")], progress=False))
    assert isinstance(err, RunError) and str(lattice) in str(err)
    manifest = tmp_path / "fifo-store" / MANIFEST_FILE
    manifest.parent.mkdir()
    os.mkfifo(manifest)
    err = _in_thread(lambda: LatticeStore(manifest.parent))
    assert isinstance(err, StoreError) and "not a regular file" in str(err)
    run = tmp_path / "fifo-run"
    run.mkdir()
    os.mkfifo(run / "run.json")
    err = _in_thread(lambda: ResultStore(run).read_manifest())
    assert isinstance(err, RunError) and "not a regular file" in str(err)
    data = tmp_path / "data.csv"
    os.mkfifo(data)
    err = _in_thread(lambda: load_dataset(data))
    assert err is not None and "not a regular file" in str(err)


def test_safe_name_keeps_plain_names_readable() -> None:
    from ballad_env import files
    from ballad_env.files import safe_name

    assert safe_name("Glass") == "Glass" and safe_name("knn_rew-cost") == "knn_rew-cost"
    assert safe_name("a b").startswith("a_b~")
    assert len(safe_name("a b")) == len("a_b~") + files.NAME_HASH_DIGITS
    assert np.unique([safe_name(n) for n in ("A", "a")]).size == 2
