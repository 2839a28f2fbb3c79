"""The robustness sweep: awkward generated data sets, each of which must either play a whole
episode with finite, well-formed figures or be refused at construction with a clear error.

The cases (:func:`episodes`, a Hypothesis strategy) cover tiny data sets, training sets just
below and above the 30 neighbours that set eta, duplicated rows, few distinct values,
constant columns, one or two anomalies, anomalies indistinguishable from normals, and
feature scales from 1e-300 to 1e200, alone or mixed across columns. :func:`check_case`
plays one and says how it ended. The test suite runs a few dozen cases
(``tests/test_properties.py``); ``python -m scripts.studies.robustness`` runs 500 or more.

Hypothesis is a development dependency (the ``dev`` extra): it is imported when a strategy
is built, not with this module.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ballad_env.env import BudgetAllocationEnv
from ballad_env.protocol import Budget, split_sizes

N_ROUNDS = 15
#: The refusals a well-formed data set can meet, by the words their errors must contain.
REFUSALS = {"too few examples": "the budget does not fit",
            "too large to standardise": "a feature's squares overflow float64"}
SCALES = (1e-300, 1e-3, 1.0, 1e4, 1e150, 1e200)
#: The smallest data set drawn (below about 19 rows the budget cannot fit).
MIN_ROWS = 12


@dataclass(frozen=True)
class Case:
    """One generated episode: the data, the allocation tried each round and the settings."""

    X: np.ndarray
    y: np.ndarray
    actions: tuple[int, ...]
    prior: str
    reward: str
    c_fp: float
    c_fn: float
    seed: int

    def describe(self) -> str:
        n_train = split_sizes(self.y)[0]
        return (f"n={len(self.y)} d={self.X.shape[1]} |D|={n_train} anomalies="
                f"{int(self.y.sum())} max|x|={np.abs(self.X).max():.3g} prior={self.prior} "
                f"reward={self.reward} c_fp={self.c_fp:g} c_fn={self.c_fn:g}")


def awkward_data(max_rows: int = 120) -> Any:
    """A Hypothesis strategy of (X, y) data sets with the awkward traits listed above, of
    ``MIN_ROWS`` to ``max_rows`` rows (a ``ValueError`` below ``MIN_ROWS``)."""
    if max_rows < MIN_ROWS:
        raise ValueError(f"max_rows must be at least {MIN_ROWS} (the smallest data set drawn); "
                         f"got {max_rows}")
    from hypothesis import strategies as st

    @st.composite
    def draw_data(draw: Any) -> tuple[np.ndarray, np.ndarray]:
        # Below about 19 rows the budget cannot fit; 70-82 rows put |D| at 28-33, around k.
        n = draw(st.one_of(st.integers(MIN_ROWS, max_rows), st.integers(70, 82)), label="n")
        d = draw(st.integers(1, 4), label="d")
        n_anomalies = draw(st.one_of(st.sampled_from([1, 2]), st.integers(1, (n - 1) // 2)),
                           label="n_anomalies")  # contamination < 0.5
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
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
        if draw(st.booleans(), label="mixed_scales"):
            scales = np.array([draw(st.sampled_from(SCALES), label=f"scale_{j}")
                               for j in range(d)])
        else:
            scales = np.full(d, draw(st.sampled_from(SCALES), label="scale"))
        return X * scales, y

    return draw_data()


def episodes(max_rows: int = 120) -> Any:
    """A Hypothesis strategy of :class:`Case`: awkward data, 15 actions and settings."""
    from hypothesis import strategies as st

    return st.tuples(
        awkward_data(max_rows),
        st.lists(st.integers(0, 1), min_size=N_ROUNDS, max_size=N_ROUNDS),
        st.sampled_from(["knn", "iforest"]), st.sampled_from(["entropy", "cosine"]),
        st.sampled_from([1.0, 10.0]), st.sampled_from([1.0, 10.0]),
        st.integers(0, 2**31 - 1),
    ).map(lambda t: Case(t[0][0], t[0][1], tuple(t[1]), *t[2:]))


def expected_refusal(case: Case) -> str | None:
    """The refusal the protocol calls for, if any (the words its error must contain)."""
    largest = float(np.abs(case.X).max())
    with np.errstate(over="ignore"):
        if not math.isfinite(4.0 * len(case.X) * largest * largest):
            return "too large to standardise"
    n_train, n_val, _ = split_sizes(case.y)
    budget = Budget.from_fractions(n_train)
    if n_train // budget.per_round + n_val // budget.per_round < budget.n_rounds:
        return "too few examples"
    return None


def check_case(case: Case) -> str:
    """Play ``case``: ``"played"``, or ``"refused: <reason>"`` when construction refused it as
    expected. An ``AssertionError`` names anything else (an unexpected error or refusal, a
    malformed or non-finite figure)."""
    expected = expected_refusal(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # data warnings (constant data, no test anomaly) are fine
        try:
            env = BudgetAllocationEnv((case.X, case.y), prior=case.prior, reward=case.reward,
                                      c_fp=case.c_fp, c_fn=case.c_fn)
        except ValueError as err:
            assert expected is not None and expected in str(err), \
                f"refused unexpectedly ({case.describe()}): {err}"
            return f"refused: {REFUSALS[expected]}"
        assert expected is None, f"accepted a case that needs refusing ({expected}): " \
                                 f"{case.describe()}"
        _play(env, case)
    return "played"


def _play(env: BudgetAllocationEnv, case: Case) -> None:
    """The whole episode, checking every step's figures."""
    gamma = float(case.y.mean())
    max_cost = max(case.c_fp, case.c_fn, gamma)  # c_r = gamma by default
    obs, info = env.reset(seed=case.seed)
    episode = env.episode
    assert episode is not None
    b = episode.budget.per_round
    assert obs in env.observation_space
    for t, wanted in enumerate(case.actions, start=1):
        mask = env.action_masks()
        assert mask.any(), "no action available before the budget is spent"
        action = wanted if mask[wanted] else 1 - wanted
        obs, reward, terminated, truncated, info = env.step(action)
        where = f"round {t} ({case.describe()})"
        assert obs in env.observation_space, (where, obs)
        assert isinstance(reward, float) and math.isfinite(reward) and reward >= 0.0, \
            (where, reward)
        assert 0.0 <= info["test_cost"] <= max_cost, (where, info["test_cost"])
        assert 0.0 <= info["tau"] <= 1.0, (where, info["tau"])
        for rate in ("fpr", "fnr", "rejection_rate"):
            assert 0.0 <= info[rate] <= 1.0, (where, rate, info[rate])
        assert 0.0 <= info["val_cost"] <= max_cost, (where, info["val_cost"])
        if np.unique(episode.split.y_test).size == 2:
            assert 0.0 <= info["auc"] <= 1.0, (where, info["auc"])
        else:
            assert math.isnan(info["auc"]), where  # T holds one class (e.g. the only anomaly)
        assert info["n_labeled_train"] + info["n_labeled_val"] == b * t, where
        assert terminated is (t == N_ROUNDS) and truncated is False, where
    assert not env.action_masks().any()


__all__ = ["MIN_ROWS", "REFUSALS", "Case", "awkward_data", "check_case", "episodes",
           "expected_refusal"]
