"""The crossed study's label-free comparison (crossed/label_free.py): BALLAD's rejector
against RejEx per cost level and slice of the data sets, on a hand-made tidy table."""

from __future__ import annotations

import pandas as pd
import pytest

from scripts.studies.crossed.label_free import (
    applies,
    label_free_table,
    per_dataset,
    tuned_table,
    verdict,
)

#: Data set -> (group, gamma, n).
PROPS = {"A": ("paper", 0.02, 300), "adbench/b": ("adbench", 0.2, 5000)}
#: (data set, rejector, strategy) -> mean cost at seed 0 (seed 1 adds 0.02).
COSTS = {("A", "confidence", "all-in-lr"): 0.10, ("A", "confidence", "ballad"): 0.12,
         ("A", "confidence", "optimal"): 0.08, ("A", "rejex", "all-in-al"): 0.07,
         ("A", "rejex", "all-in-lr"): 0.09, ("A", "rejex", "optimal"): 0.06,
         ("adbench/b", "confidence", "all-in-lr"): 0.20,
         ("adbench/b", "confidence", "ballad"): 0.21,
         ("adbench/b", "confidence", "optimal"): 0.15,
         ("adbench/b", "rejex", "all-in-al"): 0.30, ("adbench/b", "rejex", "all-in-lr"): 0.25,
         ("adbench/b", "rejex", "optimal"): 0.24}


def tidy() -> pd.DataFrame:
    rows = [{"detector": "ssdo", "rejector": rejector, "queries": "ours", "costs": "default",
             "protocol": "ours", "dataset": dataset, "seed": seed, "strategy": strategy,
             "status": "posed", "mean_cost": cost + 0.02 * seed}
            for (dataset, rejector, strategy), cost in COSTS.items() for seed in (0, 1)]
    return pd.DataFrame(rows)


def test_per_dataset_means_and_the_slices_verdicts() -> None:
    """Seed means are the seed-0 costs + 0.01. A: All-in-AL with RejEx 0.08 is at most
    BALLAD's rejector's optimum 0.09: worthless. b: 0.31 against All-in-LR 0.21: necessary.
    Both: 0.195 against optimum 0.125 and All-in-LR 0.16: necessary; one win of two."""
    sets = per_dataset(tidy())
    assert sets.set_index("dataset").loc["A", "AL, rejex"] == pytest.approx(0.08)
    assert sets["AL, rejex-tuned"].isna().all()  # that rejector was not run
    table = label_free_table(tidy(), PROPS).set_index("slice")
    assert table.loc["paper", "verdict"] == "worthless"
    assert table.loc["adbench", "verdict"] == "necessary"
    assert table.loc["gamma < 0.05", "datasets"] == 1
    assert table.loc["gamma >= 0.15", "LR, confidence"] == pytest.approx(0.21)
    assert table.loc["all", "AL, rejex"] == pytest.approx(0.195)
    assert table.loc["all", "rejex wins"] == 1 and table.loc["all", "verdict"] == "necessary"
    assert "500 <= n < 3000" not in table.index  # no data set of that size


def test_the_verdicts_rules() -> None:
    row = {"AL, rejex": 0.05, "LR, confidence": 0.06, "optimal, confidence": 0.04}
    assert verdict(row) == "worth less"
    assert verdict({**row, "optimal, confidence": 0.05}) == "worthless"
    assert verdict({**row, "AL, rejex": 0.06}) == "necessary"
    assert verdict({**row, "AL, rejex": float("nan")}) == "–"
    assert applies(["confidence", "rejex"]) and not applies(["confidence", "two-sided"])


def test_the_tuned_table_pairs_data_sets() -> None:
    """RejEx-tuned's All-in-AL at 0.05 (A) and 0.35 (b), +0.02 at seed 1 (seed means 0.06,
    0.36): against RejEx's 0.08 and 0.31 it wins on A (-0.02) and loses on b (+0.05): 1/2,
    median 0.015."""
    frame = tidy()
    extra = frame[(frame.rejector == "rejex") & (frame.strategy == "all-in-al")].assign(
        rejector="rejex-tuned")
    extra["mean_cost"] = extra.dataset.map({"A": 0.05, "adbench/b": 0.35}) + 0.02 * extra.seed
    table = tuned_table(pd.concat([frame, extra])).set_index("strategy")
    assert table.loc["all-in-al", "rejex-tuned"] == pytest.approx(0.21)
    assert table.loc["all-in-al", "tuned < rejex"] == "1/2"
    assert table.loc["all-in-al", "median tuned - rejex"] == pytest.approx(0.015)
    assert table.loc["all-in-al", "tuned < confidence"] == "0/0"  # no All-in-AL with it
    assert table.loc["optimal", "confidence"] == pytest.approx((0.09 + 0.16) / 2)
