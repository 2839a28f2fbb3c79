"""A training run's folder: its name is one path component, and one run writes it at a time.

``ballad-env train`` (and ``train_batched``) clear a run folder's earlier files before they
write it, so the folder a name picks must be its own: :func:`check_run_name` refuses a name
that is not one plain component of a path (``..``, ``a/b``, an absolute path), which would
clear another folder. Two runs into one folder at once would mix their curves and models:
:func:`run_lock` holds the folder for the whole run, as ``ResultStore`` holds ``run.json``,
and refuses a second run at once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agents.experiments.stores.results import RunError, writable_folder
from ballad_env.files import LockError, manifest_lock

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


__all__ = ["check_run_name", "run_lock"]
