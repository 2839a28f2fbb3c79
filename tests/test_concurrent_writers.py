"""Two writers into one store at once (issue 21): they never mix or orphan results.

Each race is made to happen, not hoped for. Two forked processes write into one folder; the
first is stopped just before it writes the manifest (``store.json`` or ``run.json``), after
it has read and checked it, and waits there while the second one runs. Without a lock the
second reads the same old manifest, passes its checks and writes, and the first then
overwrites it: both finish, and the store mixes two data sets under one name, or ``run.json``
lists one agent while the other's cells lie unreachable. With the manifest's lock the second
waits until the first has written, then sees the first's manifest: a different run is
refused by name, an identical one goes on and both finish with the same results.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agents.experiments.stores.results as result_store
from agents.experiments.grid import Grid
from agents.experiments.lattice_build import build_store
from agents.experiments.run import run_grid
from agents.experiments.stores.provenance import fingerprint
from agents.experiments.stores.results import load_results
from ballad_env.data import Dataset
from ballad_env.replay.lattice import build_lattice
from ballad_env.replay.store import LatticeStore, load_lattice
from ballad_env.settings import Settings

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="the races fork the test process")
CTX = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() \
    else None
SETTING = Settings(prior="knn", budget_fraction=0.1)  # 5 rounds
SEEDS = (0, 1)
#: Seconds the second writer is given to finish while the first waits (it needs well under
#: one without a lock; with the lock it waits for the first, whatever this is).
HEAD_START_S = 2.0


def data(seed: int) -> Dataset:
    """80 rows named ``shared``: two seeds are two different data sets under one name."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(80, 2))
    X[:8] += 3.0
    y = np.zeros(80, dtype=np.int8)
    y[:8] = 1
    return Dataset("shared", X, y)


def _child(work: Callable[[], Any], pause: tuple[Any, str, Any, Any] | None,
           results: Any, name: str) -> None:
    """In a forked process: ``work()``, stopped before the patched manifest writer if
    ``pause`` = (owner, attribute, paused event, go event); its outcome into ``results``."""
    try:
        if pause is not None:
            owner, attribute, paused, go = pause
            original = getattr(owner, attribute)

            def held(*args: Any, **kwargs: Any) -> Any:
                paused.set()
                go.wait(60)
                return original(*args, **kwargs)

            setattr(owner, attribute, held)
        work()
        results.put((name, "ok"))
    except Exception as err:
        results.put((name, f"{type(err).__name__}: {err}"))
    except BaseException:
        results.put((name, traceback.format_exc()))
    finally:
        os._exit(0)


def race(first: Callable[[], Any], second: Callable[[], Any], owner: Any,
         attribute: str) -> dict[str, str]:
    """Run ``first`` (held before ``owner.attribute``, its manifest write) and ``second`` at
    once, as described above; each one's outcome: ``"ok"`` or its error."""
    assert CTX is not None
    paused, go, results = CTX.Event(), CTX.Event(), CTX.SimpleQueue()
    a = CTX.Process(target=_child, args=(first, (owner, attribute, paused, go), results, "first"))
    a.start()
    try:
        assert paused.wait(60), "the first writer never reached its manifest write"
        b = CTX.Process(target=_child, args=(second, None, results, "second"))
        b.start()
        b.join(HEAD_START_S)  # without a lock the second writer finishes here
        go.set()
        a.join(120)
        b.join(120)
        assert a.exitcode == 0 and b.exitcode == 0
        return dict(results.get() for _ in range(2))
    finally:
        go.set()
        for process in (a, *([b] if "b" in locals() else [])):
            if process.is_alive():
                process.kill()


# --------------------------------------------------------------------------- lattice stores
def build(root: Path, dataset: Dataset) -> Callable[[], Any]:
    return lambda: build_store(root, [dataset], list(SEEDS), [SETTING], progress=False)


def test_two_builds_with_other_data_under_one_name_never_mix(tmp_path: Path) -> None:
    ours, theirs = data(0), data(1)
    outcome = race(build(tmp_path, ours), build(tmp_path, theirs), LatticeStore,
                   "write_manifest")
    assert outcome["first"] == "ok"
    assert outcome["second"].startswith("RunError") and \
        "holds data set shared with other data" in outcome["second"], outcome
    store = LatticeStore(tmp_path)
    assert store.manifest()["data"] == {"shared": fingerprint(ours)}
    for seed in SEEDS:  # every lattice is of the data set store.json names
        stored = load_lattice(store.path("shared", seed, SETTING)).to_arrays()
        built = build_lattice(ours, seed, SETTING).to_arrays()
        assert all(np.array_equal(stored[k], built[k], equal_nan=True) for k in built)


def test_two_identical_builds_at_once_both_finish_with_one_store(tmp_path: Path) -> None:
    ours = data(0)
    outcome = race(build(tmp_path, ours), build(tmp_path, ours), LatticeStore,
                   "write_manifest")
    assert outcome == {"first": "ok", "second": "ok"}
    store = LatticeStore(tmp_path)
    assert store.manifest()["data"] == {"shared": fingerprint(ours)}
    assert store.cells(SETTING) == [("shared", seed) for seed in SEEDS]


# --------------------------------------------------------------------------- results folders
def grid(*agent_names: str) -> Grid:
    return Grid((data(0),), SEEDS, agent_names, (SETTING,))


def play(output: Path, played: Grid) -> Callable[[], Any]:
    return lambda: run_grid(played, output, n_jobs=1, progress=False)


def test_two_runs_with_other_agents_into_one_folder_never_orphan_cells(tmp_path: Path) -> None:
    output = tmp_path / "run"
    outcome = race(play(output, grid("all-in-al")), play(output, grid("all-in-lr")),
                   result_store, "_atomic_write_text")
    assert outcome["first"] == "ok"
    assert outcome["second"].startswith("RunError") and \
        "holds a different run" in outcome["second"], outcome
    table = load_results(output)
    assert set(table["agent"]) == {"all-in-al"}
    stored = {path.name for path in (output / "cells").glob("*.parquet")}
    assert stored == {cell.filename for cell in grid("all-in-al").resolve().cells()}


def test_two_identical_runs_at_once_both_finish_with_the_same_table(tmp_path: Path) -> None:
    output, both = tmp_path / "run", grid("all-in-al", "all-in-lr")
    outcome = race(play(output, both), play(output, both), result_store, "_atomic_write_text")
    assert outcome == {"first": "ok", "second": "ok"}
    alone = run_grid(both, tmp_path / "alone", n_jobs=1, progress=False)
    assert load_results(output).equals(alone)


def test_a_run_that_cannot_get_the_lock_in_time_says_who_holds_what(tmp_path: Path,
                                                                    monkeypatch) -> None:
    from ballad_env import files

    assert CTX is not None
    output = tmp_path / "run"
    output.mkdir()
    held, done = CTX.Event(), CTX.Event()

    def hold() -> None:
        with files.manifest_lock(output / "run.json"):
            held.set()
            done.wait(60)

    holder = CTX.Process(target=_child, args=(hold, None, CTX.SimpleQueue(), "holder"))
    holder.start()
    try:
        assert held.wait(60)
        monkeypatch.setattr(files, "LOCK_TIMEOUT_S", 0.3)
        with pytest.raises(result_store.RunError, match=f"another process has held the lock "
                                                        f"of the results folder {output}"):
            run_grid(grid("all-in-al"), output, n_jobs=1, progress=False)
    finally:
        done.set()
        holder.join(60)
