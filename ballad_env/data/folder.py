"""The user's folder of data files: ``data_dir=`` or ``$BALLAD_DATA_DIR``, indexed by stem.

A name matches a file's stem in any case; when one stem has files of several formats the
preferred one is used (npz > mat > arff > csv). Two files of the preferred format whose
stems differ only in case (``Glass.npz`` and ``glass.npz``) make the name ambiguous: an
error lists both.
"""

from __future__ import annotations

import os
from pathlib import Path

from ballad_env.data.formats import DATA_SUFFIXES

DATA_DIR_ENV = "BALLAD_DATA_DIR"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """The configured data folder (the argument, else ``$BALLAD_DATA_DIR``), or ``None``."""
    if data_dir is not None:
        origin = "data_dir argument"
    else:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
        origin = f"${DATA_DIR_ENV}"
    if data_dir is None:
        return None
    path = Path(data_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise FileNotFoundError(f"data directory {str(path)!r} (from {origin}) is not a "
                                "folder: name the folder holding your data files")
    if not path.is_dir():
        raise FileNotFoundError(f"data directory {str(path)!r} (from {origin}) does not exist")
    return path


def index_dir(directory: Path) -> dict[str, list[Path]]:
    """Lower-cased stems -> the files of the preferred format with that stem (one, unless
    stems differing only in case collide)."""
    rank = {ext: i for i, ext in enumerate(DATA_SUFFIXES)}
    index: dict[str, list[Path]] = {}
    for entry in sorted(directory.iterdir()):
        ext = entry.suffix.lower()
        if ext not in rank or not entry.is_file():
            continue
        current = index.setdefault(entry.stem.lower(), [])
        best = rank[current[0].suffix.lower()] if current else len(rank)
        if rank[ext] < best:
            current[:] = [entry]
        elif rank[ext] == best:
            current.append(entry)
    return index


def folder_file(directory: Path, name: str) -> Path | None:
    """The file named ``name`` (any case) in ``directory``; ``None`` if there is none."""
    found = index_dir(directory).get(name.lower())
    if not found:
        _refuse_irregular(directory, name)
        return None
    if len(found) > 1:
        raise ValueError(
            f"data set name {name!r} is ambiguous in {str(directory)!r}: it matches "
            f"{', '.join(p.name for p in found)}; rename one of them or pass the file's path")
    return found[0]


def _refuse_irregular(directory: Path, name: str) -> None:
    """A ``ValueError`` if ``directory`` holds something named ``name`` with a data suffix
    that is not a regular file (a FIFO, a folder, a device): it is there, but not a file to
    read, and "no file" would say otherwise."""
    for entry in sorted(directory.iterdir()):
        if entry.stem.lower() == name.lower() and entry.suffix.lower() in DATA_SUFFIXES \
                and not entry.is_file():
            raise ValueError(f"data file {str(entry)!r} is not a regular file (a folder, FIFO "
                             "or device): put the data file itself there")


def folder_names(directory: Path) -> list[str]:
    """The stems of the data files in ``directory``, one per data set."""
    return [files[0].stem for files in index_dir(directory).values()]


__all__ = ["DATA_DIR_ENV", "folder_file", "folder_names", "index_dir", "resolve_data_dir"]
