"""Observation v2: the costs, the budget and label-free traits, each in a fixed range."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ballad_env.observation import OBSERVATIONS, V2_FEATURES, v2_features
from ballad_env.snapshot import detector_traits


def figures(**changes: float) -> SimpleNamespace:
    base = dict(c_fp=1.0, c_fn=10.0, c_r=0.05, max_cost=10.0, n_train=600, n_val=400,
                n_features=100, contamination=0.01, n_rounds=15, per_round=12,
                prior_flagged=0.03, prior_confidence=0.8, flagged_train=0.01,
                confidence_train=0.6, train_shift=0.02)
    return SimpleNamespace(**{**base, **changes})


def test_v2_appends_to_v1_so_every_earlier_index_holds():
    assert OBSERVATIONS["v2"][:len(OBSERVATIONS["v1"])] == OBSERVATIONS["v1"]
    assert OBSERVATIONS["v2"][len(OBSERVATIONS["v1"]):] == V2_FEATURES


def test_v2_features_by_hand():
    got = v2_features(figures())
    assert got["cost_fp"] == pytest.approx(0.1) and got["cost_fn"] == 1.0
    assert got["cost_r"] == pytest.approx(0.005)
    assert got["cost_ratio"] == pytest.approx(0.75)  # (log10(10) + 2) / 4
    assert got["log_size"] == pytest.approx(0.5)  # log10(1000) / 6
    assert got["log_dimension"] == pytest.approx(0.5)  # log10(100) / 4
    assert got["log_contamination"] == pytest.approx(0.5)  # (log10(0.01) + 4) / 4
    assert got["budget_share"] == pytest.approx(0.3)  # 15 * 12 / 600
    assert got["prior_flagged"] == pytest.approx(0.75)  # 0.03 / (0.03 + 0.01)
    assert got["flagged_ratio"] == pytest.approx(0.5)  # flags gamma
    assert (got["prior_confidence"], got["confidence_train"], got["train_shift"]) == (
        0.8, 0.6, 0.02)
    equal = v2_features(figures(c_fn=1.0, max_cost=1.0))
    assert equal["cost_ratio"] == pytest.approx(0.5) and equal["cost_fp"] == 1.0


def test_v2_features_are_elementwise_on_a_grid():
    grid = figures(n_train=np.array([600.0, 60.0]), flagged_train=np.array([0.0, 0.02]))
    got = v2_features(grid)
    for k, n in enumerate((600, 60)):
        one = v2_features(figures(n_train=n, flagged_train=float(grid.flagged_train[k])))
        for name in V2_FEATURES:
            assert np.asarray(got[name]).reshape(-1)[k if np.ndim(got[name]) else 0] == one[name]


def test_detector_traits_by_hand():
    flagged, confidence = detector_traits(np.array([0.0, 0.5, 0.75, 1.0]))
    assert flagged == 0.5  # 0.75 and 1.0
    assert confidence == pytest.approx((1.0 + 0.0 + 0.5 + 1.0) / 4)


def test_live_v2_observation_reads_the_episode(small_xy):
    from ballad_env import AL
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.observation import ALL_FEATURE_INDEX as at

    env = BudgetAllocationEnv(small_xy, observation="v2", c_fn=10.0, budget_fraction=0.1,
                              round_fraction=0.05)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (len(OBSERVATIONS["v2"]),) and env.observation_space.contains(obs)
    assert obs[at["cost_fn"]] == 1.0 and obs[at["cost_fp"]] == np.float32(0.1)
    assert obs[at["train_shift"]] == 0.0
    assert obs[at["prior_flagged"]] == obs[at["flagged_ratio"]]
    obs, *_ = env.step(AL)
    snap = env.unwrapped.snapshot()
    assert obs[at["train_shift"]] == np.float32(snap.train_shift) and snap.train_shift > 0
