"""Damaged, crafted and unwritable files (issue 21): every corrupt file is an error naming it,
a full disk is said in words and leaves no partial file, and a killed writer's temporary
files are cleared at the next start.

The fuzz tests damage a seeded sample of each file kind
(``scripts.studies.robustness.damaged_files``);
``python -m scripts.studies.robustness --files`` damages every byte of each.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.experiments.grid import Grid
from agents.experiments.lattice_build import build_store
from agents.experiments.run import run_grid
from agents.experiments.stores.results import ResultStore, RunError, load_results, writable_folder
from ballad_env import files
from ballad_env.replay.lattice import build_lattice
from ballad_env.replay.store import LatticeStore, StoreError, load_lattice, save_lattice
from ballad_env.settings import Settings
from scripts.studies.robustness.damaged_files import (
    Damage,
    check_damages,
    damages,
    lattice_kinds,
    policy_kind,
    result_kinds,
    sample_data,
)

SETTING = Settings(prior="knn", budget_fraction=0.1)  # 5 rounds
DISK_FULL = OSError(errno.ENOSPC, "No space left on device")
#: How pyarrow reports it: an OSError whose errno is not set, the code only in the message.
PYARROW_DISK_FULL = OSError("[Errno 28] Error writing bytes to file. "
                            "Detail: [errno 28] No space left on device")


@pytest.fixture(scope="module")
def lattice_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lattice") / "seed0.npz"
    save_lattice(build_lattice(sample_data(), 0, SETTING), path)
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Grid]:
    grid = Grid((sample_data(),), (0,), ("ballad",), (SETTING,))
    output = tmp_path_factory.mktemp("results") / "run"
    run_grid(grid, output, n_jobs=1, progress=False)
    return output, grid.resolve()


def copy(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / path.name
    target.write_bytes(path.read_bytes())
    return target


def hidden_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob(".*") if p.is_file() and not p.name.endswith(".lock"))


# --------------------------------------------------------------------------- corrupt lattices
def member_data(path: Path, name: str) -> range:
    """The byte range of the compressed data of member ``name`` in the zip at ``path``."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    raw = path.read_bytes()
    local = info.header_offset
    name_length, extra_length = np.frombuffer(raw[local + 26:local + 30], dtype="<u2")
    start = local + 30 + int(name_length) + int(extra_length)
    return range(start, start + info.compress_size)


def test_a_flipped_byte_in_a_compressed_member_is_an_error_naming_the_file(
        lattice_file: Path, tmp_path: Path) -> None:
    """Every flip is an error naming the file, or reads the same lattice: a flip in the last
    bytes of a deflate stream can change only what inflates past the member's size, which
    zip cuts off before its CRC check (which bytes those are depends on the file's bytes,
    so on the processor that computed them)."""
    path = copy(lattice_file, tmp_path)
    original = path.read_bytes()
    expected = load_lattice(path).to_arrays()
    causes, identical = set(), 0
    for offset in member_data(path, "packed.npy")[::7]:
        path.write_bytes(Damage("flip", offset).apply(original))
        try:
            arrays = load_lattice(path).to_arrays()
        except StoreError as err:
            assert f"lattice file {path} cannot be read" in str(err)
            causes.add(type(err.__cause__))
            continue
        assert arrays.keys() == expected.keys()
        for name, values in expected.items():
            np.testing.assert_array_equal(arrays[name], values, err_msg=f"{name}, byte {offset}")
        identical += 1
    assert zlib.error in causes  # the raw error of before, now with the file's name
    assert identical <= 2  # only the stream's last bytes can be flipped unseen


@pytest.mark.parametrize("change", [
    {"header": ["a", "list"]},
    {"arrays": [[1, 2]]},
    {"arrays": [["x", "<f8", "not a shape", 0]]},
    {"arrays": "text"},
    {"settings": "knn"},
    {"settings": {"prior": 3}},
    {"dataset": None, "seed": "zero"},
    {"n_rounds": [5]},
    {"contamination": {}},
], ids=lambda change: ",".join(change))
def test_a_crafted_header_is_an_error_naming_the_file(lattice_file: Path, tmp_path: Path,
                                                      change: dict) -> None:
    path = copy(lattice_file, tmp_path)
    with np.load(path) as data:
        arrays = dict(data)
    header = json.loads(str(arrays["header"]))
    crafted = change["header"] if "header" in change else {**header, **change}
    arrays["header"] = np.array(json.dumps(crafted))
    np.savez_compressed(path, **arrays)
    with pytest.raises(StoreError, match=str(path)):
        load_lattice(path)


