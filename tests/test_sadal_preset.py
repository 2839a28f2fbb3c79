"""``Settings.sadal()`` and the option it adds, ``tau_without_val="validation"`` (issue 23)."""

from __future__ import annotations

import numpy as np
import pytest

from ballad_env.data import Dataset
from ballad_env.episode import AL, LR, Episode
from ballad_env.settings import SADAL_CODE, Settings


def _data() -> Dataset:
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(90, 3)), rng.normal(3, 1, size=(10, 3))])
    y = np.r_[np.zeros(90, dtype=np.int8), np.ones(10, dtype=np.int8)]
    return Dataset("blobs", X, y)


def test_the_preset_switches_every_published_option() -> None:
    preset = Settings.sadal()
    assert all(getattr(preset, name) == value for name, value in SADAL_CODE.items())
    assert preset.is_sadal_code and not Settings().is_sadal_code
    assert preset.name == "sadal" and Settings.sadal(c_fn=10).name == "sadal_cfn10"
    assert Settings.sadal(prior="knn").name == "sadal_knn"  # never two settings, one name
    assert not Settings.sadal(split="stratified").is_sadal_code
    assert Settings.from_dict(preset.to_dict()) == preset
    assert preset.n_rounds == 10


def test_validation_fit_needs_the_two_sided_rejector() -> None:
    with pytest.raises(ValueError, match="tau_without_val='validation'.*two-sided"):
        Settings(tau_without_val="validation")


def _two_sided(tau_without_val: str) -> Episode:
    return Episode(_data(), 0, Settings(rejector="two-sided", tau_without_val=tau_without_val))


def test_without_v_labels_the_thresholds_are_fitted_on_v() -> None:
    """AL first, no V label: with "validation" both sides are searched on V's
    probabilities with no label, a constant cost; the exact search then takes the threshold
    that rejects fewest: left = (0.5 + the largest P below 0.5) / 2 and right = (0.5 + the
    smallest P at or above 0.5) / 2, the ends of their intervals; the next round's queries
    read them. With "zero" there is nothing to fit: (0.5, 0.5), and no thresholds to read."""
    episode = _two_sided("validation")
    assert episode.query_context().thresholds is None  # before any round
    episode.step(AL)
    p = episode.p_val
    left = (0.5 + p[p < 0.5].max()) / 2
    right = (0.5 + p[p >= 0.5].min()) / 2
    assert episode.rejection.thresholds == pytest.approx((left, right), abs=1e-15)
    assert episode.query_context().thresholds == episode.rejection.thresholds
    zero = _two_sided("zero")
    zero.step(AL)
    assert zero.rejection.thresholds == (0.5, 0.5)
    assert zero.query_context().thresholds is None
    # once V holds labels both fit on them
    episode.step(LR)
    zero.step(LR)
    assert episode.rejection.thresholds == zero.rejection.thresholds
