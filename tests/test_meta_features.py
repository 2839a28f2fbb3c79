"""Label-free meta-features of the allocation study (scripts.studies.allocation.meta_features)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scripts.studies.allocation.meta_features import NAMES, meta_features, scaled_sample, with_meta


def test_statistics_of_two_copies_of_one_feature() -> None:
    """Two equal columns: one principal component holds all the variance, |correlation| 1."""
    x = np.random.default_rng(0).standard_normal(500)
    out = meta_features(np.column_stack([x, x]))
    assert set(out) == set(NAMES)
    assert out["pc1_share"] == pytest.approx(1.0) and out["abs_correlation"] == pytest.approx(1.0)
    assert out["abs_skew"] < 0.3  # a normal sample is about symmetric


def test_landmarkers_agree_on_far_outliers() -> None:
    """20 rows far from a Gaussian cloud of 480: both detectors put most of them on top (of
    the top 5%, 25 rows, they share 15 or more; the 20 form a cluster, so a 5-neighbour
    distance misses a few) and their scores are right-skewed."""
    rng = np.random.default_rng(1)
    X = np.vstack([rng.standard_normal((480, 3)), 8.0 + rng.standard_normal((20, 3))])
    out = meta_features(X)
    assert out["top_overlap"] >= 0.6 and out["agreement"] > 0.5
    assert out["iforest_skew"] > 0 and out["knn_skew"] > 1


def test_a_large_set_is_sampled_with_a_seed_and_constant_columns_dropped() -> None:
    X = np.column_stack([np.arange(3000.0), np.ones(3000)])
    a, b = scaled_sample(X, 0), scaled_sample(X, 0)
    assert a.shape == (1000, 1) and np.array_equal(a, b)
    assert not np.array_equal(a, scaled_sample(X, 1))


def test_with_meta_appends_the_features_and_their_cost_products() -> None:
    from conftest import v2_observation as observation

    rows = pd.DataFrame({"dataset": ["a", "b"],
                         "obs": [observation(cost_ratio=0.5), observation(cost_ratio=0.25)]})
    meta = pd.DataFrame({"abs_skew": [1.0, 2.0]}, index=["a", "b"])
    arrays = {"X": np.zeros((2, 3)), "T": np.zeros((2, 1))}
    out = with_meta(arrays, rows, meta, ["abs_skew"])
    assert out["X"][:, 3:].tolist() == [[1.0, 0.5], [2.0, 0.5]]
    assert out["T"][:, 1].tolist() == [1.0, 2.0]
