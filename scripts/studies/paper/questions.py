"""The paper study's questions over the stored results: the report's writer (the one table
writer, figures), the pure table builders of Q1-Q4 and the threshold-search comparison,
and each question's tables, figures and key numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from agents.experiments.stores.results import writable_folder
from agents.reports.tables import (
    action_shares,
    per_round_table,
    summary_table,
    win_counts,
    write_table,
)
from scripts.studies.paper import figures
from scripts.studies.paper.figures import (
    fresh_rewards,
    operating_points,
    relative_gain,
    reward_difference_stats,
    reward_differences,
)
from scripts.studies.paper.runs import BALLADS, PAPER, Q1_AGENTS, Key


# ---------------------------------------------------------------------------------- output
@dataclass(frozen=True)
class Writer:
    """Where the report goes: ``<docs>/tables`` (via ``write_table``) and ``<docs>/figures``."""

    docs: Path

    def __post_init__(self) -> None:
        writable_folder(self.tables, "--docs")
        writable_folder(self.figures, "--docs")

    @property
    def tables(self) -> Path:
        return Path(self.docs) / "tables"

    @property
    def figures(self) -> Path:
        return Path(self.docs) / "figures"

    def table(self, stem: str, frame: pd.DataFrame, title: str, note: str = "",
              index: bool = True) -> Path:
        """``<stem>.csv`` and ``<stem>.md`` under ``tables``."""
        return write_table(frame, self.tables, stem, title=title, note=note, index=index)

    def figure(self, stem: str) -> Path:
        """The path of figure ``<stem>.png``."""
        return self.figures / f"{stem}.png"


# ---------------------------------------------------------------------------------- helpers
def conditional_cost(results: pd.DataFrame) -> pd.Series:
    """The paper's written metric: c_r P(reject) + c_fp FPR + c_fn FNR, per round."""
    return (results["c_r"] * results["rejection_rate"] + results["c_fp"] * results["fpr"]
            + results["c_fn"] * results["fnr"])


def budget_percent(rounds: Sequence[int] | pd.Index, round_fraction: float) -> pd.Index:
    """Rounds as the labels bought so far, in whole percent of |D| (round 1 -> 2 by default)."""
    values = (100 * pd.Index(rounds).to_numpy() * round_fraction).round().astype(int)
    return pd.Index(values, name="budget %")


def first_better(table: pd.DataFrame) -> int | None:
    """The first budget from which entropy stays at least as good as cosine to the end."""
    better = (table["better"] == "entropy").to_numpy()
    for i in range(len(better)):
        if better[i:].all():
            return int(table.index[i])
    return None


def _better(first: pd.Series, second: pd.Series, names: tuple[str, str]) -> pd.Series:
    """``names[0]`` where ``first`` costs at most ``second``, else ``names[1]``."""
    return (first <= second).map({True: names[0], False: names[1]})


def _wins(table: pd.DataFrame, setting: str) -> dict[str, int]:
    """Data sets won per agent in one setting's summary (its ``mean`` row left out)."""
    return win_counts(pd.concat({setting: table}, names=["setting"])).loc[setting].to_dict()


