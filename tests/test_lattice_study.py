"""The lattice study (scripts.studies.lattice): its analysis on hand-built tables,
its resume rules in its ResultStore (a new agent recomputes finished cells; other source
code is refused) and the command line end to end on two small synthetic data sets."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_data_files

from agents.experiments.stores import provenance
from agents.experiments.stores.results import ResultStore, RunError
from scripts.studies import lattice as study

ROOT = Path(__file__).resolve().parents[1]

# Two cells (seeds 0 and 1) of a two-round lattice: (mean cost, final cost) of each path.
PATH_COSTS = {0: {"AA": (0.20, 0.10), "AL": (0.10, 0.08), "LA": (0.12, 0.06), "LL": (0.30, 0.30)},
              1: {"AA": (0.05, 0.04), "AL": (0.08, 0.07), "LA": (0.09, 0.02), "LL": (0.10, 0.09)}}
# name -> (kind, path in cell 0, path in cell 1, (right, decided) in cell 0 and in cell 1)
PATHS = {"optimal": ("reference", "AL", "AA", (0, 0), (0, 0)),
         "optimal-final": ("reference", "LA", "LA", (0, 0), (0, 0)),
         "oracle": ("reference", "AA", "AA", (0, 0), (0, 0)),
         "fixed-lr00": ("fixed", "AA", "AA", (0, 0), (0, 0)),
         "fixed-lr01": ("fixed", "LA", "LA", (0, 0), (0, 0)),
         "fixed-lr02": ("fixed", "LL", "LL", (0, 0), (0, 0)),
         "a": ("agent", "AL", "AL", (2, 2), (1, 2)),
         "b": ("agent", "LL", "LL", (0, 1), (0, 2))}


def hand_episodes() -> pd.DataFrame:
    """The episodes table of the two cells, as ``run_cell`` writes it."""
    rows = []
    for seed in (0, 1):
        for name, (kind, *paths, right0, right1) in PATHS.items():
            path = paths[seed]
            right, decided = (right0, right1)[seed]
            mean, final = PATH_COSTS[seed][path]
            rows.append({"dataset": "d", "seed": seed, "prior": "knn", "name": name,
                         "kind": kind, "path": path, "mean_cost": mean, "final_cost": final,
                         "n_al": path.count("A"), "right_moves": right, "decided_moves": decided})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- analysis
def test_add_regrets_per_cell_and_best_fixed_row() -> None:
    episodes = study.add_regrets(hand_episodes())
    best = episodes[episodes.name == "best-fixed-per-cell"].set_index("seed")
    assert list(best.kind) == ["reference", "reference"]
    assert list(best.path) == ["LA", "AA"]  # fixed-lr01 in cell 0 (0.12), fixed-lr00 in cell 1
    by = episodes.set_index(["seed", "name"])
    # regret: mean cost minus the optimal's (0.10, 0.05); final: minus optimal-final's (0.06, 0.02)
    assert by.loc[(0, "b"), "regret"] == pytest.approx(0.20)
    assert by.loc[(1, "b"), "regret"] == pytest.approx(0.05)
    assert by.loc[(0, "a"), "final_regret"] == pytest.approx(0.02)
    assert by.loc[(1, "a"), "final_regret"] == pytest.approx(0.05)
    assert by.loc[(1, "optimal"), "regret"] == 0.0
    assert len(episodes) == len(hand_episodes()) + 2


def test_best_fixed_overall_is_lowest_mean_over_cells() -> None:
    # fixed-lr00: 0.125, fixed-lr01: 0.105, fixed-lr02: 0.20
    assert study.best_fixed_overall(hand_episodes(), "knn") == "fixed-lr01"


def test_agents_table_hand_computed() -> None:
    table = study.agents_table(study.add_regrets(hand_episodes()), ["knn"])
    assert list(table.path) == ["optimal", "optimal-final", "best-fixed-per-cell",
                                "best fixed overall (fixed-lr01)", "oracle", "a", "b"]
    rows = table.set_index("path")
    expected = {
        "optimal": {"mean_cost": 0.075, "final_cost": 0.06, "regret": 0.0, "zero_regret": 1.0,
                    "final_regret": 0.02, "al_share": 0.75},
        "best-fixed-per-cell": {"mean_cost": 0.085, "regret": 0.01, "median_regret": 0.01,
                                "zero_regret": 0.5, "final_regret": 0.01, "al_share": 0.75},
        "best fixed overall (fixed-lr01)": {"mean_cost": 0.105, "regret": 0.03,
                                            "final_regret": 0.0, "al_share": 0.5},
        "oracle": {"mean_cost": 0.125, "regret": 0.05, "median_regret": 0.05,
                   "zero_regret": 0.5},
        "a": {"mean_cost": 0.09, "final_cost": 0.075, "regret": 0.015, "zero_regret": 0.5,
              "final_regret": 0.035, "mean_rank": 1.0, "right_moves": 0.75, "al_share": 0.5},
        "b": {"mean_cost": 0.20, "final_cost": 0.195, "regret": 0.125, "median_regret": 0.125,
              "zero_regret": 0.0, "final_regret": 0.155, "mean_rank": 2.0, "right_moves": 0.0,
              "al_share": 0.0},
    }
    for path, values in expected.items():
        for column, value in values.items():
            assert rows.loc[path, column] == pytest.approx(value), (path, column)
    assert math.isnan(rows.loc["optimal", "mean_rank"])  # ranks are among agents only
    assert rows.loc["optimal", "right_moves"] == 0.0  # no decided moves: 0 / max(1, 0)


def test_agents_table_follows_the_given_agent_order() -> None:
    table = study.agents_table(study.add_regrets(hand_episodes()), ["knn"], ["b", "a", "z"])
    assert list(table.path)[-2:] == ["b", "a"]


def test_select_agents_keeps_references_and_the_asked_agents() -> None:
    kept = study.select_agents(hand_episodes(), ["b"])
    assert set(kept.name) == set(PATHS) - {"a"}
    # ranks then compare the asked agents only: b is alone, so first in each cell
    table = study.agents_table(study.add_regrets(kept), ["knn"])
    assert table.set_index("path").loc["b", "mean_rank"] == 1.0


def test_summary_table_puts_priors_side_by_side() -> None:
    agents = pd.DataFrame({
        "prior": ["knn"] * 3 + ["iforest"] * 3,
        "path": ["optimal", "best fixed overall (fixed-lr01)", "a",
                 "optimal", "best fixed overall (fixed-lr03)", "a"],
        "mean_cost": [0.1, 0.2, 0.3, 1.1, 1.2, 1.3], "regret": [0.0, 0.1, 0.2, 0.0, 0.1, 0.2],
        "mean_rank": [np.nan, np.nan, 1.0, np.nan, np.nan, 2.0],
        "al_share": [0.5, 0.6, 0.7, 0.4, 0.3, 0.2], "final_cost": [9.0] * 6})
    summary = study.summary_table(agents)
    assert list(summary.columns) == ["path", "cost knn", "regret knn", "rank knn", "AL share knn",
                                     "cost iforest", "regret iforest", "rank iforest",
                                     "AL share iforest"]
    assert list(summary.path) == ["optimal", "best fixed overall (fixed-lr01, fixed-lr03)", "a"]
    assert summary["cost iforest"].tolist() == [1.1, 1.2, 1.3]
    assert summary["AL share knn"].tolist() == [0.5, 0.6, 0.7]
    assert summary["rank iforest"].iloc[2] == 2.0


def test_signals_table_sums_cells_then_divides() -> None:
    signals = pd.DataFrame({
        "dataset": ["d", "e", "d"], "seed": 0, "prior": "knn",
        "signal": ["entropy", "entropy", "cosine"], "mode": "lookahead",
        "states": [10, 20, 8], "voted": [8, 12, 0], "correct": [6, 3, 0],
        "al_better": [4, 5, 2]})
    table = study.signals_table(signals)
    assert list(table.signal) == ["entropy", "cosine"]  # order of appearance
    entropy = table.iloc[0]
    assert (entropy.states, entropy.voted, entropy.correct, entropy.al_better) == (30, 20, 9, 9)
    assert entropy.accuracy == pytest.approx(0.45)
    assert entropy.coverage == pytest.approx(2 / 3)
    assert entropy.al_better_share == pytest.approx(0.3)
    assert math.isnan(table.iloc[1].accuracy)  # nothing voted: 0 / 0
    assert table.iloc[1].coverage == 0.0


def test_per_dataset_table_averages_seeds_and_gives_ballad_regret() -> None:
    names = ["optimal", "best-fixed-per-cell", "oracle", "ballad", "all-in-al", "all-in-lr"]
    rows = [{"dataset": dataset, "seed": seed, "prior": prior, "name": name,
             "mean_cost": base + 0.01 * k + 0.002 * seed}
            for prior, base in (("knn", 0.1), ("iforest", 0.5)) for dataset in ("d", "e")
            for seed in (0, 1) for k, name in enumerate([*names, "random"])]
    table = study.per_dataset_table(pd.DataFrame(rows), ["knn"])
    assert list(table.columns) == ["prior", "dataset", *names, "ballad_regret"]
    assert list(table.dataset) == ["d", "e"] and set(table.prior) == {"knn"}
    assert table.optimal.tolist() == pytest.approx([0.101, 0.101])  # mean of seeds 0.100, 0.102
    assert table["all-in-lr"].tolist() == pytest.approx([0.151, 0.151])
    assert table.ballad_regret.tolist() == pytest.approx([0.03, 0.03])


def test_fixed_curve_by_lr_rounds() -> None:
    episodes = pd.DataFrame({
        "prior": "knn", "kind": ["fixed", "fixed", "fixed", "agent"],
        "name": ["fixed-lr00", "fixed-lr00", "fixed-lr10", "fixed-lr99"],
        "mean_cost": [0.1, 0.3, 0.5, 9.0]})
    curve = study.fixed_curve(episodes)
    assert curve.lr_rounds.tolist() == [0, 10]
    assert curve["mean"].tolist() == pytest.approx([0.2, 0.5])
    assert curve["count"].tolist() == [2, 1]


def test_crosscheck_table_counts_matches() -> None:
    checks = pd.DataFrame({"dataset": "d", "seed": 0, "prior": "knn",
                           "name": ["ballad", "half", "oracle"],
                           "same_actions": [True, False, True],
                           "max_cost_gap": [0.0, 0.25, 0.125]})
    row = study.crosscheck_table(checks).iloc[0]
    assert (row.agents, row.same_actions, row.max_cost_gap) == (3, 2, 0.25)


def test_lattice_grid_places_costs_and_leaves_gaps() -> None:
    states = pd.DataFrame({"i": [0, 0, 1], "j": [0, 1, 0], "test_cost": [0.5, 0.4, 0.3]})
    grid = study.lattice_grid(states)
    assert grid[0, 1] == 0.4 and grid[1, 0] == 0.3 and math.isnan(grid[1, 1])


# ---------------------------------------------------------------------------- the store
def fake_cell(store: ResultStore, agents: list[str], seed: int = 0) -> tuple[str, int, str]:
    """A finished cell of data set d, prior knn, computed with ``agents``."""
    cell = ("d", seed, "knn")
    keys = {"dataset": "d", "seed": seed, "prior": "knn"}
    episodes = pd.DataFrame([{**keys, "name": n, "kind": "agent"} for n in agents]
                            + [{**keys, "name": "optimal", "kind": "reference"}])
    store.cells_dir.mkdir(parents=True, exist_ok=True)
    store.write(study.table_cell("episodes", cell), episodes)
    store.write(study.table_cell("cells", cell), pd.DataFrame([keys]))
    return cell


def test_agents_to_compute(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert study.agents_to_compute(store, ("d", 0, "knn"), ["a", "b"]) == ("a", "b")
    cell = fake_cell(store, ["b", "c"])
    assert study.stored_agents(store, cell) == ["b", "c"]
    assert study.agents_to_compute(store, cell, ["b"]) == ()
    assert study.agents_to_compute(store, cell, ["a", "b"]) == ("a", "b", "c")
    store.path(study.table_cell("episodes", cell)).write_bytes(b"garbled")
    with pytest.raises(RunError, match="corrupt result file"):
        study.agents_to_compute(store, cell, ["b"])


def test_collect_refuses_missing_agents_and_an_empty_store(tmp_path: Path) -> None:
    options = study.StudyOptions(data_dir=tmp_path, out=tmp_path / "out", docs=tmp_path,
                                 datasets=["d"], seeds=3, priors=["knn"], agents=["a"])
    with pytest.raises(RunError, match="no finished cells"):
        study.collect(options.out, ["a"])
    store = study.prepare_store(options)
    first, second = fake_cell(store, ["a", "b"], seed=0), fake_cell(store, ["a"], seed=1)
    assert study.finished_cells(store) == [first, second]  # seed 2 never finished
    with pytest.raises(RunError, match=r"cell \('d', 1, 'knn'\).*lacks agents b"):
        study.collect(options.out, ["a", "b"])


# ---------------------------------------------------------------------------- runs
@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Two small benchmark-style files, ``alpha.npz`` (150 rows) and ``beta.npz`` (140)."""
    return write_data_files(tmp_path / "data", {"alpha": 150, "beta": 140})


