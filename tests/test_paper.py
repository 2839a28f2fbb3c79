"""Tests for scripts.studies.paper: the analysis of the paper's questions on small
hand-built result tables whose expected values are worked out by hand in each test."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest

from agents.experiments import summary_table
from scripts.studies import paper

Q1 = paper.Q1_AGENTS
NAN = float("nan")


def rows(agent: str, dataset: str = "d1", seed: int = 0, setting: str = "knn",
         round_fraction: float = 0.02, **columns: Sequence[Any] | Any) -> pd.DataFrame:
    """One episode of ``agent``: one row per value of the longest list in ``columns``
    (scalars repeat), rounds 1..n, plus the key and setting columns the analysis reads."""
    n = max((len(v) for v in columns.values() if isinstance(v, list)), default=1)
    frame = pd.DataFrame({name: value if isinstance(value, list) else [value] * n
                          for name, value in columns.items()})
    keys = {"dataset": dataset, "setting": setting, "agent": agent, "seed": seed,
            "round": range(1, n + 1), "prior": setting.split("_")[0],
            "round_fraction": round_fraction, "threshold_search": "exact"}
    return frame.assign(**keys)


def table(*frames: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------- helpers
def test_conditional_cost_weighs_class_conditional_rates() -> None:
    frame = pd.DataFrame({"c_r": [0.1, 0.2], "rejection_rate": [0.5, 0.0], "c_fp": [1.0, 10.0],
                          "fpr": [0.2, 0.1], "c_fn": [10.0, 1.0], "fnr": [0.3, 0.4]})
    # 0.1*0.5 + 1*0.2 + 10*0.3 = 3.25; 0 + 10*0.1 + 1*0.4 = 1.4
    np.testing.assert_allclose(paper.conditional_cost(frame), [3.25, 1.4])


def test_budget_percent_follows_the_round_fraction() -> None:
    index = paper.budget_percent([1, 2, 15], 0.02)
    assert list(index) == [2, 4, 30] and index.name == "budget %"
    assert list(paper.budget_percent(pd.Index([1, 2, 3]), 0.05)) == [5, 10, 15]


@pytest.mark.parametrize(("better", "expected"), [
    (["cosine", "entropy", "cosine", "entropy"], 8),
    (["entropy"] * 4, 2),
    (["cosine", "entropy", "entropy", "entropy"], 4),
    (["entropy", "entropy", "entropy", "cosine"], None),
])
def test_first_better_is_where_entropy_stays_ahead(better: list[str], expected: int | None
                                                   ) -> None:
    frame = pd.DataFrame({"better": better}, index=[2, 4, 6, 8])
    assert paper.first_better(frame) == expected


def test_experiments_build_the_runs_the_questions_need() -> None:
    runs = paper.experiments(["WBC", "Glass"], 3, ["knn", "iforest"], paper.QUESTIONS,
                             bayes_datasets=["Glass", "WPBC"], bayes_seeds=2, bayes_calls=7)
    by_name = {run.name: run.grid for run in runs}
    assert list(by_name) == ["main", "costs", "bayes"]
    assert by_name["main"].agents == paper.MAIN_AGENTS
    assert [s.name for s in by_name["main"].settings] == ["knn", "iforest"]
    assert [s.name for s in by_name["costs"].settings] == [
        "knn_cfp10", "knn_cfn10", "iforest_cfp10", "iforest_cfn10"]
    bayes = by_name["bayes"]
    assert bayes.dataset_names == ("Glass",) and bayes.seeds == (0, 1)
    assert [s.name for s in bayes.settings] == ["knn_bayes7"]
    assert [r.name for r in paper.experiments(["WBC"], 1, ["knn"], ["q4"])] == ["costs"]
    with pytest.raises(ValueError, match="bayes-datasets"):
        paper.experiments(["WBC"], 1, ["knn"], ["bayes"], bayes_datasets=["Glass"])


# ---------------------------------------------------------------------------------- dynamics
def test_ballad_dynamics_by_hand() -> None:
    ballad = rows("ballad", action=["LR", "AL", "AL", "LR", "AL"],
                  entropy_al=[NAN, 0.3, 0.1, 0.1, 0.0002],
                  entropy_lr=[0.2, 0.2, 0.2, 0.0005, 0.0005],
                  cosine_al=9.0, cosine_lr=9.0, tau=[0.5, 0.5, 0.5, 0.5, 0.4],
                  test_cost=[0.10, 0.08, 0.07, 0.07, 0.09])
    cosine = rows("ballad-cosine", action=["LR", "AL", "LR"], entropy_al=9.0, entropy_lr=9.0,
                  cosine_al=[NAN, 0.4, 0.4], cosine_lr=[0.25, 0.25, 0.01],
                  tau=[0.5, 0.6, 0.7], test_cost=[0.2, 0.1, 0.1])
    other = rows("all-in-al", action="AL", entropy_al=1.0, entropy_lr=1.0, cosine_al=1.0,
                 cosine_lr=1.0, tau=0.5, test_cost=0.5)
    result = paper.ballad_dynamics(table(ballad, cosine, other))
    assert list(result.index) == [("knn", "ballad"), ("knn", "ballad-cosine")]
    entropy = result.loc[("knn", "ballad")]
    # rounds 3-5 decide: AL, LR, AL; the LR round (4) keeps tau 0.5 and measures 0.0005
    assert entropy["AL share (rounds 3-15)"] == pytest.approx(2 / 3)
    assert entropy["LR rounds (3-15) per episode"] == 1.0
    assert entropy["LR rounds leaving tau unchanged"] == 1.0
    assert entropy["LR rounds with reward < 0.001"] == 1.0
    assert entropy["AL rounds with reward < 0.001"] == 0.5  # 0.1 and 0.0002
    assert entropy["first LR reward (round 1, mean)"] == pytest.approx(0.2)
    assert entropy["later LR reward (median)"] == pytest.approx(0.0005)
    assert entropy["later AL reward (median)"] == pytest.approx((0.1 + 0.0002) / 2)
    assert entropy["test cost change per AL round"] == pytest.approx((-0.01 + 0.02) / 2)
    assert entropy["test cost change per LR round"] == pytest.approx(0.0)
    cos = result.loc[("knn", "ballad-cosine")]  # the cosine signal, not the entropy one
    assert cos["first LR reward (round 1, mean)"] == pytest.approx(0.25)
    assert cos["later LR reward (median)"] == pytest.approx(0.01)
    assert cos["LR rounds leaving tau unchanged"] == 0.0
    assert math.isnan(cos["later AL reward (median)"])  # no AL round after round 2


# ---------------------------------------------------------------------------------- Q1
def q1_results() -> pd.DataFrame:
    """WBC (a paper data set): BALLAD 0.1 < AL 0.2 < LR 0.3; d2: AL 0.2 < LR 0.3 < BALLAD 0.4.
    Under the conditional metric (= fpr here) BALLAD wins both."""
    costs = {"WBC": (0.1, 0.2, 0.3), "d2": (0.4, 0.2, 0.3)}
    auc, contamination = {"WBC": 0.8, "d2": 0.6}, {"WBC": 0.05, "d2": 0.15}
    frames = [rows(agent, dataset, seed, test_cost=[costs[dataset][k]] * 2,
                   auc=auc[dataset], contamination=contamination[dataset], c_r=0.1, c_fp=1.0,
                   c_fn=1.0, rejection_rate=0.0, fnr=0.0, fpr=(0.1, 0.3, 0.5)[k])
              for dataset in costs for k, agent in enumerate(Q1) for seed in (0, 1)]
    return table(*frames)


def test_q1_summary_adds_paper_winner_auc_and_contamination() -> None:
    summary = paper.q1_summary(q1_results())
    assert list(summary.index) == ["WBC", "d2", "mean"]
    assert list(summary["winner"]) == ["ballad", "all-in-al", "all-in-al"]
    np.testing.assert_allclose(summary["margin"], [0.5, 1 / 3, 0.2])  # (0.25-0.2)/0.25
    assert list(summary["seeds_won"]) == ["2/2", "2/2", ""]
    assert list(summary["paper"]) == ["ballad", "", ""]
    np.testing.assert_allclose(summary["auc"], [0.8, 0.6, 0.7])
    np.testing.assert_allclose(summary["gamma"], [0.05, 0.15, 0.1])


def test_q1_key_numbers() -> None:
    results = q1_results()
    summary, conditional = paper.q1_summary(results), paper.q1_conditional(results)
    key = paper.q1_key("knn", summary, conditional)
    assert key["mean_cost"] == pytest.approx({"ballad": 0.25, "all-in-al": 0.2,
                                              "all-in-lr": 0.3})
    assert key["mean_gamma"] == pytest.approx(0.1)
    assert key["gain_vs_all_in_al"] == pytest.approx(-0.25)
    assert key["gain_vs_all_in_lr"] == pytest.approx(1 / 6)
    assert key["wins"] == {"all-in-al": 1, "ballad": 1}
    assert key["conditional_metric"]["mean"] == pytest.approx(
        {"ballad": 0.1, "all-in-al": 0.3, "all-in-lr": 0.5})
    assert key["conditional_metric"]["wins"] == {"ballad": 2}
    assert key["auc_by_winner"] == pytest.approx({"all-in-al": 0.6, "ballad": 0.8})
    assert (key["agree"], key["compared"]) == (1, 1)


# ---------------------------------------------------------------------------------- Q2
def q2_results(round_fraction: float = 0.02) -> pd.DataFrame:
    costs = {("ballad", "d1"): [0.10, 0.08, 0.06], ("ballad", "d2"): [0.20, 0.10, 0.04],
             ("ballad-cosine", "d1"): [0.10] * 3, ("ballad-cosine", "d2"): [0.10] * 3}
    actions = {"ballad": ["LR", "AL", "AL"], "ballad-cosine": ["LR", "AL", "LR"]}
    return table(*(rows(agent, dataset, round_fraction=round_fraction, test_cost=cost,
                        action=actions[agent]) for (agent, dataset), cost in costs.items()))


def test_q2_table_means_stds_and_the_paper_beside() -> None:
    result = paper.q2_table(q2_results())
    assert list(result.index) == [2, 4, 6] and result.index.name == "budget %"
    np.testing.assert_allclose(result["entropy"], [0.15, 0.09, 0.05])
    np.testing.assert_allclose(result["entropy std"], np.array([0.1, 0.02, 0.02]) / np.sqrt(2))
    np.testing.assert_allclose(result["cosine"], [0.1, 0.1, 0.1])
    np.testing.assert_allclose(result["cosine std"], [0.0, 0.0, 0.0], atol=1e-15)
    assert list(result["better"]) == ["cosine", "entropy", "entropy"]
    np.testing.assert_allclose(result["paper entropy"], [0.0536, 0.0465, 0.0443])
    assert list(result["paper better"]) == ["cosine", "cosine", "cosine"]
    key = paper.q2_key(result)
    assert key["entropy_better_from"] == 4
    assert key["better"] == {2: "cosine", 4: "entropy", 6: "entropy"}
    assert key["mean"] == pytest.approx({"entropy": 0.29 / 3, "cosine": 0.1})


def test_q2_table_with_another_round_fraction() -> None:
    result = paper.q2_table(q2_results(round_fraction=0.05))
    assert list(result.index) == [5, 10, 15]
    assert math.isnan(result.loc[5, "paper entropy"])  # the paper has even steps only
    assert result.loc[10, "paper entropy"] == pytest.approx(0.0420)


def test_q2_shares_of_al_rounds() -> None:
    shares = paper.q2_shares(q2_results(), "knn")
    assert [s["agent"] for s in shares] == ["ballad", "ballad-cosine"]
    assert shares[0]["AL share (all rounds)"] == pytest.approx(2 / 3)
    assert shares[0]["AL share (rounds 3-15)"] == 1.0
    assert shares[1]["AL share (all rounds)"] == pytest.approx(1 / 3)
    assert shares[1]["AL share (rounds 3-15)"] == 0.0
    assert (shares[0]["paper"], shares[1]["paper"]) == (0.63, 0.93)


# ---------------------------------------------------------------------------------- Q3
def test_q3_stats_of_measured_rounds_per_prior() -> None:
    # AL - LR differences 0.2, -0.1, -0.2: LR is higher in two rounds of three, so the share
    # (2/3) and its complement (1/3) differ, as do the median (-0.1) and the mean (-1/30).
    ballad = rows("ballad", entropy_al=[NAN, 0.3, 0.1, 0.0], entropy_lr=[0.9, 0.1, 0.2, 0.2],
                  al_measured=[False, True, True, True], lr_measured=True)
    stats = paper.q3_stats(table(ballad, rows("all-in-al", entropy_al=5.0, entropy_lr=0.0,
                                              al_measured=True, lr_measured=True)))
    assert list(stats.index) == ["knn"] and stats.index.name == "prior"
    row = stats.loc["knn"]
    assert row["rounds"] == 3  # round 1 has no AL reward yet; the other agent is left out
    assert row["median"] == pytest.approx(-0.1)
    assert row["share_lr_higher"] == pytest.approx(2 / 3)
    assert row["std_al"] == pytest.approx(np.std([0.3, 0.1, 0.0], ddof=1))
    assert row["std_lr"] == pytest.approx(np.std([0.1, 0.2, 0.2], ddof=1))
    assert (row["paper median"], row["paper std_al"], row["paper std_lr"]) == (0.0, 0.03, 0.07)


# ---------------------------------------------------------------------------------- Q4
def q4_results() -> pd.DataFrame:
    """Round fraction 0.05: budget steps 5, 10, 15, 20 % (15 is neither below nor above 15)."""
    costs = {"ballad": [0.2, 0.1, 0.1, 0.1], "all-in-al": [0.4, 0.2, 0.15, 0.05],
             "all-in-lr": [0.1, 0.05, 0.3, 0.2]}
    return table(*(rows(agent, setting="knn_cfp10", round_fraction=0.05, test_cost=cost)
                   for agent, cost in costs.items()))


def test_q4_table_gains_and_best_per_step() -> None:
    result = paper.q4_table(q4_results())
    assert list(result.index) == [5, 10, 15, 20] and result.index.name == "budget %"
    np.testing.assert_allclose(result["gain vs all-in-al"], [0.5, 0.5, 1 / 3, -1.0])
    np.testing.assert_allclose(result["gain vs all-in-lr"], [-1.0, -1.0, 2 / 3, 0.5])
    assert list(result["best"]) == ["all-in-lr", "all-in-lr", "ballad", "all-in-al"]


def test_q4_key_numbers() -> None:
    results = q4_results()
    summary = summary_table(results)
    key = paper.q4_key("knn_cfp10", paper.q4_table(results), summary)
    assert key["mean_cost"] == pytest.approx({"ballad": 0.125, "all-in-al": 0.2,
                                              "all-in-lr": 0.1625})
    assert key["gain_vs_all_in_al"] == pytest.approx(0.375)  # 1 - 0.5 / 0.8
    assert key["gain_vs_all_in_lr"] == pytest.approx(3 / 13)  # 1 - 0.5 / 0.65
    assert key["best_per_step"] == {5: "all-in-lr", 10: "all-in-lr", 15: "ballad",
                                    20: "all-in-al"}
    assert key["gain_vs_lr_below_15"] == pytest.approx([-1.0, -1.0])
    assert key["lr_vs_ballad_above_15"] == pytest.approx(-1.0)  # 20 % only: 1 - 0.2 / 0.1
    assert key["lr_vs_al_above_15"] == pytest.approx(-3.0)  # 1 - 0.2 / 0.05
    assert key["wins"] == {"ballad": 1}


# ---------------------------------------------------------------------------------- bayes
def test_bayes_comparison_and_key() -> None:
    main = table(*(rows(agent, dataset, seed, test_cost=cost)
                   for dataset, seed, agent, cost in [
                       ("d1", 0, "ballad", 0.1), ("d1", 0, "all-in-al", 0.2),
                       ("d1", 0, "all-in-lr", 0.3), ("d1", 1, "ballad", 0.9),
                       ("d2", 0, "ballad", 0.5), ("d1", 0, "ballad-cosine", 0.0)]))
    bayes = table(*(rows(agent, "d1", 0, setting="knn_bayes20", test_cost=cost)
                    for agent, cost in [("ballad", 0.3), ("all-in-al", 0.2),
                                        ("all-in-lr", 0.4)])).assign(threshold_search="bayes")
    both = paper.bayes_comparison(main, bayes)
    assert len(both) == 6  # d1, seed 0, the three Q1 agents, once per search
    key = paper.bayes_key(summary_table(both), "knn", "knn_bayes20")
    assert key["winners"] == {"knn": {"d1": "ballad"}, "knn_bayes20": {"d1": "all-in-al"}}
    assert (key["same_winner"], key["datasets"]) == (0, 1)
    assert key["mean_cost"]["knn_bayes20"] == pytest.approx(
        {"ballad": 0.3, "all-in-al": 0.2, "all-in-lr": 0.4})


# ---------------------------------------------------------------------------------- text
def test_key_numbers_page_formats_nested_values() -> None:
    page = paper.key_numbers_page({"q": {"a": 0.5, "b": {"c": [1, 0.25]},
                                         "d": [{"e": 2, "f": "x"}]}})
    assert page == ("# The paper's numbers and ours\n\n"
                    "Generated by `python -m scripts.studies.paper` from the stored results.\n\n"
                    "## q\n\n```\n"
                    "a: 0.5000\nb:\n  c:\n    - 1\n    - 0.2500\nd:\n  - e: 2\n    f: x"
                    "\n```\n")
