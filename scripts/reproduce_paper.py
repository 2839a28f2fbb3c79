"""Reproduce the four questions of the BALLAD paper (SPEC §6) and write figures and tables.

Three runs, each a resumable grid of ``agents.runner`` in its own folder under ``--output``:

* ``main``: BALLAD (entropy), BALLAD (cosine), All-in-AL, All-in-LR, default costs, for each
  prior. Q1, Q2 and Q3 are read from it.
* ``costs``: BALLAD and the All-in baselines with c_fp = 10, and with c_fn = 10 (Q4).
* ``bayes``: Q1 with the paper's threshold search (gp_minimize, 20 calls) on the few data
  sets and seeds of ``--bayes-datasets`` / ``--bayes-seeds``, compared with ``main``.

Figures go to ``<docs>/figures/``, tables (Markdown and CSV) to ``<docs>/tables/``; both are
drawn from the stored results only (``--report-only`` redraws them without running).

    .venv/bin/python scripts/reproduce_paper.py --data-dir ../shared/benchmarks --n-jobs 2
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from agents import plots
from agents.runner import (
    Grid,
    RunError,
    Setting,
    action_shares,
    dataset_names,
    fresh_rewards,
    load_results,
    markdown_table,
    operating_points,
    per_round_table,
    relative_gain,
    reward_difference_stats,
    reward_differences,
    run_grid,
    seed_range,
    summary_table,
    win_counts,
)

Q1_AGENTS = ("ballad", "all-in-al", "all-in-lr")
MAIN_AGENTS = ("ballad", "ballad-cosine", "all-in-al", "all-in-lr")
QUESTIONS = ("q1", "q2", "q3", "q4", "bayes")
#: The paper's statements (SPEC §6), to print beside ours.
PAPER = {
    "q1_mean_cost": {"ballad": 0.043, "all-in-al": 0.055, "all-in-lr": 0.054},
    "q1_winners": {
        "ballad": ["Arrhythmia", "Glass", "KDDCup99", "Pima", "SpamBase", "WBC", "WDBC", "WPBC"],
        "all-in-al": ["Cardiotocography", "InternetAds", "PageBlocks", "Stamps", "Waveform"],
        "all-in-lr": ["ALOI", "Annthyroid", "Wilt"],
    },
    "q1_auc_by_winner": {"ballad": 0.86, "all-in-al": 0.88, "all-in-lr": 0.57},
    "q2_table2": [  # budget %, entropy mean, std, cosine mean, std
        (2, 0.0536, 0.0401, 0.0399, 0.0303), (4, 0.0465, 0.0330, 0.0411, 0.0334),
        (6, 0.0443, 0.0284, 0.0398, 0.0321), (8, 0.0436, 0.0303, 0.0399, 0.0306),
        (10, 0.0420, 0.0299, 0.0411, 0.0325), (12, 0.0416, 0.0303, 0.0433, 0.0347),
        (14, 0.0413, 0.0306, 0.0448, 0.0367), (16, 0.0408, 0.0288, 0.0456, 0.0372),
        (18, 0.0403, 0.0290, 0.0457, 0.0355), (20, 0.0412, 0.0297, 0.0451, 0.0363),
        (22, 0.0407, 0.0301, 0.0451, 0.0359), (24, 0.0421, 0.0325, 0.0438, 0.0361),
        (26, 0.0417, 0.0345, 0.0438, 0.0363), (28, 0.0416, 0.0332, 0.0438, 0.0380),
        (30, 0.0418, 0.0345, 0.0427, 0.0354)],
    "q2_al_share": {"ballad": 0.63, "ballad-cosine": 0.93},
    "q3": {"median": 0.0, "std_al": 0.03, "std_lr": 0.07},
}
DEFAULT_BAYES_DATASETS = ("WBC", "Glass", "WPBC")


@dataclass(frozen=True)
class Experiment:
    """One resumable run: a grid in its own results folder."""

    name: str
    grid: Grid


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None,
                        help="folder of the benchmark files (default: $BALLAD_DATA_DIR)")
    parser.add_argument("--datasets", nargs="+", default=["all"],
                        help="data sets, or 'all' for every file in the data folder")
    parser.add_argument("--seeds", type=int, default=10, help="repetitions: seeds 0..N-1")
    parser.add_argument("--priors", nargs="+", default=["iforest", "knn"],
                        choices=["iforest", "knn"],
                        help="SSDO priors to run every question with (the bayes run: the first)")
    parser.add_argument("--questions", nargs="+", default=list(QUESTIONS), choices=QUESTIONS,
                        help="what to run and report")
    parser.add_argument("--bayes-datasets", nargs="+", default=list(DEFAULT_BAYES_DATASETS),
                        help="data sets of the bayes-search run (a subset of --datasets)")
    parser.add_argument("--bayes-seeds", type=int, default=2,
                        help="seeds 0..N-1 of the bayes-search run")
    parser.add_argument("--bayes-calls", type=int, default=20,
                        help="gp_minimize evaluations per threshold search (the paper: 20)")
    parser.add_argument("--n-jobs", type=int, default=-1,
                        help="parallel worker processes (-1: all cores)")
    parser.add_argument("--scheduler", default=None, help="address of a Dask scheduler")
    parser.add_argument("--output", default="results/paper",
                        help="raw results folder (one sub-folder per run; resumable)")
    parser.add_argument("--docs", default="docs",
                        help="where figures/ and tables/ are written")
    parser.add_argument("--report-only", action="store_true",
                        help="redraw figures and tables from stored results, run nothing")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def experiments(args: argparse.Namespace) -> list[Experiment]:
    """The runs the chosen questions need."""
    names = dataset_names(args.datasets, args.data_dir)
    seeds = seed_range(args.seeds)
    wanted = set(args.questions)
    runs = []
    if wanted & {"q1", "q2", "q3", "bayes"}:
        settings = tuple(Setting(prior=p) for p in args.priors)
        runs.append(Experiment("main", Grid(names, seeds, MAIN_AGENTS, settings)))
    if "q4" in wanted:
        settings = tuple(Setting(prior=p, **cost) for p in args.priors
                         for cost in ({"c_fp": 10.0}, {"c_fn": 10.0}))
        runs.append(Experiment("costs", Grid(names, seeds, Q1_AGENTS, settings)))
    if "bayes" in wanted:
        bayes_names = [n for n in args.bayes_datasets if n in names]
        if not bayes_names:
            raise ValueError("--bayes-datasets: none of them is among --datasets")
        setting = Setting(prior=args.priors[0], threshold_search="bayes",
                          bayes_calls=args.bayes_calls)
        runs.append(Experiment("bayes", Grid(tuple(bayes_names),
                                             seed_range(min(args.bayes_seeds, args.seeds)),
                                             Q1_AGENTS, (setting,))))
    return runs


# ---------------------------------------------------------------------------------- output
class Writer:
    """Writes tables (Markdown + CSV) and remembers what went where."""

    def __init__(self, docs: Path) -> None:
        self.tables = docs / "tables"
        self.figures = docs / "figures"
        self.tables.mkdir(parents=True, exist_ok=True)
        self.figures.mkdir(parents=True, exist_ok=True)

    def table(self, name: str, frame: pd.DataFrame, title: str, note: str = "",
              digits: int = 4, index: bool = True) -> None:
        frame.to_csv(self.tables / f"{name}.csv", index=index)
        text = f"# {title}\n\n" + (f"{note}\n\n" if note else "")
        (self.tables / f"{name}.md").write_text(text + markdown_table(frame, digits, index))

    def figure(self, name: str) -> Path:
        return self.figures / f"{name}.png"


def q1(main: pd.DataFrame, writer: Writer, key: dict[str, object]) -> None:
    """Figure 1 and the mean cost per strategy and data set, per prior."""
    rows = main[main["agent"].isin(Q1_AGENTS)]
    paper_winner = {d: a for a, names in PAPER["q1_winners"].items() for d in names}
    for prior, block in rows.groupby("prior", sort=False):
        setting = block["setting"].iloc[0]
        plots.cost_per_round(block, writer.figure(f"q1_cost_per_round_{prior}"),
                             agents=Q1_AGENTS,
                             title=f"Q1: test cost per round, {prior} prior (mean of seeds)")
        summary = summary_table(block).loc[setting]
        summary["paper"] = [paper_winner.get(d, "") for d in summary.index]
        auc = block.groupby("dataset")["auc"].mean()
        summary["auc"] = auc.reindex(summary.index)
        summary.loc["mean", "auc"] = auc.mean()
        gamma = block.groupby("dataset")["contamination"].first()
        summary["gamma"] = gamma.reindex(summary.index)
        summary.loc["mean", "gamma"] = gamma.mean()
        writer.table(f"q1_mean_cost_{prior}", summary,
                     f"Q1: mean test cost per data set, {prior} prior",
                     "Mean over seeds and the 15 rounds; `margin` is the winner's relative "
                     "lead over the runner-up, `seeds_won` in how many seeds it was best, "
                     "`paper` the paper's winner, `auc` SSDO's test ROC AUC averaged over "
                     "rounds, seeds and the three strategies, `gamma` the contamination: "
                     "about the cost of predicting every example normal (or rejecting all).")
        conditional = summary_table(block.assign(conditional_cost=conditional_cost(block)),
                                    metric="conditional_cost").loc[setting]
        writer.table(f"q1_conditional_cost_{prior}", conditional,
                     f"Q1 under the paper's written metric, {prior} prior",
                     "c_r P(reject) + c_fp FPR + c_fn FNR (class-conditional rates, the "
                     "formula in the paper's text) instead of the cost per test example "
                     "(SPEC §5) used everywhere else; means over seeds and rounds.")
        counts = win_counts(summary_table(block)).loc[setting]
        datasets = summary.drop(index="mean")
        auc_by_winner = datasets.groupby("winner")["auc"].mean()
        means = summary.loc["mean", list(Q1_AGENTS)]
        points = operating_points(block).loc[setting]
        writer.table(f"q1_operating_points_{prior}", points,
                     f"Q1: where each strategy's cost comes from, {prior} prior",
                     "Means over data sets (seeds and rounds first): test cost, false positive "
                     "and false negative rates, rejection rate, ROC AUC and tau.")
        key[f"q1_{prior}"] = {"mean_cost": means.to_dict(), "mean_gamma": gamma.mean(),
                              "gain_vs_all_in_al": 1 - means["ballad"] / means["all-in-al"],
                              "gain_vs_all_in_lr": 1 - means["ballad"] / means["all-in-lr"],
                              "wins": counts.to_dict(),
                              "conditional_metric": {
                                  "mean": conditional.loc["mean", list(Q1_AGENTS)].to_dict(),
                                  "wins": win_counts(pd.concat({setting: conditional},
                                                               names=["setting"]))
                                  .loc[setting].to_dict()},
                              "auc_by_winner": auc_by_winner.to_dict(),
                              "agree": int((datasets["winner"] == datasets["paper"]).sum()),
                              "compared": int((datasets["paper"] != "").sum())}


def conditional_cost(results: pd.DataFrame) -> pd.Series:
    """The paper's written metric: c_r P(reject) + c_fp FPR + c_fn FNR, per round."""
    return (results["c_r"] * results["rejection_rate"] + results["c_fp"] * results["fpr"]
            + results["c_fn"] * results["fnr"])


