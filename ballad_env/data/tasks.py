"""Generated tasks: seeded anomaly-detection data sets built from a real one, rebuilt by name.

A task is named ``task/<source>/<seed>`` (``task/Glass/7``, ``task/adbench/cover@20000/3``):
``load_dataset`` resolves the name by rebuilding the task (``lookup.task_spec`` draws its
spec, :func:`build_task` builds it), so a name is all a lattice store, a result table or a
trainer needs; ``lookup.task_costs`` gives its unit costs. From the source's *normal* rows
only, the seed draws:

- the anomaly type, one of ADBench's four synthetic types (:data:`ANOMALY_TYPES`; Han et
  al., ADBench, NeurIPS 2022, section 4.3), planted among the normal rows;
- the rows, ``ROWS`` in all, a sample of the source's normals without replacement, and the
  features, a random subset (at least ``MIN_FEATURES``, at most ``MAX_FEATURES``);
- the contamination, log-uniform over ``CONTAMINATION`` (the range real sets have), and
  the unit costs ``c_fp`` and ``c_fn``, each log-uniform over ``COSTS``
  (``lookup.task_costs``; c_r stays the settings' rule, gamma by default).

A *real-anomaly* task, ``task/<source>/real-<seed>``, plants nothing: it keeps the source's
own anomalies, subsampled to one of the contamination levels Campos et al. (2016, the source
of the paper's 18 sets) publish each data set at (:data:`REAL_LEVELS`, those the source's
anomalies and normals can reach in a task of at least ``MIN_REAL_ROWS`` rows), with a random
sample of its rows and a random subset of its features, drawn as above (its own random
streams; the same unit costs' rule).

A planted task never uses the source's own anomalies. The four types, fitted on the chosen normal
rows after scaling each feature to [0, 1] (ADBench fits on the normal class as well; unlike
ADBench, which replaces the normal rows by samples of its model, the normal rows here stay
real):

- ``local``: a Gaussian mixture (components chosen by BIC) with every covariance scaled by
  ``ALPHA`` (ADBench's alpha = 5);
- ``clustered``: the same mixture with every mean scaled by ``ALPHA`` (far from the normal
  rows, since scaled features are non-negative), covariances kept;
- ``global``: uniform over each feature's range widened by ``WIDEN`` of it on each side;
- ``dependency``: every feature drawn on its own from a Gaussian kernel density of its
  normal values (Scott's bandwidth): the marginals of the normal data without its
  dependence (ADBench samples the normal rows from a vine copula instead).

Randomness: ``numpy.random.SeedSequence([seed, crc32(source)])`` (the source's canonical
name, so ``task/glass/3`` is ``task/Glass/3``), one child stream per purpose (the task's
shape, the rows, the anomalies, the costs, the order of the rows). Reserved data sets and
every group that shares their data (:data:`RESERVED_SOURCES`) are refused as sources.
"""

from __future__ import annotations

import math
import re
import warnings
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ballad_env.data.validation import Dataset, validate_xy

#: The prefix of a task's name.
TASK_PREFIX = "task/"
#: ADBench's four synthetic anomaly types.
ANOMALY_TYPES = ("local", "global", "dependency", "clustered")
#: Rows of a task (normal and anomalous), drawn uniformly in this range (inclusive).
ROWS = (200, 1200)
#: Features of a task: at least this many (or all the source has), at most ``MAX_FEATURES``.
MIN_FEATURES, MAX_FEATURES = 2, 30
#: Range of the contamination (drawn log-uniform).
CONTAMINATION = (0.005, 0.35)
#: Range of each unit cost, c_fp and c_fn (drawn log-uniform, independently).
COSTS = (1.0, 20.0)
#: ADBench's scale of the covariances (local) and the means (clustered).
ALPHA = 5.0
#: The share of each feature's range that global anomalies reach beyond it on each side.
WIDEN = 0.1
#: Largest number of mixture components tried (by BIC) for local and clustered anomalies.
MAX_COMPONENTS = 4
#: The fewest anomalies a task plants: the episode splits each class 40/40/20 (D, V, test),
#: and with fewer than 5 the test part may hold none.
MIN_ANOMALIES = 5

#: Contamination levels of real-anomaly tasks (Campos et al. 2016 publish each set at these).
REAL_LEVELS = (0.02, 0.05, 0.10, 0.20, 0.40)
#: Fewest rows of a real-anomaly task: a level that needs a smaller task is not reachable.
MIN_REAL_ROWS = 60
#: What marks a real-anomaly task's seed in its name (``task/Glass/real-3``).
REAL_MARK = "real-"