def agent_rows(out: Path) -> pd.DataFrame:
    episodes = ResultStore(out).read(study.table_cell("episodes", ("alpha", 0, "knn")))
    return episodes[episodes.kind == "agent"].set_index("name")


@pytest.mark.slow
def test_rerun_with_a_new_agent_recomputes_and_stale_source_is_refused(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = study.StudyOptions(data_dir=data_dir, out=tmp_path / "out", docs=tmp_path / "docs",
                                 datasets=["alpha"], seeds=1, priors=["knn"],
                                 agents=["ballad", "all-in-lr"], n_jobs=1, crosscheck=0)
    study.run_study(options)
    before = agent_rows(options.out)
    assert list(before.index) == ["ballad", "all-in-lr"]

    options.agents = ["ballad", "all-in-lr", "all-in-al"]
    study.run_study(options)
    after = agent_rows(options.out)
    assert list(after.index) == ["ballad", "all-in-lr", "all-in-al"]
    assert after.loc["all-in-al", "path"] == "A" * 15
    pd.testing.assert_frame_equal(after.loc[list(before.index)], before)  # same numbers again
    frames = study.collect(options.out, options.agents)
    assert set(frames["episodes"].name) >= set(options.agents)

    options.agents = ["ballad"]  # a subset: the finished cell is kept as it is
    marker = ResultStore(options.out).path(study.table_cell("cells", ("alpha", 0, "knn")))
    stamp = marker.stat().st_mtime_ns
    assert study.plan_cells(options, study.prepare_store(options)) == []
    study.run_study(options)
    assert marker.stat().st_mtime_ns == stamp

    monkeypatch.setattr(provenance, "source_fingerprint", lambda: "edited-source")
    with pytest.raises(RunError, match="ballad-env source"):
        study.run_study(options)


@pytest.mark.slow
def test_script_end_to_end_writes_well_formed_tables(tmp_path: Path, data_dir: Path) -> None:
    out, docs = tmp_path / "out", tmp_path / "docs"
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "scripts.studies.lattice", "--data-dir", str(data_dir),
         "--out", str(out), "--docs", str(docs), "--seeds", "1", "--prior", "knn",
         "--n-jobs", "1", "--figure-dataset", "alpha"], capture_output=True, text=True,
        env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "2 cells, 0 already done" in done.stdout
    tables = docs / "tables"
    stems = ["lattice_summary", "lattice_agents", "lattice_signals", "lattice_per_dataset",
             "lattice_fixed", "lattice_crosscheck"]
    for stem in stems:
        frame = pd.read_csv(tables / f"{stem}.csv")
        lines = (tables / f"{stem}.md").read_text().splitlines()
        assert len(lines) == len(frame) + 2 and lines[0].count("|") == len(frame.columns) + 1
        assert "nan" not in (tables / f"{stem}.md").read_text().lower()
    agents = pd.read_csv(tables / "lattice_agents.csv")
    assert len(agents) == 5 + len(study.STUDY_AGENTS)
    assert (agents.regret >= -1e-12).all()
    assert agents.set_index("path").loc["optimal", "regret"] == 0
    assert "| – |" in (tables / "lattice_summary.md").read_text()  # references have no rank
    per_dataset = pd.read_csv(tables / "lattice_per_dataset.csv")
    assert sorted(per_dataset.dataset) == ["alpha", "beta"]
    check = pd.read_csv(tables / "lattice_crosscheck.csv").iloc[0]
    assert check.dataset == "beta"  # the smallest file
    assert check.same_actions == check.agents == len(study.STUDY_AGENTS) + 1
    assert check.max_cost_gap == 0
    assert pd.read_csv(tables / "lattice_fixed.csv")["count"].eq(2).all()
    for figure in ("lattice_heatmap.png", "lattice_fixed.png"):
        assert (docs / "figures" / figure).stat().st_size > 0
