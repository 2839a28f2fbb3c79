"""A seeded, stratified sample of a data set's rows, only when the user asks for one.

Loading never subsamples: a data set plays at its full size. A smaller one is asked for by
name, ``"<name>@<rows>"`` or ``"<name>@<rows>:<seed>"`` (``adbench/cover@20000``): the name
is the data set's key in every result, so the sample is recorded wherever the data set is.
The rows are drawn per class without replacement from ``numpy.random.default_rng(seed)``
(seed 0 unless named), keeping the contamination up to rounding and at least one anomaly,
in the file's order.
"""

from __future__ import annotations

import re
from pathlib import PurePath

import numpy as np

from ballad_env.data.formats import DATA_SUFFIXES
from ballad_env.data.validation import Dataset

_AT = re.compile(r"^(?P<base>.+)@(?P<spec>[^@/\\]*)$")
_SPEC = re.compile(r"^(?P<rows>\d+)(?::(?P<seed>\d+))?$")


def parse_sample(source: str) -> tuple[str, int, int] | None:
    """``(name, rows, seed)`` of a sample's name ``"<name>@<rows>[:<seed>]"``, else ``None``.

    A name with an ``@`` whose last part is not ``<rows>`` or ``<rows>:<seed>`` (whole
    numbers) is a ``ValueError`` saying so, unless it is a data file's name
    (``scores@2024.csv``), which is a file like any other.
    """
    match = _AT.match(source)
    if match is None:
        return None
    spec = _SPEC.match(match["spec"])
    if spec is None:
        if PurePath(source).suffix.lower() in DATA_SUFFIXES:
            return None
        raise ValueError(
            f"{source!r}: the part after '@' is {match['spec']!r}, but a sample is named "
            f"<name>@<rows> or <rows>:<seed>, whole numbers (e.g. "
            f"{match['base'] + '@100'!r} or {match['base'] + '@100:1'!r}); drop the '@' part "
            "for the whole data set")
    return match["base"], int(spec["rows"]), int(spec["seed"] or 0)


def sample_name(name: str, rows: int, seed: int = 0) -> str:
    """The name of a sample of ``rows`` rows of ``name`` drawn with ``seed``."""
    return f"{name}@{rows}" + (f":{seed}" if seed else "")


def sample_rows(dataset: Dataset, rows: int, seed: int = 0) -> Dataset:
    """``rows`` rows of ``dataset``, stratified by class and drawn with ``seed``.

    Anomalies get ``round(rows * contamination)`` of the rows (at least one when the data
    has any), normals the rest. A sample as large as the data set or larger is refused:
    use the full data set.
    """
    n = dataset.n_samples
    if rows < 2 or rows >= n:
        raise ValueError(f"{dataset.name}: a sample of {rows} rows needs 2 <= rows < {n} (its "
                         f"size); use {dataset.name!r} itself for the full data set")
    anomalies = np.flatnonzero(dataset.y == 1)
    normals = np.flatnonzero(dataset.y == 0)
    n_anomalies = min(anomalies.size, max(int(np.floor(rows * dataset.contamination + 0.5)),
                                          1 if anomalies.size else 0))
    n_normals = rows - n_anomalies
    if n_normals > normals.size:
        n_anomalies, n_normals = rows - normals.size, normals.size
    rng = np.random.default_rng(seed)
    chosen = np.sort(np.concatenate([rng.choice(anomalies, n_anomalies, replace=False),
                                     rng.choice(normals, n_normals, replace=False)]))
    X = np.ascontiguousarray(dataset.X[chosen])
    return Dataset(sample_name(dataset.name, rows, seed), X, dataset.y[chosen].copy())


__all__ = ["parse_sample", "sample_name", "sample_rows"]