#: The 16 ADBench sets reserved for the external check of the allocator
#: (docs/allocation_split.json; ``scripts.studies.common.split`` reads them here).
RESERVED_SETS = ("breastw", "cardio", "fault", "Ionosphere", "landsat", "letter",
                 "Lymphography", "mammography", "musk", "optdigits", "satimage-2", "thyroid",
                 "vertebral", "vowels", "wine", "yeast")
#: Sources no task may come from, by base name (lower case, no ``adbench/`` prefix or sample
#: suffix): the reserved sets and the groups that share their data (WBC is breastw's data,
#: Cardiotocography cardio's, Annthyroid thyroid's, satellite landsat's and satimage-2's).
RESERVED_SOURCES = frozenset({*(name.lower() for name in RESERVED_SETS), "wbc",
                              "cardiotocography", "annthyroid", "satellite"})

_NAME = re.compile(r"^task/(?P<source>.+)/(?P<real>real-)?(?P<seed>\d+)$")


def is_task_name(source: Any) -> bool:
    """Whether ``source`` is a string that starts like a task's name (``task/``)."""
    return isinstance(source, str) and source.startswith(TASK_PREFIX)


def _match(name: str) -> re.Match[str]:
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"{name!r} is no task name: write task/<source>/<seed> (planted "
                         "anomalies) or task/<source>/real-<seed> (the source's own), a data "
                         "set's name and a whole number (task/Glass/7, "
                         "task/adbench/cover@20000/real-3)")
    return match


def parse_task(name: str) -> tuple[str, int]:
    """``(source, seed)`` of a task's name (planted or real); a clear error otherwise."""
    match = _match(name)
    return match["source"], int(match["seed"])


def is_real_task(name: str) -> bool:
    """Whether the task called ``name`` keeps its source's own anomalies (``real-<seed>``)."""
    return _match(name)["real"] is not None


def task_name(source: str, seed: int, real: bool = False) -> str:
    """The name of the task of ``source`` drawn with ``seed`` (``real``: a real-anomaly
    task)."""
    if int(seed) < 0:
        raise ValueError(f"a task's seed is a whole number >= 0, got {seed}")
    return f"{TASK_PREFIX}{source}/{REAL_MARK if real else ''}{int(seed)}"


def rename_task(name: str, source: str) -> str:
    """The task ``name`` with its source spelled ``source`` (its kind and seed kept)."""
    return task_name(source, parse_task(name)[1], is_real_task(name))


def base_source(source: str) -> str:
    """The base name a reservation compares: no ``adbench/`` prefix, no ``@rows`` suffix,
    lower case."""
    return source.split("@", 1)[0].removeprefix("adbench/").removeprefix("ADBench/").lower()


def check_source(source: str) -> None:
    """A ``ValueError`` if no task may come from ``source``: a task, or a reserved data set or
    one sharing a reserved set's data (:data:`RESERVED_SOURCES`)."""
    if is_task_name(source):
        raise ValueError(f"{source!r} is a task: generate tasks from a real data set")
    if base_source(source) in RESERVED_SOURCES:
        raise ValueError(f"no task may come from {source!r}: it is reserved for the external "
                         "check of the allocator or shares a reserved set's data "
                         "(docs/allocation_split.json); pick a source from its 'train' list")


@dataclass(frozen=True)
class TaskSpec:
    """What a task's name fixes before any anomaly is drawn: its anomaly type, rows (normal
    rows of the source, by index), features, anomaly count and unit costs."""

    source: str
    seed: int
    kind: str
    normal_rows: tuple[int, ...]
    features: tuple[int, ...]
    n_anomalies: int
    c_fp: float
    c_fn: float
    #: The source's anomalous rows a real-anomaly task keeps (kind ``real``), by index.
    anomaly_rows: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        """The task's name."""
        return task_name(self.source, self.seed, real=self.kind == "real")

    @property
    def contamination(self) -> float:
        """The share of anomalies among the task's rows."""
        return self.n_anomalies / (self.n_anomalies + len(self.normal_rows))