def ballad_dynamics(results: pd.DataFrame) -> pd.DataFrame:
    """How BALLAD's choices unfold, per setting and reward: AL share after the initialisation,
    LR rounds whose reward is (nearly) 0 because tau hardly moved, and the rewards' sizes."""
    rows = []
    for (setting, agent), block in results[results["agent"].isin(BALLADS)].groupby(
            ["setting", "agent"], sort=False):
        signal = "cosine" if agent == "ballad-cosine" else "entropy"
        block = block.assign(fresh=fresh_rewards(block, signal))
        episodes = block.groupby(["dataset", "seed"])
        block["tau_before"] = episodes["tau"].shift(1)
        block["cost_change"] = episodes["test_cost"].diff()
        later = block[block["round"] >= 3]
        later_lr, later_al = later[later["action"] == "LR"], later[later["action"] == "AL"]
        rows.append({
            "setting": setting, "agent": agent,
            "AL share (rounds 3-15)": float((later["action"] == "AL").mean()),
            "LR rounds (3-15) per episode": len(later_lr) / episodes.ngroups,
            "LR rounds leaving tau unchanged": float(
                (later_lr["tau"] == later_lr["tau_before"]).mean()),
            "LR rounds with reward < 0.001": float((later_lr["fresh"] < 1e-3).mean()),
            "AL rounds with reward < 0.001": float((later_al["fresh"] < 1e-3).mean()),
            "first LR reward (round 1, mean)": block.loc[block["round"] == 1, "fresh"].mean(),
            "later LR reward (median)": later_lr["fresh"].median(),
            "later AL reward (median)": later_al["fresh"].median(),
            "test cost change per AL round": later_al["cost_change"].mean(),
            "test cost change per LR round": later_lr["cost_change"].mean()})
    return pd.DataFrame(rows).set_index(["setting", "agent"])


# ---------------------------------------------------------------------------------- Q1
def q1_summary(block: pd.DataFrame) -> pd.DataFrame:
    """Mean test cost per data set of one setting, with the paper's winner, SSDO's mean ROC
    AUC and the contamination (``gamma``, kept as the table's column name)."""
    setting = block["setting"].iloc[0]
    paper_winner = {d: a for a, names in PAPER["q1_winners"].items() for d in names}
    summary = summary_table(block).loc[setting]
    summary["paper"] = [paper_winner.get(d, "") for d in summary.index]
    for column, values in (("auc", block.groupby("dataset")["auc"].mean()),
                           ("gamma", block.groupby("dataset")["contamination"].first())):
        summary[column] = values.reindex(summary.index)
        summary.loc["mean", column] = values.mean()
    return summary


def q1_conditional(block: pd.DataFrame) -> pd.DataFrame:
    """One setting's summary under the paper's written (class-conditional) metric."""
    setting = block["setting"].iloc[0]
    return summary_table(block.assign(conditional_cost=conditional_cost(block)),
                         metric="conditional_cost").loc[setting]


def q1_key(setting: str, summary: pd.DataFrame, conditional: pd.DataFrame) -> Key:
    """Q1's key numbers from one setting's ``q1_summary`` and ``q1_conditional``."""
    datasets = summary.drop(index="mean")
    means = summary.loc["mean", list(Q1_AGENTS)]
    return {"mean_cost": means.to_dict(), "mean_gamma": summary.loc["mean", "gamma"],
            "gain_vs_all_in_al": 1 - means["ballad"] / means["all-in-al"],
            "gain_vs_all_in_lr": 1 - means["ballad"] / means["all-in-lr"],
            "wins": _wins(summary, setting),
            "conditional_metric": {
                "mean": conditional.loc["mean", list(Q1_AGENTS)].to_dict(),
                "wins": _wins(conditional, setting)},
            "auc_by_winner": datasets.groupby("winner")["auc"].mean().to_dict(),
            "agree": int((datasets["winner"] == datasets["paper"]).sum()),
            "compared": int((datasets["paper"] != "").sum())}


