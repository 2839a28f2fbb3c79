"""SSDO's label terms summed as the published code sums them (``label_terms="authors"``).

anomatools 3.0.3 (the published BALLAD code's SSDO) computes, for every point, the
Euclidean distances to the labeled anomalies and to the labeled normals with scikit-learn's
``DistanceMetric``, the kernel ``exp(ln(0.5) (d / eta)^2)`` of each, their sums with
``np.sum`` over the labels in the order of D, and the posterior as
``z (q + alpha da)`` with ``z = 1 / (1 + alpha (da + dn))``. That is the formula of
``model.posterior_score``, evaluated in another order: ours (a matrix product for the
squared distances, sums grown label by label, one division) differs in the last bits once
labels exist (up to about 2e-15 in P), which can move the published threshold search's tau
(``docs/method.md``, the published code's variant). This module repeats the published
arithmetic operation for operation; it costs a pass over all labels per scoring, which is
what the published code pays too.
"""

from __future__ import annotations

import numpy as np

#: How SSDO's label terms are computed: ``"incremental"`` (ours: kernel sums grown as labels
#: arrive, ``kernel.KernelRows``) or ``"authors"`` (anomatools', from scratch: this module).
LABEL_TERMS = ("incremental", "authors")


def _kernel_sums(X: np.ndarray, L: np.ndarray, eta: float) -> np.ndarray:
    """Per row of X, ``np.sum`` of exp(ln(0.5) (|x - l| / eta)^2) over the rows l of L, in
    L's order (0.0 where L is empty, as anomatools starts its sums)."""
    if len(L) == 0:
        return np.zeros(len(X))
    from sklearn.metrics import DistanceMetric

    distances = DistanceMetric.get_metric("euclidean").pairwise(
        X.astype(np.double), L.astype(np.double))
    kernel = np.exp(np.log(0.5) * np.power(distances / eta, 2))
    return np.array([np.sum(row) for row in kernel])


def authors_posterior(X: np.ndarray, q: np.ndarray, X_labeled: np.ndarray,
                      y_labeled: np.ndarray, eta: float, alpha: float) -> np.ndarray:
    """The posterior score s of the points X (prior probabilities ``q``) given the labeled
    training examples ``X_labeled`` (``y_labeled``: 1 anomaly, 0 normal), which must come in
    the order of D, as anomatools sums them; ``q`` itself when there is no label."""
    q = np.asarray(q, dtype=np.float64)
    if len(y_labeled) == 0:
        return q.copy()
    y_labeled = np.asarray(y_labeled)
    X = np.asarray(X, dtype=np.float64)
    da = _kernel_sums(X, X_labeled[y_labeled == 1], eta)
    dn = _kernel_sums(X, X_labeled[y_labeled == 0], eta)
    z = 1.0 / (1.0 + alpha * (da + dn))
    return z * (q + alpha * da)


__all__ = ["LABEL_TERMS", "authors_posterior"]