def _streams(source: str, seed: int, real: bool = False) -> list[np.random.Generator]:
    """The task's random streams: shape, rows, anomalies, costs, row order (a real-anomaly
    task's entropy carries one more word, so its streams are not a planted task's)."""
    entropy = [int(seed), zlib.crc32(source.encode())] + ([1] if real else [])
    sequence = np.random.SeedSequence(entropy)
    return [np.random.default_rng(child) for child in sequence.spawn(5)]


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def draw_spec(source: str, seed: int, n_normals: int, n_features: int) -> TaskSpec:
    """The task spec of ``source`` and ``seed`` for a source with ``n_normals`` normal rows
    and ``n_features`` features."""
    shape, rows, _, costs, _ = _streams(source, seed)
    kind = ANOMALY_TYPES[int(shape.integers(len(ANOMALY_TYPES)))]
    gamma = _log_uniform(shape, *CONTAMINATION)
    total = int(shape.integers(ROWS[0], ROWS[1] + 1))
    n_normal = min(total - max(MIN_ANOMALIES, int(round(gamma * total))), n_normals)
    if n_normal < 2 * MIN_ANOMALIES:
        raise ValueError(f"{source!r} has {n_normals} normal rows: too few for a task")
    n_anomalies = max(MIN_ANOMALIES, int(round(gamma * n_normal / (1.0 - gamma))))
    low = min(MIN_FEATURES, n_features)
    d = int(shape.integers(low, min(MAX_FEATURES, n_features) + 1))
    features = tuple(sorted(int(f) for f in shape.choice(n_features, d, replace=False)))
    chosen = tuple(sorted(int(r) for r in rows.choice(n_normals, n_normal, replace=False)))
    c_fp, c_fn = _log_uniform(costs, *COSTS), _log_uniform(costs, *COSTS)
    return TaskSpec(source, int(seed), kind, chosen, features, n_anomalies,
                    round(c_fp, 4), round(c_fn, 4))


def _real_rows(level: float, wanted: int, n_normals: int, n_anomalies: int) -> int:
    """Rows of a real-anomaly task at ``level``: ``wanted``, fewer where the source's
    anomalies or normals cannot fill it at that level; 0 if the task would be smaller than
    ``MIN_REAL_ROWS`` or hold fewer than ``MIN_ANOMALIES`` anomalies."""
    rows = min(wanted, math.floor(n_anomalies / level), math.floor(n_normals / (1.0 - level)))
    return rows if rows >= MIN_REAL_ROWS and round(level * rows) >= MIN_ANOMALIES else 0


def reachable_levels(n_normals: int, n_anomalies: int) -> tuple[float, ...]:
    """The :data:`REAL_LEVELS` a source with these classes reaches at its largest task."""
    return tuple(lv for lv in REAL_LEVELS
                 if _real_rows(lv, ROWS[1], n_normals, n_anomalies) > 0)


def draw_real_spec(source: str, seed: int, n_normals: int, n_anomalies: int,
                   n_features: int) -> TaskSpec:
    """The real-anomaly task spec of ``source`` and ``seed`` (the module docstring): the
    level drawn among those reachable, then the rows (normals and anomalies sampled without
    replacement), the features and the costs."""
    shape, rows, _, costs, _ = _streams(source, seed, real=True)
    wanted = int(shape.integers(ROWS[0], ROWS[1] + 1))
    levels = [lv for lv in REAL_LEVELS if _real_rows(lv, wanted, n_normals, n_anomalies)]
    if not levels:
        raise ValueError(f"{source!r} has {n_anomalies} anomalies and {n_normals} normal rows: "
                         f"too few for a real-anomaly task of {MIN_REAL_ROWS} rows or more at "
                         f"any level of {REAL_LEVELS}; use planted tasks (task/<source>/<seed>)")
    level = levels[int(shape.integers(len(levels)))]
    total = _real_rows(level, wanted, n_normals, n_anomalies)
    n_anom = int(round(level * total))
    d = int(shape.integers(min(MIN_FEATURES, n_features), min(MAX_FEATURES, n_features) + 1))
    features = tuple(sorted(int(f) for f in shape.choice(n_features, d, replace=False)))
    normal = tuple(sorted(int(r) for r in rows.choice(n_normals, total - n_anom, replace=False)))
    anomalous = tuple(sorted(int(r) for r in rows.choice(n_anomalies, n_anom, replace=False)))
    c_fp, c_fn = _log_uniform(costs, *COSTS), _log_uniform(costs, *COSTS)
    return TaskSpec(source, int(seed), "real", normal, features, n_anom,
                    round(c_fp, 4), round(c_fn, 4), anomalous)


