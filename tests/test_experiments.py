"""Tests for agents.runner: tidy results, resume, errors, parallel and Dask equality, summaries.

Grids are tiny: two synthetic data sets of ~150 rows, the kNN prior (fast to fit) and a
budget of 5 rounds, so a whole grid runs in a couple of seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import agents.experiments.run as runner
from agents import make_agent, run_episode
from agents.experiments import (
    COLUMNS,
    Cell,
    Grid,
    ResultStore,
    RunError,
    action_shares,
    load_results,
    per_round_table,
    run_grid,
    summary_table,
    win_counts,
)
from agents.reports.tables import common_episodes
from ballad_env.data import Dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings
from scripts.studies.authors_code.ablation import seeds_text
from scripts.studies.paper.figures import reward_differences

SETTING = Settings(prior="knn", budget_fraction=0.1)  # 5 rounds
AGENTS = ("ballad", "all-in-al", "all-in-lr")


def synthetic(name: str, n: int, n_anomalies: int, seed: int) -> Dataset:
    """Gaussian normals, anomalies pushed away from them."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[:n_anomalies] += 3.0 * rng.choice([-1.0, 1.0], size=(n_anomalies, 2))
    y = np.zeros(n, dtype=np.int8)
    y[:n_anomalies] = 1
    return Dataset(name, X, y)


DATASETS = (synthetic("syn_a", 150, 15, 0), synthetic("syn_b", 120, 10, 1))
GRID = Grid(DATASETS, (0, 1), AGENTS, (SETTING,))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    """The grid run once, in this process."""
    output = tmp_path_factory.mktemp("reference") / "run"
    return output, run_grid(GRID, output, n_jobs=1, progress=False)


def copy_of(reference: tuple[Path, pd.DataFrame], tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(reference[0], target)
    return target


def count_tasks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, tuple[str, ...]]]:
    """Record the (data set, seed, agents) of every task the runner plays in this process."""
    played: list[tuple[str, int, tuple[str, ...]]] = []
    original = runner._run_task

    def spy(task: runner._Task, single_thread: bool):
        played.append((task.name, task.seed, task.agents))
        return original(task, single_thread)

    monkeypatch.setattr(runner, "_run_task", spy)
    return played


# ---------------------------------------------------------------------------------- settings
def test_setting_names_are_short_stable_and_distinct() -> None:
    assert Settings().name == "iforest"
    assert Settings(prior="knn", c_fp=10).name == "knn_cfp10"
    assert Settings(threshold_search="bayes").name == "iforest_bayes20"
    assert Settings(reward="cosine", c_r=0.01).name == "iforest_cosine_cr0.01"
    # bayes_calls means nothing to the exact search: no second name for the same experiment.
    assert Settings(bayes_calls=50) == Settings()
    settings = Settings.grid(prior=["iforest", "knn"], c_fp=[1, 10])
    assert [s.name for s in settings] == ["iforest", "iforest_cfp10", "knn", "knn_cfp10"]
    assert all(Settings.from_dict(s.to_dict()) == s for s in settings)
    with pytest.raises(ValueError, match="unknown prior"):
        Settings(prior="lofx")


def test_grid_rejects_repeats_and_empty_axes() -> None:
    with pytest.raises(ValueError, match="seed repeated"):
        Grid(("wdbc",), (0, 0), ("ballad",))
    with pytest.raises(ValueError, match="no agents"):
        Grid(("wdbc",), (0,), ())


# ---------------------------------------------------------------------------------- results
def test_tidy_table_has_one_row_per_cell_and_round(reference) -> None:
    output, table = reference
    assert tuple(table.columns) == COLUMNS
    assert len(table) == 2 * 2 * 3 * 1 * SETTING.n_rounds
    keys = ["dataset", "seed", "agent", "setting", "round"]
    assert not table.duplicated(keys).any()
    assert set(table["round"]) == set(range(1, SETTING.n_rounds + 1))
    assert set(table["agent"]) == set(AGENTS) and set(table["setting"]) == {SETTING.name}
    for figure in ("test_cost", "fpr", "fnr", "rejection_rate", "auc", "reward_al",
                   "reward_lr", "entropy_al", "cosine_lr", "tau", "reward"):
        assert table[figure].dtype == np.float64
    assert set(table["action"]) <= {"AL", "LR"}
    assert (table.loc[table["agent"] == "all-in-lr", "action"] == "LR").all()
    manifest = json.loads((output / "run.json").read_text())
    assert manifest["grid"]["settings"][0]["name"] == SETTING.name
    assert {"numpy", "scikit-learn", "pyod", "ballad-env", "ballad-env source"} <= set(
        manifest["versions"])
    assert set(manifest["data"]) == {"syn_a", "syn_b"}
    pd.testing.assert_frame_equal(load_results(output), table)
    # The folder also reads as one table with plain pandas.
    assert len(pd.read_parquet(output / "cells")) == len(table)


