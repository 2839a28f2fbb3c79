"""Property test: any small data set and any allocation give a well-formed episode.

Hypothesis draws awkward data sets (tiny, duplicated rows, constant columns, one or two
anomalies, anomalies indistinguishable from normals, features on very different scales)
and an allocation sequence, and runs a whole episode.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ballad_env import ENV_ID

N_ROUNDS = 15


def split_sizes(y: np.ndarray) -> tuple[int, int]:
    """|D| and |V|: 40% of each class, rounded half up (SPEC §1)."""
    n_train = n_val = 0
    for label in (0, 1):
        n = int(np.sum(y == label))
        n_train += int(np.floor(0.4 * n + 0.5))
        n_val += int(np.floor(0.4 * n + 0.5))
    return n_train, n_val


def expected_too_few(y: np.ndarray) -> bool:
    """Whether D and V cannot hold 15 rounds of b = max(1, round(2% of |D|)) labels."""
    n_train, n_val = split_sizes(y)
    b = max(1, int(np.floor(0.02 * n_train + 0.5)))
    return n_train // b + n_val // b < N_ROUNDS


@st.composite
def datasets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(12, 120), label="n")  # below ~19 rows the budget does not fit
    d = draw(st.integers(1, 4), label="d")
    n_anomalies = draw(st.one_of(st.sampled_from([1, 2]), st.integers(1, (n - 1) // 2)),
                       label="n_anomalies")  # contamination < 0.5
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e4]), label="scale")
    X = rng.normal(size=(n, d))
    if draw(st.booleans(), label="coarse"):
        X = np.round(X)  # few distinct values: many duplicated rows
    n_copies = draw(st.integers(0, n // 2), label="n_copies")
    X[rng.choice(n, n_copies)] = X[rng.choice(n, n_copies)]  # exact duplicates
    for j in range(d):
        if draw(st.booleans(), label=f"constant_{j}"):
            X[:, j] = 1.5
    y = np.zeros(n, dtype=np.int8)
    y[rng.choice(n, n_anomalies, replace=False)] = 1
    shift = draw(st.sampled_from([0.0, 1.0, 4.0]), label="shift")  # 0: no signal at all
    X[y == 1] += shift
    return X * scale, y


@pytest.mark.slow
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    data=datasets(),
    actions=st.lists(st.integers(0, 1), min_size=N_ROUNDS, max_size=N_ROUNDS),
    prior=st.sampled_from(["knn", "iforest"]),
    reward=st.sampled_from(["entropy", "cosine"]),
    c_fp=st.sampled_from([1.0, 10.0]),
    c_fn=st.sampled_from([1.0, 10.0]),
    seed=st.integers(0, 2**31 - 1),
)
def test_any_small_data_set_gives_a_well_formed_episode(data, actions, prior, reward, c_fp,
                                                        c_fn, seed) -> None:
    X, y = data
    too_few = expected_too_few(y)
    try:
        env = gym.make(ENV_ID, dataset=(X, y), prior=prior, reward=reward, c_fp=c_fp,
                       c_fn=c_fn)
    except ValueError as err:
        # The only acceptable refusal: the budget does not fit (and it must say so).
        if "too few examples" not in str(err):
            raise
        assert too_few, f"refused a data set the budget fits: {err}"
        return
    assert not too_few, "accepted a data set too small for 15 rounds"

    gamma = float(y.mean())
    max_cost = max(c_fp, c_fn, gamma)  # c_r = gamma by default
    obs, info = env.reset(seed=seed)
    ep = env.unwrapped.episode
    b = ep.budget.per_round
    assert obs in env.observation_space
    for t, wanted in enumerate(actions, start=1):
        mask = env.unwrapped.action_masks()
        assert mask.any(), "no action available before the budget is spent"
        action = wanted if mask[wanted] else 1 - wanted
        obs, r, terminated, truncated, info = env.step(action)

        assert obs in env.observation_space, obs
        assert isinstance(r, float) and math.isfinite(r)
        assert r >= 0.0, r
        assert 0.0 <= info["test_cost"] <= max_cost
        assert 0.0 <= info["tau"] <= 1.0
        for rate in ("fpr", "fnr", "rejection_rate"):
            assert 0.0 <= info[rate] <= 1.0, (rate, info[rate])
        assert 0.0 <= info["val_cost"] <= max_cost
        if np.unique(ep.split.y_test).size == 2:
            assert 0.0 <= info["auc"] <= 1.0
        else:
            assert math.isnan(info["auc"])  # T holds one class (e.g. the only anomaly)
        assert info["n_labeled_train"] + info["n_labeled_val"] == b * t
        assert terminated is (t == N_ROUNDS) and truncated is False
    assert not env.unwrapped.action_masks().any()
    env.close()
