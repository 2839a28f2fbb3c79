"""Data sets for the BALLAD environment.

Loads tabular anomaly-detection data sets from benchmark files (ADBench ``.npz``,
ODDS ``.mat``, DAMI ``.arff`` and plain ``.csv``) or from two built-in generators,
and validates them into a :class:`Dataset` with float64 features and int8 labels
(1 = anomaly, 0 = normal).
"""

from __future__ import annotations

import csv
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DATA_DIR_ENV = "BALLAD_DATA_DIR"
BUILTIN_DATASETS = ("toy", "wdbc")

# Supported file extensions, in order of preference when several files share a stem.
_CSV_LABEL_COLUMNS = ("label", "y", "outlier", "class", "is_anomaly")
_CSV_MISSING = frozenset({"", "?", "na", "nan", "n/a", "null", "none"})
_TRUE_WORDS = frozenset({"yes", "true", "y", "t"})
_FALSE_WORDS = frozenset({"no", "false", "n", "f"})
_MAX_LISTED = 30


class DataWarning(UserWarning):
    """Data on which the results are degenerate (every score ties, a test set without
    anomalies, ...): the run goes on, but its figures mean less than they seem to."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A validated anomaly-detection data set.

    Parameters
    ----------
    name : str
        Human-readable name (file stem, built-in name or ``"arrays"``).
    X : numpy.ndarray
        Features, float64, shape ``(n, d)``, C-contiguous.
    y : numpy.ndarray
        Labels, int8, shape ``(n,)``, 1 = anomaly and 0 = normal.
    """

    name: str
    X: np.ndarray
    y: np.ndarray

    @property
    def contamination(self) -> float:
        """Fraction of anomalies in the data."""
        return float(self.y.mean())

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return int(self.X.shape[1])

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, n_samples={self.n_samples}, "
            f"n_features={self.n_features}, contamination={self.contamination:.4f})"
        )


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def _format_values(values: np.ndarray) -> str:
    """Render distinct label values compactly, e.g. ``[0, 1, 2]``."""
    shown = []
    for value in values[:10].tolist():
        if isinstance(value, float) and value.is_integer():
            shown.append(str(int(value)))
        elif isinstance(value, bytes):
            shown.append(repr(value.decode("utf-8", "replace")))
        else:
            shown.append(repr(value))
    more = f", ... ({len(values)} distinct)" if len(values) > 10 else ""
    return "[" + ", ".join(shown) + more + "]"


def _binary_labels(y: np.ndarray, name: str) -> np.ndarray:
    """Convert labels to int8 0/1 or raise ``ValueError`` listing bad values."""
    if y.dtype == np.bool_:
        return y.astype(np.int8, copy=False)
    if y.dtype.kind == "O":  # e.g. a list mixing ints and floats, or Python objects
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if y.dtype.kind in "iuf":
        values = np.unique(y)  # NaN, if any, sorts last and is reported below
        if np.all(np.isin(values, (0, 1))):
            return y.astype(np.int8, copy=False)
    else:
        try:
            values = np.unique(y)
        except TypeError:  # mixed object types cannot be sorted
            values = np.array(sorted({repr(v) for v in y.tolist()}), dtype=object)
    raise ValueError(
        f"{name}: labels must be 0 (normal) or 1 (anomaly); found {_format_values(values)}"
    )