def ballad_dynamics(results: pd.DataFrame) -> pd.DataFrame:
    """How BALLAD's choices unfold, per setting and reward: AL share after the initialisation,
    LR rounds whose reward is (nearly) 0 because tau hardly moved, and the rewards' sizes."""
    rows = []
    for (setting, agent), block in results[results["agent"].isin(
            ["ballad", "ballad-cosine"])].groupby(["setting", "agent"], sort=False):
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
            "LR rounds (3-15) per episode": len(later_lr) / block.groupby(
                ["dataset", "seed"]).ngroups,
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


def q2(main: pd.DataFrame, writer: Writer, key: dict[str, object]) -> None:
    """Table 2 (entropy vs cosine per budget step) and each reward's share of AL choices."""
    paper = pd.DataFrame(PAPER["q2_table2"], columns=["budget %", "paper entropy",
                                                      "paper entropy std", "paper cosine",
                                                      "paper cosine std"]).set_index("budget %")
    shares = []
    for prior, block in main[main["agent"].isin(["ballad", "ballad-cosine"])].groupby(
            "prior", sort=False):
        setting = block["setting"].iloc[0]
        table = per_round_table(block, spread=True).loc[setting]
        ours = pd.DataFrame({
            "entropy": table[("ballad", "mean")], "entropy std": table[("ballad", "std")],
            "cosine": table[("ballad-cosine", "mean")],
            "cosine std": table[("ballad-cosine", "std")]})
        ours.index = (100 * ours.index.to_numpy() * block["round_fraction"].iloc[0]).round()
        ours.index = ours.index.astype(int).rename("budget %")
        ours["better"] = (ours["entropy"] <= ours["cosine"]).map({True: "entropy",
                                                                    False: "cosine"})
        both = ours.join(paper)
        both["paper better"] = (both["paper entropy"] <= both["paper cosine"]).map(
            {True: "entropy", False: "cosine"})
        writer.table(f"q2_table2_{prior}", both,
                     f"Q2 (Table 2): mean (std) test cost per budget step, {prior} prior",
                     "Per round: each data set's mean over seeds, then mean and std across "
                     "data sets; the paper's values beside ours.")
        plots.mean_cost_per_round(block, writer.figure(f"q2_entropy_vs_cosine_{prior}"),
                                  agents=["ballad", "ballad-cosine"],
                                  title=f"Q2: entropy vs cosine reward, {prior} prior")
        all_rounds = action_shares(block).loc[setting]
        decided = action_shares(block, first_round=3).loc[setting]
        for agent in ("ballad", "ballad-cosine"):
            shares.append({"prior": prior, "agent": agent, "AL share (all rounds)":
                           all_rounds[agent], "AL share (rounds 3-15)": decided[agent],
                           "paper": PAPER["q2_al_share"][agent]})
        key[f"q2_{prior}"] = {"entropy_better_from": _first_better(ours),
                              "better": ours["better"].to_dict(),
                              "mean": {"entropy": ours["entropy"].mean(),
                                       "cosine": ours["cosine"].mean()}}
    share_table = pd.DataFrame(shares)
    writer.table("q2_al_share", share_table, "Q2: share of rounds given to AL",
                 "Rounds 1-2 are BALLAD's fixed initialisation (LR, then AL).", index=False)
    key["q2_al_share"] = share_table.to_dict("records")


