"""``ballad-env compare``'s spread: a standard error per agent in the summary, and ``--plot``'s
cost-by-round figure with error bands (agents.reports.tables and .plots)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.experiments.cli.compare import main
from agents.reports.plots import cost_by_round_with_errors
from agents.reports.tables import (
    standard_errors,
    summary_table,
    with_standard_errors,
)


def tidy(costs: dict[tuple[str, int], float], agent: str = "ballad", rounds: int = 2
         ) -> pd.DataFrame:
    """A tidy table: each (data set, seed) episode of ``agent`` costs its value every round."""
    rows = [{"setting": "default", "dataset": dataset, "seed": seed, "agent": agent,
             "round": r, "spent_fraction": 0.02 * r, "test_cost": cost}
            for (dataset, seed), cost in costs.items() for r in range(1, rounds + 1)]
    return pd.DataFrame(rows)


def test_standard_errors_by_hand() -> None:
    # A: seeds 0.1, 0.2, 0.3 -> sd 0.1, se 0.1 / sqrt(3); B: 0.0, 0.2 -> sd sqrt(0.02), se 0.1;
    # the mean row: sqrt(se_A^2 + se_B^2) / 2.
    table = tidy({("A", 0): 0.1, ("A", 1): 0.2, ("A", 2): 0.3, ("B", 0): 0.0, ("B", 1): 0.2})
    errors = standard_errors(table)["ballad"]
    se_a, se_b = 0.1 / math.sqrt(3), 0.1
    assert errors[("default", "A")] == pytest.approx(se_a)
    assert errors[("default", "B")] == pytest.approx(se_b)
    assert errors[("default", "mean")] == pytest.approx(math.sqrt(se_a ** 2 + se_b ** 2) / 2)


def test_one_seed_has_no_standard_error() -> None:
    assert np.isnan(standard_errors(tidy({("A", 0): 0.1}))["ballad"]).all()


def test_summary_gains_a_standard_error_column_after_each_agent() -> None:
    table = pd.concat([tidy({("A", 0): 0.1, ("A", 1): 0.3}),
                       tidy({("A", 0): 0.2, ("A", 1): 0.2}, agent="all-in-lr")])
    summary = with_standard_errors(summary_table(table), standard_errors(table))
    assert list(summary.columns[:4]) == ["ballad", "ballad se", "all-in-lr", "all-in-lr se"]
    assert summary.loc[("default", "A"), "ballad se"] == pytest.approx(0.1)
    assert summary.loc[("default", "A"), "all-in-lr se"] == pytest.approx(0.0)
    assert summary.loc[("default", "A"), "winner"] == "tie"


def test_cost_by_round_with_errors_draws_a_figure(tmp_path: Path) -> None:
    table = tidy({("A", 0): 0.1, ("A", 1): 0.3, ("B", 0): 0.2, ("B", 1): 0.2}, rounds=3)
    path = cost_by_round_with_errors(table, tmp_path / "f" / "cost.png")
    assert path.is_file() and path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="no results for agent"):
        cost_by_round_with_errors(table, tmp_path / "g.png", agents=["oracle"])


def test_a_figure_given_a_folder_names_the_reader_to_use(tmp_path: Path) -> None:
    """The reports sit below the harness and read no results folder: a folder given in place
    of the table is one line naming the harness's reader."""
    with pytest.raises(TypeError, match=r"tidy results table.*load_results\(folder\)"):
        cost_by_round_with_errors(tmp_path, tmp_path / "f.png")


@pytest.mark.slow
def test_compare_prints_standard_errors_and_plots(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "run"
    args = ["--datasets", "toy", "--seeds", "2", "--agents", "ballad", "all-in-lr",
            "--prior", "knn", "--n-jobs", "1", "--no-progress", "--output", str(output),
            "--plot"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ballad se" in out and "standard error over seeds" in out
    summary = pd.read_csv(output / "summary.csv")
    assert {"ballad se", "all-in-lr se"} <= set(summary.columns)
    assert (summary["ballad se"].dropna() >= 0).all() and summary["ballad se"].notna().any()
    assert (output / "cost_by_round.png").is_file()
    assert main([*args[:-1], "--plot", str(tmp_path / "mine.png")]) == 0  # resumes; own path
    assert (tmp_path / "mine.png").is_file()
