"""From a name, a path or arrays to a :class:`Dataset`: the one place names are resolved.

The rule, first match wins:

1. a :class:`Dataset` or an ``(X, y)`` tuple is the data itself;
2. ``task/<source>/<seed>`` is a generated task, rebuilt from its source data set
   (``ballad_env.data.tasks``);
3. ``adbench/<name>`` (any case) is ADBench's classical data set, downloaded once into the
   cache and verified at every use (``ballad_env.data.adbench``);
4. ``toy`` and ``wdbc``, in lower case, are the built-ins (refused as ambiguous when the
   user's folder also holds a file of that name in any case, ``Toy.npz``: its path, or
   ``Toy``, loads the file);
5. a path (with a folder separator or a data-file ending) is that file;
6. any other name is a file stem in the user's folder (``data_dir=`` or
   ``$BALLAD_DATA_DIR``, any case), else one of the paper's 18 bundled data sets (any case).

So ``WBC`` is the paper's rebuilt WBC (or the user's own ``WBC`` file, which a configured
folder puts first) and ``adbench/WBC`` is ADBench's; a bare name is never downloaded.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

import ballad_env.data.adbench as adbench
import ballad_env.data.bundled as bundled
from ballad_env.data.builtin import BUILTIN_DATASETS, BUILTIN_MAKERS
from ballad_env.data.folder import (
    DATA_DIR_ENV,
    folder_file,
    folder_names,
    index_dir,
    resolve_data_dir,
)
from ballad_env.data.formats import DATA_SUFFIXES, read_file
from ballad_env.data.sampling import parse_sample, sample_name, sample_rows
from ballad_env.data.tasks import (
    TaskSpec,
    build_task,
    check_source,
    draw_real_spec,
    draw_spec,
    is_real_task,
    is_task_name,
    parse_task,
    rename_task,
)
from ballad_env.data.validation import Dataset, validate_xy

_MAX_LISTED = 30


def _check_file(path: Path) -> Path:
    """``path`` if it is a data file of a supported format, else a clear error."""
    if path.suffix.lower() not in DATA_SUFFIXES:
        raise ValueError(
            f"{path}: unsupported file extension {path.suffix!r}; "
            f"expected one of {list(DATA_SUFFIXES)}"
        )
    if path.exists() and not path.is_file():  # a FIFO would block its reader for ever
        raise ValueError(f"data file {str(path)!r} is not a regular file (a folder, FIFO or "
                         "device): give the path of the file itself")
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} does not exist")
    return path


def _builtin(name: str, data_dir: str | os.PathLike | None) -> str:
    """``name``, a built-in data set's, unless the user's data folder also holds a file of that
    name (any case, ``Toy.npz`` for ``toy``): then which one is meant is ambiguous, and a
    ``ValueError`` names both and how to pick each (the paper's bundled folder is not the
    user's and never collides)."""
    try:
        directory = resolve_data_dir(data_dir)
    except FileNotFoundError:  # no folder: nothing to collide with (a built-in needs none)
        return name
    if directory is None or directory.resolve() == bundled.BUNDLED_DIR.resolve():
        return name
    found = index_dir(directory).get(name.lower())
    if found:
        raise ValueError(f"data set name {name!r} is ambiguous: it is a built-in data set and "
                         f"{str(found[0])!r} in the data folder; pass the file's path to load "
                         "the file, or rename the file to load the built-in")
    return name


def _looks_like_path(source: str | os.PathLike) -> bool:
    if isinstance(source, os.PathLike):
        return True
    text = str(source)
    if "/" in text or os.sep in text or (os.altsep and os.altsep in text):
        return True
    return Path(text).suffix.lower() in DATA_SUFFIXES


def _listing(names: list[str]) -> str:
    listed = ", ".join(names[:_MAX_LISTED])
    if len(names) > _MAX_LISTED:
        listed += f", ... ({len(names)} in total)"
    return listed


def _unknown_name(name: str, directory: Path | None) -> FileNotFoundError:
    """The error for a bare name that is no file, with the names it could have meant."""
    where = (f"no file {name}{{{','.join(DATA_SUFFIXES)}}} in {str(directory)!r} and"
             if directory is not None else
             f"no data directory is configured (pass data_dir or set ${DATA_DIR_ENV}) and")
    hint = ""
    if name.lower() in adbench.entries():
        hint = (f" ADBench's data set of that name is "
                f"{adbench.PREFIX + adbench.entries()[name.lower()]['name']!r} (downloaded "
                "once, then cached).")
    names = [n for n in _names(directory) if not adbench.is_adbench_name(n)]
    return FileNotFoundError(
        f"unknown data set {name!r}: {where} it is not one of the paper's bundled data sets."
        f"{hint} Available: {_listing(names)}, and adbench/<name> for ADBench's "
        f"{len(adbench.entries())} (see available_datasets())")


def _find_by_name(name: str, data_dir: str | os.PathLike | None) -> Path:
    """The file of the bare name ``name``: the user's folder first, then the bundled sets."""
    directory = resolve_data_dir(data_dir)
    if directory is not None:
        path = folder_file(directory, name)
        if path is not None:
            return path
    key = bundled.bundled_name(name)
    if key is not None:
        return bundled.bundled_file(key)
    raise _unknown_name(name, directory)


def data_file(source: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Path:
    """The file a path or a name refers to, as :func:`load_dataset` finds it: a path as
    given (a bare file name also in the data directory), ``adbench/<name>`` its verified
    cached file (downloaded first if absent), a bare name as the module's rule says.
    Raises :func:`load_dataset`'s errors for unknown names and missing files; a generated
    task has no file (a ``ValueError``)."""
    if is_task_name(source):
        raise ValueError(f"{source!r} is a generated task: it has no file; load_dataset "
                         "rebuilds it from its name")
    if adbench.is_adbench_name(source):
        return adbench.fetch(str(source))
    if _looks_like_path(source):
        path = Path(source).expanduser()
        if not path.exists() and path.parent == Path("."):
            directory = resolve_data_dir(data_dir)
            if directory is not None and (directory / path.name).exists():
                path = directory / path.name
        return _check_file(path)
    return _find_by_name(str(source), data_dir)


def dataset_name(source: Dataset | tuple[Any, Any] | str | os.PathLike,
                 data_dir: str | os.PathLike | None = None) -> str:
    """The name :func:`load_dataset` gives ``source``, found without reading (or
    downloading) the data.

    It is the data set's one key in results: ``"glass"``, ``"Glass"`` and
    ``"data/Glass.npz"`` all name ``Glass`` (the file's stem); ``"ADBench/COVER"`` names
    ``adbench/cover`` and ``"ADBench/COVER@20000"`` its sample ``adbench/cover@20000``; a
    built-in keeps its name, a ``Dataset`` its own, an ``(X, y)`` tuple is ``"arrays"``.
    """
    if isinstance(source, Dataset):
        return source.name
    if isinstance(source, tuple):
        return "arrays"
    if isinstance(source, str) and (sample := parse_sample(source)):
        return sample_name(dataset_name(sample[0], data_dir), *sample[1:])
    if is_task_name(source):
        return rename_task(str(source), dataset_name(parse_task(str(source))[0], data_dir))
    if isinstance(source, str) and source in BUILTIN_MAKERS:
        return _builtin(source, data_dir)
    if adbench.is_adbench_name(source):
        return adbench.PREFIX + adbench.entry(str(source))["name"]
    return data_file(source, data_dir).stem


def _load_file(path: Path, name: str) -> Dataset:
    """Read and validate a data file; validation errors name the file."""
    X, y = read_file(path)
    return Dataset(name, *validate_xy(X, y, str(path)))


def load_dataset(
    source: Dataset | tuple[Any, Any] | str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
) -> Dataset:
    """Load and validate a data set, at its full size unless a sample is asked for by name
    (``"<name>@<rows>[:<seed>]"``, :mod:`~ballad_env.data.sampling`).

    Parameters
    ----------
    source : Dataset, tuple, str or os.PathLike
        A :class:`Dataset` (validated and returned), an ``(X, y)`` tuple (named
        ``"arrays"``), a path to a ``.npz``/``.mat``/``.arff``/``.csv`` file, or a name:
        ``adbench/<name>`` for ADBench's classical data sets (downloaded once, verified),
        ``task/<source>/<seed>`` for a generated task (``ballad_env.data.tasks``),
        ``"toy"`` or ``"wdbc"`` for the built-ins, else a file stem in the data directory
        or one of the paper's 18 bundled data sets, matched case-insensitively (so
        ``"WDBC"`` is the benchmark file); npz > mat > arff > csv when stems collide.
        The module ``ballad_env.data.lookup`` states the rule in full.
    data_dir : str or os.PathLike, optional
        Directory searched first for names; defaults to ``$BALLAD_DATA_DIR``.
    seed : int, default 0
        Seed for built-in generators; ignored for files and arrays.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        If a name matches nothing, or a path or the data directory does not exist.
    ValueError
        If the data is malformed (see :func:`validate_xy`), the file cannot be parsed, a
        name is ambiguous, or a cached download no longer matches its hash.
    OSError
        ``DownloadError``: a download failed, was cut short or did not match its hash.
    """
    if isinstance(source, Dataset):
        X, y = validate_xy(source.X, source.y, source.name)
        if X is source.X and y is source.y:
            return source
        return Dataset(source.name, X, y)
    if isinstance(source, tuple):
        if len(source) != 2:
            raise ValueError(f"expected an (X, y) tuple; got a tuple of length {len(source)}")
        return Dataset("arrays", *validate_xy(source[0], source[1], "arrays"))
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            "source must be a Dataset, an (X, y) tuple, a path or a name; "
            f"got {type(source).__name__}"
        )
    if isinstance(source, str) and (sample := parse_sample(source)):
        base, rows, sample_seed = sample
        return sample_rows(load_dataset(base, data_dir, seed), rows, sample_seed)
    if is_task_name(source):
        spec = task_spec(str(source), data_dir)
        folder = _folder_text(data_dir)
        anomalies = _anomalies(spec.source, folder) if spec.kind == "real" else None
        return build_task(spec, _normals(spec.source, folder), anomalies)
    if isinstance(source, str) and source in BUILTIN_MAKERS:
        return BUILTIN_MAKERS[_builtin(source, data_dir)](seed)
    if adbench.is_adbench_name(source):
        return _load_file(adbench.fetch(str(source)), dataset_name(source))
    path = data_file(source, data_dir)
    return _load_file(path, path.stem)


# ------------------------------------------------------------------------------ tasks
def _folder_text(data_dir: str | os.PathLike | None) -> str | None:
    return None if data_dir is None else str(data_dir)


@functools.lru_cache(maxsize=32)
def _class_rows(source: str, data_dir: str | None, label: int) -> np.ndarray:
    """The rows of ``source`` of class ``label`` (0 normal, 1 anomaly), read-only, loaded
    once per process for the last 16 sources."""
    data = load_dataset(source, data_dir=data_dir)
    rows = np.asarray(data.X[data.y == label])
    rows.setflags(write=False)
    return rows


def _normals(source: str, data_dir: str | None) -> np.ndarray:
    """The normal rows of ``source``."""
    return _class_rows(source, data_dir, 0)


def _anomalies(source: str, data_dir: str | None) -> np.ndarray:
    """The anomalous rows of ``source`` (for real-anomaly tasks)."""
    return _class_rows(source, data_dir, 1)


def task_spec(name: str, data_dir: str | os.PathLike | None = None) -> TaskSpec:
    """The spec of the generated task called ``name`` (``ballad_env.data.tasks``; reads
    its source's shape). A reserved source, or a task of a task, is a ``ValueError``."""
    source, seed = parse_task(name)
    check_source(source)
    source = dataset_name(source, data_dir)
    check_source(source)
    folder = _folder_text(data_dir)
    n_normals, n_features = _normals(source, folder).shape
    if is_real_task(name):
        return draw_real_spec(source, seed, n_normals, len(_anomalies(source, folder)),
                              n_features)
    return draw_spec(source, seed, n_normals, n_features)


def task_costs(name: str, data_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """The unit costs the task called ``name`` drew, ``{"c_fp": ..., "c_fn": ...}``: its
    episodes' settings are ``settings.replace(**task_costs(name))``."""
    spec = task_spec(name, data_dir)
    return {"c_fp": spec.c_fp, "c_fn": spec.c_fn}


# ------------------------------------------------------------------------------ listing
@dataclass(frozen=True)
class DatasetInfo:
    """One row of :func:`available_datasets` ``(details=True)``.

    ``kind`` is ``built-in``, ``folder`` (the user's data folder), ``bundled`` (the paper's
    18, shipped in the package) or ``adbench`` (downloaded on first use); ``cached`` says
    whether the data is on this machine without a download. n, d and contamination come
    from the registries (a folder file's are read from it).
    """

    name: str
    kind: str
    n: int
    d: int
    contamination: float
    cached: bool
    location: str
    #: Why a file of the data folder cannot be loaded ("" when it can); its n, d and
    #: contamination are then 0, 0 and NaN.
    problem: str = ""


def _builtin_infos() -> list[DatasetInfo]:
    infos = []
    for name in BUILTIN_DATASETS:
        ds = BUILTIN_MAKERS[name](0)
        infos.append(DatasetInfo(name, "built-in", ds.n_samples, ds.n_features,
                                 round(ds.contamination, 4), True, "made in memory"))
    return infos


def _folder_infos(directory: Path) -> list[DatasetInfo]:
    infos = []
    for name in folder_names(directory):
        try:
            path = folder_file(directory, name)
            ds = _load_file(path, name) if path is not None else None
        except (ValueError, OSError) as err:  # listed with its reason, not a traceback
            infos.append(DatasetInfo(name, "folder", 0, 0, float("nan"), True,
                                     str(directory), f"{type(err).__name__}: {err}"))
            continue
        if ds is not None:
            infos.append(DatasetInfo(name, "folder", ds.n_samples, ds.n_features,
                                     round(ds.contamination, 4), True, str(path)))
    return infos


def _registry_infos() -> list[DatasetInfo]:
    infos = [DatasetInfo(name, "bundled", e["n"], e["d"], e["contamination"], True,
                         str(bundled.bundled_file(name)))
             for name in bundled.bundled_names() for e in [bundled.manifest()[name]]]
    for row in adbench.registry()["datasets"]:
        infos.append(DatasetInfo(adbench.PREFIX + row["name"], "adbench", row["n"], row["d"],
                                 row["contamination"], adbench.cache_path(row).is_file(),
                                 adbench.source_url(row)))
    return infos


def _names(directory: Path | None) -> list[str]:
    """Every name, as :func:`available_datasets` lists them."""
    folder = folder_names(directory) if directory else []
    mine = sorted({*BUILTIN_DATASETS, *folder}, key=lambda n: (n.lower(), n))
    taken = {n.lower() for n in folder}  # a folder file hides the bundled set of its name
    return [*mine, *(n for n in bundled.bundled_names() if n.lower() not in taken),
            *adbench.adbench_names()]


@overload
def available_datasets(data_dir: str | os.PathLike | None = None, *,
                       details: Literal[False] = False) -> list[str]: ...


@overload
def available_datasets(data_dir: str | os.PathLike | None = None, *,
                       details: Literal[True]) -> list[DatasetInfo]: ...


def available_datasets(data_dir: str | os.PathLike | None = None, *,
                       details: bool = False) -> list[str] | list[DatasetInfo]:
    """List the names :func:`load_dataset` accepts.

    Parameters
    ----------
    data_dir : str or os.PathLike, optional
        Directory with data files; defaults to ``$BALLAD_DATA_DIR`` if set.
    details : bool, default False
        Return :class:`DatasetInfo` rows (kind, n, d, contamination, cached, location)
        instead of names. Reads every file of the data folder.

    Returns
    -------
    list of str or list of DatasetInfo
        Built-in names, the data folder's file stems, the paper's 18 bundled data sets and
        ADBench's 47 (``adbench/<name>``), each group sorted case-insensitively; a file
        named like a built-in but not in lower case (``WDBC.npz``) is listed beside it.
    """
    directory = resolve_data_dir(data_dir)
    if details:
        return [*_builtin_infos(), *(_folder_infos(directory) if directory else []),
                *_registry_infos()]
    return _names(directory)


__all__ = ["DatasetInfo", "available_datasets", "data_file", "dataset_name", "load_dataset",
           "task_costs", "task_spec"]