def test_a_store_json_that_is_not_an_object_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "store.json").write_text("[1, 2]")
    with pytest.raises(StoreError, match=f"{tmp_path / 'store.json'} is malformed"):
        LatticeStore(tmp_path)


def test_a_run_json_with_a_damaged_grid_is_an_error_naming_it(results, tmp_path: Path) -> None:
    import shutil

    output = Path(shutil.copytree(results[0], tmp_path / "run"))
    run_file = output / "run.json"
    manifest = json.loads(run_file.read_text())
    del manifest["grid"]["seeds"]
    run_file.write_text(json.dumps(manifest))
    with pytest.raises(RunError, match=f"{run_file} holds no valid grid"):
        load_results(output)


# --------------------------------------------------------------------------- a full disk
def partial_write_then(err: OSError):
    """A writer that leaves a partial file at the path it was given, then fails with ``err``."""
    def write(self_or_path, path=None, *args, **kwargs):
        target = path if path is not None else self_or_path
        if hasattr(target, "write"):  # a handle
            target.write(b"partial")
        else:
            Path(target).write_bytes(b"partial")
        raise err
    return write


@pytest.mark.parametrize("err", [DISK_FULL, PYARROW_DISK_FULL], ids=["errno", "pyarrow"])
def test_a_full_disk_writing_a_cell_says_so_and_leaves_no_file(results, tmp_path: Path,
                                                               monkeypatch, err) -> None:
    output, grid = results
    cell = grid.cells()[0]
    frame = ResultStore(output).read(cell)
    store = ResultStore(tmp_path / "run")
    store.cells_dir.mkdir(parents=True)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", partial_write_then(err))
    with pytest.raises(RunError, match=f"the disk is full: cannot write {store.path(cell)}"):
        store.write(cell, frame)
    assert list(store.cells_dir.iterdir()) == []


def test_a_full_disk_writing_run_json_says_so_and_leaves_no_file(results, tmp_path: Path,
                                                                 monkeypatch) -> None:
    manifest = json.loads((results[0] / "run.json").read_text())
    store = ResultStore(tmp_path / "run")
    original = Path.write_text

    def full(self: Path, *args, **kwargs):
        if self.name.startswith(".run.json"):
            original(self, "")  # the 0-byte file of before
            raise DISK_FULL
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    for _ in range(2):  # a retry leaves nothing either
        with pytest.raises(RunError, match=f"the disk is full: cannot write {store.run_file}"):
            store.prepare(manifest)
    assert hidden_files(store.root) == [] and not store.run_file.exists()


def test_a_full_disk_writing_a_lattice_says_so_and_leaves_no_file(lattice_file: Path,
                                                                  tmp_path: Path,
                                                                  monkeypatch) -> None:
    lattice = load_lattice(lattice_file)
    target = tmp_path / "store" / "knn" / "fuzz" / "seed4.npz"
    monkeypatch.setattr(np, "savez_compressed", partial_write_then(DISK_FULL))
    for _ in range(2):
        with pytest.raises(StoreError, match=f"the disk is full: cannot write {target}"):
            save_lattice(lattice, target)
    assert list(target.parent.iterdir()) == []


def test_the_writability_probe_catches_a_full_disk(tmp_path: Path, monkeypatch) -> None:
    def full(handle: int) -> None:
        raise DISK_FULL

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(RunError, match=f"the disk is full: cannot write {tmp_path}.*--output"):
        writable_folder(tmp_path)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- killed writers
