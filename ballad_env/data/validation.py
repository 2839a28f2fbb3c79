"""What every data set is checked into: a :class:`Dataset` of float64 features and int8
labels (1 = anomaly, 0 = normal), by :func:`validate_xy`, whatever its source."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np


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
    if np.iscomplexobj(X):  # converting would drop the imaginary parts with a mere warning
        raise ValueError(f"{name}: X holds complex numbers; features must be real: pass "
                         "X.real, or the real and imaginary parts as columns of their own")
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


__all__ = ["DataWarning", "Dataset", "validate_xy"]
