"""SSDO, the semi-supervised detector of BALLAD, on an unsupervised pyod prior.

See ``docs/method.md``, Detector.

SSDO (Vercruyssen et al., ICDM 2018) propagates the few labels of the training set
through a Gaussian-like kernel and blends them with the prior's anomaly probability.
Everything that does not depend on labels (the prior, its quantile, the kernel width
``eta``) is fitted once; label terms are sums over labeled examples and are updated
incrementally as labels arrive.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import pkgutil
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from sklearn.neighbors import NearestNeighbors

from ballad_env.compute import episode_threads, thread_limit
from ballad_env.data import DataWarning
from ballad_env.registry import Registry

_CHUNK_ELEMENTS = 262_144  # one block of pairwise distances: 2 MiB, cache-sized
_EXP_FLOOR = -700.0  # exp is fast down to here (1e-304); below, it slows 5 to 100-fold

#: Training sets up to this size take the exact paths by default (every point's neighbour
#: distance for eta, float64 kernel sums); larger ones the fast paths (``docs/scale.md``).
#: Every benchmark data set is below it (the largest, KDDCup99, has |D| = 19,245).
EXACT_MAX_TRAIN = 20_000
#: Query points of the sampled eta above ``EXACT_MAX_TRAIN`` (about 1% off eta).
ETA_SAMPLE_DEFAULT = 2_000
KERNEL_DTYPES = ("float64", "float32")
#: float32 kernel sums form the exponent in float32 while its rounding error, estimated as
#: eps32 |ln 2 / eta^2| (max |x - c|^2 + max |z - c|^2), stays below this; else in float64
#: (about 30% slower at d = 10, 70% at d = 100). Measured errors are 0.3 to 1 times it.
_F32_EXPONENT_ERROR = 1e-5


def squash(s: np.ndarray | float, threshold: float) -> np.ndarray:
    """Squashing function S_l(s) = 1 - 2^(-(s/l)^2): maps s >= 0 to [0, 1) with S_l(l) = 0.5.

    A threshold of 0 (all reference scores zero) degenerates to the indicator s > 0.
    """
    s = np.asarray(s, dtype=np.float64)
    if threshold <= 0:
        return (s > 0).astype(np.float64)
    return -np.expm1(-np.log(2.0) * (s / threshold) ** 2)


#: How D's prior scores are taken: ``"fitted"`` (pyod's ``decision_scores_``; kNN leaves each
#: point out of its own neighbours) or ``"rescored"`` (``decision_function`` on D, as the
#: published code does: each point is its own nearest neighbour).
TRAIN_SCORINGS = ("fitted", "rescored")
#: Where the squashing threshold sits: ``"exact"``, the (1 - gamma) quantile, or
#: ``"whole-percent"``, the published code's ``np.percentile(S, int((1 - gamma) * 100))``.
SQUASH_QUANTILES = ("exact", "whole-percent")


def squash_threshold(scores: np.ndarray, contamination: float, rule: str = "exact") -> float:
    """The score that squashes to 0.5: the (1 - gamma) quantile of ``scores``, or with
    ``"whole-percent"`` the quantile at the whole percent at or below it (Python's int())."""
    if rule not in SQUASH_QUANTILES:
        raise ValueError(f"unknown squash quantile {rule!r}: use one of "
                         f"{', '.join(SQUASH_QUANTILES)}")
    level = 1.0 - contamination if rule == "exact" else int((1.0 - contamination) * 100) / 100
    return float(np.quantile(scores, level))


#: name -> factory(seed, number of training points) of an unfitted pyod detector.
PriorFactory = Callable[[int | None, int | None], Any]
PRIORS: Registry[PriorFactory] = Registry("prior")


@PRIORS.register("iforest")
def _iforest(seed: int | None, n_samples: int | None) -> Any:
    """The paper's text: IForest with pyod's defaults."""
    from pyod.models.iforest import IForest

    return IForest(random_state=seed)


@PRIORS.register("knn")
def _knn(seed: int | None, n_samples: int | None) -> Any:
    """The authors' code: mean distance to 10 neighbours (fewer on tiny training sets)."""
    from pyod.models.knn import KNN

    neighbours = 10 if n_samples is None else max(1, min(10, n_samples - 1))
    return KNN(n_neighbors=neighbours, method="mean")


_PYOD_SKIPPED_PREFIXES = ("_", "base", "pyg_", "ts_", "audio_")
_PYOD_SKIPPED = frozenset({"combination", "sklearn_base", "gaal_base", "thresholds",
                           "embedding", "so_gaal_new"})
_resolve_lock = threading.Lock()


@cache
def pyod_detector_names() -> tuple[str, ...]:
    """Module names of pyod's tabular detectors (``ecod``, ``copod``, ``lof``, ...), found
    without importing them; each can be named as a prior."""
    spec = importlib.util.find_spec("pyod.models")
    if spec is None or not spec.submodule_search_locations:
        return ()
    names = (module.name for module in pkgutil.iter_modules(spec.submodule_search_locations))
    return tuple(sorted(name for name in names if not name.startswith(_PYOD_SKIPPED_PREFIXES)
                        and name not in _PYOD_SKIPPED))


def _unknown_prior(name: str) -> ValueError:
    others = [n for n in pyod_detector_names() if n not in PRIORS]
    return ValueError(f"unknown prior {name!r}: use one of {', '.join(PRIORS)} or the name of "
                      f"a pyod detector ({', '.join(others)})")


def _pyod_class(name: str) -> type:
    """The detector class of ``pyod.models.<name>`` (``ECOD`` for ``ecod``), checked to work
    as SSDO's prior: importable, buildable with its defaults, and unsupervised."""
    if name not in pyod_detector_names():
        raise _unknown_prior(name)
    try:
        module = importlib.import_module(f"pyod.models.{name}")
    except ImportError as err:
        raise ValueError(f"prior {name!r}: pyod's {name} needs a package that is not "
                         f"installed ({err})") from err
    from pyod.models.base import BaseDetector

    wanted = name.replace("_", "")
    found = [value for value in vars(module).values()
             if isinstance(value, type) and issubclass(value, BaseDetector)
             and value.__module__ == module.__name__
             and value.__name__.lower().replace("_", "") == wanted]
    if not found:
        raise _unknown_prior(name)
    cls: Any = found[0]
    label = inspect.signature(cls.fit).parameters.get("y")
    if label is not None and label.default is inspect.Parameter.empty:
        raise ValueError(f"prior {name!r}: pyod's {cls.__name__} is supervised (its fit needs "
                         "labels); SSDO's prior must learn without labels")
    try:
        cls()
    except TypeError as err:
        raise ValueError(f"prior {name!r}: pyod's {cls.__name__} cannot be built with its "
                         f"defaults ({err}); register a factory for it with "
                         "ballad_env.detector.PRIORS.register") from err
    return cls


def _pyod_factory(cls: type) -> PriorFactory:
    """A prior factory for a pyod class: its defaults, seeded, with at most n - 1 neighbours."""

    def factory(seed: int | None, n_samples: int | None) -> Any:
        detector = cls()
        params = detector.get_params()
        if "random_state" in params:
            detector.set_params(random_state=seed)
        neighbours = params.get("n_neighbors")
        if n_samples is not None and isinstance(neighbours, int) and neighbours >= n_samples:
            detector.set_params(n_neighbors=max(1, n_samples - 1))
        return detector

    factory.__doc__ = f"pyod's {cls.__name__} with its defaults (registered by name on first use)."
    return factory


def prior_factory(name: str) -> PriorFactory:
    """The factory of prior ``name``: a registered one, else the pyod detector of that module
    name (``ecod``, ``copod``, ``lof``, ``hbos``, ...), registered on first use."""
    name = name.lower()
    with _resolve_lock:
        if name not in PRIORS:
            PRIORS.register(name, _pyod_factory(_pyod_class(name)))
        return PRIORS[name]


def check_prior(prior: str | Any) -> None:
    """Raise a clear error unless ``prior`` names a registered prior or a pyod detector, or is
    a pyod-like detector (with ``fit`` and ``decision_function``)."""
    if isinstance(prior, str):
        prior_factory(prior)
    elif not hasattr(prior, "fit") or not hasattr(prior, "decision_function"):
        raise TypeError(f"prior {prior!r} has no fit/decision_function: pass a pyod detector "
                        f"or one of {', '.join(PRIORS)}")
    elif type(prior).__module__.split(".")[0] == "sklearn":
        raise TypeError(
            f"prior {type(prior).__name__} is a scikit-learn estimator, but SSDO needs a pyod "
            "detector: it reads the scores pyod keeps of the training points after fitting "
            "(decision_scores_, larger = more anomalous), which scikit-learn's detectors do not "
            "have (and their scores run the other way). Use pyod's version "
            "(pyod.models.iforest.IForest for IsolationForest, pyod.models.lof.LOF for "
            f"LocalOutlierFactor) or a prior name: {', '.join(PRIORS)}")


def training_scores(prior: Any) -> np.ndarray:
    """A fitted prior's scores of its training points (pyod's ``decision_scores_``, larger =
    more anomalous); a ``DataWarning`` when they all tie, since SSDO then starts from no
    ranking at all."""
    scores = getattr(prior, "decision_scores_", None)
    if scores is None:
        raise TypeError(f"prior {type(prior).__name__} has no decision_scores_ after fit: SSDO "
                        "needs a pyod detector (pyod.models.base.BaseDetector) or a prior name: "
                        f"{', '.join(PRIORS)}")
    raw = np.asarray(scores, dtype=np.float64)
    if raw.size > 1 and np.all(raw == raw[0]):
        warnings.warn(
            f"the {type(prior).__name__} prior scores every training example alike "
            f"({raw[0]:g}), so until labels separate them every test score ties (ROC AUC 0.5). "
            "Typical causes: constant features, or every example repeated at least as often as "
            "the prior has neighbours (kNN: 10).", DataWarning, stacklevel=2)
    return raw


def make_prior(prior: str | Any = "iforest", seed: int | None = None,
               n_samples: int | None = None) -> Any:
    """An unfitted prior: a registered or pyod name (``prior_factory``) or a copy of a given
    detector."""
    check_prior(prior)
    if isinstance(prior, str):
        return prior_factory(prior)(seed, n_samples)
    detector = copy.deepcopy(prior)
    if seed is not None and "random_state" in getattr(detector, "get_params", dict)():
        detector.set_params(random_state=seed)
    return detector


def kernel_width(X: np.ndarray, k: int = 30, sample: int = 0,
                 rng: np.random.Generator | None = None) -> float:
    """eta: harmonic mean over X of each point's distance to its k-th neighbour (itself excluded).

    Zero distances are replaced by the smallest positive one; constant data gives 1.
    ``sample = 0`` (or >= len(X)) uses every point: exact. ``sample = m`` uses m points drawn
    by ``rng``, each searched against all of X: an estimate (about 1% off with m = 2,000,
    ``docs/scale.md``) in O(m n) instead of O(n^2). Not with exact duplicates, though: the
    smallest positive distance the zeros take is seen only by the exact path, so a sampled
    point with k duplicates gives a ``DataWarning``.
    """
    n = X.shape[0]
    k = min(k, n - 1)
    if k < 1:
        return 1.0
    if 0 < sample < n:
        kth = _sampled_kth_distances(X, k, sample, rng or np.random.default_rng())
        if np.any(kth == 0):
            warnings.warn(
                f"eta from a sample of {sample} training points: {int(np.sum(kth == 0))} of "
                f"them have {k} or more exact duplicates. Their zero distance counts as the "
                "smallest positive one in all of D, which a sample cannot see, so eta may be "
                "far off (on KDDCup99: 2.3 times the exact value). Use eta_sample=0 for the "
                "exact eta.", DataWarning, stacklevel=2)
    else:
        dist, _ = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)
        # Column 0 is the point itself (or a duplicate at distance 0, which is the same
        # distance): the k-th neighbour other than itself is column k.
        kth = dist[:, k]
    positive = kth[kth > 0]
    if positive.size == 0:
        return 1.0
    kth = np.where(kth > 0, kth, positive.min())
    return float(kth.size / np.sum(1.0 / kth))


