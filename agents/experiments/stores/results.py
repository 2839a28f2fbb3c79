"""Results on disk: ``run.json`` plus one Parquet file per finished cell.

``<output>/run.json`` records the grid, a fingerprint of each data set, a hash of each saved
policy's file, the package versions and a hash of the project's source; ``<output>/cells/``
holds one Parquet file per finished cell, written to a hidden temporary name and renamed,
so a file either is complete or does not exist. A rerun may grow the grid (more data sets,
seeds, agents or settings: ``run.json`` then describes the larger grid), never change what
is stored. Why Parquet files per cell rather than one CSV:

* a cell is the unit of work and of completion: an interrupted run loses at most the cells
  in flight, and resuming is "skip the cells whose file exists and validates";
* Parquet keeps dtypes (NaN rewards, integer rounds, strings) exactly, so a resumed run's
  table equals an uninterrupted one bit for bit, and it is compact;
* the folder reads as one table anywhere: ``pandas.read_parquet("<output>/cells")``
  (hidden temporary files are ignored), or ``load_results(output)`` which also validates.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agents.experiments.grid import Cell, Grid, agent_label
from agents.experiments.stores.provenance import SOURCE_KEY
from agents.extras import require
from ballad_env.episode import RECORD_FIELDS
from ballad_env.files import (
    atomic_write,
    manifest_lock,
    open_regular,
    probe_writable,
    read_regular_text,
    remove_stale_temporaries,
    safe_name,
    write_failure,
)
from ballad_env.settings import Settings

require("pandas")  # installed or named now; imported where a table is read or built

if TYPE_CHECKING:  # pandas is imported where a table is read or built: training needs none
    import pandas as pd

RUN_FILE = "run.json"


CELLS_DIR = "cells"


FORMAT_VERSION = 1


KEY_COLUMNS = ("dataset", "setting", "agent", "seed", "round")


#: The settings' options, one column each (the reward's name as ``reward_type``: the
#: ``reward`` column holds each step's reward).
SETTING_COLUMNS = tuple("reward_type" if f.name == "reward" else f.name
                        for f in fields(Settings))


METRIC_COLUMNS = tuple(name for name in RECORD_FIELDS if name not in ("dataset", "round")
                       ) + ("reward",)


#: ``spent_fraction``: labels bought so far as a fraction of |D| (the paper's x axis,
#: 0.02, 0.04, ..., 0.30), not the observation's ``budget_used`` (rounds / rounds in budget).
COLUMNS = (*KEY_COLUMNS, "contamination", "spent_fraction", *SETTING_COLUMNS, *METRIC_COLUMNS)


#: The grid's axes: a stored run may grow along each (more data sets, seeds, agents or
#: settings), keeping its finished cells, but never lose values.
GRID_AXES = ("datasets", "seeds", "agents", "settings")


@dataclass(frozen=True)
class TableCell:
    """A study's cell and one tidy table it writes: ``key`` names the cell (column, value)
    pairs, e.g. data set, seed and prior, which every row of its table carries. A study
    stores its cells in a ``ResultStore`` as the grid runner does, one file a table."""

    table: str
    key: tuple[tuple[str, Any], ...]

    @property
    def filename(self) -> str:
        """The file's name under ``cells/``: the table, then the key's values."""
        parts = [self.table, *(str(value) for _, value in self.key)]
        return "__".join(safe_name(part) for part in parts) + ".parquet"

    def problem(self, frame: pd.DataFrame) -> str | None:
        """What is wrong with the stored rows of this cell, or ``None``."""
        for column, value in self.key:
            if column not in frame.columns:
                return f"no column {column!r}"
            if len(frame) and set(frame[column].tolist()) != {value}:
                return f"column {column!r} should be {value!r} throughout"
        return None


class RunError(RuntimeError):
    """A run that cannot go on as asked: its output folder is mismatched, corrupt, incomplete
    or not writable, or its cluster cannot be reached."""


def writable_folder(folder: str | os.PathLike, option: str = "--output") -> Path:
    """Create ``folder`` (and its parents) and return it; a folder that cannot be written (a
    full disk too: a few kB are written and synced) is a ``RunError`` naming it and the
    command-line ``option`` that chose it."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe_writable(folder)
    except OSError as err:
        raise RunError(write_failure(folder, err, f"choose another {option}, one you can "
                                     "write to")) from err
    return folder


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
            manifest = json.loads(read_regular_text(self.run_file, "the run description"))
        except (OSError, ValueError, RecursionError) as err:
            reason = "nested too deeply" if isinstance(err, RecursionError) else err
            raise RunError(f"{self.run_file} is unreadable ({reason}). Delete it together with "
                           f"{self.cells_dir} to start over, or use another --output.") from err
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
            raise RunError(f"{self.run_file} is not a run description of format "
                           f"{FORMAT_VERSION}; use another --output.")
        try:
            _check_sections(manifest)
            if "study" in manifest:  # a study's cells (``TableCell``): its axes are lists of keys
                _check_study_grid(manifest["grid"])
            else:
                grid_from_manifest(manifest)
        except Exception as err:  # a damaged or hand-edited grid: missing keys, bad values
            raise RunError(f"{self.run_file} holds no valid grid ({type(err).__name__}: {err})."
                           f" Delete it together with {self.cells_dir} to start over, or use "
                           "another --output.") from err
        return manifest

    def prepare(self, manifest: dict[str, Any]) -> None:
        """Start a new run, or check that the stored one is this run or grows into it: the
        same data, versions and policies, and a grid holding at least the stored one's data
        sets, seeds, agents and settings (then ``run.json`` describes the grown grid).

        The check and the write are one step for every process (``run.json``'s lock), so two
        runs started at once into one folder never both pass: the second sees the first's
        ``run.json``. Temporary files a killed run left behind are removed here."""
        writable_folder(self.cells_dir)
        try:
            self._prepare_locked(manifest)
        except TimeoutError as err:  # another run keeps run.json's lock
            raise RunError(str(err)) from err

    def _prepare_locked(self, manifest: dict[str, Any]) -> None:
        with manifest_lock(self.run_file, f"the results folder {self.root}"):
            stored = self.read_manifest()
            if stored is not None:
                problems = _manifest_differences(stored, manifest)
                if problems:
                    raise RunError(f"{self.root} holds a different run ({self.run_file}), "
                                   "so its results cannot "
                                   "be mixed with this one:\n  " + "\n  ".join(problems) +
                                   "\nA run can grow (more data sets, seeds, agents or "
                                   "settings) but not change: use another --output, or delete "
                                   f"{self.root} to start over.")
                manifest = {**manifest,
                            "created": stored.get("created", manifest.get("created"))}
            remove_stale_temporaries([self.root, self.cells_dir])
            if manifest != stored:
                _atomic_write_text(self.run_file, json.dumps(manifest, indent=2) + "\n")

    # cells ----------------------------------------------------------------
    def path(self, cell: Cell | TableCell) -> Path:
        """The file of a cell (of the grid, or a study's table of one cell)."""
        return self.cells_dir / cell.filename

    def read(self, cell: Cell | TableCell) -> pd.DataFrame:
        """A finished cell's rows, validated against the cell; ``RunError`` names a bad file."""
        import pandas as pd

        path = self.path(cell)
        try:  # page checksums: a changed byte in the data is an error, not other numbers
            with open_regular(path, "result file") as handle:
                frame = pd.read_parquet(handle, page_checksum_verification=True)
        except Exception as err:  # pyarrow raises several types for truncated or garbled files
            raise _corrupt(path, f"unreadable ({type(err).__name__}: {err})") from err
        problem = cell.problem(frame) if isinstance(cell, TableCell) else _cell_problem(frame, cell)
        if problem:
            raise _corrupt(path, problem)
        return frame

    def write(self, cell: Cell | TableCell, frame: pd.DataFrame) -> None:
        """Write a finished cell atomically: a hidden temporary file (removed if the write
        fails), then a rename; a full disk is a ``RunError`` saying so and where."""
        path = self.path(cell)
        try:
            atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False,
                                                            write_page_checksum=True))
        except OSError as err:  # pyarrow's errors of the file system are OSErrors
            raise RunError(write_failure(path, err, "use another --output (the cells "
                                         "finished so far stay where they are)")) from err

    def finished(self, cells: Iterable[Any]) -> dict[Any, pd.DataFrame]:
        """The cells already on disk, each validated (a corrupt file is an error, not a skip).
        The folder is listed once, not asked for every cell (a million cells of a large grid
        were a million ``stat`` calls)."""
        try:
            present = set(os.listdir(self.cells_dir))
        except (FileNotFoundError, NotADirectoryError):  # no cell written yet
            return {}
        return {cell: self.read(cell) for cell in cells if cell.filename in present}


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
    try:
        atomic_write(path, lambda tmp: tmp.write_text(text))
    except OSError as err:
        raise RunError(write_failure(path, err, "use another --output")) from err