def _first_better(table: pd.DataFrame) -> int | None:
    """The first budget from which entropy stays at least as good as cosine to the end."""
    better = (table["better"] == "entropy").to_numpy()
    for i in range(len(better)):
        if better[i:].all():
            return int(table.index[i])
    return None


def q3(main: pd.DataFrame, writer: Writer, key: dict[str, object]) -> None:
    """The AL - LR entropy reward difference: histogram, median and each side's std."""
    block = main[main["agent"] == "ballad"]
    stats = reward_difference_stats(reward_differences(block))
    stats["rounds"] = stats["rounds"].astype(int)
    stats.index = [block.loc[block["setting"] == s, "prior"].iloc[0] for s in stats.index]
    stats.index.name = "prior"
    for prior, setting in block.groupby("prior", sort=False)["setting"].first().items():
        plots.reward_difference_histogram(block, writer.figure(f"q3_reward_difference_{prior}"),
                                          setting=setting)
    writer.table("q3_ballad_dynamics", ballad_dynamics(main),
                 "How BALLAD's choices unfold (exact threshold search)",
                 "Rounds 3-15 are the ones BALLAD decides; `later` rewards are the ones "
                 "measured in those rounds by the side chosen. An LR round whose labels hardly "
                 "move tau measures an LR reward near 0, which stays the stored LR reward "
                 "until LR is chosen again: BALLAD then picks AL until the AL reward drops "
                 "below it (ties go to AL). The last two columns: mean change of the test "
                 "cost over the rounds of each kind (negative = the labels helped).")
    stats["paper median"], stats["paper std_al"], stats["paper std_lr"] = 0.0, 0.03, 0.07
    writer.table("q3_reward_difference", stats,
                 "Q3: entropy reward of AL minus LR over BALLAD's rounds",
                 "Rounds in which both sides have a measured reward (rounds 2-15); the "
                 "values are the latest rewards BALLAD compares. std_al and std_lr are the "
                 "standard deviations of each side's reward over the same rounds.")
    key["q3"] = stats.to_dict("index")