def _sampled_kth_distances(X: np.ndarray, k: int, sample: int,
                           rng: np.random.Generator) -> np.ndarray:
    """The k-th neighbour distances of ``sample`` random points of X, among all of X.

    A brute-force search finds the k + 1 nearest candidates (fast, but its distances come
    from |x|^2 + |z|^2 - 2 x.z and are off by rounding, so a duplicate is not at distance 0);
    the distances to them are then recomputed as |x - z|, which is 0 for duplicates.
    """
    queries = X[np.sort(rng.choice(X.shape[0], size=sample, replace=False))]
    _, idx = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X).kneighbors(queries)
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
        np.clip(w, _EXP_FLOOR, 0.0, out=w)
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

    Read-only once built: episodes started from one cached reset share it.
    """

    def __init__(self, X: np.ndarray, eta: float, dtype: str = "float64",
                 center: np.ndarray | None = None, label_spread: float | None = None) -> None:
        if dtype not in KERNEL_DTYPES:
            raise ValueError(f"unknown kernel dtype {dtype!r}: use one of {KERNEL_DTYPES}")
        self.X = np.asarray(X, dtype=np.float64)
        self.eta = float(eta)
        self.dtype = dtype
        self.center = (np.zeros(self.X.shape[1]) if center is None
                       else np.asarray(center, dtype=np.float64))
        self.augmented: np.ndarray | None = None
        self.spread: float | None = None  # float32: the largest |x - center|^2 of the rows
        if dtype == "float64":
            return
        scale = -np.log(2.0) / self.eta**2
        centred = self.X - self.center
        norms = np.einsum("ij,ij->i", centred, centred)
        self.spread = float(norms.max()) if norms.size else 0.0
        spread = self.spread + (self.spread if label_spread is None else label_spread)
        error = float(np.finfo(np.float32).eps) * abs(scale) * spread
        exponent = np.float32 if error <= _F32_EXPONENT_ERROR else np.float64
        self.augmented = np.empty((len(centred), centred.shape[1] + 2), dtype=exponent)
        self.augmented[:, :-2] = centred
        self.augmented[:, -2] = scale * norms
        self.augmented[:, -1] = 1.0
        self.augmented.setflags(write=False)

    def __deepcopy__(self, memo: dict[int, Any]) -> KernelRows:
        return self  # read-only: forks and copies share it

    @property
    def nbytes(self) -> int:
        """Bytes this object holds beyond the rows it was given."""
        return 0 if self.augmented is None else int(self.augmented.nbytes)

    def like(self, X: np.ndarray) -> KernelRows:
        """Other rows, prepared with this object's eta, dtype and centre; labels come from
        these rows (the training set)."""
        return KernelRows(X, self.eta, self.dtype, self.center, self.spread)

    def sums(self, X_labeled: np.ndarray, y_labeled: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        """(da, dn): kernel sums of every row over labeled anomalies and normals."""
        if self.augmented is None:
            return kernel_sums(self.X, X_labeled, y_labeled, self.eta)
        n, n_lab = self.X.shape[0], X_labeled.shape[0]
        sums = np.zeros((n, 2))
        if n_lab == 0 or n == 0:
            return sums[:, 0], sums[:, 1]
        is_anomaly = np.asarray(y_labeled).ravel() == 1
        indicator = np.column_stack([is_anomaly, ~is_anomaly]).astype(np.float32)
        scale = -np.log(2.0) / self.eta**2
        centred = np.asarray(X_labeled, dtype=np.float64) - self.center
        labels = np.empty((centred.shape[1] + 2, n_lab), dtype=self.augmented.dtype)
        labels[:-2] = (-2.0 * scale) * centred.T
        labels[-2] = 1.0  # times the rows' scale |x - c|^2
        labels[-1] = scale * np.einsum("ij,ij->i", centred, centred)  # times the rows' 1
        augmented = self.augmented

        def block(start: int, stop: int) -> None:
            e = augmented[start:stop] @ labels
            w = e if e.dtype == np.float32 else e.astype(np.float32)  # round it once
            np.exp(w, out=w)
            sums[start:stop] = w @ indicator

        _in_blocks(n, max(1, _CHUNK_ELEMENTS // n_lab), block)
        return sums[:, 0].copy(), sums[:, 1].copy()


def posterior_score(
    q: np.ndarray, da: np.ndarray, dn: np.ndarray, alpha: float = 2.3
) -> np.ndarray:
    """SSDO score s = (q + alpha * da) / (1 + alpha * (da + dn)); equals q with no labels."""
    return (q + alpha * da) / (1.0 + alpha * (da + dn))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class UnlabeledFit:
    """What SSDO learns from the training set without labels: the fitted prior, its score
    shift and squashing threshold, the prior probabilities q of the training set, eta, and
    the training set prepared for kernel sums. Read-only, so episodes can share it."""

    prior: Any
    score_shift: float
    prior_threshold: float
    q_train: np.ndarray
    eta: float
    rows: KernelRows

    def __deepcopy__(self, memo: dict[int, Any]) -> UnlabeledFit:
        return self


class SSDO:
    """Semi-supervised SSDO detector with an unsupervised pyod prior.

    ``fit`` learns the label-free parts on the training set (prior, its squashing
    threshold, eta); ``add_labels`` adds labeled training examples; the anomaly
    probability of any point then follows docs/method.md, Detector.

    Parameters
    ----------
    contamination : float
        Fraction of anomalies gamma, assumed known; sets both squashing thresholds.
    prior : str or pyod detector
        ``"iforest"`` (the paper's text), ``"knn"`` (the authors' code), another registered
        name or pyod detector name (``"ecod"``, ...), or an instance.
    k : int
        Neighbour rank defining the kernel width eta.
    alpha : float
        Weight of the label terms against the prior.
    random_state : int, optional
        Seed for the prior's randomness (and for the points of a sampled eta).
    eta_sample : int
        0: eta from every training point (exact); m: from m random points (``kernel_width``).
    kernel_dtype : str
        ``"float64"`` (exact) or ``"float32"`` kernel sums (``KernelRows``).
    train_scores : str
        ``"fitted"`` or ``"rescored"``: D's prior scores (``TRAIN_SCORINGS``).
    squash_quantile : str
        ``"exact"`` or ``"whole-percent"``: both squashing thresholds (``squash_threshold``).

    References
    ----------
    Vercruyssen et al., "Semi-supervised anomaly detection with an application to
    water analytics", ICDM 2018.
    """

    def __init__(
        self,
        contamination: float,
        prior: str | Any = "iforest",
        k: int = 30,
        alpha: float = 2.3,
        random_state: int | None = None,
        eta_sample: int = 0,
        kernel_dtype: str = "float64",
        train_scores: str = "fitted",
        squash_quantile: str = "exact",
    ) -> None:
        if train_scores not in TRAIN_SCORINGS:
            raise ValueError(f"unknown train_scores {train_scores!r}: use one of "
                             f"{', '.join(TRAIN_SCORINGS)}")
        self.contamination = contamination
        self.prior = prior
        self.k = k
        self.alpha = alpha
        self.random_state = random_state
        self.eta_sample = eta_sample
        self.kernel_dtype = kernel_dtype
        self.train_scores = train_scores
        self.squash_quantile = squash_quantile

    def fit(self, X: np.ndarray, unlabeled: UnlabeledFit | None = None) -> SSDO:
        """Fit the prior on unlabeled training data; compute eta and the prior threshold.

        ``unlabeled``: those parts already fitted on this ``X`` (an episode's cached reset).
        """
        X = np.asarray(X, dtype=np.float64)
        fitted = unlabeled if unlabeled is not None else self.fit_unlabeled(X)
        self.X_train_ = X
        self.unlabeled_ = fitted
        self.prior_ = fitted.prior
        self.score_shift_ = fitted.score_shift
        self.prior_threshold_ = fitted.prior_threshold
        self.q_train_ = fitted.q_train
        self.eta_ = fitted.eta
        self.X_labeled_ = np.empty((0, X.shape[1]))
        self.y_labeled_ = np.empty(0, dtype=np.int8)
        self.da_train_, self.dn_train_ = np.zeros(len(X)), np.zeros(len(X))
        self._update_threshold()
        return self

    def _fit_prior(self, X: np.ndarray) -> tuple[Any, float, float, np.ndarray]:
        """The prior fitted on X, its score shift and squashing threshold, and q on X."""
        prior = make_prior(self.prior, self.random_state, len(X)).fit(X)
        raw = training_scores(prior)
        if self.train_scores == "rescored":
            raw = np.asarray(prior.decision_function(X), dtype=np.float64)
        # Shift scores that can be negative (IForest) so the most normal point scores 0.
        shift = min(0.0, float(raw.min()))
        train_scores = raw - shift
        threshold = squash_threshold(train_scores, self.contamination, self.squash_quantile)
        return prior, shift, threshold, squash(train_scores, threshold)

    def fit_unlabeled(self, X: np.ndarray) -> UnlabeledFit:
        """The label-free parts: the prior fitted on X, its threshold, q on X, eta."""
        X = np.asarray(X, dtype=np.float64)
        prior, shift, threshold, q_train = self._fit_prior(X)
        eta_rng = np.random.default_rng(np.random.SeedSequence(self.random_state,
                                                               spawn_key=(1,)))
        eta = kernel_width(X, self.k, self.eta_sample, eta_rng)
        center = X.mean(axis=0) if self.kernel_dtype != "float64" else None
        rows = KernelRows(X, eta, self.kernel_dtype, center)
        return UnlabeledFit(prior, shift, threshold, _read_only(q_train), eta, rows)

    def unlabeled_probability(self, X: np.ndarray) -> np.ndarray:
        """P on X of this detector fitted on X without labels (s = q, squashed at its own
        quantile), computing neither eta nor kernel rows: the published code's initial
        outputs, from a detector fitted on D and V together (``initial_fit``)."""
        q = self._fit_prior(np.asarray(X, dtype=np.float64))[3]
        return squash(q, squash_threshold(q, self.contamination, self.squash_quantile))

    def prior_probability(self, X: np.ndarray) -> np.ndarray:
        """q(x): the prior's anomaly probability of new points (not the training set)."""
        raw = np.asarray(self.prior_.decision_function(X), dtype=np.float64)
        return squash(np.maximum(raw - self.score_shift_, 0.0), self.prior_threshold_)

    def add_labels(self, X_new: np.ndarray, y_new: np.ndarray) -> SSDO:
        """Add labeled training examples and update the training label terms incrementally."""
        X_new = np.asarray(X_new, dtype=np.float64).reshape(-1, self.X_train_.shape[1])
        y_new = np.asarray(y_new, dtype=np.int8).ravel()
        da, dn = self.unlabeled_.rows.sums(X_new, y_new)
        self.da_train_ += da
        self.dn_train_ += dn
        self.X_labeled_ = np.vstack([self.X_labeled_, X_new])
        self.y_labeled_ = np.concatenate([self.y_labeled_, y_new])
        self._update_threshold()
        return self

    def _update_threshold(self) -> None:
        s_train = posterior_score(self.q_train_, self.da_train_, self.dn_train_, self.alpha)
        self.score_threshold_ = squash_threshold(s_train, self.contamination,
                                                 self.squash_quantile)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Posterior score s(x) of new points."""
        da, dn = kernel_sums(np.asarray(X, dtype=np.float64), self.X_labeled_,
                             self.y_labeled_, self.eta_)
        return posterior_score(self.prior_probability(X), da, dn, self.alpha)

    def anomaly_probability(self, X: np.ndarray) -> np.ndarray:
        """P(x) = S_t'(s(x)), t' the (1 - gamma) quantile of s on the training set."""
        return squash(self.decision_function(X), self.score_threshold_)


class PointScores:
    """SSDO's anomaly probabilities for a fixed set of points, kept current as labels arrive.

    The episode scores the same points (D, V and T) after every round; holding their
    prior probabilities and label sums makes a round cost O(points x new labels).
    The training set's own probabilities come from the detector (``docs/method.md``,
    Detector: the prior's training scores as fitted); ``X`` holds only the other points.
    ``rows`` and ``q`` (their kernel rows and prior probabilities) may come from a cached
    reset; by default they are computed here.
    """

    def __init__(self, detector: SSDO, X: np.ndarray, rows: KernelRows | None = None,
                 q: np.ndarray | None = None) -> None:
        self.detector = detector
        self.X = np.asarray(X, dtype=np.float64)
        self.rows = rows if rows is not None else detector.unlabeled_.rows.like(self.X)
        if q is None:
            q = detector.prior_probability(self.X) if len(self.X) else np.empty(0)
        self.q = q
        self.da, self.dn = self.rows.sums(detector.X_labeled_, detector.y_labeled_)

    def add_labels(self, X_new: np.ndarray, y_new: np.ndarray) -> None:
        """Label new training examples: update the detector and these points' label sums."""
        self.detector.add_labels(X_new, y_new)
        da, dn = self.rows.sums(np.asarray(X_new, dtype=np.float64), y_new)
        self.da += da
        self.dn += dn

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Anomaly probabilities (training set, other points)."""
        det = self.detector
        s_train = posterior_score(det.q_train_, det.da_train_, det.dn_train_, det.alpha)
        s_other = posterior_score(self.q, self.da, self.dn, det.alpha)
        return squash(s_train, det.score_threshold_), squash(s_other, det.score_threshold_)