def test_cells_equal_fresh_episodes(tmp_path: Path) -> None:
    """The shared reset changes nothing: each cell equals run_episode on a fresh environment."""
    agents = ("ballad", "oracle", "random", "all-in-al")
    grid = Grid(DATASETS[:1], (1,), agents, (SETTING,))
    table = run_grid(grid, tmp_path / "run", n_jobs=1, progress=False)
    for agent in agents:
        env = BudgetAllocationEnv(DATASETS[0], settings=SETTING)
        records = pd.DataFrame(run_episode(env, make_agent(agent, env), 1))
        ours = table[table["agent"] == agent].reset_index(drop=True)
        for column in ("test_cost", "action", "tau", "reward", "entropy_al", "n_labeled_val"):
            assert ours[column].tolist() == records[column].tolist(), (agent, column)


# ---------------------------------------------------------------------------------- resume
def test_interrupted_run_resumes_without_loss(reference, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "run"
    written = []
    original = ResultStore.write

    def write_then_die(self: ResultStore, cell: Cell, frame: pd.DataFrame) -> None:
        if len(written) == 4:
            raise KeyboardInterrupt
        original(self, cell, frame)
        written.append(cell)

    monkeypatch.setattr(ResultStore, "write", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_grid(GRID, output, n_jobs=1, progress=False)
    assert len(list((output / "cells").glob("*.parquet"))) == 4
    assert not list((output / "cells").glob(".*"))  # no temporary left behind
    monkeypatch.setattr(ResultStore, "write", original)
    played = count_tasks(monkeypatch)
    table = run_grid(GRID, output, n_jobs=1, progress=False)
    assert sum(len(agents) for *_, agents in played) == len(GRID.cells()) - 4
    pd.testing.assert_frame_equal(table, reference[1])


def test_deleted_cell_is_the_only_one_rerun(reference, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    output = copy_of(reference, tmp_path)
    cell = Cell("syn_b", 1, "all-in-lr", SETTING)
    (output / "cells" / cell.filename).unlink()
    played = count_tasks(monkeypatch)
    table = run_grid(GRID, output, n_jobs=1, progress=False)
    assert played == [("syn_b", 1, ("all-in-lr",))]
    pd.testing.assert_frame_equal(table, reference[1])


def test_corrupt_cell_file_is_a_clear_error(reference, tmp_path: Path) -> None:
    output = copy_of(reference, tmp_path)
    path = output / "cells" / Cell("syn_a", 0, "ballad", SETTING).filename
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with pytest.raises(RunError, match=rf"corrupt result file .*{path.name}.*Delete this file"):
        run_grid(GRID, output, n_jobs=1, progress=False)
    with pytest.raises(RunError, match="corrupt"):
        load_results(output)


def test_cell_file_of_another_cell_is_rejected(reference, tmp_path: Path) -> None:
    output = copy_of(reference, tmp_path)
    cells = output / "cells"
    shutil.copy(cells / Cell("syn_a", 0, "ballad", SETTING).filename,
                cells / Cell("syn_a", 1, "ballad", SETTING).filename)
    with pytest.raises(RunError, match="column 'seed' should be 1"):
        run_grid(GRID, output, n_jobs=1, progress=False)


def test_mismatched_grid_or_versions_is_a_clear_error(reference, tmp_path: Path) -> None:
    output = copy_of(reference, tmp_path)
    other = Grid(DATASETS, (0, 1), AGENTS, (Settings(prior="knn", budget_fraction=0.1, c_fn=2),))
    with pytest.raises(RunError, match=r"different run(.|\n)*grid.settings(.|\n)*another --output"):
        run_grid(other, output, n_jobs=1, progress=False)
    with pytest.raises(RunError, match="grid.seeds"):  # a run grows, it never drops seeds
        run_grid(Grid(DATASETS, (0,), AGENTS, (SETTING,)), output, n_jobs=1, progress=False)
    manifest = json.loads((output / "run.json").read_text())
    manifest["versions"]["numpy"] = "0.0.1"
    manifest["versions"]["ballad-env source"] = "an older edit"
    (output / "run.json").write_text(json.dumps(manifest))
    with pytest.raises(RunError, match="versions.ballad-env source(.|\n)*module moved or "
                       "renamed(.|\n)*versions.numpy: stored '0.0.1'"):
        run_grid(GRID, output, n_jobs=1, progress=False)


def test_changed_data_is_a_clear_error(reference, tmp_path: Path) -> None:
    output = copy_of(reference, tmp_path)
    changed = synthetic("syn_a", 150, 15, 7)
    with pytest.raises(RunError, match="data.syn_a"):
        run_grid(Grid((changed, DATASETS[1]), (0, 1), AGENTS, (SETTING,)), output, n_jobs=1,
                 progress=False)


def test_cells_without_run_file_or_incomplete_runs(reference, tmp_path: Path) -> None:
    output = copy_of(reference, tmp_path)
    (output / "run.json").unlink()
    with pytest.raises(RunError, match="run.json is missing"):
        run_grid(GRID, output, n_jobs=1, progress=False)
    partial = copy_of(reference, tmp_path / "partial")
    next((partial / "cells").glob("*.parquet")).unlink()
    with pytest.raises(RunError, match="incomplete: 1 of 12 cells"):
        load_results(partial)
    assert len(load_results(partial, allow_partial=True)) == 11 * SETTING.n_rounds


def test_bad_agents_and_costs_fail_before_running(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown agent 'balad'"):
        run_grid(Grid(DATASETS, (0,), ("balad",), (SETTING,)), tmp_path / "a", progress=False)
    with pytest.raises(FileNotFoundError, match="saved policy"):
        run_grid(Grid(DATASETS, (0,), (str(tmp_path / "nope.zip"),), (SETTING,)),
                 tmp_path / "b", progress=False)
    bad_cost = Settings(prior="knn", budget_fraction=0.1, c_r=0.5)
    with pytest.raises(ValueError, match="data set syn_a, setting knn_cr0.5_budget0.1"):
        run_grid(Grid(DATASETS, (0,), AGENTS, (bad_cost,)), tmp_path / "c", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


@pytest.mark.slow
# ---------------------------------------------------------------------------------- parallel
def test_two_jobs_equal_one(reference, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "WORKER_START_S", 0.0)  # workers even for this small grid
    table = run_grid(GRID, tmp_path / "run", n_jobs=2, progress=False)
    pd.testing.assert_frame_equal(table, reference[1])


@pytest.mark.slow
def test_dask_cluster_equals_local_run(reference, tmp_path: Path) -> None:
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  host="127.0.0.1", protocol="tcp://",
                                  dashboard_address=None) as cluster:
        table = run_grid(GRID, tmp_path / "run", scheduler=cluster.scheduler_address,
                         progress=False)
        prefixes = list(cluster.scheduler.task_prefixes)
    assert any("_run_task" in prefix for prefix in prefixes)  # the cells ran on the cluster
    pd.testing.assert_frame_equal(table, reference[1])


# ---------------------------------------------------------------------------------- summaries
def handmade() -> pd.DataFrame:
    """Known costs: on 'x' agent b is best in both seeds, on 'y' a and c tie, 2 rounds each."""
    rows = []
    costs = {("x", "a"): [0.3, 0.3], ("x", "b"): [0.1, 0.2], ("x", "c"): [0.4, 0.1],
             ("y", "a"): [0.2, 0.2], ("y", "b"): [0.5, 0.5], ("y", "c"): [0.2, 0.2]}
    for (dataset, agent), per_seed in costs.items():
        for seed, cost in enumerate(per_seed):
            for rnd in (1, 2):
                rows.append({"setting": "s", "dataset": dataset, "agent": agent, "seed": seed,
                             "round": rnd, "test_cost": cost + (0.01 if rnd == 2 else 0.0),
                             "action": "AL" if (agent != "b" or rnd == 1) else "LR",
                             "entropy_al": 0.1 * rnd, "entropy_lr": 0.05, "al_measured": True,
                             "lr_measured": rnd == 2})
    return pd.DataFrame(rows)


def test_summary_names_the_winner_its_margin_and_seeds() -> None:
    summary = summary_table(handmade()).loc["s"]
    assert list(summary.columns[:3]) == ["a", "b", "c"]
    assert summary.loc["x", "winner"] == "b"
    assert summary.loc["x", "margin"] == pytest.approx(1 - 0.155 / 0.255)
    assert summary.loc["x", "seeds_won"] == "1/2"  # seed 1: c (0.1) beats b (0.2)
    assert summary.loc["y", "winner"] == "tie"
    assert summary.loc["mean", "a"] == pytest.approx((0.305 + 0.205) / 2)
    counts = win_counts(summary_table(handmade())).loc["s"]
    assert counts.to_dict() == {"b": 1, "tie": 1}


def test_common_episodes_keep_the_pairs_every_setting_and_agent_played() -> None:
    rows = [{"setting": setting, "agent": agent, "dataset": dataset, "seed": seed, "round": 1,
             "test_cost": 0.1}
            for setting in ("s", "t") for agent in ("a", "b") for dataset in ("x", "y")
            for seed in (0, 1, 2)
            # a partial run: t/b has not played y's seeds 1 and 2, nor x's seed 2
            if not (setting == "t" and agent == "b" and (seed == 2 or dataset == "y" and seed))]
    kept, dropped = common_episodes(pd.DataFrame(rows))
    assert dropped == 3
    assert set(zip(kept["dataset"], kept["seed"], strict=True)) == {("x", 0), ("x", 1), ("y", 0)}
    assert len(kept) == 3 * 4  # every (setting, agent) of each kept pair
    assert seeds_text(kept) == "1-2"
    assert seeds_text(kept[kept["dataset"] == "x"]) == "2"
    complete = pd.DataFrame(rows[:6])  # s/a only: nothing to leave out
    assert common_episodes(complete)[1] == 0 and len(common_episodes(complete)[0]) == 6


def test_per_round_table_shares_and_reward_differences() -> None:
    table = handmade()
    rounds = per_round_table(table).loc["s"]
    assert list(rounds.index) == [1, 2]
    assert rounds.loc[1, "a"] == pytest.approx((0.3 + 0.2) / 2)
    spread = per_round_table(table, spread=True).loc["s"]
    assert spread.loc[2, ("b", "std")] == pytest.approx(np.std([0.16, 0.51], ddof=1))
    shares = action_shares(table).loc["s"]
    assert shares.to_dict() == {"a": 1.0, "b": 0.5, "c": 1.0}
    differences = reward_differences(table, agent="a")
    assert len(differences) == 4  # round 2 only: LR is unmeasured in round 1
    assert differences["difference"].tolist() == pytest.approx([0.15] * 4)


def test_two_arrays_in_a_grid_or_a_store_keep_distinct_names(tmp_path: Path) -> None:
    from agents.experiments.lattice_build import build_store
    from ballad_env.replay.store import LatticeStore

    first, second = DATASETS[0], DATASETS[1]
    arrays = [(first.X, first.y), (second.X, second.y)]
    grid = Grid(arrays, (0,), ("all-in-al",), (SETTING,))
    assert grid.resolve().dataset_names == ("arrays-0", "arrays-1")
    table = run_grid(grid, tmp_path / "run", n_jobs=1, progress=False)
    assert list(table["dataset"].unique()) == ["arrays-0", "arrays-1"]
    store = LatticeStore(tmp_path / "store", create=True)
    build_store(store.root, arrays, [0], [SETTING], progress=False)
    assert store.cells(SETTING) == [("arrays-0", 0), ("arrays-1", 0)]
    with pytest.raises(ValueError, match="complex"):
        Grid([(first.X + 1j, first.y)], (0,), ("all-in-al",), (SETTING,))