def validate_xy(X: Any, y: Any, name: str = "data") -> tuple[np.ndarray, np.ndarray]:
    """Check and convert a feature matrix and label vector.

    Parameters
    ----------
    X : array-like
        Feature matrix of shape ``(n, d)``.
    y : array-like
        Labels of shape ``(n,)``: 0/1 integers, floats equal to 0/1, or booleans.
    name : str, default "data"
        Data set name used in error messages.

    Returns
    -------
    X : numpy.ndarray
        float64, C-contiguous, shape ``(n, d)``.
    y : numpy.ndarray
        int8, shape ``(n,)``, values in {0, 1}.

    Raises
    ------
    ValueError
        If shapes disagree, ``X`` holds NaN or inf, labels are not binary, one class
        is missing, the data is empty, or the contamination is not below 0.5.
    """
    try:
        X = np.ascontiguousarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: X cannot be converted to float64 ({exc})") from exc
    if X.ndim != 2:
        raise ValueError(f"{name}: X must be 2-D (n_samples, n_features); got shape {X.shape}")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name}: y must be 1-D (n_samples,); got shape {y.shape}")
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{name}: length mismatch: X has {X.shape[0]} rows but y has {y.shape[0]} labels"
        )
    if X.shape[0] == 0:
        raise ValueError(f"{name}: data is empty (0 samples)")
    if X.shape[1] == 0:
        raise ValueError(f"{name}: data is empty (0 features)")

    nan_rows = int(np.isnan(X).any(axis=1).sum())
    if nan_rows:
        raise ValueError(
            f"{name}: X contains NaN in {nan_rows} of {X.shape[0]} rows; "
            "impute or drop missing values first"
        )
    inf_rows = int(np.isinf(X).any(axis=1).sum())
    if inf_rows:
        raise ValueError(f"{name}: X contains inf in {inf_rows} of {X.shape[0]} rows")
    largest = np.abs(X).max(axis=0)
    with np.errstate(over="ignore"):  # values too large for float64 squares: the error below
        too_large = np.flatnonzero(~np.isfinite(4.0 * X.shape[0] * largest * largest))
    if too_large.size:
        column = int(too_large[0])
        raise ValueError(
            f"{name}: feature {column} reaches {largest[column]:.3g}, too large to standardise "
            "in float64 (its squares overflow); rescale X first, e.g. divide each column by "
            "its largest absolute value")

    y = _binary_labels(y, name)
    n_anomalies = int(y.sum())
    n = int(y.shape[0])
    if n_anomalies == 0:
        raise ValueError(f"{name}: no anomalies (no label equal to 1) among {n} samples")
    if n_anomalies == n:
        raise ValueError(f"{name}: no normals (every one of the {n} labels is 1)")
    contamination = n_anomalies / n
    if contamination >= 0.5:
        raise ValueError(
            f"contamination {contamination:.2f} is not below 0.5: {name} has "
            f"{n_anomalies} anomalies among {n} samples; check that 1 marks the anomaly class"
        )
    if np.array_equal(X.min(axis=0), X.max(axis=0)):  # O(n d), no copy of X
        warnings.warn(
            f"{name}: every row of X is the same, so no detector can tell the examples apart: "
            "every score ties and the ROC AUC stays 0.5 whatever the labels. Check that the "
            "file's feature columns were read as intended.", DataWarning, stacklevel=2)
    return X, y


# ---------------------------------------------------------------------------
# Built-in data sets
# ---------------------------------------------------------------------------


def make_toy(seed: int = 0) -> Dataset:
    """Two moons (900 normal points) plus 100 uniform anomalies on ``[-3, 3]^2``.

    Parameters
    ----------
    seed : int, default 0
        Seed for ``numpy.random.default_rng``; the global NumPy RNG is not used.

    Returns
    -------
    Dataset
        Named ``"toy"``: 1000 rows, 2 features, contamination 0.1.
    """
    from sklearn.datasets import make_moons

    rng = np.random.default_rng(seed)
    moons_state = int(rng.integers(0, 2**31 - 1))
    normals, _ = make_moons(n_samples=900, noise=0.1, random_state=moons_state)
    anomalies = rng.uniform(-3.0, 3.0, size=(100, 2))
    X = np.vstack([normals, anomalies])
    y = np.concatenate([np.zeros(900, dtype=np.int8), np.ones(100, dtype=np.int8)])
    return Dataset("toy", *validate_xy(X, y, "toy"))


def make_wdbc(seed: int = 0) -> Dataset:
    """Breast-cancer Wisconsin (diagnostic): all benign plus 10 sampled malignant rows.

    Uses the copy bundled with scikit-learn (no download). Rows keep their original order.

    Parameters
    ----------
    seed : int, default 0
        Seed for ``numpy.random.default_rng`` choosing the 10 malignant rows.

    Returns
    -------
    Dataset
        Named ``"wdbc"``: 367 rows, 30 features, 10 anomalies (malignant).
    """
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    target = np.asarray(bunch.target)  # 0 = malignant, 1 = benign
    benign = np.flatnonzero(target == 1)
    malignant = np.flatnonzero(target == 0)
    chosen = np.random.default_rng(seed).choice(malignant, size=10, replace=False)
    keep = np.sort(np.concatenate([benign, chosen]))
    y = (target[keep] == 0).astype(np.int8)
    return Dataset("wdbc", *validate_xy(bunch.data[keep], y, "wdbc"))


_BUILTIN_MAKERS = {"toy": make_toy, "wdbc": make_wdbc}


