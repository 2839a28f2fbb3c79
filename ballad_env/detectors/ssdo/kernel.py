"""SSDO's kernel: the width eta and the sums of w(x, z) = 2^(-(|x - z| / eta)^2) over labels.

See ``docs/method.md``, Detector, and ``docs/scale.md`` for the fast paths: a sampled eta
and float32 kernel sums (``KernelRows``) on large training sets. Pure array code, with no
detector or prior in it: the kernel sums are the label terms of SSDO's posterior.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ballad_env.compute import episode_threads, thread_limit
from ballad_env.data import DataWarning
from ballad_env.detectors.ssdo.kernel_near import (
    EXP_FLOOR,
    KERNEL_PAIRS,
    NearRows,
    block_sums,
    near_sums,
)

_CHUNK_ELEMENTS = 262_144  # one block of pairwise distances: 2 MiB, cache-sized

#: Training sets up to this size take the exact paths by default (every point's neighbour
#: distance for eta, float64 kernel sums); larger ones the fast paths (``docs/scale.md``).
#: Every benchmark data set is below it (the largest, KDDCup99, has |D| = 19,245).
EXACT_MAX_TRAIN = 20_000
#: Query points of the sampled eta above ``EXACT_MAX_TRAIN`` (about 1% off eta).
ETA_SAMPLE_DEFAULT = 2_000
KERNEL_DTYPES = ("float64", "float32")
#: Where the kernel sums and the sampled eta's neighbour search run: numpy (this module) or
#: torch (``ballad_env.detectors.ssdo.kernel_torch``, on a GPU when there is one; an optional
#: extra).
KERNEL_BACKENDS = ("numpy", "torch")
#: float32 kernel sums form the exponent in float32 while its rounding error, estimated as
#: eps32 |ln 2 / eta^2| (max |x - c|^2 + max |z - c|^2), stays below this; else in float64
#: (about 30% slower at d = 10, 70% at d = 100). Measured errors are 0.3 to 1 times it.
_F32_EXPONENT_ERROR = 1e-5


def kernel_width(X: np.ndarray, k: int = 30, sample: int = 0,
                 rng: np.random.Generator | None = None, backend: str = "numpy",
                 device: str | None = None) -> float:
    """eta: harmonic mean over X of each point's distance to its k-th neighbour (itself excluded).

    Zero distances are replaced by the smallest positive one; constant data gives 1.
    ``sample = 0`` (or >= len(X)) uses every point: exact. ``sample = m`` uses m points drawn
    by ``rng``, each searched against all of X: an estimate (about 1% off with m = 2,000,
    ``docs/scale.md``) in O(m n) instead of O(n^2). Not with exact duplicates, though: the
    smallest positive distance the zeros take is seen only by the exact path, so a sampled
    point with k duplicates gives a ``DataWarning``.

    ``backend="torch"`` runs the sampled path's neighbour search on torch ``device`` when
    it is a GPU (``kernel_torch.nearest_candidates``, in float64 as scikit-learn's: in
    float32 the rounding of |x|^2 + |z|^2 - 2 x.z hides the small distances between
    near-duplicates, and eta moved on smtp); the exact path always runs here.
    """
    n = X.shape[0]
    k = min(k, n - 1)
    if k < 1:
        return 1.0
    if 0 < sample < n:
        kth = _sampled_kth_distances(X, k, sample, rng or np.random.default_rng(), backend,
                                     device)
        if np.any(kth == 0):
            warnings.warn(
                f"eta from a sample of {sample} training points: {int(np.sum(kth == 0))} of "
                f"them have {k} or more exact duplicates. Their zero distance counts as the "
                "smallest positive one in all of D, which a sample cannot see, so eta may be "
                "far off (on KDDCup99: 2.3 times the exact value). Use eta_sample=0 for the "
                "exact eta.", DataWarning, stacklevel=2)
    else:
        from sklearn.neighbors import NearestNeighbors  # slow to import; replay never needs it

        dist, _ = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)
        # Column 0 is the point itself (or a duplicate at distance 0, which is the same
        # distance): the k-th neighbour other than itself is column k.
        kth = dist[:, k]
    positive = kth[kth > 0]
    if positive.size == 0:
        return 1.0
    kth = np.where(kth > 0, kth, positive.min())
    return float(kth.size / np.sum(1.0 / kth))


def _sampled_kth_distances(X: np.ndarray, k: int, sample: int, rng: np.random.Generator,
                           backend: str = "numpy", device: str | None = None) -> np.ndarray:
    """The k-th neighbour distances of ``sample`` random points of X, among all of X.

    A brute-force search finds the k + 1 nearest candidates (fast, but its distances come
    from |x|^2 + |z|^2 - 2 x.z and are off by rounding, so a duplicate is not at distance 0);
    the distances to them are then recomputed as |x - z|, which is 0 for duplicates.
    With ``backend="torch"`` on a GPU the candidates come from the same search there; on
    a CPU scikit-learn's search stays (torch's top-k there took 3 times as long on smtp).
    """
    queries = X[np.sort(rng.choice(X.shape[0], size=sample, replace=False))]
    on_device = None
    if backend == "torch":
        from ballad_env.detectors.ssdo.kernel_torch import resolve_device

        on_device = resolve_device(device)
    if on_device is not None and on_device != "cpu":
        from ballad_env.detectors.ssdo.kernel_torch import nearest_candidates

        idx = nearest_candidates(X, queries, k + 1, on_device)
    else:
        from sklearn.neighbors import NearestNeighbors  # slow to import; replay never needs it

        _, idx = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X).kneighbors(
            queries)
    kth = np.empty(sample)
    rows = max(1, _CHUNK_ELEMENTS // ((k + 1) * X.shape[1]))
    for start in range(0, sample, rows):
        block = slice(start, start + rows)
        exact = np.sqrt(np.sum((X[idx[block]] - queries[block, None, :]) ** 2, axis=2))
        kth[block] = np.sort(exact, axis=1)[:, k]
    return kth


def _in_blocks(n: int, rows: int, work: Callable[[int, int], None]) -> None:
    """``work(start, stop)`` on the row blocks [0, rows), [rows, 2 rows), ... of n rows.

    With ``episode_threads()`` above 1, consecutive blocks are shared among that many threads
    (numpy releases the GIL in its matrix products and exp); the blocks, and so the results,
    are the same either way.
    """
    starts = range(0, n, rows)
    threads = min(episode_threads() or 1, len(starts))
    if threads <= 1:
        for start in starts:
            work(start, min(n, start + rows))
        return

    def stripe(part: int) -> None:
        for start in starts[part::threads]:
            work(start, min(n, start + rows))

    # The threads share the cores: BLAS runs one thread each (and concurrent calls into a
    # multithreaded OpenBLAS are not safe). A pool per call leaves no idle threads to a fork.
    with thread_limit(1), ThreadPoolExecutor(threads) as pool:
        list(pool.map(stripe, range(threads)))


def kernel_sums(
    X: np.ndarray, X_labeled: np.ndarray, y_labeled: np.ndarray, eta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Sums of w(x, z) = 2^(-(|x - z| / eta)^2) over labeled anomalies (da) and normals (dn).

    Vectorised over cache-sized row blocks, in place, so memory stays bounded on large
    data sets; one matrix product yields both sums.
    """
    n, n_lab = X.shape[0], X_labeled.shape[0]
    sums = np.zeros((n, 2))
    if n_lab == 0:
        return sums[:, 0], sums[:, 1]
    is_anomaly = np.asarray(y_labeled).ravel() == 1
    indicator = np.column_stack([is_anomaly, ~is_anomaly]).astype(np.float64)
    # log2 w = -|x - z|^2 / eta^2 = scale (|x|^2 + |z|^2 - 2 x.z), computed in natural log.
    scale = -np.log(2.0) / eta**2
    scaled_lab = scale * np.einsum("ij,ij->i", X_labeled, X_labeled)
    scaled_all = scale * np.einsum("ij,ij->i", X, X)
    cross = (-2.0 * scale) * X_labeled.T

    def block(start: int, stop: int) -> None:
        w = X[start:stop] @ cross
        w += scaled_all[start:stop, None]
        w += scaled_lab[None, :]
        # Rounding can make a squared distance slightly negative (exponent > 0): clip at 0.
        # Far pairs: exp below -700 leaves its fast path (subnormals, underflow) while the
        # kernel is worth nothing next to the prior there: clip at -700 (w ~ 1e-304).
        np.clip(w, EXP_FLOOR, 0.0, out=w)
        np.exp(w, out=w)
        sums[start:stop] = w @ indicator

    _in_blocks(n, max(1, _CHUNK_ELEMENTS // n_lab), block)
    return sums[:, 0].copy(), sums[:, 1].copy()


class KernelRows:
    """Points whose label sums SSDO keeps (D, or V and T together), prepared once.

    ``dtype="float64"`` (exact) computes :func:`kernel_sums` as it always has. ``"float32"``
    centres the rows on the training mean ``center`` and appends their scaled squared norms
    and a one, so that one matrix product with the labels' side gives the exponent
    ln w = scale (|x|^2 + |z|^2 - 2 x.z); exp and the sums then run in float32, about 4 times
    faster, within about 1e-5 of the float64 sums relative to 1 + da + dn, mostly within
    1e-6 (``docs/scale.md``). The exponent itself is formed in float32 only while its
    rounding, estimated from the data's spread around the centre relative to eta, stays
    below 1e-5; otherwise (a kernel narrow next to the data's spread) in float64.

    ``pairs="near"`` orders the rows into leaves of a median split (``kernel_near.NearRows``,
    the augmented rows held in that order, built here on the numpy backend and for either
    dtype) and computes each round only the (leaf, label group) blocks close enough for a
    weight that exp does not round to 0: the same sums up to their order of summation.

    ``backend="torch"`` keeps the same augmented rows (in float64 for ``dtype="float64"``)
    on torch ``device`` (a resolved name: ``kernel_torch.resolve_device``) and computes the
    sums there (``kernel_torch.DeviceRows``).

    Read-only once built: episodes started from one cached reset share it.
    """

    def __init__(self, X: np.ndarray, eta: float, dtype: str = "float64",
                 center: np.ndarray | None = None, label_spread: float | None = None,
                 backend: str = "numpy", device: str | None = None, pairs: str = "all"
                 ) -> None:
        if dtype not in KERNEL_DTYPES:
            raise ValueError(f"unknown kernel dtype {dtype!r}: use one of {KERNEL_DTYPES}")
        if backend not in KERNEL_BACKENDS:
            raise ValueError(f"unknown kernel backend {backend!r}: use one of "
                             f"{KERNEL_BACKENDS}")
        check_pairs(pairs, backend)
        self.X = np.asarray(X, dtype=np.float64)
        self.eta = float(eta)
        self.dtype = dtype
        self.backend = backend
        self.device = device
        self.pairs = pairs
        self.center = (np.zeros(self.X.shape[1]) if center is None
                       else np.asarray(center, dtype=np.float64))
        self.augmented: np.ndarray | None = None
        self.spread: float | None = None  # augmented: the largest |x - center|^2 of the rows
        self.device_rows: Any = None  # torch: kernel_torch.DeviceRows
        self.near: NearRows | None = None
        self.exponent_dtype: np.dtype[Any] = np.dtype(np.float64)
        if dtype == "float64" and backend == "numpy" and pairs == "all":
            return
        scale = -np.log(2.0) / self.eta**2
        centred = self.X - self.center
        norms = np.einsum("ij,ij->i", centred, centred)
        self.spread = float(norms.max()) if norms.size else 0.0
        spread = self.spread + (self.spread if label_spread is None else label_spread)
        error = float(np.finfo(np.float32).eps) * abs(scale) * spread
        self.exponent_dtype = np.dtype(np.float32 if dtype == "float32"
                                       and error <= _F32_EXPONENT_ERROR else np.float64)
        augmented = np.empty((len(centred), centred.shape[1] + 2), dtype=self.exponent_dtype)
        augmented[:, :-2] = centred
        augmented[:, -2] = scale * norms
        augmented[:, -1] = 1.0
        if pairs == "near":  # the rows are kept in the leaves' order only
            self.near = NearRows(centred, augmented)
            return
        self.augmented = augmented
        if backend == "torch":
            from ballad_env.detectors.ssdo.kernel_torch import DeviceRows

            self.device_rows = DeviceRows(self.augmented, device or "cpu")
        self.augmented.setflags(write=False)

    def __deepcopy__(self, memo: dict[int, Any]) -> KernelRows:
        return self  # read-only: forks and copies share it

    @property
    def nbytes(self) -> int:
        """Bytes this object holds beyond the rows it was given (in host memory)."""
        return ((0 if self.augmented is None else int(self.augmented.nbytes))
                + (0 if self.near is None else self.near.nbytes))

    def like(self, X: np.ndarray) -> KernelRows:
        """Other rows, prepared with this object's eta, dtype, centre and backend; labels
        come from these rows (the training set)."""
        return KernelRows(X, self.eta, self.dtype, self.center, self.spread, self.backend,
                          self.device, self.pairs)

    def _label_side(self, X_labeled: np.ndarray) -> np.ndarray:
        """The labels' side of the augmented product: -2 scale (z - c), 1, scale |z - c|^2."""
        scale = -np.log(2.0) / self.eta**2
        centred = np.asarray(X_labeled, dtype=np.float64) - self.center
        labels = np.empty((centred.shape[1] + 2, len(centred)), dtype=self.exponent_dtype)
        labels[:-2] = (-2.0 * scale) * centred.T
        labels[-2] = 1.0  # times the rows' scale |x - c|^2
        labels[-1] = scale * np.einsum("ij,ij->i", centred, centred)  # times the rows' 1
        return labels

    def sums(self, X_labeled: np.ndarray, y_labeled: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        """(da, dn): kernel sums of every row over labeled anomalies and normals."""
        if self.augmented is None and self.near is None:
            return kernel_sums(self.X, X_labeled, y_labeled, self.eta)
        n, n_lab = self.X.shape[0], X_labeled.shape[0]
        sums = np.zeros((n, 2))
        if n_lab == 0 or n == 0:
            return sums[:, 0], sums[:, 1]
        is_anomaly = np.asarray(y_labeled).ravel() == 1
        exp_dtype = np.dtype(np.float64 if self.dtype == "float64" else np.float32)
        indicator = np.column_stack([is_anomaly, ~is_anomaly]).astype(exp_dtype)
        labels = self._label_side(X_labeled)
        if self.device_rows is not None:
            sums = self.device_rows.sums(labels, indicator, exp_dtype, _CHUNK_ELEMENTS)
            return sums[:, 0].copy(), sums[:, 1].copy()
        if self.near is not None:
            sums = self._near_sums(X_labeled, labels, indicator, exp_dtype)
            return sums[:, 0].copy(), sums[:, 1].copy()
        augmented = self.augmented
        assert augmented is not None

        def block(start: int, stop: int) -> None:  # exp_dtype is float32 here
            block_sums(augmented[start:stop], labels, indicator, exp_dtype, sums[start:stop])

        _in_blocks(n, max(1, _CHUNK_ELEMENTS // n_lab), block)
        return sums[:, 0].copy(), sums[:, 1].copy()

    def _near_sums(self, X_labeled: np.ndarray, labels: np.ndarray, indicator: np.ndarray,
                   exp_dtype: np.dtype[Any]) -> np.ndarray:
        """``sums`` over the (leaf, label group) blocks that can hold a weight above 0."""
        assert self.near is not None
        centred = np.asarray(X_labeled, dtype=np.float64) - self.center
        scale = -np.log(2.0) / self.eta**2
        order, starts, near = self.near.near_blocks(centred, scale, exp_dtype)
        return near_sums(self.near, labels, indicator, near, order, starts, exp_dtype,
                         _CHUNK_ELEMENTS, _in_blocks)


def check_pairs(pairs: str, backend: str = "numpy") -> None:
    """A ``ValueError`` naming the fix for an unknown ``pairs`` or near pairs on torch."""
    if pairs not in KERNEL_PAIRS:
        raise ValueError(f"unknown kernel pairs {pairs!r}: use one of {', '.join(KERNEL_PAIRS)}")
    if pairs == "near" and backend != "numpy":
        raise ValueError(f"kernel_pairs='near' runs on the numpy backend only: use "
                         f"kernel_backend='numpy', or kernel_pairs='all' with {backend!r}")


__all__ = ["ETA_SAMPLE_DEFAULT", "EXACT_MAX_TRAIN", "KERNEL_BACKENDS", "KERNEL_DTYPES",
           "KERNEL_PAIRS", "KernelRows", "check_pairs", "kernel_sums", "kernel_width"]
