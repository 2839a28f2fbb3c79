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
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.neighbors import NearestNeighbors

from ballad_env.registry import Registry

_CHUNK_ELEMENTS = 262_144  # one block of pairwise distances: 2 MiB, cache-sized
_EXP_FLOOR = -700.0  # exp is fast down to here (1e-304); below, it slows 5 to 100-fold


def squash(s: np.ndarray | float, threshold: float) -> np.ndarray:
    """Squashing function S_l(s) = 1 - 2^(-(s/l)^2): maps s >= 0 to [0, 1) with S_l(l) = 0.5.

    A threshold of 0 (all reference scores zero) degenerates to the indicator s > 0.
    """
    s = np.asarray(s, dtype=np.float64)
    if threshold <= 0:
        return (s > 0).astype(np.float64)
    return -np.expm1(-np.log(2.0) * (s / threshold) ** 2)


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


def check_prior(prior: str | Any) -> None:
    """Raise a clear error unless ``prior`` is a registered name or a pyod-like detector."""
    if isinstance(prior, str):
        PRIORS.check(prior.lower())
    elif not hasattr(prior, "fit") or not hasattr(prior, "decision_function"):
        raise TypeError(f"prior {prior!r} has no fit/decision_function: pass a pyod detector "
                        f"or one of {', '.join(PRIORS)}")


def make_prior(prior: str | Any = "iforest", seed: int | None = None,
               n_samples: int | None = None) -> Any:
    """An unfitted prior: a registered name (``PRIORS``) or a copy of a given detector."""
    check_prior(prior)
    if isinstance(prior, str):
        return PRIORS[prior.lower()](seed, n_samples)
    detector = copy.deepcopy(prior)
    if seed is not None and "random_state" in getattr(detector, "get_params", dict)():
        detector.set_params(random_state=seed)
    return detector


def kernel_width(X: np.ndarray, k: int = 30) -> float:
    """eta: harmonic mean over X of each point's distance to its k-th neighbour (itself excluded).

    Zero distances are replaced by the smallest positive one; constant data gives 1.
    """
    n = X.shape[0]
    k = min(k, n - 1)
    if k < 1:
        return 1.0
    dist, _ = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)
    # Column 0 is the point itself (or a duplicate at distance 0, which is the same
    # distance): the k-th neighbour other than itself is column k.
    kth = dist[:, k]
    positive = kth[kth > 0]
    if positive.size == 0:
        return 1.0
    kth = np.where(kth > 0, kth, positive.min())
    return float(n / np.sum(1.0 / kth))


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
    rows = max(1, _CHUNK_ELEMENTS // n_lab)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        w = X[start:stop] @ cross
        w += scaled_all[start:stop, None]
        w += scaled_lab[None, :]
        # Rounding can make a squared distance slightly negative (exponent > 0): clip at 0.
        # Far pairs: exp below -700 leaves its fast path (subnormals, underflow) while the
        # kernel is worth nothing next to the prior there: clip at -700 (w ~ 1e-304).
        np.clip(w, _EXP_FLOOR, 0.0, out=w)
        np.exp(w, out=w)
        sums[start:stop] = w @ indicator
    return sums[:, 0].copy(), sums[:, 1].copy()


def posterior_score(
    q: np.ndarray, da: np.ndarray, dn: np.ndarray, alpha: float = 2.3
) -> np.ndarray:
    """SSDO score s = (q + alpha * da) / (1 + alpha * (da + dn)); equals q with no labels."""
    return (q + alpha * da) / (1.0 + alpha * (da + dn))


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
        ``"iforest"`` (the paper's text), ``"knn"`` (the authors' code) or an instance.
    k : int
        Neighbour rank defining the kernel width eta.
    alpha : float
        Weight of the label terms against the prior.
    random_state : int, optional
        Seed for the prior's randomness.

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
    ) -> None:
        self.contamination = contamination
        self.prior = prior
        self.k = k
        self.alpha = alpha
        self.random_state = random_state

    def fit(self, X: np.ndarray) -> SSDO:
        """Fit the prior on unlabeled training data; compute eta and the prior threshold."""
        X = np.asarray(X, dtype=np.float64)
        self.X_train_ = X
        self.prior_ = make_prior(self.prior, self.random_state, len(X)).fit(X)
        raw = np.asarray(self.prior_.decision_scores_, dtype=np.float64)
        # Shift scores that can be negative (IForest) so the most normal point scores 0.
        self.score_shift_ = min(0.0, float(raw.min()))
        train_scores = raw - self.score_shift_
        self.prior_threshold_ = float(np.quantile(train_scores, 1.0 - self.contamination))
        self.q_train_ = squash(train_scores, self.prior_threshold_)
        self.eta_ = kernel_width(X, self.k)
        self.X_labeled_ = np.empty((0, X.shape[1]))
        self.y_labeled_ = np.empty(0, dtype=np.int8)
        self.da_train_, self.dn_train_ = np.zeros(len(X)), np.zeros(len(X))
        self._update_threshold()
        return self

    def prior_probability(self, X: np.ndarray) -> np.ndarray:
        """q(x): the prior's anomaly probability of new points (not the training set)."""
        raw = np.asarray(self.prior_.decision_function(X), dtype=np.float64)
        return squash(np.maximum(raw - self.score_shift_, 0.0), self.prior_threshold_)

    def add_labels(self, X_new: np.ndarray, y_new: np.ndarray) -> SSDO:
        """Add labeled training examples and update the training label terms incrementally."""
        X_new = np.asarray(X_new, dtype=np.float64).reshape(-1, self.X_train_.shape[1])
        y_new = np.asarray(y_new, dtype=np.int8).ravel()
        da, dn = kernel_sums(self.X_train_, X_new, y_new, self.eta_)
        self.da_train_ += da
        self.dn_train_ += dn
        self.X_labeled_ = np.vstack([self.X_labeled_, X_new])
        self.y_labeled_ = np.concatenate([self.y_labeled_, y_new])
        self._update_threshold()
        return self

    def _update_threshold(self) -> None:
        s_train = posterior_score(self.q_train_, self.da_train_, self.dn_train_, self.alpha)
        self.score_threshold_ = float(np.quantile(s_train, 1.0 - self.contamination))

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
    """

    def __init__(self, detector: SSDO, X: np.ndarray) -> None:
        self.detector = detector
        self.X = np.asarray(X, dtype=np.float64)
        self.q = detector.prior_probability(self.X) if len(self.X) else np.empty(0)
        self.da, self.dn = kernel_sums(self.X, detector.X_labeled_, detector.y_labeled_,
                                       detector.eta_)

    def add_labels(self, X_new: np.ndarray, y_new: np.ndarray) -> None:
        """Label new training examples: update the detector and these points' label sums."""
        self.detector.add_labels(X_new, y_new)
        da, dn = kernel_sums(self.X, np.asarray(X_new, dtype=np.float64), y_new,
                             self.detector.eta_)
        self.da += da
        self.dn += dn

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Anomaly probabilities (training set, other points)."""
        det = self.detector
        s_train = posterior_score(det.q_train_, det.da_train_, det.dn_train_, det.alpha)
        s_other = posterior_score(self.q, self.da, self.dn, det.alpha)
        return squash(s_train, det.score_threshold_), squash(s_other, det.score_threshold_)