# ---------------------------------------------------------------------------
# File loaders
# ---------------------------------------------------------------------------


def _unreadable(path: Path, kind: str, err: Exception, advice: str) -> ValueError:
    """A file that its loader cannot parse (empty, truncated or another format)."""
    size = path.stat().st_size if path.is_file() else 0
    detail = "it is empty (0 bytes)" if size == 0 else f"{type(err).__name__}: {err}"
    return ValueError(f"{path}: not a readable {kind} file ({detail}). {advice}")


_NPZ_ADVICE = "Save the data with numpy.savez(path, X=X, y=y)."


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read arrays ``X`` and ``y`` from an ADBench-style ``.npz`` file."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise _unreadable(path, ".npz", err, _NPZ_ADVICE) from err
    if not isinstance(archive, np.lib.npyio.NpzFile):  # a single .npy array
        raise _unreadable(path, ".npz", TypeError("it holds one array, not the arrays X and y"),
                          _NPZ_ADVICE)
    with archive:
        missing = [key for key in ("X", "y") if key not in archive.files]
        if missing:
            raise ValueError(
                f"{path}: .npz file lacks array(s) {missing}; found {sorted(archive.files)}"
            )
        try:
            return archive["X"], archive["y"]
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:  # truncated, pickled
            raise _unreadable(path, ".npz", err, _NPZ_ADVICE) from err


def _load_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read keys ``X`` and ``y`` from an ODDS-style MATLAB ``.mat`` file."""
    import scipy.io
    import scipy.sparse

    try:
        contents = scipy.io.loadmat(path)
    except NotImplementedError as exc:  # raised by scipy for v7.3 (HDF5) files
        raise ValueError(
            f"{path}: MATLAB v7.3 (HDF5) files are not supported. Re-save it in MATLAB "
            "with save(..., '-v7'), or convert it to .npz with arrays X and y "
            f"(for example with h5py). Details: {exc}"
        ) from exc
    except (OSError, ValueError, TypeError, scipy.io.matlab.MatReadError) as exc:
        raise _unreadable(path, "MATLAB .mat", exc,
                          "Save the data with scipy.io.savemat(path, {'X': X, 'y': y}).") from exc
    missing = [key for key in ("X", "y") if key not in contents]
    if missing:
        found = sorted(k for k in contents if not k.startswith("__"))
        raise ValueError(f"{path}: .mat file lacks variable(s) {missing}; found {found}")
    X, y = contents["X"], contents["y"]
    if scipy.sparse.issparse(X):
        X = X.toarray()
    if scipy.sparse.issparse(y):
        y = y.toarray()
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    return X, y


def _yes_no(value: Any) -> int | None:
    """Map yes/no, true/false words (str or bytes) to 1/0; ``None`` if unknown."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    word = str(value).strip().strip("'\"").lower()
    if word in _TRUE_WORDS:
        return 1
    if word in _FALSE_WORDS:
        return 0
    return None


def _words_to_labels(values: np.ndarray, path: Path, column: str) -> np.ndarray:
    """Convert an array of yes/no style words to int8 labels."""
    mapping = {v: _yes_no(v) for v in set(values.tolist())}
    unknown = sorted(str(v) for v, m in mapping.items() if m is None)
    if unknown:
        raise ValueError(
            f"{path}: label column {column!r} must hold yes/no values; found {unknown[:10]}"
        )
    return np.array([mapping[v] for v in values.tolist()], dtype=np.int8)


