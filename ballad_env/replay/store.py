"""Lattices on disk: one compressed ``.npz`` file per (data set, seed, setting), in a store.

A store is a folder::

    <root>/store.json                              what made it (``StoreManifest``)
    <root>/<setting name>/<data set>/seed<N>.npz   one lattice (``save_lattice``)

A data set's folder is its name, each ``/``-separated part made a safe file name
injectively (``ballad_env.files.safe_name``: ``adbench/cover`` stays, ``a b`` becomes
``a_b~<hash>``); a store written before that keeps its folders of other names readable.

The setting is the episode's ``Settings`` with the reward left at its default: a lattice
holds every reward signal, so one file serves every reward choice. Each file records the
format, the hash of the environment's source that built it (``environment_fingerprint``),
its keys and settings; a file from other environment code, with other keys, or that cannot
be read is refused with an error naming it (``StoreError``), never silently used or deleted.
``agents.experiments.lattice_build`` builds stores; ``ballad_env.replay.env`` plays them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ballad_env.files import (
    atomic_write,
    check_array_bytes,
    manifest_lock,
    npz_array_bytes,
    open_regular,
    read_regular_text,
    safe_name,
    write_failure,
    zip_directory_problem,
)
from ballad_env.replay.lattice import Lattice
from ballad_env.settings import Settings

#: Version of the file layout; a file of another version is refused. Format 2 packs every
#: array into one byte buffer (a cell loads in well under a millisecond; format 1 stored
#: ~30 named arrays and took ~10 ms).
FORMAT_VERSION = 2
MANIFEST_FILE = "store.json"
#: Environment modules that never change a lattice (paths under the package's parent folder):
#: editing them keeps stores valid.
NOT_IN_LATTICES = frozenset({
    "ballad_env/render.py", "ballad_env/files.py", "ballad_env/plugins.py",
    "ballad_env/settings/cli.py",
    "ballad_env/replay/env.py", "ballad_env/replay/transitions.py",
    "ballad_env/replay/store.py", "ballad_env/replay/vector.py",
    "ballad_env/replay/vector_tables.py", "ballad_env/replay/vector_cells.py"})


class StoreError(ValueError):
    """A lattice store or file that cannot be used: missing, corrupt, or made by other code."""


# --------------------------------------------------------------------------- provenance
def source_hash(packages: Iterable[ModuleType], excluded: Iterable[str] = ()) -> str:
    """Hash of the ``.py`` files of ``packages`` (paths in ``excluded``, relative to the
    package's parent folder, left out): each file's relative path, then its bytes. A module
    moved or renamed changes the hash, so results of the old layout are refused."""
    skip = frozenset(excluded)
    digest = hashlib.sha256()
    for package in packages:
        root = Path(str(package.__file__)).parent
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root.parent).as_posix()
            if relative not in skip:
                digest.update(f"{relative}\n".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def environment_fingerprint() -> str:
    """Hash of the ``ballad_env`` source that computes lattices (``NOT_IN_LATTICES`` left out)."""
    import ballad_env

    return source_hash([ballad_env], NOT_IN_LATTICES)


def lattice_settings(settings: Settings) -> Settings:
    """The settings a lattice is stored under: the reward at its default (it holds them all)."""
    return _stored_form(settings)[0]


def setting_key(settings: Settings) -> str:
    """The store's folder name for ``settings`` (``lattice_settings(settings).name``)."""
    return _stored_form(settings)[1]


def _stored_form(settings: Settings) -> tuple[Settings, str, dict[str, Any] | None]:
    """``settings`` as a lattice is stored under them, their name and their JSON values (None
    if they cannot be saved), computed once per settings (loading a store asks for each cell)."""
    try:
        return _stored_form_cached(settings)
    except TypeError:  # unhashable (a prior object): computed each time
        return _stored_form_cached.__wrapped__(settings)


@functools.lru_cache(maxsize=64)
def _stored_form_cached(settings: Settings) -> tuple[Settings, str, dict[str, Any] | None]:
    stored = settings.replace(reward=Settings().reward)
    try:
        values = stored.to_dict()
    except ValueError:  # a prior object
        values = None
    return stored, stored.name, values


# --------------------------------------------------------------------------- one file
def pack_arrays(arrays: dict[str, np.ndarray]) -> tuple[list[list[Any]], np.ndarray]:
    """Named arrays as one byte buffer and its layout ([name, dtype, shape, offset] each,
    offsets 8-byte aligned), so a file holds two members whatever the lattice holds."""
    layout, parts, offset = [], [], 0
    for name, value in arrays.items():
        value = np.ascontiguousarray(value)
        layout.append([name, value.dtype.str, list(value.shape), offset])
        pad = -value.nbytes % 8
        parts += [value.reshape(-1).view(np.uint8), np.zeros(pad, np.uint8)]
        offset += value.nbytes + pad
    return layout, np.concatenate(parts) if parts else np.empty(0, np.uint8)


def unpack_arrays(layout: list[list[Any]], packed: np.ndarray) -> dict[str, np.ndarray]:
    """Inverse of :func:`pack_arrays`: each array a view of ``packed``."""
    arrays = {}
    for name, dtype, shape, offset in layout:
        kind = np.dtype(dtype)
        size = math.prod(shape) * kind.itemsize
        arrays[name] = packed[offset:offset + size].view(kind).reshape(shape)
    return arrays


def save_lattice(lattice: Lattice, path: str | os.PathLike, **extra: Any) -> int:
    """Write ``lattice`` to ``path`` (a hidden temporary file renamed into place, so a file is
    complete or absent); ``extra`` JSON values go into its header. Returns the bytes written."""
    path = Path(path)
    header = {"format": FORMAT_VERSION, "source": environment_fingerprint(),
              "dataset": lattice.dataset, "seed": lattice.seed, "n_rounds": lattice.n_rounds,
              "contamination": lattice.contamination,
              "settings": lattice_settings(lattice.settings).to_dict(), **extra}
    layout, packed = pack_arrays(lattice.to_arrays())
    text = np.array(json.dumps({**header, "arrays": layout}))

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, header=text, packed=packed)

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, write)
    except OSError as err:
        raise StoreError(write_failure(path, err, "build into a folder on another disk "
                                       "(ballad-env lattices --out)")) from err
    return path.stat().st_size


