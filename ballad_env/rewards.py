"""BALLAD's reward signals: how much the last allocation changed the detector (SPEC §4).

Both compare a side's output now with its output after that side's previous round,
over all examples of D and V. AL looks at anomaly probabilities (entropy) or anomaly
predictions (cosine); LR at rejection probabilities or rejection indicators.
"""

from __future__ import annotations

import numpy as np

REWARDS = ("entropy", "cosine")


def entropy(p: np.ndarray) -> np.ndarray:
    """The paper's one-term entropy H(p) = -p log2 p, with H(0) = 0."""
    p = np.asarray(p, dtype=np.float64)
    out = np.zeros_like(p)
    positive = p > 0
    out[positive] = -p[positive] * np.log2(p[positive])
    return out


def entropy_reward(p_new: np.ndarray, p_old: np.ndarray) -> float:
    """Mean over examples of |H(p_new) - H(p_old)|."""
    if np.size(p_new) == 0:
        return 0.0
    return float(np.mean(np.abs(entropy(p_new) - entropy(p_old))))


def cosine_reward(v_new: np.ndarray, v_old: np.ndarray) -> float:
    """1 - cos(v_new, v_old) of two 0/1 vectors; 0 if both are zero, 1 if exactly one is."""
    v_new = np.asarray(v_new, dtype=np.float64)
    v_old = np.asarray(v_old, dtype=np.float64)
    sq_new, sq_old = v_new @ v_new, v_old @ v_old
    if sq_new == 0 and sq_old == 0:
        return 0.0
    if sq_new == 0 or sq_old == 0:
        return 1.0
    # One square root of the product: exactly 0 for identical 0/1 vectors.
    return float(1.0 - (v_new @ v_old) / np.sqrt(sq_new * sq_old))
