"""The crossed study (scripts.studies.crossed): its factor combinations and the
not-posable ones, its summaries on a hand-built table, and a small run end to end on the
built-in toy data (lattices built, replayed, stored, resumed, reported)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import crossed_hand_paths

from ballad_env.replay.lattice import build_lattice
from ballad_env.settings import Settings
from scripts.studies import crossed as study
from scripts.studies.common.lattice_paths import BEST_FIXED, best_fixed_per_cell
from scripts.studies.crossed import __main__ as cli

OURS = {"detector": ["ssdo"], "rejector": ["confidence"], "queries": ["ours"],
        "costs": ["default"], "protocol": ["ours"]}


def levels(**changes: list[str]) -> dict[str, list[str]]:
    return {**OURS, **changes}


# ---------------------------------------------------------------------------- factors
def test_combinations_cross_the_levels_in_order() -> None:
    combos = study.combinations(levels(costs=["default", "cfn10"], queries=["ours", "sadal"]))
    assert [c.label for c in combos] == [
        "ssdo/confidence/ours/default/ours", "ssdo/confidence/ours/cfn10/ours",
        "ssdo/confidence/sadal/default/ours", "ssdo/confidence/sadal/cfn10/ours"]
    assert combos[1].options() == {"c_fn": 10.0}
    assert combos[3].options() == {"al_strategy": "threshold-distance",
                                   "lr_strategy": "stratified-probability", "c_fn": 10.0}


def test_the_two_sided_rejectors_tie_rule_is_a_level_of_its_own() -> None:
    posed, refused = study.split_posable(study.combinations(
        levels(rejector=["two-sided", "two-sided-most"])))
    assert not refused
    assert list(posed.values()) == [Settings(rejector="two-sided"),
                                    Settings(rejector="two-sided", two_sided_tie="most")]


def test_unknown_or_missing_levels_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown detector level.*lof.*use some of ssdo, ssif"):
        study.combinations(levels(detector=["lof"]))
    with pytest.raises(ValueError, match="no level of factor 'costs'"):
        study.combinations(levels(costs=[]))
    with pytest.raises(SystemExit):
        cli.parse_options(["--datasets", "toy", "--detectors", "lof"])


def test_sadal_queries_are_not_posable_and_say_why() -> None:
    posed, refused = study.split_posable(study.combinations(
        levels(queries=["ours", "sadal", "sadal-al"], rejector=["confidence", "two-sided"])))
    assert [c.label for c in posed] == ["ssdo/confidence/ours/default/ours",
                                        "ssdo/two-sided/ours/default/ours"]
    assert list(posed.values()) == [Settings(), Settings(rejector="two-sided")]
    assert [c.levels[2] for c in refused] == ["sadal", "sadal-al", "sadal", "sadal-al"]
    for reason in refused.values():  # the lattice's own words: the option and why
        assert "no lattice with al_strategy='threshold-distance'" in reason
        assert "depend on their order" in reason


def test_sadals_protocol_is_posed_with_its_split_budget_and_rejection_cost() -> None:
    posed, refused = study.split_posable(study.combinations(levels(protocol=["ours", "sadal"])))
    assert not refused
    sadal = posed[study.Combination(("ssdo", "confidence", "ours", "default", "sadal"))]
    assert (sadal.split, sadal.budget_rule, sadal.c_r) == ("sadal", "sadal", "bound")
    assert sadal.replace(split="stratified", budget_rule="paper", budget_fraction=0.3,
                         c_r=None) == Settings()


def test_options_settings_refuse_make_a_not_posable_combination() -> None:
    factors = {**study.FACTORS, "costs": {**study.FACTORS["costs"], "bad": {"c_fp": -1.0}}}
    combo = study.Combination(("ssdo", "confidence", "ours", "bad", "ours"))
    reason = study.combination_settings(combo, factors=factors)
    assert isinstance(reason, str) and reason.startswith("settings refused") and "c_fp" in reason


# ---------------------------------------------------------------------------- summaries
def hand_paths() -> pd.DataFrame:
    """Two data sets, one seed, one combination; mean costs chosen by hand."""
    return crossed_hand_paths()


def test_best_fixed_per_cell_is_the_cheapest_fixed_split() -> None:
    best = best_fixed_per_cell(hand_paths(), study.CELL).set_index("dataset")
    assert list(best.name) == [BEST_FIXED, BEST_FIXED]
    assert best.mean_cost.to_dict() == {"A": 0.15, "B": 0.35}
    assert set(best.kind) == {"reference"}


def test_room_and_the_share_each_rule_takes_by_hand() -> None:
    tidy = study.tidy_table(hand_paths(), {}, ["A", "B"], [0])
    assert len(tidy) == 2 * len(study.STRATEGIES)
    assert tidy.regret[tidy.strategy == "ballad"].tolist() == pytest.approx([0.10, 0.20])
    table = study.strategies_table(tidy, {})
    row = table.iloc[0]
    # means over the two data sets: All-in-LR 0.40, optimum 0.20, so the room is 0.20;
    # BALLAD 0.35 takes (0.40 - 0.35) / 0.20 = 0.25 of it, SADAL (0.40 - 0.55) / 0.20 = -0.75
    assert row["all-in-lr"] == pytest.approx(0.40) and row["optimal"] == pytest.approx(0.20)
    assert row["room"] == pytest.approx(0.20)
    assert row[BEST_FIXED] == pytest.approx(0.25)
    assert row["takes it"] == "ballad"
    room = study.room_table(tidy).set_index("factor").loc["detector"]
    assert room["room"] == pytest.approx(0.20)
    assert room["share ballad"] == pytest.approx(0.25)
    assert room["share sadal"] == pytest.approx(-0.75)
    assert room["share all-in-al"] == pytest.approx(-0.75)
    assert room[f"share {BEST_FIXED}"] == pytest.approx((0.40 - 0.25) / 0.20)
    assert room["share oracle"] == pytest.approx((0.40 - 0.35) / 0.20)
    assert room["optimal AL share"] == pytest.approx(0.5)  # one AL round of two
    assert room["room > 0.01"] == 1.0
    assert room["takes it"] == "ballad"


def test_no_deployable_rule_beating_all_in_lr_takes_none() -> None:
    paths = hand_paths()
    paths.loc[paths.name == "ballad", "mean_cost"] = 0.9
    shares = study.room_shares(study.dataset_means(
        study.tidy_table(paths, {}, ["A", "B"], [0]), list(study.FACTOR_NAMES)))
    assert shares["takes it"].tolist() == ["none"]


def test_seeds_average_within_a_data_set_first() -> None:
    paths = hand_paths()
    extra = paths[paths.dataset == "A"].assign(seed=1)
    extra.loc[extra.name == "all-in-lr", "mean_cost"] = 0.50  # A: (0.30 + 0.50) / 2 = 0.40
    means = study.dataset_means(study.tidy_table(pd.concat([paths, extra]), {}, ["A", "B"],
                                                 [0, 1]), ["detector"])
    assert means["all-in-lr"].item() == pytest.approx((0.40 + 0.50) / 2)
    assert means["datasets"].item() == 2 and means["seeds"].item() == 1


def test_groups_table_answers_for_the_papers_sets_and_adbenchs_apart() -> None:
    paths = hand_paths()  # A: LR 0.30, BALLAD 0.20, SADAL 0.40, AL 0.50; B: 0.50, 0.50, 0.70, 0.60
    extra = paths[paths.dataset == "A"].assign(dataset="adbench/C")
    extra.loc[extra.name == "all-in-al", "mean_cost"] = 0.10
    tidy = study.tidy_table(pd.concat([paths, extra]), {}, ["A", "B", "adbench/C"], [0])
    assert study.dataset_group("adbench/C") == "adbench" and study.dataset_group("A") == "paper"
    table = study.groups_table(tidy).set_index("group")
    assert table[list(study.FACTOR_NAMES)].drop_duplicates().values.tolist() == [
        ["ssdo", "confidence", "ours", "default", "ours"]]
    paper, adbench = table.loc["paper"], table.loc["adbench"]
    assert paper["datasets"] == 2 and adbench["datasets"] == 1
    assert paper["all-in-lr"] == pytest.approx(0.40) and paper["ballad"] == pytest.approx(0.35)
    # BALLAD beats All-in-LR on A only (B: 0.50 against 0.50 is no win); SADAL nowhere
    assert (paper["beat ballad"], paper["beat sadal"], paper["beat all-in-al"]) == (1, 0, 0)
    assert adbench["all-in-al"] == pytest.approx(0.10) and adbench["beat all-in-al"] == 1


def test_not_posable_rows_in_the_tidy_and_strategies_tables() -> None:
    combo = study.Combination(("ssdo", "confidence", "sadal", "default", "ours"))
    refused = {combo: "no lattice with lr_strategy='stratified-probability'"}
    tidy = study.tidy_table(hand_paths(), refused, ["A", "B"], [0])
    marked = tidy[tidy.status == study.NOT_POSABLE]
    assert len(marked) == 2 * len(study.STRATEGIES)
    assert set(marked.reason) == set(refused.values()) and marked.mean_cost.isna().all()
    table = study.strategies_table(tidy, refused).set_index("queries")
    assert table.loc["sadal", "status"] == study.NOT_POSABLE
    assert np.isnan(table.loc["sadal", "room"]) and table.loc["sadal", "datasets"] == 0
    assert table.loc["ours", "status"] == study.POSED
    other = study.Combination(("ssdo", "confidence", "sadal", "cfn10", "ours"))
    grouped = study.not_posable_table({**refused, other: refused[combo]})
    assert grouped.combinations.tolist() == [2] and grouped.costs.tolist() == ["default, cfn10"]
    assert grouped.queries.tolist() == ["sadal"]
    assert grouped.reason.tolist() == list(refused.values())


# ---------------------------------------------------------------------------- end to end
def test_small_run_on_toy_data_end_to_end_and_resumed(tmp_path: Path) -> None:
    options = study.StudyOptions(out=tmp_path / "out", datasets=["toy"], seeds=[0],
                                 levels=levels(costs=["default", "cfn10"],
                                               queries=["ours", "sadal"]),
                                 progress=False)
    refused = study.run_study(options)
    assert [c.label for c in refused] == ["ssdo/confidence/sadal/default/ours",
                                          "ssdo/confidence/sadal/cfn10/ours"]
    tables = study.write_report(options, tmp_path / "docs")
    tidy = tables["tidy"]
    posed = tidy[tidy.status == study.POSED]
    assert len(posed) == 2 * len(study.STRATEGIES)
    # SADAL's queries are played live: every strategy but the oracle and the optimum
    live = tidy[tidy.status == study.LIVE]
    assert len(live) == 2 * (len(study.STRATEGIES) - 2) and len(tidy) == len(posed) + len(live)
    # every rule is at least as costly as the hindsight optimum of its cell
    assert (posed.regret >= -1e-12).all()
    # the replayed numbers are the lattice's own
    lattice = build_lattice("toy", 0, Settings(c_fn=10.0))
    lr = posed[(posed.costs == "cfn10") & (posed.strategy == "all-in-lr")]
    assert lr.mean_cost.item() == pytest.approx(lattice.mean_cost((1,) * lattice.n_rounds))
    assert posed[(posed.costs == "cfn10") & (posed.strategy == "optimal")].mean_cost.item() \
        == pytest.approx(lattice.mean_cost(lattice.optimal_path("mean")))
    for stem in ("crossed_strategies", "crossed_room", "crossed_not_posable"):
        assert (tmp_path / "docs" / "tables" / f"{stem}.md").is_file()
    assert (tmp_path / "out" / "tables" / "crossed_tidy.csv").is_file()
    assert (tmp_path / "docs" / "figures" / "crossed_regret.png").is_file()
    # a rerun finds every cell stored: nothing to replay
    store = study.prepare_paths_store(options)
    posed_combos, _ = study.split_posable(options.combinations())
    assert study.pending_cells(options, store, posed_combos) == []


def test_command_line_report_only_from_the_stores(tmp_path: Path, capsys) -> None:
    argv = ["--out", str(tmp_path / "out"), "--datasets", "toy", "--seeds", "1",
            "--detectors", "ssdo", "--rejectors", "confidence", "--queries", "ours",
            "--costs", "default", "--protocols", "ours", "--no-progress"]
    assert cli.main(argv) == 0
    assert cli.main([*argv, "--report-only", "--docs", str(tmp_path / "docs")]) == 0
    table = pd.read_csv(tmp_path / "docs" / "tables" / "crossed_strategies.csv")
    assert table.status.tolist() == ["posed"] and table.datasets.tolist() == [1]
    assert "takes it" in capsys.readouterr().out
