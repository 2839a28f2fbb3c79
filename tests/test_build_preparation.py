"""A lattice build prepares only the cells it is asked for: a build of many generated
tasks, each at its own costs, checks the store, clears stale temporaries, finds its pending
cells and lists its table one (task, setting) pair at a time, never every task with every
setting of the call; a grid's table and store stay what they were."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import make_xy

from agents.experiments import lattice_build
from agents.experiments.lattice_build import build_cells, build_store, store_table
from ballad_env.data import Dataset, load_dataset
from ballad_env.replay.store import LatticeStore, lattice_settings, setting_key
from ballad_env.settings import Settings

#: Generated tasks of the many-task build.
N_TASKS = 30


def _task(name: str, seed: int) -> Dataset:
    """A tiny data set standing for one generated task."""
    return load_dataset(Dataset(name, *make_xy(n=62, n_anomalies=5, seed=seed)))


def _own_costs(k: int) -> Settings:
    """Task ``k``'s settings: the kNN prior at costs of its own."""
    return Settings(prior="knn", budget_fraction=0.1, c_fn=1.0 + k)


def test_a_build_of_many_tasks_visits_each_task_once(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task's one folder is cleared and each cell's path asked for a bounded number of
    times (a preparation over every task and setting asks N x N); the building itself is
    recorded, not run."""
    cells = [(_task(f"task{k}", k), 0, _own_costs(k)) for k in range(N_TASKS)]
    asked: list[str] = []
    cleared: list[Path] = []
    planned: list[Any] = []
    path = LatticeStore.path

    def counted(store: LatticeStore, dataset: str, seed: int, settings: Settings) -> Path:
        asked.append(dataset)
        return path(store, dataset, seed, settings)

    def clear(folders: list[Path]) -> list[Path]:
        cleared.extend(map(Path, folders))
        return []

    def record(tasks: list[Any], *_: Any) -> list[list[Any]]:
        planned.extend(tasks)
        return []

    monkeypatch.setattr(LatticeStore, "path", counted)
    monkeypatch.setattr(lattice_build, "remove_stale_temporaries", clear)
    monkeypatch.setattr(lattice_build, "execute", record)
    table = build_cells(tmp_path / "store", cells, progress=False)
    assert table.empty  # nothing was built
    assert len(asked) <= 3 * N_TASKS  # preparation, pending check, table: one each
    root = cleared[0]
    assert root.resolve() == (tmp_path / "store").resolve()
    folders = {root / setting_key(s) / data.name for data, _, s in cells}
    assert len(cleared) == N_TASKS + 1 and set(cleared[1:]) == folders
    assert sorted((task.name, task.settings) for task in planned) == sorted(
        (data.name, (lattice_settings(s),)) for data, _, s in cells)
    manifest = LatticeStore(tmp_path / "store").manifest()
    assert sorted(manifest["data"]) == sorted(data.name for data, _, _ in cells)
    assert sorted(manifest["settings"]) == sorted(setting_key(s) for _, _, s in cells)


def _stale_temporary(folder: Path) -> Path:
    """A temporary file another machine's killed build left in ``folder`` an hour ago."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".seed9.npz.~ballad-0badf00d-1-0123abcd.tmp"
    path.write_bytes(b"partial")
    old = time.time() - 7200
    os.utime(path, (old, old))
    return path


def test_a_grid_keeps_its_table_and_a_task_build_lists_its_own_cells(tmp_path: Path) -> None:
    """The grid's table is the store's listing of it; a build of two tasks at their own
    costs in that store lists its two cells alone and clears only their folders."""
    a, b = _task("a", 0), _task("b", 1)
    cheap, dear = _own_costs(0), _own_costs(4)
    grid = build_store(tmp_path, [a, b], [0], [cheap, dear], progress=False)
    store = LatticeStore(tmp_path)
    pd.testing.assert_frame_equal(grid, store_table(store, [cheap, dear], ["a", "b"], [0]))
    keys = [setting_key(cheap), setting_key(dear)]
    assert list(zip(grid.setting, grid.dataset, strict=True)) == [(keys[0], "a"), (keys[0], "b"),
        (keys[1], "a"), (keys[1], "b")]
    assert (grid.n_rounds > 0).all() and (grid.bytes > 0).all()
    written = _stale_temporary(tmp_path / keys[0] / "a")
    other = _stale_temporary(tmp_path / keys[1] / "a")  # a folder the task build skips
    tasks = build_cells(tmp_path, [(b, 0, dear), (a, 0, cheap)], progress=False)  # dear first
    pd.testing.assert_frame_equal(tasks, grid.iloc[[3, 0]].reset_index(drop=True))
    assert not written.exists() and other.exists()
    manifest = store.manifest()
    assert sorted(manifest["settings"]) == sorted(keys) and sorted(manifest["data"]) == ["a", "b"]


def test_the_preparation_timing_gives_each_task_its_costs_and_one_line_a_count(
        capsys: pytest.CaptureFixture[str]) -> None:
    from scripts.studies.timings import build_preparation

    cells = build_preparation.generated_cells(5)
    assert len({setting_key(s) for _, _, s in cells}) == len({d.name for d, _, _ in cells}) == 5
    assert build_preparation.main(["--tasks", "2", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["2 tasks", "3 tasks"]
    with pytest.raises(SystemExit):
        build_preparation.main(["--tasks", "0"])
    assert "--tasks must be positive counts" in capsys.readouterr().err
