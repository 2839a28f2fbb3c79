"""Property test: any small data set and any allocation give a well-formed episode.

Hypothesis draws awkward data sets (``scripts.studies.robustness.datasets``: tiny, around the 30
neighbours of eta, duplicated rows, constant columns, one or two anomalies, anomalies
indistinguishable from normals, feature scales from 1e-300 to 1e200) and an allocation
sequence, and runs a whole episode: it must play with finite, well-formed figures, or be
refused at construction with the error the case calls for. The suite runs a few dozen
cases; ``python -m scripts.studies.robustness`` runs 500 or more.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from scripts.studies.robustness.datasets import Case, check_case, episodes, expected_refusal


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=episodes())
def test_any_small_data_set_gives_a_well_formed_episode(case: Case) -> None:
    check_case(case)


def _case(X: np.ndarray, y: np.ndarray) -> Case:
    return Case(X, y, (0, 1) * 7 + (0,), "knn", "entropy", 1.0, 1.0, 0)


def test_the_sweep_accepts_plays_and_refuses_as_it_should() -> None:
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 2)), np.zeros(80, dtype=np.int8)
    y[:4] = 1
    assert check_case(_case(X, y)) == "played"
    assert expected_refusal(_case(X * 1e200, y)) == "too large to standardise"
    assert check_case(_case(X * 1e200, y)) == "refused: a feature's squares overflow float64"
    assert check_case(_case(X[:12], y[:12])) == "refused: the budget does not fit"
    assert check_case(_case(X * 1e-300, y)) == "played"  # tiny, but standardisable


def test_the_sweep_refuses_a_max_rows_below_its_smallest_data_set(capsys) -> None:
    from scripts.studies.robustness import __main__ as script
    from scripts.studies.robustness.datasets import MIN_ROWS, awkward_data

    with pytest.raises(SystemExit) as done:
        script.main(["--max-rows", str(MIN_ROWS - 1), "--examples", "1"])
    assert done.value.code == 2  # argparse's usage error, not a failed case
    assert f"--max-rows: give at least {MIN_ROWS}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=f"max_rows must be at least {MIN_ROWS}"):
        awkward_data(MIN_ROWS - 1)
