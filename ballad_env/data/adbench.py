"""ADBench's 47 classical data sets by name (``adbench/cover``), downloaded once, verified.

``adbench.json`` (written by ``scripts/tools/adbench_registry.py``) pins repository
Minqi824/ADBench at one commit and lists, per file of ``adbench/datasets/Classical``, its git
blob id (and, for the files that were read, size and SHA256), n, d, the anomaly count and
where those figures came from. First use downloads the file to the cache
(``$BALLAD_DATA_HOME``, else the platform's user cache folder) and every use checks it
against the registry, so a changed cached file is refused. ``$BALLAD_DATA_MIRROR`` replaces
the address's base: the file is fetched from ``<mirror>/<ADBench file name>`` (an
``http(s)://`` or ``file://`` address, or a local folder).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

from ballad_env.data.download import check_scheme, download, verify
from ballad_env.files import remove_stale_temporaries

DATA_HOME_ENV = "BALLAD_DATA_HOME"
MIRROR_ENV = "BALLAD_DATA_MIRROR"
PREFIX = "adbench/"
REGISTRY_FILE = Path(__file__).resolve().parent / "adbench.json"
#: The pinned address of a file: ``.format(commit=..., folder=..., file=...)``.
URL_TEMPLATE = "https://github.com/Minqi824/ADBench/raw/{commit}/{folder}/{file}"


@functools.cache
def registry() -> dict[str, Any]:
    """The registry file's contents: repository, commit, folder and ``datasets``."""
    data: dict[str, Any] = json.loads(REGISTRY_FILE.read_text(encoding="utf-8"))
    return data


def entries() -> dict[str, dict[str, Any]]:
    """Lower-cased ADBench name (``cover``) -> its registry entry."""
    return {row["name"].lower(): row for row in registry()["datasets"]}


def is_adbench_name(source: object) -> bool:
    """Whether ``source`` is a string of the form ``adbench/<name>`` (any case)."""
    return isinstance(source, str) and source.lower().startswith(PREFIX)


def dataset_group(name: str) -> str:
    """Where a data set comes from: ``adbench`` for ADBench's downloads (``adbench/<name>``),
    ``paper`` for the rest (the paper's bundled sets, and built-in or local files)."""
    return "adbench" if is_adbench_name(name) else "paper"


def adbench_names() -> list[str]:
    """Every registered name, ``adbench/<ADBench's file stem without its number>``."""
    return [PREFIX + row["name"] for row in registry()["datasets"]]


def entry(name: str) -> dict[str, Any]:
    """The registry entry of ``adbench/<name>`` (any case); ``FileNotFoundError`` listing
    the registered names if there is none."""
    row = entries().get(name.lower().removeprefix(PREFIX))
    if row is None:
        raise FileNotFoundError(
            f"unknown data set {name!r}: ADBench's classical data sets are "
            f"{', '.join(adbench_names())}")
    return row


def data_home() -> Path:
    """The cache root: ``$BALLAD_DATA_HOME``, else the platform's user cache folder (an
    ``EnvVarError`` naming the variable if it names a file)."""
    from ballad_env.files import env_folder

    configured = env_folder(DATA_HOME_ENV)
    if configured is not None:
        return configured
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ballad-env"


def cache_path(row: dict[str, Any]) -> Path:
    """Where the file of a registry entry is cached (one folder per pinned commit)."""
    return data_home() / "adbench" / registry()["commit"][:12] / row["file"]


def source_url(row: dict[str, Any]) -> str:
    """The address a file is fetched from: ``$BALLAD_DATA_MIRROR/<file>``, else the pinned
    address of the registry's commit."""
    mirror = os.environ.get(MIRROR_ENV)
    if mirror:
        if "://" not in mirror:  # a local folder
            return (Path(mirror).expanduser().resolve() / row["file"]).as_uri()
        check_scheme(mirror, f"${MIRROR_ENV}")
        return f"{mirror.rstrip('/')}/{row['file']}"
    reg = registry()
    return URL_TEMPLATE.format(commit=reg["commit"], folder=reg["folder"], file=row["file"])


def hashes(row: dict[str, Any]) -> dict[str, Any]:
    """The registered size and hashes of an entry (those it has)."""
    return {key: row.get(key) for key in ("size", "sha256", "git_blob_sha1")}


def max_bytes(row: dict[str, Any]) -> int:
    """The most bytes a download of ``row`` may take: its registered size, else (the four
    files registered by git blob id alone) twice its arrays' float64 size plus 1 MB."""
    if row.get("size") is not None:
        return int(row["size"])
    return 2 * 8 * int(row["n"]) * (int(row["d"]) + 1) + (1 << 20)


def is_cached(name: str) -> bool:
    """Whether the file of ``adbench/<name>`` is in the cache (not checked)."""
    return cache_path(entry(name)).is_file()


def fetch(name: str, *, progress: bool = True) -> Path:
    """The verified cached file of ``adbench/<name>``, downloaded first if absent.

    Raises
    ------
    ballad_env.data.download.DownloadError
        If the download fails, is cut short or does not match the registry.
    ballad_env.data.download.IntegrityError
        If the cached file does not match the registry (changed after download).
    """
    row = entry(name)
    path = cache_path(row)
    label = PREFIX + row["name"]
    remove_stale_temporaries([path.parent])  # a killed download's, even once the file is here
    if not path.is_file():
        download(source_url(row), path, hashes(row), label, max_bytes=max_bytes(row),
                 progress=progress)
    return verify(path, hashes(row), label)


__all__ = ["DATA_HOME_ENV", "MIRROR_ENV", "PREFIX", "URL_TEMPLATE", "adbench_names",
           "cache_path", "data_home", "dataset_group", "entry", "fetch", "is_adbench_name",
           "is_cached", "max_bytes", "registry", "source_url"]
