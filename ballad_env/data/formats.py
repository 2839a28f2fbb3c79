"""Data file formats: one loader per file ending, each ``path -> (X, y)`` before validation.

ADBench ``.npz`` (arrays ``X`` and ``y``), ODDS MATLAB ``.mat`` (variables ``X`` and ``y``),
DAMI ``.arff`` (an ``outlier`` yes/no column; an ``id`` column is dropped) and ``.csv`` (a
header row with a label column: the first of ``label``, ``y``, ``outlier``, ``class``,
``is_anomaly`` present, in any case; labels 0/1, yes/no or true/false; every other column a
number; empty, ``?``, ``NA``, ``NaN``, ``null`` or ``none`` cells are missing values, which
validation refuses). A file a parser cannot read (empty, truncated, corrupted, another
format) is a ``ValueError`` that names the file and what is wrong, never the parser's own
exception.
"""

from __future__ import annotations

import csv
import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ballad_env.data.validation import DataWarning
from ballad_env.files import (
    array_ceiling,
    check_array_bytes,
    npz_array_bytes,
    open_regular,
    zip_directory_problem,
)

_CSV_LABEL_COLUMNS = ("label", "y", "outlier", "class", "is_anomaly")
_CSV_MISSING = frozenset({"", "?", "na", "nan", "n/a", "null", "none"})
_TRUE_WORDS = frozenset({"yes", "true", "y", "t"})
_FALSE_WORDS = frozenset({"no", "false", "n", "f"})


def _unreadable(path: Path, kind: str, err: BaseException, advice: str) -> ValueError:
    """A file that its loader cannot parse (empty, truncated, corrupted or another format)."""
    size = path.stat().st_size if path.is_file() else 0
    detail = "it is empty (0 bytes)" if size == 0 else f"{type(err).__name__}: {err}"
    return ValueError(f"{path}: not a readable {kind} file ({detail}). {advice}")


_NPZ_ADVICE = "Save the data with numpy.savez(path, X=X, y=y)."


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read arrays ``X`` and ``y`` from an ADBench-style ``.npz`` file (its zip directory
    bounded before numpy parses it: ``ballad_env.files.zip_directory_problem``)."""
    try:
        with open_regular(path, "data file") as handle:
            problem = zip_directory_problem(handle)
        if problem:
            raise ValueError(f"{problem}; refused before reading it")
        archive = np.load(path, allow_pickle=False)
    except Exception as err:  # a damaged file fails in many ways: BadZipFile, EOFError, ...
        raise _unreadable(path, ".npz", err, _NPZ_ADVICE) from err
    if not isinstance(archive, np.lib.npyio.NpzFile):  # a single .npy array
        raise _unreadable(path, ".npz", TypeError("it holds one array, not the arrays X and y"),
                          _NPZ_ADVICE)
    with archive:
        try:
            nbytes = npz_array_bytes(archive)  # from the headers, nothing inflated
        except Exception as err:  # a damaged member header: BadZipFile, ValueError, ...
            raise _unreadable(path, ".npz", err, _NPZ_ADVICE) from err
        check_array_bytes(path, nbytes, "arrays")
        missing = [key for key in ("X", "y") if key not in archive.files]
        if missing:
            raise ValueError(
                f"{path}: .npz file lacks array(s) {missing}; found {sorted(archive.files)}"
            )
        try:
            return archive["X"], archive["y"]
        except Exception as err:  # truncated, pickled, a bad CRC, zlib.error in a member, ...
            raise _unreadable(path, ".npz", err, _NPZ_ADVICE) from err


def _load_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read keys ``X`` and ``y`` from an ODDS-style MATLAB ``.mat`` file."""
    import scipy.io
    import scipy.sparse

    from ballad_env.data.mat5 import mat5_problem

    advice = "Save the data with scipy.io.savemat(path, {'X': X, 'y': y})."
    check_array_bytes(path, path.stat().st_size, "file")
    raw = path.read_bytes()
    problem = mat5_problem(raw, array_ceiling())
    if problem:  # scipy's reader could crash the process on it (segmentation fault)
        raise _unreadable(path, "MATLAB .mat", ValueError(problem), advice)
    _check_mat_shapes(path, raw, advice)
    try:
        contents = scipy.io.loadmat(io.BytesIO(raw))  # the bytes checked, read once
    except NotImplementedError as exc:  # raised by scipy for v7.3 (HDF5) files
        raise ValueError(
            f"{path}: MATLAB v7.3 (HDF5) files are not supported. Re-save it in MATLAB "
            "with save(..., '-v7'), or convert it to .npz with arrays X and y "
            f"(for example with h5py). Details: {exc}"
        ) from exc
    except Exception as exc:  # MatReadError, or IndexError for a file under 128 bytes, ...
        raise _unreadable(path, "MATLAB .mat", exc, advice) from exc
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