def q4(costs: pd.DataFrame, writer: Writer, key: dict[str, object]) -> None:
    """c_fp = 10 and c_fn = 10: cost per budget step and BALLAD's relative gain."""
    for prior, block in costs.groupby("prior", sort=False):
        plots.mean_cost_per_round(block, writer.figure(f"q4_costs_{prior}"), agents=Q1_AGENTS,
                                  title=f"Q4: mean test cost per round, {prior} prior")
        rounds = per_round_table(block)
        for setting in dict.fromkeys(block["setting"]):
            table = rounds.loc[setting].copy()
            table.index = (table.index * 2).rename("budget %")
            for base in ("all-in-al", "all-in-lr"):
                table[f"gain vs {base}"] = relative_gain(table, "ballad", base)
            table["best"] = table[list(Q1_AGENTS)].idxmin(axis=1)
            overall = table[list(Q1_AGENTS)].mean()
            writer.table(f"q4_{setting}", table, f"Q4: mean test cost per budget step, {setting}",
                         "Mean over data sets (seeds first); gain = 1 - BALLAD / baseline.")
            summary = summary_table(block[block["setting"] == setting])
            summary.to_csv(writer.tables / f"q4_{setting}_per_dataset.csv")
            key[f"q4_{setting}"] = {
                "mean_cost": overall.to_dict(),
                "gain_vs_all_in_al": 1 - overall["ballad"] / overall["all-in-al"],
                "gain_vs_all_in_lr": 1 - overall["ballad"] / overall["all-in-lr"],
                "best_per_step": table["best"].to_dict(),
                "gain_vs_lr_below_15": table.loc[table.index < 15, "gain vs all-in-lr"].tolist(),
                "lr_vs_ballad_above_15": (1 - table.loc[table.index > 15, "all-in-lr"]
                                          / table.loc[table.index > 15, "ballad"]).mean(),
                "lr_vs_al_above_15": (1 - table.loc[table.index > 15, "all-in-lr"]
                                      / table.loc[table.index > 15, "all-in-al"]).mean(),
                "wins": win_counts(summary).loc[setting].to_dict()}