def q1(main: pd.DataFrame, writer: Writer, key: Key) -> None:
    """Figure 1 and the mean cost per strategy and data set, per prior."""
    rows = main[main["agent"].isin(Q1_AGENTS)]
    for prior, block in rows.groupby("prior", sort=False):
        setting = block["setting"].iloc[0]
        figures.cost_per_round(block, writer.figure(f"q1_cost_per_round_{prior}"),
                             agents=Q1_AGENTS,
                             title=f"Q1: test cost per round, {prior} prior (mean of seeds)")
        summary = q1_summary(block)
        writer.table(f"q1_mean_cost_{prior}", summary,
                     f"Q1: mean test cost per data set, {prior} prior",
                     "Mean over seeds and the 15 rounds; `margin` is the winner's relative "
                     "lead over the runner-up, `seeds_won` in how many seeds it was best, "
                     "`paper` the paper's winner, `auc` SSDO's test ROC AUC averaged over "
                     "rounds, seeds and the three strategies, `gamma` the contamination: "
                     "about the cost of predicting every example normal (or rejecting all).")
        conditional = q1_conditional(block)
        writer.table(f"q1_conditional_cost_{prior}", conditional,
                     f"Q1 under the paper's written metric, {prior} prior",
                     "c_r P(reject) + c_fp FPR + c_fn FNR (class-conditional rates, the "
                     "formula in the paper's text) instead of the cost per test example "
                     "(SPEC §5) used everywhere else; means over seeds and rounds.")
        writer.table(f"q1_operating_points_{prior}", operating_points(block).loc[setting],
                     f"Q1: where each strategy's cost comes from, {prior} prior",
                     "Means over data sets (seeds and rounds first): test cost, false positive "
                     "and false negative rates, rejection rate, ROC AUC and tau.")
        key[f"q1_{prior}"] = q1_key(setting, summary, conditional)


# ---------------------------------------------------------------------------------- Q2
def q2_table(block: pd.DataFrame) -> pd.DataFrame:
    """Table 2 for one setting: BALLAD's entropy and cosine rewards' mean (std across data
    sets) test cost per budget step, which is better, and the paper's values beside."""
    setting = block["setting"].iloc[0]
    table = per_round_table(block, spread=True).loc[setting]
    ours = pd.DataFrame({
        "entropy": table[("ballad", "mean")], "entropy std": table[("ballad", "std")],
        "cosine": table[("ballad-cosine", "mean")],
        "cosine std": table[("ballad-cosine", "std")]})
    ours.index = budget_percent(ours.index, block["round_fraction"].iloc[0])
    ours["better"] = _better(ours["entropy"], ours["cosine"], ("entropy", "cosine"))
    paper = pd.DataFrame(PAPER["q2_table2"], columns=["budget %", "paper entropy",
                                                      "paper entropy std", "paper cosine",
                                                      "paper cosine std"]).set_index("budget %")
    both = ours.join(paper)
    both["paper better"] = _better(both["paper entropy"], both["paper cosine"],
                                   ("entropy", "cosine"))
    return both


def q2_shares(block: pd.DataFrame, prior: str) -> list[dict[str, Any]]:
    """Each BALLAD reward's share of AL choices, over all rounds and over rounds 3-15."""
    setting = block["setting"].iloc[0]
    all_rounds = action_shares(block).loc[setting]
    decided = action_shares(block, first_round=3).loc[setting]
    return [{"prior": prior, "agent": agent, "AL share (all rounds)": all_rounds[agent],
             "AL share (rounds 3-15)": decided[agent], "paper": PAPER["q2_al_share"][agent]}
            for agent in BALLADS]


def q2_key(table: pd.DataFrame) -> Key:
    """Q2's key numbers from one setting's ``q2_table``."""
    return {"entropy_better_from": first_better(table), "better": table["better"].to_dict(),
            "mean": {"entropy": table["entropy"].mean(), "cosine": table["cosine"].mean()}}


def q2(main: pd.DataFrame, writer: Writer, key: Key) -> None:
    """Table 2 (entropy vs cosine per budget step) and each reward's share of AL choices."""
    shares = []
    for prior, block in main[main["agent"].isin(BALLADS)].groupby("prior", sort=False):
        table = q2_table(block)
        writer.table(f"q2_table2_{prior}", table,
                     f"Q2 (Table 2): mean (std) test cost per budget step, {prior} prior",
                     "Per round: each data set's mean over seeds, then mean and std across "
                     "data sets; the paper's values beside ours.")
        figures.mean_cost_per_round(block, writer.figure(f"q2_entropy_vs_cosine_{prior}"),
                                  agents=list(BALLADS),
                                  title=f"Q2: entropy vs cosine reward, {prior} prior")
        shares += q2_shares(block, prior)
        key[f"q2_{prior}"] = q2_key(table)
    share_table = pd.DataFrame(shares)
    writer.table("q2_al_share", share_table, "Q2: share of rounds given to AL",
                 "Rounds 1-2 are BALLAD's fixed initialisation (LR, then AL).", index=False)
    key["q2_al_share"] = share_table.to_dict("records")


