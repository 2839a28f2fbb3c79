"""A training run's folder: its name is one path component, one run writes it at a time,
and an earlier run in it is replaced only when asked.

Every trainer (``training.train``, ``ballad-env train``) writes a run folder afresh, so the
folder a name picks must be its own: :func:`check_run_name` refuses a name that is not one
plain component of a path (``..``, ``a/b``, an absolute path), which would clear another
folder. Two runs into one folder at once would mix their curves and models: :func:`run_lock`
holds the folder for the whole run, as ``ResultStore`` holds ``run.json``, and refuses a
second run at once.
What an earlier run left (a finished model, or an interrupted run's checkpoints) is cleared
only with ``--overwrite`` (:func:`clear_earlier_run`), and a link among the run's entries
(``monitor/`` pointing elsewhere) is never written through: it is refused, or with
``--overwrite`` removed itself, never what it points to.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from agents.experiments.stores.results import RunError, writable_folder
from ballad_env.files import LockError, manifest_lock

if TYPE_CHECKING:  # config imports this module
    from agents.experiments.training.config import TrainConfig

#: The sub-folders a run writes; training again under the same run name replaces them.
RUN_FOLDERS = ("monitor", "logs", "eval", "checkpoints")

#: Characters a run name may not hold: path separators (either system's), a drive's colon,
#: NUL and other control characters.
_NOT_IN_NAMES = re.compile(r"[/\\:\x00-\x1f\x7f]")


def check_run_name(name: str) -> str:
    """``name`` if it is one plain component of a path; else a ``ValueError`` naming it."""
    if not isinstance(name, str) or not name.strip() or name in (".", "..") \
            or _NOT_IN_NAMES.search(name) or name != name.strip():
        raise ValueError(f"run name {name!r} is not a name: give one folder name (letters, "
                         "digits, - _ . +; no /, \\ or :, not . or ..); the run goes under "
                         "--output-dir")
    return name


@contextmanager
def run_lock(run_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold ``run_dir`` (created if missing) for this process during a ``with`` block; a
    ``RunError`` at once if another run holds it."""
    folder = writable_folder(run_dir, "--output-dir")
    lock = manifest_lock(folder / "training", f"the run folder {folder}", timeout=0)
    try:
        lock.__enter__()
    except LockError as err:
        raise RunError(f"{err} (another training run writes into it: name this run apart "
                       "with --run-name, --seed or --output-dir)") from err
    try:
        yield folder
    finally:
        lock.__exit__(None, None, None)


#: What a refusal suggests besides ``--overwrite``.
_APART = "or name the new run apart (--run-name, --seed, --output-dir)"


def earlier_entries(run_dir: Path, name: str, folders: Sequence[str]) -> list[Path]:
    """What a run called ``name`` writes in ``run_dir`` and is there already (links
    included, whatever they point to): ``folders``, ``<name>.zip``, ``<name>.json`` and
    ``curve.png``."""
    entries = [run_dir / entry for entry in (*folders, f"{name}.zip", f"{name}.json",
                                             "curve.png")]
    return [entry for entry in entries if os.path.lexists(entry)]


def clear_earlier_run(run_dir: Path, name: str, folders: Sequence[str],
                      overwrite: bool) -> None:
    """Remove what an earlier run called ``name`` left in ``run_dir`` (see
    :func:`earlier_entries`) if ``overwrite``; else, if anything is there, a ``RunError``
    of one line naming ``--overwrite``: a finished run, a link (training would write through
    it, outside the run) or an unfinished run (its checkpoints would be lost). A link is
    removed itself, never followed."""
    entries = earlier_entries(run_dir, name, folders)
    if entries and not overwrite:
        raise RunError(_refusal(run_dir, name, entries))
    for entry in entries:
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink()
        else:
            shutil.rmtree(entry)


def _refusal(run_dir: Path, name: str, entries: list[Path]) -> str:
    """Why the earlier run's ``entries`` in ``run_dir`` stop a new run, in one line."""
    model = run_dir / f"{name}.zip"
    links = [entry for entry in entries if entry.is_symlink()]
    if links:
        return (f"{links[0]} is a link inside the run folder: training would write through "
                "it, outside the run. Remove it, or pass --overwrite to remove the link (not "
                f"what it points to), {_APART}")
    if model in entries:
        return (f"{model} is a finished run of this name: training again would replace it. "
                f"Pass --overwrite (overwrite=True) to replace it, {_APART}")
    checkpoints = run_dir / "checkpoints"
    saved = len(list(checkpoints.glob("*.zip"))) if checkpoints in entries else 0
    return (f"{run_dir} holds an unfinished run of this name ({saved} checkpoints, "
            f"{', '.join(e.name for e in entries)}; no {model.name}): training again would "
            f"delete it. Pass --overwrite (overwrite=True) to replace it, {_APART}")


def fresh_run_dir(config: TrainConfig) -> Path:
    """The run's folder, cleared of what an earlier run under the same name wrote (model,
    settings, curve, monitor files, logs, evaluations, checkpoints) only with
    ``config.overwrite``: nothing of it may mix with this run's, and nothing is lost
    unasked. Otherwise an earlier run, finished or interrupted, or a link among those
    entries is a ``RunError`` naming ``--overwrite`` (:func:`clear_earlier_run`). Every
    trainer starts its run here."""
    run_dir = writable_folder(config.run_dir, "--output-dir")
    clear_earlier_run(run_dir, config.name, RUN_FOLDERS, config.overwrite)
    return run_dir


__all__ = ["RUN_FOLDERS", "check_run_name", "clear_earlier_run", "earlier_entries",
           "fresh_run_dir", "run_lock"]