def _read(path: Path, arrays: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A lattice file's checked header, and its arrays if asked (``StoreError`` naming it)."""
    try:
        with open_regular(path, "lattice file") as handle:
            problem = zip_directory_problem(handle)  # before numpy parses the directory
            if problem:
                raise StoreError(f"{path}: {problem}; refused before reading it")
            with np.load(handle, allow_pickle=False) as data:
                check_array_bytes(path, npz_array_bytes(data), "arrays")  # nothing inflated
                header = json.loads(str(data["header"]))
                _check_header(path, header)
                values = unpack_arrays(header["arrays"], data["packed"]) if arrays else {}
    except StoreError:
        raise
    except Exception as err:  # zipfile, zlib, numpy and json each raise their own types
        raise _unreadable(path, err) from err
    return header, values


def _unreadable(path: Path, err: BaseException) -> StoreError:
    return StoreError(f"lattice file {path} cannot be read ({type(err).__name__}: {err}); "
                      "delete it and build it again (ballad-env lattices resumes)")


def read_header(path: str | os.PathLike) -> dict[str, Any]:
    """A lattice file's header, checked for format and environment source (``StoreError``)."""
    return _read(Path(path), arrays=False)[0]


def _check_header(path: Path, header: Any) -> None:
    if not isinstance(header, dict):
        raise StoreError(f"{path} is malformed: its header is a JSON {type(header).__name__}, "
                         "not an object; build it again")
    if header.get("format") != FORMAT_VERSION:
        raise StoreError(f"{path} has format {header.get('format')!r}, this code "
                         f"reads format {FORMAT_VERSION}: build the store again")
    if header.get("source") != environment_fingerprint():
        raise StoreError(f"{path} was built by other environment code (a module edited, "
                         "moved or renamed since; source "
                         f"{header.get('source')}, now {environment_fingerprint()}), so its "
                         "episodes may differ from the environment's: build a new store "
                         "(ballad-env lattices --out NEW_FOLDER)")


def load_lattice(path: str | os.PathLike, *, dataset: str | None = None, seed: int | None = None,
                 settings: Settings | None = None) -> Lattice:
    """Read one lattice file; ``StoreError`` naming the file if it is unreadable, from other
    environment code, or not the (``dataset``, ``seed``, ``settings``) asked for."""
    path = Path(path)
    header, arrays = _read(path, arrays=True)
    try:
        form = None if settings is None else _stored_form(settings)
        if form is not None and header["settings"] == form[2]:
            stored = form[0]  # the same values: from_dict would rebuild these settings
        else:
            stored = Settings.from_dict(header["settings"])
        wanted = {"dataset": dataset, "seed": seed,
                  "settings": None if form is None else form[0]}
        found = {"dataset": header["dataset"], "seed": header["seed"], "settings": stored}
        for key, value in wanted.items():
            if value is not None and value != found[key]:
                raise StoreError(f"lattice file {path} holds {key} {found[key]!r}, "
                                 f"not {value!r}")
        lattice = Lattice.from_arrays(arrays, dataset=header["dataset"],
                                      seed=int(header["seed"]), n_rounds=int(header["n_rounds"]),
                                      contamination=float(header["contamination"]),
                                      settings=stored)
        problem = lattice_problem(lattice)
        if problem:
            raise StoreError(f"lattice file {path} holds no episode of its header ({problem}): "
                             "delete it and build it again (ballad-env lattices resumes)")
        return lattice
    except StoreError:
        raise
    except Exception as err:  # a crafted or damaged header: missing keys, wrong types
        raise StoreError(f"lattice file {path} is malformed ({type(err).__name__}: {err}); "
                         "delete it and build it again (ballad-env lattices resumes)"
                         ) from err


def lattice_problem(lattice: Lattice) -> str | None:
    """What makes ``lattice``'s states impossible (a zeroed or forged payload under a valid
    header), or ``None``: the start state held, no state past the budget, each state's round
    and budget its own, and positive sizes (set sizes, features, the cost's scale)."""
    n, grid, reach = lattice.n_rounds, lattice.grid, lattice.reachable
    if n < 1 or reach.ndim != 2 or not reach[0, 0]:
        return "no start state"
    i, j = np.nonzero(reach)
    if np.any(i + j > n):
        return f"states past its {n} rounds"
    if not (np.array_equal(grid["round"][reach], i + j)
            and np.all(grid["n_rounds"][reach] == n)):
        return "states whose round or budget is not their own"
    for name in ("n_train", "n_val", "n_features", "max_cost", "per_round"):
        if not np.all(grid[name][reach] > 0):
            return f"a state whose {name} is not positive"
    return None


def dataset_folder(dataset: str) -> str:
    """A data set's folder in a store: each ``/``-separated part of its name made a safe
    file name injectively (``ballad_env.files.safe_name``), so no two names share a folder
    and none leaves the store (``..``)."""
    return "/".join(safe_name(part) for part in dataset.split("/"))


def _legacy_folder(dataset: str) -> str | None:
    """The folder an earlier layout gave ``dataset`` (its name as it is), when that stays
    inside the store; ``None`` otherwise."""
    parts = dataset.split("/")
    if any(part in ("", ".", "..") or "\\" in part for part in parts) or \
            dataset_folder(dataset) == dataset:
        return None
    return dataset


def _check_manifest_sections(path: Path, manifest: dict[str, Any]) -> None:
    """``store.json``'s sections must be objects: ``data`` of fingerprints (objects),
    ``versions`` of versions, ``settings`` of settings objects; a ``StoreError`` naming the
    file and the section otherwise."""
    kinds = {"data": dict, "versions": object, "settings": dict}
    for section, kind in kinds.items():
        value = manifest.get(section, {})
        if not isinstance(value, dict):
            raise StoreError(f"{path} is malformed: its {section!r} is a JSON "
                             f"{type(value).__name__}, not an object; build the store again")
        wrong = [key for key, item in value.items() if not isinstance(item, kind)]
        if wrong:
            raise StoreError(f"{path} is malformed: its {section!r} entry {wrong[0]!r} is "
                             f"{value[wrong[0]]!r}; build the store again")


# --------------------------------------------------------------------------- a store
class LatticeStore:
    """A folder of lattice files: where each cell goes, which cells there are, and loading.

    Opening a store checks its ``store.json``: a store built by other environment code is
    refused (``StoreError``), as is any single file that is.
    """

    def __init__(self, root: str | os.PathLike, *, create: bool = False) -> None:
        self.root = Path(root)
        self.manifest_path = self.root / MANIFEST_FILE
        if not create:
            self.manifest()  # fails now, naming the problem

    def manifest(self) -> dict[str, Any]:
        """``store.json``, checked for format and environment source."""
        try:
            manifest = json.loads(read_regular_text(self.manifest_path, "the manifest"))
        except FileNotFoundError:
            raise StoreError(f"{self.root} is not a lattice store (no {MANIFEST_FILE}): build "
                             "one with ballad-env lattices --out "
                             f"{self.root}") from None
        except (OSError, ValueError, RecursionError) as err:  # UnicodeDecodeError: ValueError
            reason = "nested too deeply" if isinstance(err, RecursionError) else err
            raise StoreError(f"{self.manifest_path} cannot be read ({reason})") from err
        _check_header(self.manifest_path, manifest)
        _check_manifest_sections(self.manifest_path, manifest)
        return manifest

    def lock(self) -> AbstractContextManager[None]:
        """The store's inter-process lock, for a ``with`` block around a read-modify-write of
        ``store.json`` (``ballad_env.files.manifest_lock``; re-entrant in a thread)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return manifest_lock(self.manifest_path, f"the lattice store {self.root}")

    def write_manifest(self, **fields: Any) -> dict[str, Any]:
        """Write ``store.json`` (format, environment source and ``fields``), keeping what an
        existing one holds, under the store's lock; an existing store of other code is
        refused, and a write that fails (a full disk) is a ``StoreError`` naming the file."""
        with self.lock():
            manifest = self.manifest() if self.manifest_path.exists() else {}
            manifest.update({"format": FORMAT_VERSION, "source": environment_fingerprint(),
                             **fields})
            text = json.dumps(manifest, indent=1) + "\n"
            try:
                atomic_write(self.manifest_path, lambda tmp: tmp.write_text(text))
            except OSError as err:
                raise StoreError(write_failure(self.manifest_path, err, "build into a folder "
                                               "on another disk")) from err
        return manifest

    def path(self, dataset: str, seed: int, settings: Settings) -> Path:
        """Where the lattice of (``dataset``, ``seed``, ``settings``) is (or goes): under
        the data set's safe folder (:func:`dataset_folder`), or its folder of an earlier
        store's layout when only that one holds it."""
        folder = self.root / setting_key(settings)
        name = f"seed{int(seed)}.npz"
        path = folder / dataset_folder(dataset) / name
        legacy = _legacy_folder(dataset)
        if legacy is not None and not path.exists() and (folder / legacy / name).exists():
            return folder / legacy / name
        return path

    def cells(self, settings: Settings) -> list[tuple[str, int]]:
        """Every (data set, seed) stored under ``settings``, sorted; a folder whose name was
        made safe (it holds a ``~``) gives its data set's name from its files' headers."""
        folder = self.root / setting_key(settings)
        found = []
        for path in folder.rglob("seed*.npz"):  # a name may hold a "/" (adbench/cover)
            digits = path.stem.removeprefix("seed")
            if digits.isdigit():
                relative = path.parent.relative_to(folder).as_posix()
                name = str(read_header(path)["dataset"]) if "~" in relative else relative
                found.append((name, int(digits)))
        return sorted(found)

    def load(self, dataset: str, seed: int, settings: Settings) -> Lattice:
        """The lattice of (``dataset``, ``seed``, ``settings``); ``StoreError`` if it is absent,
        unreadable or stale."""
        path = self.path(dataset, seed, settings)
        if not path.exists():
            raise StoreError(f"the store {self.root} has no lattice for data set {dataset!r}, "
                             f"seed {seed}, setting {setting_key(settings)} ({path} is absent)")
        return load_lattice(path, dataset=dataset, seed=seed, settings=settings)


__all__ = ["FORMAT_VERSION", "MANIFEST_FILE", "LatticeStore", "StoreError", "dataset_folder",
           "environment_fingerprint", "lattice_problem", "lattice_settings", "load_lattice",
           "pack_arrays", "read_header", "save_lattice", "setting_key", "source_hash",
           "unpack_arrays"]
