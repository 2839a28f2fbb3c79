"""Inputs refused up front in one line naming them, where they used to fail late or be read
wrongly: a bootstrap seed numpy refuses after the whole run, a settings JSON whose number
Python will not convert, a CSV naming its label column twice, complex features, a built-in
name that is also a file of the user's, a FIFO named as a data set."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from ballad_env.data import load_dataset


def test_a_negative_stats_seed_is_refused_before_the_run(tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    from agents.experiments.cli import compare

    pytest.importorskip("scipy")
    ran: list[str] = []
    monkeypatch.setattr(compare, "run_grid", lambda *a, **k: ran.append("run"))
    code = compare.main(["--datasets", "toy", "--seeds", "1", "--agents", "all-in-al",
                         "--stats", "--stats-seed", "-1", "--output", str(tmp_path / "r"),
                         "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and ran == [] and "--stats-seed must be a whole number >= 0" in err


def test_a_settings_json_with_a_5000_digit_number_names_the_file(tmp_path: Path) -> None:
    from agents.policy import read_settings
    from agents.policy_zip import PolicyFileError

    path = tmp_path / "run.json"
    path.write_text('{"algo": "ppo", "config": {"seed": ' + "9" * 5000 + "}}")
    with pytest.raises(PolicyFileError, match=rf"{path}: not valid JSON \(ValueError"):
        read_settings(path)
    path.write_text(json.dumps({"algo": "ppo"}))
    assert read_settings(path) == {"algo": "ppo"}


def test_a_csv_naming_its_label_column_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.csv"
    rows = "\n".join(f"{int(k < 3)},{int(k < 5)},{k * 0.1}" for k in range(30))
    path.write_text("label,Label,a\n" + rows + "\n")
    with pytest.raises(ValueError, match=r"twice.csv: the header names the label column "
                                         r"'label' 2 times \(columns 1, 2\)"):
        load_dataset(path)
    path.write_text("label,b,a\n" + rows + "\n")
    assert load_dataset(path).n_features == 2


def test_complex_features_are_refused_not_truncated(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2)) + 1j * rng.normal(size=(40, 2))
    y = (np.arange(40) < 4).astype(np.int8)
    path = tmp_path / "complex.npz"
    np.savez(path, X=X, y=y)
    with pytest.raises(ValueError, match=r"complex.npz: X holds complex numbers"):
        load_dataset(path)
    with pytest.raises(ValueError, match=r"arrays: X holds complex numbers"):
        load_dataset((X, y))
    assert load_dataset((X.real, y)).n_samples == 40


def test_a_builtin_name_that_is_also_a_users_file_is_ambiguous(tmp_path: Path) -> None:
    from agents.experiments.grid import dataset_names

    data = tmp_path / "data"
    data.mkdir()
    assert load_dataset("toy", data).n_samples == 1000  # no file of that name: the built-in
    rng = np.random.default_rng(1)
    np.savez(data / "Toy.npz", X=rng.normal(size=(50, 2)), y=(np.arange(50) < 5))
    for call in (lambda: load_dataset("toy", data), lambda: dataset_names(["toy"], data)):
        with pytest.raises(ValueError, match=r"'toy' is ambiguous: it is a built-in data set "
                                             r"and '.*Toy.npz' in the data folder"):
            call()
    assert load_dataset(data / "Toy.npz").n_samples == 50  # the path says which
    assert load_dataset("Toy", data).n_samples == 50


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX's")
def test_a_fifo_named_as_a_data_set_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "piped.npz")
    with pytest.raises(ValueError, match=r"piped.npz' is not a regular file"):
        load_dataset("piped", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"unknown data set 'absent'"):
        load_dataset("absent", tmp_path)


def test_an_episode_deriving_more_than_the_ceiling_is_refused_naming_the_set(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """A file under the arrays' ceiling whose episode would derive several times it (the
    split, the scaled copy, the kernel rows): refused before anything is derived."""
    from agents.experiments.cli import main
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.episode_start import EPISODE_COPIES

    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(2_000, 6)), (np.arange(2_000) < 100).astype(np.int8)
    np.savez(tmp_path / "wide.npz", X=X, y=y)
    monkeypatch.setenv("BALLAD_MAX_ARRAY_BYTES", str(2 * X.nbytes))  # the file loads
    assert load_dataset(tmp_path / "wide.npz").n_samples == 2_000
    said = (rf"wide: an episode on its 2,000 x 6 features would derive about "
            rf"{EPISODE_COPIES * X.nbytes:,} bytes .* set \$BALLAD_MAX_ARRAY_BYTES")
    with pytest.raises(ValueError, match=said):
        BudgetAllocationEnv(str(tmp_path / "wide.npz"))
    assert main(["compare", "--datasets", "wide", "--data-dir", str(tmp_path), "--seeds", "1",
                 "--agents", "all-in-al", "--n-jobs", "1", "--no-progress", "--output",
                 str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "wide: an episode" in err and "$BALLAD_MAX_ARRAY_BYTES" in err
    monkeypatch.setenv("BALLAD_MAX_ARRAY_BYTES", str(EPISODE_COPIES * X.nbytes))
    assert BudgetAllocationEnv(str(tmp_path / "wide.npz")).reset(seed=0)[0] is not None


def test_seeds_and_cells_are_bounded_where_planning_stays_small(tmp_path: Path,
                                                                capsys) -> None:
    """``--seeds`` at its old bound of 10^7 planned for minutes and gigabytes; the bound is
    where planning takes seconds, and a grid's cells are bounded whatever its axes."""
    from agents.experiments.cli import main
    from agents.experiments.grid import MAX_CELLS, MAX_SEEDS, Grid, seed_range

    assert MAX_SEEDS <= 10**5 and MAX_CELLS <= 10**6
    with pytest.raises(ValueError, match=r"--seeds must be at most 100,000"):
        seed_range(10**7)
    with pytest.raises(ValueError, match=r"the grid holds 1,100,000 cells \(1 x 100,000 x 11 "
                                         r"x 1\), more than 1,000,000"):
        Grid(("toy",), seed_range(MAX_SEEDS), tuple(f"lr-first-{p}" for p in range(11)))
    with pytest.raises(SystemExit):  # argparse's error
        main(["lattices", "--datasets", "toy", "--seeds", str(10**7), "--out",
              str(tmp_path / "store")])
    assert "--seeds must be from 1 to 100,000" in capsys.readouterr().err
    assert main(["compare", "--datasets", "toy", "--seeds", str(10**7), "--output",
                 str(tmp_path / "run")]) == 2
    assert "--seeds must be at most 100,000" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
