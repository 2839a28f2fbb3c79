"""Label-free meta-features of a data set (MetaOD-style: statistics and landmarkers) and
their grouped ablation in the safe split's cross validation.

MetaOD (Zhao, Rossi and Akoglu, NeurIPS 2021) describes a new data set without labels by
statistics of its features and by *landmarkers*: what quick detectors' scores look like on
it. :func:`meta_features` computes a compact set of both on a data set's rows (the labels
are never read), once per data set: the rows are scaled per feature (median, IQR) and at
most :data:`MAX_ROWS` of them are drawn with a seeded generator.

- statistics: log(1 + the mean |skewness|) and the mean log(1 + |excess kurtosis|) of the
  features, the first principal component's share of the variance, the mean |correlation|
  between features;
- landmarkers: an isolation forest's and a 5-nearest-neighbour distance's scores: each
  one's skewness and tail ratio ((q99 - q50) / (q50 - q1)), both on a log scale
  (sign(v) log(1 + |v|): a few data sets have ratios in the hundreds), their Spearman
  agreement and the overlap of their top 5%.

:func:`ablation` adds a group of them (and their products with the cost ratio) to the
safe split's features and reruns its grouped cross validation: a group is kept only if the
safety rule's choice takes more of the training folds' room with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.split_allocators import feature_vector

#: Rows read per data set (a seeded sample above this).
MAX_ROWS = 1000
#: The meta-features, by group.
GROUPS = {"statistics": ("abs_skew", "log_kurtosis", "pc1_share", "abs_correlation"),
          "landmarkers": ("iforest_skew", "iforest_tail", "knn_skew", "knn_tail",
                          "agreement", "top_overlap")}
NAMES = (*GROUPS["statistics"], *GROUPS["landmarkers"])


def _skew(v: np.ndarray) -> float:
    sd = v.std()
    return float(np.mean(((v - v.mean()) / sd) ** 3)) if sd > 0 else 0.0


def _tail(v: np.ndarray) -> float:
    q1, q50, q99 = np.quantile(v, [0.01, 0.5, 0.99])
    return float((q99 - q50) / (q50 - q1)) if q50 > q1 else 0.0


def _log(v: float) -> float:
    """sign(v) log(1 + |v|)."""
    return float(np.sign(v) * np.log1p(abs(v)))


def _ranks(v: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(v)).astype(float)


def scaled_sample(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """At most :data:`MAX_ROWS` rows of ``X`` (seeded), each feature centred on its median
    and scaled by its IQR (by its sd where the IQR is 0; constant features dropped)."""
    X = np.asarray(X, dtype=float)
    if len(X) > MAX_ROWS:
        X = X[np.random.default_rng(seed).choice(len(X), MAX_ROWS, replace=False)]
    q25, q50, q75 = np.quantile(X, [0.25, 0.5, 0.75], axis=0)
    width = np.where(q75 > q25, q75 - q25, X.std(axis=0))
    keep = width > 0
    return np.asarray((X[:, keep] - q50[keep]) / width[keep])


def meta_features(X: np.ndarray, seed: int = 0) -> dict[str, float]:
    """The label-free meta-features of the rows ``X`` (the module docstring)."""
    from sklearn.ensemble import IsolationForest
    from sklearn.neighbors import NearestNeighbors

    U = scaled_sample(X, seed)
    n, d = U.shape
    if d == 0:
        return dict.fromkeys(NAMES, 0.0)
    sd = U.std(axis=0)
    Z = (U - U.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    kurt = np.mean(Z**4, axis=0) - 3.0
    eig = np.linalg.eigvalsh(np.cov(Z, rowvar=False)) if d > 1 else np.array([1.0])
    corr = np.corrcoef(Z, rowvar=False) if d > 1 else np.eye(1)
    off = np.abs(corr[~np.eye(d, dtype=bool)]) if d > 1 else np.zeros(1)
    forest = IsolationForest(n_estimators=50, random_state=seed).fit(U)
    iforest = -forest.score_samples(U)
    distances, _ = NearestNeighbors(n_neighbors=min(6, n)).fit(U).kneighbors(U)
    knn = distances[:, -1]
    top = max(1, int(round(0.05 * n)))
    overlap = len(set(np.argsort(-iforest)[:top]) & set(np.argsort(-knn)[:top])) / top
    agreement = np.corrcoef(_ranks(iforest), _ranks(knn))[0, 1]
    return {"abs_skew": _log(float(np.mean(np.abs([_skew(c) for c in Z.T])))),
            "log_kurtosis": float(np.mean(np.log1p(np.abs(kurt)))),
            "pc1_share": float(eig.max() / max(eig.sum(), 1e-12)),
            "abs_correlation": float(np.nan_to_num(off).mean()),
            "iforest_skew": _log(_skew(iforest)), "iforest_tail": _log(_tail(iforest)),
            "knn_skew": _log(_skew(knn)), "knn_tail": _log(_tail(knn)),
            "agreement": float(np.nan_to_num(agreement)), "top_overlap": float(overlap)}


def table(names: Sequence[str]) -> pd.DataFrame:
    """The meta-features of each named data set or task (rows: names)."""
    from ballad_env.data import load_dataset

    return pd.DataFrame({name: meta_features(load_dataset(name).X) for name in names}).T


def with_meta(arrays: Mapping[str, np.ndarray], rows: pd.DataFrame, meta: pd.DataFrame,
              names: Sequence[str]) -> dict[str, np.ndarray]:
    """``tasks_fit.design`` arrays with the named meta-features and their products with the
    cost ratio appended to the gain model's features (and the meta-features to the traits
    the distance check reads)."""
    M = meta.loc[list(rows["dataset"]), list(names)].to_numpy(dtype=float)
    ratio = np.array([feature_vector(o, ["cost_ratio"])[0] for o in rows["obs"]])
    return {**arrays, "X": np.hstack([arrays["X"], M, M * ratio[:, None]]),
            "T": np.hstack([arrays["T"], M])}


def ablation(real: pd.DataFrame, tasks: pd.DataFrame, meta: pd.DataFrame,
             grid: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """The safety rule's choice (``tasks_fit.choose_safely``) of the grouped cross
    validation with no meta-features, each group, and all of them."""
    from scripts.studies.allocation import tasks_fit as F

    variants = {"none": (), **{k: v for k, v in GROUPS.items()}, "all": NAMES}
    out = []
    for label, names in variants.items():
        extra = None if not names else (lambda a, r, n=names: with_meta(a, r, meta, n))
        cv = F.cross_validate(real, tasks, grid, extra=extra)
        best = F.choose_safely(cv)
        settings = {k: best[k] for k in grid} if best["candidate"] != "all-in-lr" else {}
        out.append({"meta-features": label, "n": len(names), "choice": best["candidate"],
                    "settings": settings,
                    **{f"cv {lv}": best[f"fold {lv}"] for lv in F.LEVEL_RATIO},
                    **{f"lower {lv}": best[f"lower {lv}"] for lv in F.LEVEL_RATIO},
                    "cv mean": best["fold mean"]})
    return pd.DataFrame(out)


__all__ = ["GROUPS", "MAX_ROWS", "NAMES", "ablation", "meta_features", "scaled_sample",
           "table", "with_meta"]
