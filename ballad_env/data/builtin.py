"""The two built-in data sets, made in memory: ``toy`` (two moons plus uniform anomalies)
and ``wdbc`` (scikit-learn's breast-cancer copy, 10 malignant rows kept)."""

from __future__ import annotations

import numpy as np

from ballad_env.data.validation import Dataset, validate_xy

BUILTIN_DATASETS = ("toy", "wdbc")


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


#: The built-in data sets' makers by name: ``maker(seed) -> Dataset``.
BUILTIN_MAKERS = {"toy": make_toy, "wdbc": make_wdbc}


__all__ = ["BUILTIN_DATASETS", "BUILTIN_MAKERS", "make_toy", "make_wdbc"]