def dead_pid() -> int:
    """The id of a process that has exited."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def temporary(folder: Path, name: str, pid: int, host: str | None = None) -> Path:
    """The temporary name a writer ``pid`` on ``host`` (default: this machine) gives ``name``."""
    return folder / f".{name}.~ballad-{host or files._host()}-{pid}-0123abcd.tmp"


def test_a_killed_runs_temporary_cell_files_are_removed_at_the_next_start(
        results, tmp_path: Path) -> None:
    import shutil

    output = Path(shutil.copytree(results[0], tmp_path / "run"))
    cells, pid = output / "cells", dead_pid()
    stale = [temporary(cells, f"{name}.parquet", pid) for name in ("a", "b")]
    stale.append(temporary(output, "run.json", pid))
    live = temporary(cells, "c.parquet", os.getpid())  # a writer still at work
    recent = temporary(cells, "d.parquet", pid, "0badf00d")  # another machine's, being written
    user = [cells / f".e.parquet.{pid}.0123abcd.tmp", output / ".thesis.4000000.tmp"]
    old = time.time() - 2 * files.STALE_AFTER_S
    for path in (*stale, live, recent, *user):
        path.write_bytes(b"")
        if path is not recent:
            os.utime(path, (old, old))
    grid = Grid((sample_data(),), (0,), ("ballad",), (SETTING,))
    run_grid(grid, output, n_jobs=1, progress=False)
    assert hidden_files(output) == sorted([live, recent, *user])


def test_a_killed_builds_temporary_lattice_files_are_removed_at_the_next_start(
        tmp_path: Path) -> None:
    """Only this program's temporary files, only in the folders the build writes (issue
    39, item 3): a user's hidden files that look temporary stay, in every subfolder."""
    data = sample_data()
    build_store(tmp_path, [data], [0], [SETTING], progress=False)
    folder, pid = LatticeStore(tmp_path).path(data.name, 0, SETTING).parent, dead_pid()
    leftovers = [temporary(folder, "seed5.npz", pid), temporary(tmp_path, "store.json", pid)]
    mine = tmp_path / "notes"
    mine.mkdir()
    kept = [folder / ".thesis.4000000.tmp", folder / ".config.part4000002",
            tmp_path / f".seed4.tmp{pid}.npz", temporary(mine, "draft.txt", pid)]
    old = time.time() - 2 * files.STALE_AFTER_S
    for path in (*leftovers, *kept):
        path.write_bytes(b"partial")
        os.utime(path, (old, old))
    build_store(tmp_path, [data], [0], [SETTING], progress=False)
    assert hidden_files(tmp_path) == sorted(kept)


def test_stale_temporaries_that_cannot_be_removed_are_left_without_an_error(
        tmp_path: Path, monkeypatch) -> None:
    """A read-only download cache holding a killed download's file: the load goes on (root
    ignores a folder's mode, so the refusal is simulated)."""
    stale = temporary(tmp_path, "glass.npz", dead_pid())
    stale.write_bytes(b"partial")

    def refuse(path: Path, missing_ok: bool = False) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(Path, "unlink", refuse)
    assert files.remove_stale_temporaries([tmp_path]) == []
    assert stale.exists()


def test_another_machines_temporary_folder_goes_once_nothing_in_it_changed(
        tmp_path: Path) -> None:
    """A recording's marked folder: its own time stays put while the file in it grows, so
    the newest change below it is what counts."""
    old = time.time() - 2 * files.STALE_AFTER_S
    growing, idle = (temporary(tmp_path, name, 4000000, "0badf00d") for name in ("a", "b"))
    for folder in (growing, idle):
        (folder / "tmp1").mkdir(parents=True)
        (folder / "tmp1" / "main_data.hdf5").write_bytes(b"episodes")
        for path in (folder / "tmp1" / "main_data.hdf5", folder / "tmp1", folder):
            os.utime(path, (old, old))
    os.utime(growing / "tmp1" / "main_data.hdf5")  # written a moment ago
    assert files.remove_stale_temporaries([tmp_path]) == [idle]
    assert growing.is_dir() and not idle.exists()


# --------------------------------------------------------------------------- fuzzing
def assert_fuzzed(kind, n_flips: int, n_truncations: int) -> None:
    outcome = check_damages(kind, damages(kind.path.stat().st_size, n_flips, n_truncations))
    assert not outcome.failures, "\n".join(outcome.failures[:10])
    assert outcome.counts["refused, naming the file"] > 0


def test_damaged_lattice_files_and_store_json_are_read_identically_or_refused_by_name(
        tmp_path: Path) -> None:
    lattice, manifest = lattice_kinds(tmp_path)
    assert_fuzzed(lattice, 120, 30)
    assert_fuzzed(manifest, 40, 10)


def test_damaged_result_cells_and_run_json_are_read_identically_or_refused_by_name(
        tmp_path: Path) -> None:
    cell, run_file = result_kinds(tmp_path)
    assert_fuzzed(cell, 100, 30)
    assert_fuzzed(run_file, 80, 20)


@pytest.mark.slow  # trains a policy for a few seconds
def test_damaged_policy_zips_act_identically_or_are_refused_by_name(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    assert_fuzzed(policy_kind(tmp_path), 40, 20)
