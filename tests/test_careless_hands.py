"""What a new user trips on (issue 30): a misspelt option, a data set of one anomaly, rounds
smaller than a label, a CSV saved with its row index, settings missing from the results
table, seeds a store does not hold, and Gymnasium's vector env over a store whose data sets
buy different numbers of labels a round."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_xy

import ballad_env
from agents.experiments.grid import Grid
from agents.experiments.lattice_build import build_store
from agents.experiments.run import run_grid
from agents.experiments.stores.results import SETTING_COLUMNS
from ballad_env import BudgetAllocationEnv, BudgetWarning
from ballad_env.data import Dataset, DataWarning, load_dataset
from ballad_env.replay.store import StoreError
from ballad_env.settings import Settings
from ballad_env.snapshot import QUERIED_WIDTH


def test_a_misspelt_setting_lists_the_fields() -> None:
    with pytest.raises(TypeError, match=r"'rewrad' \(did you mean 'reward'\?\).*c_fp, c_fn"):
        Settings(rewrad="cost")
    with pytest.raises(TypeError, match=r"'pryor' \(did you mean 'prior'\?\)"):
        Settings().replace(pryor="knn")


def test_one_anomaly_warns_that_d_and_v_hold_none() -> None:
    X, y = make_xy(n=120, n_anomalies=1, seed=3)
    with pytest.warns(DataWarning, match=r"D and V get no anomaly.*FNR is 1"):
        BudgetAllocationEnv(Dataset("one", X, y), prior="knn").reset(seed=0)


def test_rounds_smaller_than_a_label_warn_that_they_are_rounded_up() -> None:
    with pytest.warns(BudgetWarning, match=r"rounded up to 1: 3 rounds buy 3 labels \(3.5% of D"):
        env = BudgetAllocationEnv("Glass", prior="knn", budget_fraction=0.003,
                                  round_fraction=0.001)
        env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        BudgetAllocationEnv("Glass", prior="knn").reset(seed=0)  # 2% of 86: 2 labels, exact


def test_a_csv_saved_with_its_row_index_drops_it(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    X, y = make_xy(n=60, n_anomalies=6, d=2, seed=0)
    frame = pandas.DataFrame({"a": X[:, 0], "b": X[:, 1], "label": y})
    frame.to_csv(tmp_path / "indexed.csv")  # index=True: a first column "", 0..59
    with pytest.warns(DataWarning, match=r"row index 0..59"):
        ds = load_dataset(tmp_path / "indexed.csv")
    assert ds.X.shape == (60, 2)
    np.testing.assert_allclose(ds.X, X)
    frame.to_csv(tmp_path / "plain.csv", index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        assert load_dataset(tmp_path / "plain.csv").X.shape == (60, 2)
    named = frame.assign(id=np.arange(60))[["id", "a", "b", "label"]]
    named.to_csv(tmp_path / "named.csv", index=False)  # a named column is the user's feature
    assert load_dataset(tmp_path / "named.csv").X.shape == (60, 3)


def test_settings_at_their_defaults_are_in_the_results_table(tmp_path: Path) -> None:
    grid = Grid((Dataset("small", *make_xy(n=120, n_anomalies=10)),), (0,), ("all-in-lr",),
                (Settings(prior="knn"),))
    table = run_grid(grid, tmp_path / "out", n_jobs=1, progress=False)
    unset = {"query_seed", "kernel_device"}  # None: nothing is set (no legacy RNG, no torch)
    empty = [c for c in SETTING_COLUMNS if c not in unset and table[c].isna().all()]
    assert empty == []
    assert len(table[table.rejector == "confidence"]) == len(table)
    assert set(table.kernel_pairs) == {"all"} and set(table.scaling) == {"standard-minmax"}


@pytest.fixture(scope="module")
def two_widths(tmp_path_factory) -> Path:
    """Two data sets buying 2 and 3 labels a round (|D| 80 and 160), seeds 0-2."""
    root = tmp_path_factory.mktemp("widths")
    small = Dataset("narrow", *make_xy(n=200, n_anomalies=20, seed=0))
    large = Dataset("wide", *make_xy(n=400, n_anomalies=40, seed=1))
    build_store(root, [small, large], [0, 1, 2], [Settings(prior="knn")], progress=False)
    return root


def test_the_replay_env_refuses_seeds_the_store_lacks(two_widths: Path) -> None:
    with pytest.raises(StoreError, match=r"narrow lacks 3-49 \(holds 0-2\)"):
        gym.make(ballad_env.REPLAY_ENV_ID, store=two_widths, prior="knn", seeds=range(50))
    env = gym.make(ballad_env.REPLAY_ENV_ID, store=two_widths, prior="knn", seeds=[1, 2])
    assert {seed for _, seed in env.unwrapped.cells} == {1, 2}
    with pytest.raises(StoreError, match=r"lacks 7"):
        env.reset(options={"seed": 7})


def test_gymnasium_sync_vector_env_over_data_sets_of_two_widths(two_widths: Path) -> None:
    envs = gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=6, vectorization_mode="sync",
                        store=two_widths, prior="knn")
    try:
        _, info = envs.reset(seed=0)
        assert info["queried"].shape == (6, QUERIED_WIDTH) and (info["queried"] == -1).all()
        rng = np.random.default_rng(0)
        for _ in range(40):  # past the episodes' ends: auto-resets mixed with steps
            masks = np.stack(envs.call("action_masks"))
            actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks])
            _, _, _, _, info = envs.step(actions)
            queried = info["queried"]
            assert queried.shape == (6, QUERIED_WIDTH)
            for row in queried:
                bought = row[row >= 0]
                assert len(bought) in (0, 2, 3) and (row[len(bought):] == -1).all()
    finally:
        envs.close()


def test_data_listing_marks_an_invalid_file_with_its_reason(tmp_path: Path, capsys) -> None:
    from agents.experiments.cli import main as cli

    X, y = make_xy(n=60, n_anomalies=6, d=2, seed=0)
    np.savez(tmp_path / "good.npz", X=X, y=y)
    (tmp_path / "bad.csv").write_text("a,b,label\n1,x,0\n")
    status = cli(["data", "--data-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert status == 1 and "bad" in out.err
    rows = {line.split("|")[1].strip(): line for line in out.out.splitlines()
            if line.startswith("| `")}
    assert "| 60 | 2 |" in rows["`good`"]
    assert "invalid: ValueError" in rows["`bad`"] and "non-numeric value 'x'" in rows["`bad`"]
