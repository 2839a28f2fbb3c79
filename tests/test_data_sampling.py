"""A sample of a data set's rows: only by name, seeded, stratified, recorded in the name."""

from __future__ import annotations

import numpy as np
import pytest

from ballad_env.data import Dataset, dataset_name, load_dataset, sample_rows
from ballad_env.data.sampling import parse_sample


def _ten_rows() -> Dataset:
    """8 normals and 2 anomalies (rows 3 and 7), each row's feature its index."""
    y = np.zeros(10, dtype=np.int8)
    y[[3, 7]] = 1
    return Dataset("ten", np.arange(10.0).reshape(-1, 1), y)


def test_a_sample_keeps_the_contamination_by_hand() -> None:
    """5 of 10 rows at contamination 0.2: round(5 x 0.2) = 1 anomaly and 4 normals, drawn
    per class from default_rng(seed), in the data's order."""
    sample = sample_rows(_ten_rows(), 5, seed=3)
    rng = np.random.default_rng(3)
    anomaly = rng.choice(np.array([3, 7]), 1, replace=False)
    normals = rng.choice(np.array([0, 1, 2, 4, 5, 6, 8, 9]), 4, replace=False)
    expected = np.sort(np.concatenate([anomaly, normals]))
    assert sample.name == "ten@5:3"
    assert np.array_equal(sample.X[:, 0], expected)
    assert sample.y.sum() == 1 and sample.y.dtype == np.int8
    assert np.array_equal(sample_rows(_ten_rows(), 5, seed=3).X, sample.X)  # seeded


def test_a_sample_keeps_one_anomaly_and_refuses_the_full_size() -> None:
    assert sample_rows(_ten_rows(), 2).y.sum() == 1  # round(0.4) = 0, kept at 1
    with pytest.raises(ValueError, match=r"ten: a sample of 10 rows needs 2 <= rows < 10"):
        sample_rows(_ten_rows(), 10)


def test_a_sample_by_name_is_recorded_in_the_name() -> None:
    assert parse_sample("adbench/cover@20000") == ("adbench/cover", 20000, 0)
    assert parse_sample("Glass@50:7") == ("Glass", 50, 7)
    assert parse_sample("Glass") is None
    assert dataset_name("glass@100") == "Glass@100"
    assert dataset_name("glass@100:2") == "Glass@100:2"
    full, sample = load_dataset("Glass"), load_dataset("glass@100")
    assert sample.name == "Glass@100" and sample.n_samples == 100
    assert sample.y.sum() == round(100 * full.contamination)
    assert full.n_samples > 100  # loading by the plain name never subsamples