def bayes(main: pd.DataFrame, bayes_results: pd.DataFrame, writer: Writer,
          key: dict[str, object]) -> None:
    """Q1 with gp_minimize against the exact search on the same data sets and seeds."""
    prior = bayes_results["prior"].iloc[0]
    exact = main[(main["prior"] == prior) & (main["threshold_search"] == "exact")
                 & main["agent"].isin(Q1_AGENTS)
                 & main["dataset"].isin(bayes_results["dataset"].unique())
                 & main["seed"].isin(bayes_results["seed"].unique())]
    both = pd.concat([exact, bayes_results], ignore_index=True)
    summary = summary_table(both)
    writer.table("q1_bayes_vs_exact", summary,
                 "Q1 with the exact and the bayes (gp_minimize) threshold search",
                 f"{prior} prior; data sets {', '.join(bayes_results['dataset'].unique())}, "
                 f"seeds 0-{bayes_results['seed'].max()}. Mean test cost over seeds and rounds.")
    plots.cost_per_round(both, writer.figure("q1_bayes_vs_exact"), agents=Q1_AGENTS,
                         title="Q1: exact (solid) vs bayes (dashed) threshold search")
    writer.table("q1_bayes_vs_exact_dynamics", ballad_dynamics(both),
                 "BALLAD's choices with the exact and the bayes threshold search",
                 "Same data sets and seeds as q1_bayes_vs_exact.")
    writer.table("q1_bayes_vs_exact_operating_points", operating_points(both),
                 "Operating points with the exact and the bayes threshold search")
    winners = summary["winner"].unstack("setting").drop(index="mean")
    exact_name, bayes_name = exact["setting"].iloc[0], bayes_results["setting"].iloc[0]
    key["bayes"] = {"winners": winners.to_dict(), "mean_cost": summary.xs(
        "mean", level="dataset")[list(Q1_AGENTS)].to_dict("index"),
        "same_winner": int((winners[exact_name] == winners[bayes_name]).sum()),
        "datasets": int(len(winners))}


