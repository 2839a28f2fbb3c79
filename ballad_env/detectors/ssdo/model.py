"""SSDO, the semi-supervised detector of BALLAD, on an unsupervised pyod prior.

See ``docs/method.md``, Detector.

SSDO (Vercruyssen et al., ICDM 2018) propagates the few labels of the training set
through a Gaussian-like kernel and blends them with the prior's anomaly probability.
Everything that does not depend on labels (the prior, its quantile, the kernel width
``eta``) is fitted once; label terms are sums over labeled examples and are updated
incrementally as labels arrive.

The detector's parts live beside it: ``ballad_env.detectors.priors`` (the unsupervised prior, pyod
detectors by name) and ``ballad_env.detectors.ssdo.kernel`` (eta and the kernel sums); their public
names
are importable from here too. An episode reaches the detector through ``EpisodeScores``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ballad_env.detectors.priors import (
    PRIORS,
    PriorFactory,
    check_prior,
    make_prior,
    prior_factory,
    pyod_detector_names,
    training_scores,
)
from ballad_env.detectors.ssdo.authors import LABEL_TERMS, authors_posterior
from ballad_env.detectors.ssdo.kernel import (
    ETA_SAMPLE_DEFAULT,
    EXACT_MAX_TRAIN,
    KERNEL_BACKENDS,
    KERNEL_DTYPES,
    KERNEL_PAIRS,
    KernelRows,
    kernel_sums,
    kernel_width,
)

#: How the squashing function is evaluated: ``"expm1"``, -expm1(-ln 2 (s/l)^2), which keeps
#: its precision for small s, or ``"authors"``, anomatools' ``SquashScaler`` (the published
#: code's) 1 - exp(ln(0.5) (s/l)^2), which differs from it in the last bit on some scores.
SQUASH_FORMULAS = ("expm1", "authors")


def squash(s: np.ndarray | float, threshold: float, formula: str = "expm1") -> np.ndarray:
    """Squashing function S_l(s) = 1 - 2^(-(s/l)^2): maps s >= 0 to [0, 1) with S_l(l) = 0.5,
    evaluated as ``formula`` says (``SQUASH_FORMULAS``).

    A threshold of 0 (all reference scores zero) degenerates to the indicator s > 0.
    """
    s = np.asarray(s, dtype=np.float64)
    if threshold <= 0:
        return (s > 0).astype(np.float64)
    if formula == "authors":  # anomatools 3.0.3's SquashScaler, operation for operation
        return 1.0 - np.exp(np.log(0.5) * np.power(s / threshold, 2))
    if formula != "expm1":
        raise ValueError(f"unknown squash formula {formula!r}: use one of "
                         f"{', '.join(SQUASH_FORMULAS)}")
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
    squash_formula : str
        ``"expm1"`` or ``"authors"``: how both squashings are evaluated (``squash``).
    label_terms : str
        ``"incremental"`` or ``"authors"``: how the label terms are summed (``LABEL_TERMS``;
        ``"authors"`` needs the training labels' indices, ``add_labels(..., indices)``).
    kernel_backend : str
        ``"numpy"`` or ``"torch"``: where the kernel sums and the sampled eta's neighbour
        search run (``KernelRows``, ``kernel_width``).
    kernel_device : str, optional
        The torch backend's device (None: ``"cuda"`` when there is one, else ``"cpu"``).
    kernel_pairs : str
        ``"all"`` (dense) or ``"near"``: the kernel sums visit only the blocks of pairs
        whose weight can be above 0 (``KernelRows``, ``kernel_near``; numpy backend only).

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
        kernel_backend: str = "numpy",
        kernel_device: str | None = None,
        kernel_pairs: str = "all",
        squash_formula: str = "expm1",
        label_terms: str = "incremental",
    ) -> None:
        if train_scores not in TRAIN_SCORINGS:
            raise ValueError(f"unknown train_scores {train_scores!r}: use one of "
                             f"{', '.join(TRAIN_SCORINGS)}")
        if label_terms not in LABEL_TERMS:
            raise ValueError(f"unknown label_terms {label_terms!r}: use one of "
                             f"{', '.join(LABEL_TERMS)}")
        if squash_formula not in SQUASH_FORMULAS:
            raise ValueError(f"unknown squash_formula {squash_formula!r}: use one of "
                             f"{', '.join(SQUASH_FORMULAS)}")
        self.contamination = contamination
        self.prior = prior
        self.k = k
        self.alpha = alpha
        self.random_state = random_state
        self.eta_sample = eta_sample
        self.kernel_dtype = kernel_dtype
        self.train_scores = train_scores
        self.squash_quantile = squash_quantile
        self.kernel_backend = kernel_backend
        self.kernel_device = kernel_device
        self.kernel_pairs = kernel_pairs
        self.squash_formula = squash_formula
        self.label_terms = label_terms

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
        self.labeled_index_ = np.empty(0, dtype=np.intp)  # into X, when add_labels is told
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
        return prior, shift, threshold, squash(train_scores, threshold, self.squash_formula)

    def fit_unlabeled(self, X: np.ndarray) -> UnlabeledFit:
        """The label-free parts: the prior fitted on X, its threshold, q on X, eta."""
        X = np.asarray(X, dtype=np.float64)
        prior, shift, threshold, q_train = self._fit_prior(X)
        eta_rng = np.random.default_rng(np.random.SeedSequence(self.random_state,
                                                               spawn_key=(1,)))
        device = None
        if self.kernel_backend == "torch":
            from ballad_env.detectors.ssdo.kernel_torch import resolve_device

            device = resolve_device(self.kernel_device)
        eta = kernel_width(X, self.k, self.eta_sample, eta_rng, self.kernel_backend, device)
        centred = (self.kernel_dtype != "float64" or self.kernel_backend != "numpy"
                   or self.kernel_pairs != "all")
        rows = KernelRows(X, eta, self.kernel_dtype, X.mean(axis=0) if centred else None,
                          backend=self.kernel_backend, device=device, pairs=self.kernel_pairs)
        return UnlabeledFit(prior, shift, threshold, _read_only(q_train), eta, rows)

    def unlabeled_probability(self, X: np.ndarray) -> np.ndarray:
        """P on X of this detector fitted on X without labels (s = q, squashed at its own
        quantile), computing neither eta nor kernel rows: the published code's initial
        outputs, from a detector fitted on D and V together (``initial_fit``)."""
        q = self._fit_prior(np.asarray(X, dtype=np.float64))[3]
        return squash(q, squash_threshold(q, self.contamination, self.squash_quantile),
                      self.squash_formula)

    def prior_probability(self, X: np.ndarray) -> np.ndarray:
        """q(x): the prior's anomaly probability of new points (not the training set)."""
        raw = np.asarray(self.prior_.decision_function(X), dtype=np.float64)
        return squash(np.maximum(raw - self.score_shift_, 0.0), self.prior_threshold_,
                      self.squash_formula)

    def add_labels(self, X_new: np.ndarray, y_new: np.ndarray,
                   indices: np.ndarray | None = None) -> SSDO:
        """Add labeled training examples (``indices``: their rows of the training set, which
        ``label_terms="authors"`` needs) and update the training label terms."""
        X_new = np.asarray(X_new, dtype=np.float64).reshape(-1, self.X_train_.shape[1])
        y_new = np.asarray(y_new, dtype=np.int8).ravel()
        if indices is not None:
            self.labeled_index_ = np.concatenate([self.labeled_index_,
                                                  np.asarray(indices, dtype=np.intp)])
        elif self.label_terms == "authors":
            raise ValueError("label_terms='authors' sums the labels in the order of the "
                             "training set: pass their indices, add_labels(X, y, indices)")
        da, dn = self.unlabeled_.rows.sums(X_new, y_new)
        self.da_train_ += da
        self.dn_train_ += dn
        self.X_labeled_ = np.vstack([self.X_labeled_, X_new])
        self.y_labeled_ = np.concatenate([self.y_labeled_, y_new])
        self._update_threshold()
        return self

    def _update_threshold(self) -> None:
        self.score_threshold_ = squash_threshold(self.train_posterior(), self.contamination,
                                                 self.squash_quantile)

    def train_posterior(self) -> np.ndarray:
        """Posterior scores s of the training set."""
        if self.label_terms == "authors":
            return self.authors_posterior(self.X_train_, self.q_train_)
        return posterior_score(self.q_train_, self.da_train_, self.dn_train_, self.alpha)

    def authors_posterior(self, X: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Posterior scores of X (prior probabilities q) summed as anomatools sums them, over
        the labels in the order of the training set (``authors.authors_posterior``)."""
        order = np.argsort(self.labeled_index_, kind="stable")
        return authors_posterior(X, q, self.X_labeled_[order], self.y_labeled_[order],
                                 self.eta_, self.alpha)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Posterior score s(x) of new points."""
        if self.label_terms == "authors":
            return self.authors_posterior(np.asarray(X, dtype=np.float64),
                                          self.prior_probability(X))
        da, dn = kernel_sums(np.asarray(X, dtype=np.float64), self.X_labeled_,
                             self.y_labeled_, self.eta_)
        return posterior_score(self.prior_probability(X), da, dn, self.alpha)

    def anomaly_probability(self, X: np.ndarray) -> np.ndarray:
        """P(x) = S_t'(s(x)), t' the (1 - gamma) quantile of s on the training set."""
        return squash(self.decision_function(X), self.score_threshold_, self.squash_formula)


class EpisodeScores(Protocol):
    """What an episode reaches its detector through: the anomaly probabilities of the
    episode's fixed points (the training set D, and V and T stacked), kept current as
    training labels arrive. ``PointScores`` is SSDO's, ``ssif_detector.SSIFScores`` SSIF's;
    a registered ``detectors.Detector`` starts one (``ballad_env.detectors``,
    ``detectors.ssdo.episode``)."""

    def add_training_labels(self, indices: np.ndarray, y_new: np.ndarray) -> None:
        """Label the training examples at ``indices`` (into D) with ``y_new`` (0 or 1)."""

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Anomaly probabilities (training set, other points), in [0, 1]."""

    def anomaly_probability(self, X: np.ndarray) -> np.ndarray:
        """Anomaly probabilities of any points under the current detector (``render``)."""


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

    def add_labels(self, X_new: np.ndarray, y_new: np.ndarray,
                   indices: np.ndarray | None = None) -> None:
        """Label new training examples (``indices``: their rows of D): update the detector
        and these points' label sums."""
        self.detector.add_labels(X_new, y_new, indices)
        da, dn = self.rows.sums(np.asarray(X_new, dtype=np.float64), y_new)
        self.da += da
        self.dn += dn

    def add_training_labels(self, indices: np.ndarray, y_new: np.ndarray) -> None:
        """Label the training examples at ``indices`` (into D): ``add_labels`` of their rows."""
        self.add_labels(self.detector.X_train_[indices], y_new, indices)

    def anomaly_probability(self, X: np.ndarray) -> np.ndarray:
        """P(x) of any points under the current detector (``SSDO.anomaly_probability``)."""
        return self.detector.anomaly_probability(X)

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Anomaly probabilities (training set, other points)."""
        det = self.detector
        s_train = det.train_posterior()
        if det.label_terms == "authors":
            s_other = det.authors_posterior(self.X, self.q)
        else:
            s_other = posterior_score(self.q, self.da, self.dn, det.alpha)
        formula = det.squash_formula
        return (squash(s_train, det.score_threshold_, formula),
                squash(s_other, det.score_threshold_, formula))


__all__ = ["ETA_SAMPLE_DEFAULT", "EXACT_MAX_TRAIN", "KERNEL_BACKENDS", "KERNEL_DTYPES",
           "KERNEL_PAIRS", "LABEL_TERMS", "PRIORS", "SQUASH_FORMULAS",
           "SQUASH_QUANTILES", "SSDO", "TRAIN_SCORINGS", "EpisodeScores", "KernelRows",
           "PointScores", "PriorFactory", "UnlabeledFit", "check_prior", "kernel_sums",
           "kernel_width", "make_prior", "posterior_score", "prior_factory",
           "pyod_detector_names", "squash", "squash_threshold", "training_scores"]
