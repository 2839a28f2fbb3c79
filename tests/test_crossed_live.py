"""The crossed study's live cells (scripts.studies.crossed.live): which
combinations are played live, a live cell's rows (fixed splits' paths, the scoring checked
against the lattice's), the analysis' live rows by hand, resumption and the command line.
On the built-in toy data with 5 rounds (a budget of 10% in rounds of 2%), so it is fast."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import crossed_hand_paths

from agents.registry import make_agent
from ballad_env.data import load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.replay.lattice import build_lattice
from ballad_env.settings import Settings
from scripts.studies import crossed as study
from scripts.studies.common.lattice_paths import BEST_FIXED, episode_row, reference_paths
from scripts.studies.crossed import __main__ as cli

SHORT = Settings(budget_fraction=0.1)  # 5 rounds of 2%
SADAL_QUERIES = {"al_strategy": "threshold-distance", "lr_strategy": "stratified-probability"}
OURS = {"detector": ["ssdo"], "rejector": ["confidence"], "queries": ["ours"],
        "costs": ["default"], "protocol": ["ours"]}


def levels(**changes: list[str]) -> dict[str, list[str]]:
    return {**OURS, **changes}


# ---------------------------------------------------------------------------- which
def test_only_combinations_refused_for_their_path_dependent_queries_are_live() -> None:
    combos = study.combinations(levels(queries=["ours", "sadal", "sadal-al"]))
    posed, refused = study.split_posable(combos)
    live = study.split_live(refused)
    assert [c.levels[2] for c in live] == ["sadal", "sadal-al"]
    assert live[combos[1]] == Settings(**SADAL_QUERIES)
    assert study.path_refused(combos[0]) is None  # posed: nothing to play live
    # a shared query stream is refused for another reason: not live
    assert study.path_refused(combos[1], Settings(query_rng="authors")) is None
    factors = {**study.FACTORS, "costs": {**study.FACTORS["costs"], "bad": {"c_fp": -1.0}}}
    bad = study.Combination(("ssdo", "confidence", "sadal", "bad", "ours"))
    assert study.path_refused(bad, factors=factors) is None  # Settings refuses it


def test_live_plays_every_fixed_split_once() -> None:
    plays = study.live_plays(study.AGENTS, 4)
    assert list(plays)[:4] == list(study.AGENTS)
    assert [plays[f"fixed-lr{m:02d}"][1] for m in range(5)] == [
        "all-in-al", "lr-first-25", "lr-first-50", "lr-first-75", "all-in-lr"]
    assert plays["fixed-lr01"][2] == (1, 0, 0, 0)  # LR, then AL
    assert study.fixed_split_agent(1, 15) == "lr-first-6.66667"
    assert study.n_rounds(Settings()) == 15
    assert study.n_rounds(Settings(split="sadal", budget_rule="sadal", budget_fraction=0.2)) == 10


# ---------------------------------------------------------------------------- one cell
def live_frame(settings: Settings, seed: int = 0) -> pd.DataFrame:
    env = BudgetAllocationEnv(load_dataset("toy"), settings=settings)
    return pd.DataFrame(study.live_rows(env, seed, study.AGENTS)).set_index("name")


@pytest.mark.parametrize("k", [15, 5])
def test_fixed_split_agents_take_the_paths_they_name(k: int) -> None:
    frame = live_frame(Settings(budget_fraction=0.02 * k, **SADAL_QUERIES))
    for m in range(k + 1):
        row = frame.loc[f"fixed-lr{m:02d}"]
        assert row.path == "L" * m + "A" * (k - m) and row.kind == "fixed"
        assert row.n_al == k - m
    for name in study.AGENTS:
        assert frame.loc[name, "kind"] == "agent" and len(frame.loc[name, "path"]) == k
    # m = 0 and m = k are All-in-AL's and All-in-LR's own episodes
    assert frame.loc["fixed-lr00", "mean_cost"] == frame.loc["all-in-al", "mean_cost"]
    assert frame.loc[f"fixed-lr{k:02d}", "mean_cost"] == frame.loc["all-in-lr", "mean_cost"]


def test_live_scores_equal_the_lattices_where_the_lattice_poses_the_setting() -> None:
    """With our queries the lattice poses the setting: every live path (the agents and the
    fixed splits) must score what the lattice scores for the same path."""
    live = live_frame(SHORT, seed=1)
    lattice = build_lattice("toy", 1, SHORT)
    paths = {name: (kind, actions) for name, (kind, actions) in reference_paths(lattice).items()
             if kind == "fixed"}
    paths.update({name: ("agent", lattice.replay(make_agent(name))) for name in study.AGENTS})
    assert set(paths) == set(live.index)
    for name, (kind, actions) in paths.items():
        expected = episode_row(lattice, name, kind, actions)
        row = live.loc[name]
        assert row.path == expected["path"], name
        assert row.mean_cost == pytest.approx(expected["mean_cost"], abs=1e-12), name
        assert row.final_cost == pytest.approx(expected["final_cost"], abs=1e-12), name
        assert row.n_al == expected["n_al"]


# ---------------------------------------------------------------------------- analysis
def hand_rows(queries: str, with_lattice: bool) -> pd.DataFrame:
    """Two data sets, one seed, one combination; mean costs chosen by hand."""
    return crossed_hand_paths(queries, with_lattice)


def test_live_rows_in_the_tables_and_posed_rows_unchanged() -> None:
    posed_paths = hand_rows("ours", True)
    sadal = study.Combination(("ssdo", "confidence", "sadal", "default", "ours"))
    alone = study.tidy_table(posed_paths, {}, ["A", "B"], [0])
    tidy = study.tidy_table(posed_paths, {}, ["A", "B"], [0],
                            live=hand_rows("sadal", False))
    live = tidy[tidy.status == study.LIVE]
    assert sorted(live.strategy.unique()) == sorted(["all-in-al", "all-in-lr", "ballad",
                                                     "sadal", BEST_FIXED])
    assert live.regret.isna().all()  # no optimum live
    pd.testing.assert_frame_equal(tidy[tidy.status == study.POSED].reset_index(drop=True),
                                  alone.reset_index(drop=True))
    table = study.strategies_table(tidy, {}, [sadal]).set_index("queries")
    pd.testing.assert_series_equal(table.loc["ours"], study.strategies_table(alone, {})
                                   .set_index("queries").loc["ours"].reindex(table.columns),
                                   check_dtype=False)
    row = table.loc["sadal"]
    # All-in-LR 0.40, best fixed split 0.25 (0.15 and 0.35): the room's lower bound 0.15
    assert row.status == study.LIVE and row.datasets == 2
    assert row["all-in-lr"] == pytest.approx(0.40) and row[BEST_FIXED] == pytest.approx(0.25)
    assert row["room"] == pytest.approx(0.15) and np.isnan(row["optimal"])
    assert row["takes it"] == "ballad"
    room = study.room_table(tidy)
    pd.testing.assert_frame_equal(room[room.status == study.POSED].reset_index(drop=True),
                                  study.room_table(alone))
    room = room.set_index(["factor", "status"])
    live_queries = room.loc[("queries", study.LIVE)]
    assert live_queries["room"] == pytest.approx(0.15)
    assert live_queries["share ballad"] == pytest.approx((0.40 - 0.35) / 0.15)
    assert live_queries[f"share {BEST_FIXED}"] == pytest.approx(1.0)
    assert np.isnan(live_queries["share oracle"]) and np.isnan(live_queries["optimal"])
    per_set = study.per_dataset_table(tidy).set_index(["status", "dataset"])
    assert per_set.loc[(study.LIVE, "A"), "room"] == pytest.approx(0.30 - 0.15)


def test_live_combination_without_cells_and_the_not_posable_table() -> None:
    sadal = study.Combination(("ssdo", "confidence", "sadal", "default", "ours"))
    other = study.Combination(("ssdo", "confidence", "sadal", "cfn10", "ours"))
    tidy = study.tidy_table(hand_rows("ours", True), {other: "no lattice"}, ["A", "B"], [0])
    table = study.strategies_table(tidy, {other: "no lattice"}, [sadal])
    assert table.status.tolist() == [study.POSED, study.LIVE, study.NOT_POSABLE]
    assert table.costs.tolist() == ["default", "default", "cfn10"]
    assert table.datasets.tolist() == [2, 0, 0]
    assert table.reason.tolist() == ["", "no live cell stored yet", "no lattice"]
    grouped = study.not_posable_table({sadal: "no lattice", other: "no lattice"}, [sadal])
    assert grouped.status.tolist() == [study.LIVE, study.NOT_POSABLE]
    assert grouped.combinations.tolist() == [1, 1]


# ---------------------------------------------------------------------------- end to end
def test_live_cells_stored_resumed_and_reported(tmp_path: Path) -> None:
    options = study.StudyOptions(out=tmp_path / "out", datasets=["toy"], seeds=[0],
                                 levels=levels(queries=["ours", "sadal"]), base=SHORT,
                                 progress=False)
    study.run_study(options)
    live = study.live_combinations(options)
    assert [c.label for c in live] == ["ssdo/confidence/sadal/default/ours"]
    store = study.prepare_live_store(options, live)
    assert study.pending_live(options, store, live) == []  # a rerun plays nothing
    stored = study.stored_live(options)
    assert set(stored.name) == {*study.AGENTS, *(f"fixed-lr{m:02d}" for m in range(6))}
    # a lost cell is played again, and gives the same rows
    cell = study.table_cell(next(iter(live)), "toy", 0, study.LIVE_TABLE)
    store.path(cell).unlink()
    assert len(study.pending_live(options, store, live)) == 1
    study.run_study(options)
    pd.testing.assert_frame_equal(study.stored_live(options), stored)
    tables = study.write_report(options, tmp_path / "docs")
    strategies = tables["strategies"].set_index("queries")
    assert strategies.status.to_dict() == {"ours": study.POSED, "sadal": study.LIVE}
    # with live off the same combination is not posable, and nothing live is read
    off = study.report_tables(study.StudyOptions(**{**vars(options), "live": False}))
    assert off["strategies"].set_index("queries").loc["sadal", "status"] == study.NOT_POSABLE


def test_command_line_live_and_no_live(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path / "out"), "--datasets", "toy", "--seeds", "1",
            "--detectors", "ssdo", "--rejectors", "confidence", "--queries", "sadal-al",
            "--costs", "default", "--protocols", "ours", "--no-progress"]
    assert cli.main([*argv, "--no-live"]) == 0
    assert not (tmp_path / "out" / "live").exists()
    assert cli.main(argv) == 0
    assert cli.main([*argv, "--report-only", "--docs", str(tmp_path / "docs")]) == 0
    table = pd.read_csv(tmp_path / "docs" / "tables" / "crossed_strategies.csv")
    assert table.status.tolist() == ["live"] and table.datasets.tolist() == [1]