# --------------------------------------------------------------------------- the planting
def minmax(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's minimum and range (1 where a column is constant)."""
    low = X.min(axis=0)
    width = X.max(axis=0) - low
    return low, np.where(width > 0, width, 1.0)


def fit_mixture(U: np.ndarray, rng: np.random.Generator,
                max_components: int = MAX_COMPONENTS) -> Any:
    """A full-covariance Gaussian mixture of ``U``, the number of components (1 to
    ``max_components``, at most one per 20 rows) chosen by BIC; seeded from ``rng``."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    state = int(rng.integers(2**31 - 1))
    best, best_bic = None, np.inf
    for k in range(1, max(1, min(max_components, U.shape[0] // 20)) + 1):
        with warnings.catch_warnings():  # more components than distinct rows: BIC rejects it
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = GaussianMixture(k, covariance_type="full", reg_covar=1e-6,
                                    random_state=state).fit(U)
        bic = model.bic(U)
        if bic < best_bic:
            best, best_bic = model, bic
    return best


def sample_mixture(weights: np.ndarray, means: np.ndarray, covariances: np.ndarray, n: int,
                   rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of the Gaussian mixture (weights, means, full covariances) from ``rng``."""
    components = rng.choice(len(weights), size=n, p=weights / weights.sum())
    out = np.empty((n, means.shape[1]))
    for c in range(len(weights)):
        rows = np.flatnonzero(components == c)
        lower = np.linalg.cholesky(covariances[c] + 1e-12 * np.eye(means.shape[1]))
        out[rows] = means[c] + rng.standard_normal((rows.size, means.shape[1])) @ lower.T
    return out


def plant(U: np.ndarray, kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` anomalies of type ``kind`` for the normal rows ``U`` (features scaled to
    [0, 1]), in the same scale (the module docstring says how each type is drawn)."""
    if kind == "global":
        return rng.uniform(-WIDEN, 1.0 + WIDEN, size=(n, U.shape[1]))
    if kind == "dependency":
        bandwidth = U.std(axis=0) * U.shape[0] ** -0.2  # Scott's rule in one dimension
        picks = rng.integers(U.shape[0], size=(n, U.shape[1]))
        values = U[picks, np.arange(U.shape[1])]
        return np.asarray(values + rng.standard_normal(values.shape) * bandwidth)
    if kind in ("local", "clustered"):
        mixture = fit_mixture(U, rng)
        means, covariances = mixture.means_, mixture.covariances_
        if kind == "local":
            covariances = ALPHA * covariances
        else:
            means = ALPHA * means
        return sample_mixture(mixture.weights_, means, covariances, n, rng)
    raise ValueError(f"unknown anomaly type {kind!r}: use one of {', '.join(ANOMALY_TYPES)}")


def build_task(spec: TaskSpec, normals: np.ndarray,
               anomalies: np.ndarray | None = None) -> Dataset:
    """The task of ``spec`` from its source's normal rows ``normals`` (all of them, in the
    file's order; a real-anomaly task also reads its ``anomalies``, likewise): the drawn
    rows and features and the planted (or kept) anomalies, rows shuffled; named
    ``spec.name``. ``ballad_env.data.lookup`` loads the source and calls this."""
    columns = np.array(spec.features)
    X0 = normals[np.array(spec.normal_rows)][:, columns]
    _, _, anomaly_rng, _, order_rng = _streams(spec.source, spec.seed, spec.kind == "real")
    if spec.kind == "real":
        if anomalies is None:
            raise ValueError(f"{spec.name!r} keeps its source's anomalies: pass them")
        X1 = anomalies[np.array(spec.anomaly_rows)][:, columns]
    else:
        low, width = minmax(X0)
        X1 = low + plant((X0 - low) / width, spec.kind, spec.n_anomalies, anomaly_rng) * width
    X = np.vstack([X0, X1])
    y = np.concatenate([np.zeros(len(X0)), np.ones(len(X1))])
    order = order_rng.permutation(len(y))
    return Dataset(spec.name, *validate_xy(X[order], y[order], spec.name))


__all__ = ["ALPHA", "ANOMALY_TYPES", "CONTAMINATION", "COSTS", "MAX_FEATURES", "MIN_FEATURES",
           "MIN_REAL_ROWS", "REAL_LEVELS", "REAL_MARK", "RESERVED_SETS", "RESERVED_SOURCES",
           "ROWS", "TASK_PREFIX", "WIDEN", "TaskSpec", "base_source", "build_task",
           "check_source", "draw_real_spec", "draw_spec", "fit_mixture", "is_real_task",
           "is_task_name", "minmax", "parse_task", "plant", "reachable_levels", "rename_task",
           "sample_mixture", "task_name"]