def _load_arff(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a DAMI-style ``.arff`` file with an ``outlier`` yes/no column."""
    from scipy.io import arff

    try:
        data, meta = arff.loadarff(path)
    except Exception as exc:  # scipy raises several exception types for bad files
        raise ValueError(f"{path}: could not parse ARFF file: {exc}") from exc
    names = list(meta.names())
    types = dict(zip(names, meta.types(), strict=True))
    label_col = next((c for c in names if c.lower() == "outlier"), None)
    if label_col is None:
        raise ValueError(f"{path}: no 'outlier' label column; columns are {names}")
    features = [c for c in names if c != label_col and c.lower() != "id"]
    nominal = [c for c in features if types[c] != "numeric"]
    if nominal:
        raise ValueError(
            f"{path}: non-numeric feature column(s) {nominal} "
            f"(types {[types[c] for c in nominal]}); only numeric features are supported"
        )
    if not features:
        raise ValueError(f"{path}: no feature columns besides the label")
    X = np.column_stack([np.asarray(data[c], dtype=np.float64) for c in features])
    labels = np.asarray(data[label_col])
    if types[label_col] == "numeric":
        return X, labels
    return X, _words_to_labels(labels, path, label_col)


def _parse_float(text: str) -> float:
    """Parse a CSV cell as float; missing markers become NaN."""
    cell = text.strip()
    if cell.lower() in _CSV_MISSING:
        return float("nan")
    return float(cell)


def _csv_label(text: str) -> float | None:
    """Parse a CSV label cell (0/1, yes/no, true/false); ``None`` if unrecognised."""
    word = _yes_no(text)
    if word is not None:
        return float(word)
    try:
        return float(text.strip())
    except ValueError:
        return None


def _load_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a ``.csv`` file with a header row and a label column."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        sample = handle.read(8192)
        handle.seek(0)
        try:
            dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t")
        except csv.Error:
            dialect = csv.excel
        reader = csv.reader(handle, dialect)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty CSV file (no header row)")
        header = [h.strip() for h in header]
        lowered = [h.lower() for h in header]
        label_idx = next((lowered.index(c) for c in _CSV_LABEL_COLUMNS if c in lowered), None)
        if label_idx is None:
            raise ValueError(
                f"{path}: no label column; expected one of {list(_CSV_LABEL_COLUMNS)} "
                f"(case-insensitive), header is {header}"
            )
        feature_idx = [i for i in range(len(header)) if i != label_idx]
        rows: list[list[float]] = []
        raw_labels: list[str] = []
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise ValueError(
                    f"{path}, line {line_no}: {len(row)} fields but header has {len(header)}"
                )
            try:
                rows.append([_parse_float(row[i]) for i in feature_idx])
            except ValueError:
                bad = next(i for i in feature_idx if not _is_float(row[i]))
                raise ValueError(
                    f"{path}, line {line_no}: non-numeric value {row[bad]!r} "
                    f"in feature column {header[bad]!r}"
                ) from None
            raw_labels.append(row[label_idx])

    X = np.array(rows, dtype=np.float64).reshape(len(rows), len(feature_idx))
    parsed = {text: _csv_label(text) for text in set(raw_labels)}
    unknown = sorted(text for text, value in parsed.items() if value is None)
    if unknown:
        raise ValueError(
            f"{path}: labels must be 0 (normal) or 1 (anomaly) (or yes/no, true/false) "
            f"in column {header[label_idx]!r}; found {unknown[:10]}"
        )
    y = np.array([parsed[text] for text in raw_labels], dtype=np.float64)
    return X, y


def _is_float(text: str) -> bool:
    try:
        _parse_float(text)
    except ValueError:
        return False
    return True


#: Loaders by file ending, in order of preference when a name matches several files.
#: A new data format is one entry: a function ``path -> (X, y)``.
_LOADERS = {".npz": _load_npz, ".mat": _load_mat, ".arff": _load_arff, ".csv": _load_csv}


# ---------------------------------------------------------------------------
# Lookup
# ---------------------------------------------------------------------------


def _resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """Return the configured data directory, or ``None`` if none is configured."""
    if data_dir is not None:
        origin = "data_dir argument"
    else:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
        origin = f"${DATA_DIR_ENV}"
    if data_dir is None:
        return None
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"data directory {str(path)!r} (from {origin}) does not exist")
    return path


def _index_dir(directory: Path) -> dict[str, Path]:
    """Map lower-cased file stems to files, preferring npz > mat > arff > csv."""
    rank = {ext: i for i, ext in enumerate(_LOADERS)}
    index: dict[str, Path] = {}
    for entry in sorted(directory.iterdir()):
        ext = entry.suffix.lower()
        if ext not in rank or not entry.is_file():
            continue
        key = entry.stem.lower()
        current = index.get(key)
        if current is None or rank[ext] < rank[current.suffix.lower()]:
            index[key] = entry
    return index


def _unique_names(names: list[str]) -> list[str]:
    """Deduplicate names and sort them case-insensitively."""
    return sorted(set(names), key=lambda n: (n.lower(), n))


def available_datasets(data_dir: str | os.PathLike | None = None) -> list[str]:
    """List the names :func:`load_dataset` accepts.

    Parameters
    ----------
    data_dir : str or os.PathLike, optional
        Directory with data files; defaults to ``$BALLAD_DATA_DIR`` if set.

    Returns
    -------
    list of str
        Built-in names plus file stems in the data directory, sorted; a file named like a
        built-in but not in lower case (``WDBC.npz``) is listed beside it.
    """
    names = list(BUILTIN_DATASETS)
    directory = _resolve_data_dir(data_dir)
    if directory is not None:
        names.extend(path.stem for path in _index_dir(directory).values())
    return _unique_names(names)


def _check_file(path: Path) -> Path:
    """``path`` if it is a data file of a supported format, else a clear error."""
    if path.suffix.lower() not in _LOADERS:
        raise ValueError(
            f"{path}: unsupported file extension {path.suffix!r}; "
            f"expected one of {list(_LOADERS)}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} does not exist")
    return path


def _load_file(path: Path) -> Dataset:
    X, y = _LOADERS[path.suffix.lower()](path)
    return Dataset(path.stem, *validate_xy(X, y, path.stem))


def _looks_like_path(source: str | os.PathLike) -> bool:
    if isinstance(source, os.PathLike):
        return True
    text = str(source)
    if "/" in text or os.sep in text or (os.altsep and os.altsep in text):
        return True
    return Path(text).suffix.lower() in _LOADERS


def _find_by_name(name: str, data_dir: str | os.PathLike | None) -> Path:
    """The file of data set ``name`` in the data directory (stems match in any case)."""
    directory = _resolve_data_dir(data_dir)
    if directory is None:
        raise FileNotFoundError(
            f"unknown data set {name!r}: it is not a built-in {list(BUILTIN_DATASETS)} and "
            f"no data directory is configured (pass data_dir or set ${DATA_DIR_ENV})"
        )
    index = _index_dir(directory)
    path = index.get(name.lower())
    if path is None:
        names = available_datasets(directory)
        listed = ", ".join(names[:_MAX_LISTED])
        if len(names) > _MAX_LISTED:
            listed += f", ... ({len(names)} in total)"
        raise FileNotFoundError(
            f"unknown data set {name!r}: no file {name}{{{','.join(_LOADERS)}}} in "
            f"{str(directory)!r}. Available: {listed}"
        )
    return path


def data_file(source: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Path:
    """The file a path or a name refers to, as :func:`load_dataset` finds it: a path as
    given (a bare file name also in the data directory), a name by its stem in the data
    directory. Raises :func:`load_dataset`'s errors for unknown names and missing files."""
    if _looks_like_path(source):
        path = Path(source).expanduser()
        if not path.exists() and path.parent == Path("."):
            directory = _resolve_data_dir(data_dir)
            if directory is not None and (directory / path.name).exists():
                path = directory / path.name
        return _check_file(path)
    return _find_by_name(str(source), data_dir)


def dataset_name(source: Dataset | tuple[Any, Any] | str | os.PathLike,
                 data_dir: str | os.PathLike | None = None) -> str:
    """The name :func:`load_dataset` gives ``source``, found without reading the data.

    It is the data set's one key in results: ``"glass"``, ``"Glass"`` and
    ``"data/Glass.npz"`` all name ``Glass`` (the file's stem); a built-in keeps its name, a
    ``Dataset`` its own, an ``(X, y)`` tuple is ``"arrays"``.
    """
    if isinstance(source, Dataset):
        return source.name
    if isinstance(source, tuple):
        return "arrays"
    if isinstance(source, str) and source in _BUILTIN_MAKERS:
        return source
    return data_file(source, data_dir).stem


def load_dataset(
    source: Dataset | tuple[Any, Any] | str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
) -> Dataset:
    """Load and validate a data set.

    Parameters
    ----------
    source : Dataset, tuple, str or os.PathLike
        A :class:`Dataset` (validated and returned), an ``(X, y)`` tuple (named
        ``"arrays"``), a path to a ``.npz``/``.mat``/``.arff``/``.csv`` file, or a name.
        A lower-case built-in name (``"toy"``, ``"wdbc"``) is the built-in; any other name
        is a file stem in the data directory, matched case-insensitively, so ``"WDBC"`` is
        the benchmark file; npz > mat > arff > csv when stems collide.
    data_dir : str or os.PathLike, optional
        Directory searched for names; defaults to ``$BALLAD_DATA_DIR``.
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
        If the data is malformed (see :func:`validate_xy`) or the file cannot be parsed.
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
    if isinstance(source, str) and source in _BUILTIN_MAKERS:
        return _BUILTIN_MAKERS[source](seed)
    return _load_file(data_file(source, data_dir))