SOURCE_CHANGED = (" (the project's code was edited, or a module moved or renamed, since these "
                  "results were stored)")


def _manifest_differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Why a stored run cannot go on as ``wanted``, in words: a grid axis that lost values,
    other data, package versions or source, or a saved policy whose file changed."""
    problems = []
    old_grid, new_grid = stored.get("grid", {}), wanted.get("grid", {})
    for axis in GRID_AXES:
        old, new = old_grid.get(axis, []), new_grid.get(axis, [])
        same: Any = agent_label if axis == "agents" else (lambda value: value)
        kept = {_hashable(same(value)) for value in new}  # a set: 2 million seeds in seconds
        lost = [value for value in old if _hashable(same(value)) not in kept]
        if lost:
            problems.append(f"grid.{axis}: stored {_short(old)}, now {_short(new)} (lacking "
                            f"{_short(lost)})")
    problems += _implementation_differences(stored, wanted)
    for section in ("data", "versions"):
        old, new = stored.get(section, {}), wanted.get(section, {})
        # a data set new to the grid is not a difference; a package's version always is
        names = set(old) & set(new) if section == "data" else set(old) | set(new)
        for key in sorted(names):
            if old.get(key) != new.get(key):
                why = SOURCE_CHANGED if key == SOURCE_KEY else ""
                problems.append(f"{section}.{key}: stored {old.get(key)!r}, now "
                                f"{new.get(key)!r}{why}")
    old_policies, new_policies = stored.get("policies", {}), wanted.get("policies", {})
    for label in sorted(set(old_policies) & set(new_policies)):
        old, new = old_policies[label], new_policies[label]
        if old["sha256"] != new["sha256"]:
            problems.append(f"{new['file']} has changed since its results were stored (content "
                            f"{old['sha256']} then, {new['sha256']} now): the stored cells of "
                            f"{label} belong to the policy that was there before")
    return problems


def _short(values: list[Any]) -> str:
    """``values`` as a message shows them: in full up to 8, else the first 8 and a count."""
    if len(values) <= 8:
        return repr(values)
    return f"[{', '.join(map(repr, values[:8]))}, ... ({len(values):,} in all)]"


def _hashable(value: Any) -> Any:
    """``value`` as a set member: itself if hashable, else its JSON text (a setting)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _implementation_differences(stored: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """An agent now implemented by other code than when its cells were stored (a plugin
    that replaced a built-in's name, or a plugin missing now), and plugin modules imported
    by the stored run and not this one, or by this one and not the stored run."""
    problems = []
    old, new = stored.get("agents", {}), wanted.get("agents", {})
    for label in sorted(set(old) & set(new)):
        if old[label] != new[label]:
            problems.append(f"agent {label} is implemented by {new[label] or 'nothing'} now, "
                            f"by {old[label]} when its results were stored (a plugin module "
                            "replaced it, or is not imported now: --import MODULE)")
    before, now = stored.get("plugins", []), wanted.get("plugins", [])
    missing = [m for m in before if m not in set(now)]
    if missing:
        problems.append(f"plugins: the stored run imported {', '.join(missing)}, this one "
                        "does not (--import MODULE)")
    added = [m for m in now if m not in set(before)]
    if added and "plugins" in stored:  # a run.json of before plugins were recorded: unknown
        problems.append(f"plugins: this run imports {', '.join(added)}, the stored run did "
                        "not (a plugin may replace what an agent's name runs): leave "
                        f"--import {added[0]} out, or write to another --output")
    return problems


def normalise_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
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


def concat_cells(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Cells in the grid's order (so tables list agents as the grid does), rounds within."""
    import pandas as pd

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
                       f"of the grid in {store.run_file} are missing; run the same command "
                       "again to finish it")
    if not frames:
        import pandas as pd

        return pd.DataFrame(columns=list(COLUMNS))
    return concat_cells(frames[cell] for cell in cells if cell in frames)


def _check_sections(manifest: dict[str, Any]) -> None:
    """The shapes ``run.json``'s sections must have before they are compared: ``grid``,
    ``data`` and ``versions`` objects, ``policies`` an object of ``{"file", "sha256"}``
    objects (a ``ValueError`` naming the section otherwise)."""
    for section in ("grid", "data", "versions", "policies", "agents"):
        if section in manifest and not isinstance(manifest[section], dict):
            raise ValueError(f"its {section!r} is a JSON {type(manifest[section]).__name__}, "
                             "not an object")
    if not all(isinstance(v, str) for v in manifest.get("agents", {}).values()):
        raise ValueError("its 'agents' must map each agent to the text naming its code")
    plugins = manifest.get("plugins", [])
    if not (isinstance(plugins, list) and all(isinstance(m, str) for m in plugins)):
        raise ValueError(f"its 'plugins' is {plugins!r}, not a list of module names")
    for label, entry in manifest.get("policies", {}).items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and isinstance(entry.get("file"), str)):
            raise ValueError(f"its policy {label!r} is {entry!r}, not an object with a "
                             "'file' and a 'sha256'")


def _check_study_grid(grid: Any) -> None:
    """A study's grid in ``run.json``: named axes, each a list of key values."""
    if not isinstance(grid, dict) or not all(isinstance(v, list) for v in grid.values()):
        raise ValueError(f"a study's grid maps axes to lists, not {grid!r}")


def grid_from_manifest(manifest: dict[str, Any]) -> Grid:
    """The grid a run.json describes (data sets by name)."""
    grid = manifest["grid"]
    return Grid(tuple(grid["datasets"]), tuple(grid["seeds"]), tuple(grid["agents"]),
                tuple(Settings.from_dict(s) for s in grid["settings"]))


__all__ = ["COLUMNS", "GRID_AXES", "KEY_COLUMNS", "METRIC_COLUMNS", "SETTING_COLUMNS",
           "ResultStore", "RunError", "TableCell", "concat_cells", "grid_from_manifest",
           "load_results", "normalise_dtypes", "writable_folder"]
