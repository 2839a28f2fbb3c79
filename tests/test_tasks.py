"""Generated tasks (ballad_env.data.tasks): the four anomaly types, names and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from ballad_env.data import data_file, dataset_name, load_dataset
from ballad_env.data.lookup import task_costs, task_spec
from ballad_env.data.tasks import (
    ALPHA,
    ANOMALY_TYPES,
    COSTS,
    MIN_ANOMALIES,
    MIN_REAL_ROWS,
    REAL_LEVELS,
    WIDEN,
    check_source,
    draw_real_spec,
    draw_spec,
    is_real_task,
    parse_task,
    plant,
    sample_mixture,
    task_name,
)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_global_anomalies_fill_the_widened_box() -> None:
    """Uniform over [-0.1, 1.1] per feature: every draw inside, mean 0.5, variance 1.2^2/12."""
    U = _rng().uniform(size=(50, 2))
    out = plant(U, "global", 4000, _rng(1))
    assert out.shape == (4000, 2)
    assert out.min() >= -WIDEN and out.max() <= 1 + WIDEN
    assert out.mean(axis=0) == pytest.approx([0.5, 0.5], abs=0.02)
    assert out.var(axis=0) == pytest.approx([1.2**2 / 12] * 2, rel=0.05)


def test_dependency_anomalies_break_the_dependence_and_keep_the_marginals() -> None:
    """Two equal columns, half 0 and half 1: each anomaly feature is drawn on its own, so
    about half the anomalies have x1 != x2 (none of the normal rows has), and each feature
    sits near 0 or 1 (Gaussian kernel of bandwidth 0.5 * 400^-0.2 = 0.15)."""
    column = np.repeat([0.0, 1.0], 200)
    U = np.column_stack([column, column])
    out = plant(U, "dependency", 4000, _rng(2))
    rounded = (out > 0.5).astype(int)
    assert np.mean(rounded[:, 0] != rounded[:, 1]) == pytest.approx(0.5, abs=0.03)
    assert rounded.mean(axis=0) == pytest.approx([0.5, 0.5], abs=0.03)
    bandwidth = 0.5 * 400 ** -0.2
    assert np.std(out[:, 0] - rounded[:, 0]) == pytest.approx(bandwidth, rel=0.05)


def test_local_anomalies_scale_the_covariance_by_alpha() -> None:
    """One tight Gaussian (sd 0.01 around 0.5): one component; anomalies keep the mean and
    have ALPHA times the variance (sd 0.01 sqrt(5))."""
    U = 0.5 + 0.01 * _rng(3).standard_normal((400, 1))
    out = plant(U, "local", 5000, _rng(4))
    assert out.mean() == pytest.approx(0.5, abs=0.002)
    assert out.std() == pytest.approx(0.01 * np.sqrt(ALPHA), rel=0.05)


def test_clustered_anomalies_scale_the_mean_by_alpha() -> None:
    """The same cluster: anomalies centred on ALPHA x 0.5 = 2.5 with the cluster's spread."""
    U = 0.5 + 0.01 * _rng(3).standard_normal((400, 1))
    out = plant(U, "clustered", 5000, _rng(5))
    assert out.mean() == pytest.approx(ALPHA * 0.5, abs=0.002)
    assert out.std() == pytest.approx(0.01, rel=0.05)


def test_mixture_draws_follow_the_weights_and_means() -> None:
    """Zero covariances: every draw is one of the means, in the weights' proportions."""
    means = np.array([[0.0, 0.0], [1.0, 2.0]])
    out = sample_mixture(np.array([0.25, 0.75]), means, np.zeros((2, 2, 2)), 4000, _rng(6))
    at_second = np.all(np.abs(out - means[1]) < 1e-5, axis=1)
    at_first = np.all(np.abs(out - means[0]) < 1e-5, axis=1)
    assert np.all(at_first | at_second)
    assert at_second.mean() == pytest.approx(0.75, abs=0.03)


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown anomaly type"):
        plant(np.zeros((10, 1)), "spiky", 3, _rng())


def test_names_round_trip() -> None:
    assert parse_task(task_name("adbench/cover@20000", 3)) == ("adbench/cover@20000", 3)
    assert task_name("Glass", 7) == "task/Glass/7"
    assert dataset_name("task/glass/7") == "task/Glass/7"
    assert load_dataset("task/glass/7").name == "task/Glass/7"
    for bad in ("task/Glass", "task/Glass/x", "task//3"):
        with pytest.raises(ValueError, match="no task name"):
            parse_task(bad)
    with pytest.raises(ValueError, match="no file"):
        data_file("task/Glass/7")


@pytest.mark.parametrize("source", ["adbench/cardio", "WBC", "adbench/WBC", "Annthyroid",
                                    "adbench/satellite", "adbench/Ionosphere@100",
                                    "Cardiotocography", "task/Glass/1"])
def test_reserved_sources_and_tasks_are_refused(source: str) -> None:
    with pytest.raises(ValueError, match="reserved|is a task"):
        check_source(source)
    with pytest.raises(ValueError, match="reserved|is a task"):
        load_dataset(task_name(source, 0))
    with pytest.raises(ValueError, match="reserved|is a task"):
        load_dataset(task_name(source, 0, real=True))


def test_real_task_names_round_trip() -> None:
    name = task_name("adbench/cover@20000", 3, real=True)
    assert name == "task/adbench/cover@20000/real-3"
    assert parse_task(name) == ("adbench/cover@20000", 3)
    assert is_real_task(name) and not is_real_task("task/Glass/3")
    assert dataset_name("task/glass/real-7") == "task/Glass/real-7"
    for bad in ("task/Glass/real-", "task/Glass/real-x", "task/Glass/rea-3"):
        with pytest.raises(ValueError, match="no task name"):
            parse_task(bad)