def key_numbers(key: dict[str, object], writer: Writer) -> None:
    """Every figure of SPEC §6 with ours beside it, as one Markdown page."""
    lines = ["# The paper's numbers and ours", "",
             "Generated by `scripts/reproduce_paper.py` from the stored results.", ""]
    for name, value in key.items():
        lines.append(f"## {name}\n\n```\n{_pretty(value)}\n```\n")
    (writer.tables / "paper_vs_ours.md").write_text("\n".join(lines))


def _pretty(value: object, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(value, dict):
        return "\n".join(f"{pad}{k}:" + ("\n" + _pretty(v, indent + 1)
                                          if isinstance(v, dict | list) else f" {_fmt(v)}")
                         for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(f"{pad}- " + (_pretty(v, indent + 1).strip()
                                       if isinstance(v, dict | list) else _fmt(v))
                         for v in value)
    return pad + _fmt(value)


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


# ---------------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> dict[str, pd.DataFrame]:
    """Run (or resume) each experiment; its tidy results by name."""
    output = Path(args.output)
    results = {}
    for experiment in experiments(args):
        folder = output / experiment.name
        start = time.perf_counter()
        if args.report_only:
            results[experiment.name] = load_results(folder)
            continue
        print(f"{experiment.name}: {len(experiment.grid.cells())} cells -> {folder}",
              file=sys.stderr)
        results[experiment.name] = run_grid(experiment.grid, folder, data_dir=args.data_dir,
                                            n_jobs=args.n_jobs, scheduler=args.scheduler,
                                            progress=not args.no_progress)
        print(f"{experiment.name}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return results


def report(args: argparse.Namespace, results: dict[str, pd.DataFrame]) -> None:
    """Figures, tables and the key numbers of the questions asked."""
    writer = Writer(Path(args.docs))
    key: dict[str, object] = {}
    wanted = set(args.questions)
    if "q1" in wanted:
        q1(results["main"], writer, key)
    if "q2" in wanted:
        q2(results["main"], writer, key)
    if "q3" in wanted:
        q3(results["main"], writer, key)
    if "q4" in wanted:
        q4(results["costs"], writer, key)
    if "bayes" in wanted:
        bayes(results["main"], results["bayes"], writer, key)
    key_numbers(key, writer)
    print(f"figures: {writer.figures}, tables: {writer.tables}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run(args)
        report(args, results)
    except (RunError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished cells are kept under {args.output}; run the same "
              "command again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