# ---------------------------------------------------------------------------------- Q3
def q3_stats(main: pd.DataFrame) -> pd.DataFrame:
    """BALLAD's AL - LR entropy reward differences per prior: rounds, median, spread, each
    side's std, and the paper's values beside."""
    block = main[main["agent"] == "ballad"]
    stats = reward_difference_stats(reward_differences(block))
    stats["rounds"] = stats["rounds"].astype(int)
    stats.index = pd.Index([block.loc[block["setting"] == s, "prior"].iloc[0]
                            for s in stats.index], name="prior")
    for name, value in PAPER["q3"].items():
        stats[f"paper {name}"] = value
    return stats


def q3(main: pd.DataFrame, writer: Writer, key: Key) -> None:
    """The AL - LR entropy reward difference: histogram, median and each side's std."""
    block = main[main["agent"] == "ballad"]
    for prior, setting in block.groupby("prior", sort=False)["setting"].first().items():
        figures.reward_difference_histogram(block, writer.figure(f"q3_reward_difference_{prior}"),
                                          setting=setting)
    writer.table("q3_ballad_dynamics", ballad_dynamics(main),
                 "How BALLAD's choices unfold (exact threshold search)",
                 "Rounds 3-15 are the ones BALLAD decides; `later` rewards are the ones "
                 "measured in those rounds by the side chosen. An LR round whose labels hardly "
                 "move tau measures an LR reward near 0, which stays the stored LR reward "
                 "until LR is chosen again: BALLAD then picks AL until the AL reward drops "
                 "below it (ties go to AL). The last two columns: mean change of the test "
                 "cost over the rounds of each kind (negative = the labels helped).")
    stats = q3_stats(main)
    writer.table("q3_reward_difference", stats,
                 "Q3: entropy reward of AL minus LR over BALLAD's rounds",
                 "Rounds in which both sides have a measured reward (rounds 2-15); the "
                 "values are the latest rewards BALLAD compares. std_al and std_lr are the "
                 "standard deviations of each side's reward over the same rounds.")
    key["q3"] = stats.to_dict("index")


# ---------------------------------------------------------------------------------- Q4
def q4_table(block: pd.DataFrame) -> pd.DataFrame:
    """One cost setting's mean test cost per budget step and agent, BALLAD's relative gain
    over each All-in baseline and the best agent per step."""
    setting = block["setting"].iloc[0]
    table = per_round_table(block).loc[setting].copy()
    table.index = budget_percent(table.index, block["round_fraction"].iloc[0])
    for base in ("all-in-al", "all-in-lr"):
        table[f"gain vs {base}"] = relative_gain(table, "ballad", base)
    table["best"] = table[list(Q1_AGENTS)].idxmin(axis=1)
    return table


def q4_key(setting: str, table: pd.DataFrame, summary: pd.DataFrame) -> Key:
    """Q4's key numbers from one setting's ``q4_table`` and its per-data-set summary; ``above
    15``: the budget steps past 15 % of |D|."""
    overall = table[list(Q1_AGENTS)].mean()
    late = table.loc[table.index > 15]
    return {"mean_cost": overall.to_dict(),
            "gain_vs_all_in_al": 1 - overall["ballad"] / overall["all-in-al"],
            "gain_vs_all_in_lr": 1 - overall["ballad"] / overall["all-in-lr"],
            "best_per_step": table["best"].to_dict(),
            "gain_vs_lr_below_15": table.loc[table.index < 15, "gain vs all-in-lr"].tolist(),
            "lr_vs_ballad_above_15": (1 - late["all-in-lr"] / late["ballad"]).mean(),
            "lr_vs_al_above_15": (1 - late["all-in-lr"] / late["all-in-al"]).mean(),
            "wins": win_counts(summary).loc[setting].to_dict()}