def _check_mat_shapes(path: Path, raw: bytes, advice: str) -> None:
    """The dense size of ``X`` and ``y`` from the variables' headers (a sparse matrix of a
    few bytes may declare 25,000 x 25,000), checked before scipy reads any data."""
    import scipy.io

    try:
        variables = scipy.io.whosmat(io.BytesIO(raw))
    except NotImplementedError:
        return  # v7.3 (HDF5): loadmat refuses it, with its own message
    except Exception as exc:  # a header scipy cannot list
        raise _unreadable(path, "MATLAB .mat", exc, advice) from exc
    nbytes = 0
    for name, shape, _ in variables:
        if name in ("X", "y"):
            count = 1
            for extent in shape:
                count *= int(extent)
            nbytes += 8 * count  # read, then made dense, as float64
    check_array_bytes(path, nbytes, "variables X and y (dense)")


def _check_text_size(path: Path) -> None:
    """A text file's parse takes up to about 16 bytes of memory per byte of file (Python
    strings and lists): checked from the file's size before it is read."""
    check_array_bytes(path, 16 * path.stat().st_size, "values, parsed from text,")


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

    _check_text_size(path)
    try:
        data, meta = arff.loadarff(path)
    except Exception as exc:  # scipy raises several exception types for bad files
        raise ValueError(f"{path}: could not parse ARFF file: {type(exc).__name__}: {exc}"
                         ) from exc
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


def _csv_text(path: Path) -> str:
    """The file's text, decoded as UTF-8 (a byte-order mark is dropped)."""
    _check_text_size(path)
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start} "
            "cannot be decoded). Save the CSV file as UTF-8, or convert it with e.g. "
            "iconv -f latin1 -t utf-8.") from err


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header (stripped) and the rows (line number first) of a CSV file."""
    text = _csv_text(path)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    try:
        lines = list(csv.reader(io.StringIO(text, newline=""), dialect))
    except csv.Error as err:  # e.g. a quote left open at the end of the file
        raise ValueError(f"{path}: not a readable CSV file (csv.Error: {err})") from err
    if not lines:
        raise ValueError(f"{path}: empty CSV file (no header row)")
    return [h.strip() for h in lines[0]], lines[1:]


def _load_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read a ``.csv`` file with a header row and a label column."""
    header, lines = _csv_rows(path)
    lowered = [h.lower() for h in header]
    label_idx = next((lowered.index(c) for c in _CSV_LABEL_COLUMNS if c in lowered), None)
    if label_idx is None:
        raise ValueError(
            f"{path}: no label column; expected one of {list(_CSV_LABEL_COLUMNS)} "
            f"(case-insensitive), header is {header}"
        )
    twice = [i for i, name in enumerate(lowered) if name == lowered[label_idx]]
    if len(twice) > 1:  # the second would silently be read as a feature
        raise ValueError(f"{path}: the header names the label column {header[label_idx]!r} "
                         f"{len(twice)} times (columns {', '.join(str(i + 1) for i in twice)}); "
                         "keep one label column")
    feature_idx = [i for i in range(len(header)) if i != label_idx]
    rows: list[list[float]] = []
    raw_labels: list[str] = []
    for line_no, row in enumerate(lines, start=2):
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
    X = _without_row_index(X, header, feature_idx, path)
    parsed = {text: _csv_label(text) for text in set(raw_labels)}
    unknown = sorted(text for text, value in parsed.items() if value is None)
    if unknown:
        raise ValueError(
            f"{path}: labels must be 0 (normal) or 1 (anomaly) (or yes/no, true/false) "
            f"in column {header[label_idx]!r}; found {unknown[:10]}"
        )
    y = np.array([parsed[text] for text in raw_labels], dtype=np.float64)
    return X, y


def _without_row_index(X: np.ndarray, header: list[str], feature_idx: list[int],
                       path: Path) -> np.ndarray:
    """``X`` without a pandas row index saved as its first column (``df.to_csv(path)``
    without ``index=False``: an unnamed first column, or pandas's ``Unnamed: 0``, holding
    0, 1, ..., n-1), which would otherwise be read as a feature; a ``DataWarning`` says so."""
    if not feature_idx or feature_idx[0] != 0 or not len(X):
        return X
    name = header[0].strip()
    if (name and not name.startswith("Unnamed: 0")) or \
            not np.array_equal(X[:, 0], np.arange(len(X))):
        return X
    warnings.warn(f"{path}: its first column ({name or 'unnamed'}) is a row index 0..{len(X) - 1}"
                  " (pandas's to_csv without index=False), not a feature: dropped. Save with "
                  "index=False to silence this.", DataWarning, stacklevel=5)
    return X[:, 1:]


def _is_float(text: str) -> bool:
    try:
        _parse_float(text)
    except ValueError:
        return False
    return True


#: Loaders by file ending, in order of preference when a name matches several files.
#: A new data format is one entry: a function ``path -> (X, y)``.
_LOADERS: dict[str, Callable[[Path], tuple[np.ndarray, np.ndarray]]] = {
    ".npz": _load_npz, ".mat": _load_mat, ".arff": _load_arff, ".csv": _load_csv}
#: The file endings of data files, in order of preference.
DATA_SUFFIXES = tuple(_LOADERS)


def read_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of a data file as its format's loader reads them (not yet validated)."""
    return _LOADERS[path.suffix.lower()](path)


__all__ = ["DATA_SUFFIXES", "read_file"]
