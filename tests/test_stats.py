"""The statistics of ``compare --stats`` (agents.reports.stats) on small tables
computed by hand: ranks, the Friedman statistic, Nemenyi's critical difference, the Holm-
corrected Wilcoxon post hoc, paired tests by seed, seeded bootstrap intervals."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.experiments.cli.compare import check_stats_args, main, parse_args
from agents.reports import stats
from agents.reports.stats_report import (
    StatsOptions,
    _pvalue_text,
    summary_lines,
    write_stats,
)
from scripts.studies.claims.stale import read_scores, stale_stats

pytest.importorskip("scikit_posthocs")


def tidy(costs: dict[str, np.ndarray], datasets: list[str], rounds: int = 2) -> pd.DataFrame:
    """A tidy table: ``costs[agent][d, s]`` is the cost of data set ``d``, seed ``s`` in every
    round (so the mean over rounds is that value)."""
    rows = [{"setting": "default", "dataset": dataset, "seed": seed, "agent": agent,
             "round": r, "test_cost": float(matrix[d, seed])}
            for agent, matrix in costs.items() for d, dataset in enumerate(datasets)
            for seed in range(matrix.shape[1]) for r in range(1, rounds + 1)]
    return pd.DataFrame(rows)


def test_average_ranks_share_ties() -> None:
    # Rows rank (1, 2, 3), (3, 2, 1) and (1.5, 1.5, 3): A 5.5/3, B 5.5/3, C 7/3.
    block = pd.DataFrame([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [0.1, 0.1, 0.3]],
                         columns=["A", "B", "C"])
    ranks = stats.average_ranks(block)
    assert ranks.to_dict() == pytest.approx({"A": 5.5 / 3, "B": 5.5 / 3, "C": 7 / 3})


def test_friedman_statistic_by_hand() -> None:
    # N = 4 data sets all ranking A < B < C: chi2 = 12N/(k(k+1)) sum R_j^2 - 3N(k+1)
    # = 12*4/12 * (1 + 4 + 9) - 3*4*4 = 8, p = exp(-8/2) on 2 degrees of freedom.
    block = pd.DataFrame([[0.1, 0.2, 0.3], [0.0, 0.5, 0.9], [0.2, 0.3, 0.4], [0.1, 0.4, 0.8]],
                         columns=["A", "B", "C"])
    statistic, pvalue = stats.friedman_test(block)
    assert statistic == pytest.approx(8.0)
    assert pvalue == pytest.approx(math.exp(-4.0))
    assert all(map(math.isnan, stats.friedman_test(block[["A", "B"]])))  # needs 3 agents


def test_nemenyi_critical_difference_matches_demsar() -> None:
    # Demsar (2006) table 5a: q_0.05 = 1.960 for k = 2 and 2.343 for k = 3.
    assert stats.nemenyi_critical_difference(3, 5) == pytest.approx(2.343 * math.sqrt(12 / 30),
                                                                    abs=1e-3)
    assert stats.nemenyi_critical_difference(2, 10) == pytest.approx(1.960 * math.sqrt(6 / 60),
                                                                     abs=1e-3)


def test_wilcoxon_holm_by_hand() -> None:
    # Six data sets, A always cheapest by distinct margins: the exact two-sided Wilcoxon p of
    # A against B (and against C) is 2 / 2**6 = 0.03125; Holm over the 3 pairs makes both
    # 3 * 0.03125 = 0.09375 (the second: max(0.09375, 2 * 0.03125)). B - C = (1, -2, 3, -4,
    # 5, -6) / 1000: W = min(1+3+5, 2+4+6) = 9; 27 of the 64 sign patterns have W+ <= 9, so
    # p = 2 * 27 / 64 = 0.84375, which Holm keeps (the largest p: max(0.09375, 1 * p)).
    a = np.linspace(0.1, 0.6, 6)
    b = a + [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]
    block = pd.DataFrame({"A": a, "B": b, "C": b - np.array([1, -2, 3, -4, 5, -6]) / 1000})
    pvalues = stats.posthoc_pvalues(block, "wilcoxon-holm")
    assert pvalues.loc["A", "B"] == pytest.approx(0.09375)
    assert pvalues.loc["C", "A"] == pytest.approx(0.09375)
    assert pvalues.loc["B", "C"] == pytest.approx(0.84375)
    assert stats.wilcoxon_floor(6) == pytest.approx(0.03125)
    assert stats.not_different(pvalues, 0.1) == [("B", "C")]
    assert stats.not_different(pvalues, 0.05) == [("A", "B"), ("A", "C"), ("B", "C")]
    with pytest.raises(ValueError, match="unknown post hoc test 'tukey'"):
        stats.posthoc_pvalues(block, "tukey")


def test_nemenyi_separates_ranks_further_apart_than_the_critical_difference() -> None:
    # 10 data sets ranking A < B < C: rank gap 2 > CD(3, 10) = 1.05 > gap 1.
    block = pd.DataFrame({"A": np.arange(10.0), "B": np.arange(10.0) + 1,
                          "C": np.arange(10.0) + 2})
    pvalues = stats.posthoc_pvalues(block, "nemenyi")
    assert pvalues.loc["A", "C"] < 0.05 < pvalues.loc["A", "B"]
    assert stats.nemenyi_critical_difference(3, 10) == pytest.approx(1.048, abs=1e-3)


def test_bootstrap_interval_is_reproducible_under_a_seed() -> None:
    values = np.array([0.1, 0.4, 0.2, 0.5, 0.3])
    first = stats.bootstrap_interval(values, stats.stream(7, "x"), resamples=999)
    again = stats.bootstrap_interval(values, stats.stream(7, "x"), resamples=999)
    other = stats.bootstrap_interval(values, stats.stream(8, "x"), resamples=999)
    assert first == again and first != other
    assert first[0] < values.mean() < first[1]
    assert stats.bootstrap_interval(np.full(4, 0.2), stats.stream(0), resamples=99) == \
        pytest.approx((0.2, 0.2))
    assert all(map(math.isnan, stats.bootstrap_interval(np.array([0.2]), stats.stream(0))))


def test_paired_tests_pair_by_seed_and_keep_the_sign() -> None:
    # The baseline's cost varies widely over seeds; the agent costs 0.01 less on every seed
    # (plus a little noise): unpaired the gap drowns in the spread, paired it is clear.
    base = np.array([[0.1, 0.5, 0.9, 0.3, 0.7, 0.2]])
    agent = base - 0.01 + np.array([[0.001, -0.002, 0.0, 0.002, -0.001, 0.0005]])
    table = tidy({"base": base, "agent": agent}, ["D"])
    table = table.sample(frac=1.0, random_state=np.random.RandomState(0))  # order not pairs
    paired = stats.paired_tests(stats.seed_scores(table), "base")
    row = paired.loc[("default", "D", "agent")]
    assert row["difference"] == pytest.approx(float(np.mean(agent - base)))
    assert row["high"] < 0 and row["p_t"] < 1e-4 and row["verdict"] == "lower"
    assert row["p_wilcoxon"] == pytest.approx(2 / 2 ** 6)
    # The t interval: mean -0.01 + 0.0000833, sd of the differences s, half-width
    # t_{0.975, 5} s / sqrt(6) with t_{0.975, 5} = 2.5706 (tables).
    differences = (agent - base)[0]
    half = 2.5706 * differences.std(ddof=1) / math.sqrt(6)
    assert (row["low"], row["high"]) == pytest.approx((differences.mean() - half,
                                                       differences.mean() + half), rel=1e-4)
    same = stats.paired_test(base[0], base[0])
    assert (same["low"], same["high"], same["p_t"], same["p_wilcoxon"]) == (0.0, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="baseline 'oracle' is not among the agents"):
        stats.paired_tests(stats.seed_scores(table), "oracle")


def test_seeds_needed_matches_cohens_table() -> None:
    # Effect sizes 0.5 and 1 (mean / sd of the differences): 34 and 10 pairs for power 0.8 at
    # 0.05 two-sided (Cohen 1988, table 2.4.1: n = 33.4 and 9.9, rounded up).
    half = np.array([0.0, 1.0, 2.0]) * 2.0 - 1.0  # mean 1, sd 2 -> effect 0.5
    assert stats.seeds_needed(half) == 34
    assert stats.seeds_needed(np.array([0.0, 1.0, 2.0])) == 10  # mean 1, sd 1
    assert stats.seeds_needed(np.array([1.0, -1.0])) == math.inf
    assert math.isnan(stats.seeds_needed(np.array([0.5, 0.5])))


def test_holm_by_hand() -> None:
    adjusted = stats.holm(pd.Series([0.01, 0.04, 0.03, np.nan]))
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
    assert adjusted.iloc[:3].tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted.iloc[3])


@pytest.mark.slow
def test_write_stats_writes_the_diagram_and_tables(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    datasets = [f"D{i}" for i in range(6)]
    base = rng.uniform(0.1, 0.5, size=(6, 3))
    step = np.arange(6.0)[:, None] * 0.001  # distinct gaps per data set: an exact Wilcoxon
    noise = rng.uniform(0.0, 0.001, size=(6, 3))
    costs = {"ballad": base + 0.02 + step + noise, "all-in-lr": base,
             "all-in-al": base + 0.05 + 2 * step + noise[::-1]}
    folder = tmp_path / "stats"
    options = StatsOptions(baseline="all-in-lr", resamples=199)
    report = write_stats(stats.seed_scores(tidy(costs, datasets)), folder, options=options)
    (comparison,) = report.comparisons
    assert comparison.ranks.to_dict() == {"ballad": 2.0, "all-in-lr": 1.0, "all-in-al": 3.0}
    assert comparison.friedman == pytest.approx(12.0)  # 12*6/12 * 14 - 3*6*4
    assert comparison.pvalues.loc["all-in-lr", "all-in-al"] == pytest.approx(0.09375)
    assert report.figures[0].read_bytes()[:4] == b"\x89PNG"
    for stem in ("ranks", "posthoc", "intervals", "paired"):
        assert (tmp_path / "stats" / f"{stem}.csv").is_file()
        assert (tmp_path / "stats" / f"{stem}.md").read_text().startswith("# ")
    ranks = pd.read_csv(tmp_path / "stats" / "ranks.csv")
    assert ranks.loc[0, "rank all-in-lr"] == 1.0
    assert ranks.loc[0, "friedman_p"] == pytest.approx(math.exp(-6))  # exact in the CSV
    assert "| 0.0025 | wilcoxon-holm |" in (folder / "ranks.md").read_text()
    assert _pvalue_text(1.234e-5) == "1.2e-05" and _pvalue_text(float("nan")) == ""
    assert (report.paired["verdict"] == "higher").all()  # every gap is positive
    text = "\n".join(summary_lines(report))
    assert "Friedman chi2 = 12.000" in text and "cd-default.png" in text
    assert stale_stats(folder) == []  # the stored scores and options give the same tables
    assert read_scores(folder / "scores.csv").equals(stats.seed_scores(tidy(costs, datasets)))
    (folder / "paired.md").write_text((folder / "paired.md").read_text().replace("0.", "1.", 1))
    (folder / "ranks.md").unlink()
    assert stale_stats(folder) == ["paired.md", "ranks.md"]


def test_dataset_intervals_resample_data_sets_in_pairs(tmp_path: Path) -> None:
    # The agent costs twice the baseline on every data set: every paired resample has the
    # ratio 2; one seed per data set writes the tables across data sets only.
    base = np.array([[0.1], [0.3], [0.2], [0.05]])
    scores = stats.seed_scores(tidy({"agent": 2 * base, "base": base}, list("ABCD")))
    table = stats.dataset_intervals(scores, "base", resamples=199)
    row = table.loc[("default", "agent")]
    assert row["mean"] == pytest.approx(0.65 / 2) and row["datasets"] == 4
    assert (row["ratio"], row["ratio_low"], row["ratio_high"]) == pytest.approx((2, 2, 2))
    assert row["low"] < row["mean"] < row["high"]
    report = write_stats(scores, tmp_path, options=StatsOptions(baseline="base", resamples=99))
    assert report.intervals is None and report.paired is None
    assert sorted(p.name for p in tmp_path.glob("*.md")) == ["datasets.md", "posthoc.md",
                                                               "ranks.md"]
    assert "agent's mean cost over the baseline's: 2.000" in "\n".join(summary_lines(report))


def test_ratio_interval_of_a_share_by_hand() -> None:
    # Savings 1, 2, 3 over rooms 2, 4, 6: every paired resample has the share 0.5; unpaired
    # savings 0, 0, 3 over rooms 1, 1, 1 give 1 with an interval from 0 (no 3 drawn) to 3.
    assert stats.ratio_interval([1, 2, 3], [2, 4, 6], stats.stream(0), resamples=99) == \
        pytest.approx((0.5, 0.5, 0.5))
    share, low, high = stats.ratio_interval([0, 0, 3], [1, 1, 1], stats.stream(0),
                                            resamples=999)
    assert share == 1.0 and low == 0.0 and high == 3.0
    assert math.isnan(stats.ratio_interval([1], [2], stats.stream(0))[1])


def test_episodes_not_every_agent_played_are_left_out_with_a_warning() -> None:
    table = tidy({"A": np.array([[0.1, 0.2]]), "B": np.array([[0.2, 0.3]])}, ["D"])
    table = table[~((table["agent"] == "B") & (table["seed"] == 1))]
    with pytest.warns(UserWarning, match="1 .* episode"):
        scores = stats.seed_scores(table)
    assert scores.index.get_level_values("seed").tolist() == [0]


def test_ranks_need_two_data_sets() -> None:
    table = tidy({"A": np.array([[0.1, 0.2]]), "B": np.array([[0.2, 0.3]])}, ["D"])
    with pytest.raises(ValueError, match="at least two of each"):
        stats.rank_comparison(stats.seed_scores(table), "default")


def test_compare_checks_its_stats_options_before_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    grid = ["--datasets", "toy", "--agents", "ballad", "all-in-lr", "--output",
            str(tmp_path / "run"), "--no-progress"]
    assert main([*grid, "--baseline", "all-in-lr"]) == 2
    assert main([*grid, "--stats", "--baseline", "oracle"]) == 2
    assert "--baseline 'oracle' is not among --agents" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "scikit_posthocs", None)
    assert main([*grid, "--stats"]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[stats]'" in err and err.count("\n") == 1
    assert not (tmp_path / "run" / "cells").exists()


def test_a_saved_policy_baseline_is_named_as_in_the_results() -> None:
    args = parse_args(["--datasets", "toy", "--agents", "ballad", "runs/p.zip", "--stats",
                       "--baseline", "runs/p.zip"])
    check_stats_args(args)
    assert args.baseline == "policy:p"  # the agent column's name for a saved policy


@pytest.mark.slow
def test_compare_stats_writes_its_folder(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "run"
    assert main(["--datasets", "toy", "wdbc", "--seeds", "2", "--agents", "ballad",
                 "all-in-lr", "all-in-al", "--prior", "knn", "--n-jobs", "1",
                 "--no-progress", "--output", str(output), "--stats", "--baseline",
                 "all-in-lr"]) == 0
    out = capsys.readouterr().out
    assert "Friedman chi2" in out and "critical-difference diagram" in out
    assert (output / "stats" / "cd-knn.png").is_file()
    assert {"ballad", "all-in-al"} == set(pd.read_csv(output / "stats" / "paired.csv")["agent"])


def test_the_documented_stats_tables_are_current() -> None:
    """docs/experiments.md shows the example's tables (docs/tables/compare_stats_*): they
    must equal a recomputation from the stored scores and options."""
    tables = Path(__file__).resolve().parents[1] / "docs" / "tables"
    assert (tables / "compare_stats_ranks.md").is_file()
    assert stale_stats(tables, "compare_stats_") == [], (
        "regenerate with write_stats (docs/experiments.md, 'In Python') and fill the reports")