def q4(costs: pd.DataFrame, writer: Writer, key: Key) -> None:
    """c_fp = 10 and c_fn = 10: cost per budget step and BALLAD's relative gain."""
    for prior, block in costs.groupby("prior", sort=False):
        figures.mean_cost_per_round(block, writer.figure(f"q4_costs_{prior}"), agents=Q1_AGENTS,
                                  title=f"Q4: mean test cost per round, {prior} prior")
        for setting, rows in block.groupby("setting", sort=False):
            table = q4_table(rows)
            writer.table(f"q4_{setting}", table, f"Q4: mean test cost per budget step, {setting}",
                         "Mean over data sets (seeds first); gain = 1 - BALLAD / baseline.")
            summary = summary_table(rows)
            write_table(summary, writer.tables, f"q4_{setting}_per_dataset", markdown=False)
            key[f"q4_{setting}"] = q4_key(setting, table, summary)


# ---------------------------------------------------------------------------------- bayes
def bayes_comparison(main: pd.DataFrame, bayes_results: pd.DataFrame) -> pd.DataFrame:
    """The bayes run's rows and the exact search's rows of ``main`` on the same prior, data
    sets, seeds and Q1 agents, in one table."""
    prior = bayes_results["prior"].iloc[0]
    exact = main[(main["prior"] == prior) & (main["threshold_search"] == "exact")
                 & main["agent"].isin(Q1_AGENTS)
                 & main["dataset"].isin(bayes_results["dataset"].unique())
                 & main["seed"].isin(bayes_results["seed"].unique())]
    return pd.concat([exact, bayes_results], ignore_index=True)


def bayes_key(summary: pd.DataFrame, exact_name: str, bayes_name: str) -> Key:
    """Winners per data set of both searches and how often they agree."""
    winners = summary["winner"].unstack("setting").drop(index="mean")
    return {"winners": winners.to_dict(),
            "mean_cost": summary.xs("mean", level="dataset")[list(Q1_AGENTS)].to_dict("index"),
            "same_winner": int((winners[exact_name] == winners[bayes_name]).sum()),
            "datasets": int(len(winners))}


def bayes(main: pd.DataFrame, bayes_results: pd.DataFrame, writer: Writer, key: Key) -> None:
    """Q1 with gp_minimize against the exact search on the same data sets and seeds."""
    both = bayes_comparison(main, bayes_results)
    summary = summary_table(both)
    writer.table("q1_bayes_vs_exact", summary,
                 "Q1 with the exact and the bayes (gp_minimize) threshold search",
                 f"{bayes_results['prior'].iloc[0]} prior; data sets "
                 f"{', '.join(bayes_results['dataset'].unique())}, seeds "
                 f"0-{bayes_results['seed'].max()}. Mean test cost over seeds and rounds.")
    figures.cost_per_round(both, writer.figure("q1_bayes_vs_exact"), agents=Q1_AGENTS,
                         title="Q1: exact (solid) vs bayes (dashed) threshold search")
    writer.table("q1_bayes_vs_exact_dynamics", ballad_dynamics(both),
                 "BALLAD's choices with the exact and the bayes threshold search",
                 "Same data sets and seeds as q1_bayes_vs_exact.")
    writer.table("q1_bayes_vs_exact_operating_points", operating_points(both),
                 "Operating points with the exact and the bayes threshold search")
    key["bayes"] = bayes_key(summary, both["setting"].iloc[0], bayes_results["setting"].iloc[0])