@pytest.mark.parametrize("source", ["Glass", "WDBC", "Arrhythmia"])
def test_a_real_task_keeps_real_anomalies_at_a_campos_level(source: str) -> None:
    """Over seeds: the contamination is one of Campos et al.'s levels up to the rounding of
    one row, every anomaly and every normal row is the source's own (on the drawn
    features), and the name rebuilds the same data."""
    full = load_dataset(source)
    for seed in range(6):
        name = task_name(source, seed, real=True)
        data, spec = load_dataset(name), task_spec(name)
        rows = data.n_samples
        assert spec.kind == "real" and rows >= MIN_REAL_ROWS and data.y.sum() >= MIN_ANOMALIES
        assert min(abs(data.contamination - lv) for lv in REAL_LEVELS) <= 0.5 / rows
        columns = np.array(spec.features)
        for label in (0, 1):
            kept = {tuple(r) for r in full.X[full.y == label][:, columns]}
            assert {tuple(r) for r in data.X[data.y == label]} <= kept
        assert np.array_equal(load_dataset(name).X, data.X)
    assert len({task_spec(task_name(source, k, real=True)).contamination
                for k in range(12)}) > 1


def test_a_level_the_source_cannot_reach_is_never_drawn() -> None:
    """9 anomalies among 205 normals (Glass): 2% needs 250 rows of normals it has not, 20%
    and 40% a task under the row floor, so every task sits at 5% or 10%; 3 anomalies reach
    no level at all."""
    levels = {round(draw_real_spec("Glass", k, 205, 9, 7).contamination, 2) for k in range(40)}
    assert levels == {0.05, 0.1}
    with pytest.raises(ValueError, match="too few for a real-anomaly task"):
        draw_real_spec("Glass", 0, 205, 3, 7)


def test_a_task_is_rebuilt_from_its_name() -> None:
    """The same name gives the same data; another seed other data; the rows are the drawn
    normals and the planted anomalies, with the spec's contamination."""
    first, again = load_dataset("task/Glass/0"), load_dataset("task/Glass/0")
    assert np.array_equal(first.X, again.X) and np.array_equal(first.y, again.y)
    other = load_dataset("task/Glass/1")
    assert first.X.shape != other.X.shape or not np.array_equal(first.X, other.X)
    spec = task_spec("task/Glass/0")
    assert first.n_samples == len(spec.normal_rows) + spec.n_anomalies
    assert first.n_features == len(spec.features)
    assert first.contamination == pytest.approx(spec.contamination)
    glass = load_dataset("Glass")
    normals = glass.X[glass.y == 0][np.array(spec.normal_rows)][:, np.array(spec.features)]
    assert {tuple(r) for r in first.X[first.y == 0]} == {tuple(r) for r in normals}


@pytest.mark.parametrize(("name", "kind", "shape", "total", "anomalies", "costs"), [
    ("task/Glass/0", "global", (250, 5), 540.2659947027062, 47, (3.3006, 16.0002)),
    ("task/Glass/1", "dependency", (224, 7), 678.6474321532748, 19, (12.8384, 7.6887)),
    ("task/WDBC/5", "global", (374, 5), 38757.175319879556, 27, (5.0922, 10.0729)),
    ("task/SpamBase/2", "local", (1168, 14), 203442.61401275024, 75, (5.7812, 3.7238))])
def test_the_studys_tasks_are_rebuilt_bit_for_bit(name, kind, shape, total, anomalies,
                                                  costs) -> None:
    """Tasks as the third round of the allocation study built them (their sums recorded
    then): a change to the generator shows here."""
    data = load_dataset(name)
    assert task_spec(name).kind == kind and data.X.shape == shape
    assert float(data.X.sum()) == pytest.approx(total, rel=1e-12)
    assert int(data.y.sum()) == anomalies
    assert tuple(task_costs(name).values()) == costs


def test_specs_cover_the_ranges() -> None:
    """Over many seeds: every type drawn, contamination in [0.5%, 35%] up to the anomaly
    floor (5 anomalies), costs in [1, 20], features a subset of the source's."""
    specs = [draw_spec("Glass", seed, 2000, 12) for seed in range(200)]
    assert {s.kind for s in specs} == set(ANOMALY_TYPES)
    assert all(0.004 <= s.contamination <= 0.36 for s in specs)
    assert all(COSTS[0] <= c <= COSTS[1] for s in specs for c in (s.c_fp, s.c_fn))
    assert all(2 <= len(s.features) <= 12 and max(s.features) < 12 for s in specs)
    spec = task_spec("task/Glass/3")
    assert task_costs("task/Glass/3") == {"c_fp": spec.c_fp, "c_fn": spec.c_fn}


@pytest.mark.slow
def test_lattices_command_builds_a_task_at_its_own_costs(tmp_path) -> None:
    from agents.experiments.cli.lattices import main
    from ballad_env.replay.store import LatticeStore

    out = tmp_path / "store"
    assert main(["--out", str(out), "--tasks-from", "Glass", "--tasks-per-source", "1",
                 "--task-costs", "--seeds", "1", "--no-progress"]) == 0
    from ballad_env.settings import Settings

    settings = Settings().replace(**task_costs("task/Glass/0"))
    lattice = LatticeStore(out).load("task/Glass/0", 0, settings)
    assert (lattice.settings.c_fp, lattice.settings.c_fn) == (settings.c_fp, settings.c_fn)
    assert lattice.dataset == "task/Glass/0"
