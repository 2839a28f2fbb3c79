"""The tables, figures and printout of ``ballad-env compare --stats``
(:mod:`agents.reports.stats` computes; this module writes and reads back).

:func:`write_stats` writes, into one folder and under one prefix: ``scores.csv`` (one score
per episode: setting, data set, seed, one column per agent, the input of every statistic),
``stats.json`` (the options), ``ranks`` (average ranks and the Friedman test per setting),
``posthoc`` (every pair's p-value), ``datasets`` (means over data sets with bootstrap
intervals, and the ratio to a baseline), ``intervals`` (means per data set with bootstrap
intervals over seeds) and ``paired`` (per data set against a baseline, paired by seed),
each as CSV and Markdown, and one critical-difference diagram per setting. Scores with one
seed per data set (means taken elsewhere) get the tables across data sets only. Since
scores and options are stored, the tables can be recomputed and compared (the claims
study's ``stale_stats`` checks the documentation's this way).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.reports.stats import (
    ALPHA,
    POWER,
    RESAMPLES,
    RankComparison,
    cd_diagram,
    dataset_intervals,
    paired_tests,
    rank_comparison,
    require_stats_extra,
    seed_intervals,
    wilcoxon_floor,
)
from agents.reports.tables import write_table
from ballad_env.files import safe_name

#: The stored tables (Markdown and CSV each); ``paired`` only with a baseline.
TABLES = ("ranks", "posthoc", "datasets", "intervals", "paired")
SCORES = "scores.csv"
#: The columns that hold p-values.
PVALUES = ("friedman_p", "p", "p_t", "p_wilcoxon", "p_holm")
OPTIONS = "stats.json"


@dataclass(frozen=True)
class StatsOptions:
    """How the statistics were computed (stored beside the scores as ``stats.json``)."""

    baseline: str | None = None
    posthoc: str = "wilcoxon-holm"
    alpha: float = ALPHA
    seed: int = 0
    resamples: int = RESAMPLES


@dataclass(frozen=True)
class StatsReport:
    """What :func:`write_stats` computed and wrote."""

    comparisons: list[RankComparison]
    datasets: pd.DataFrame
    intervals: pd.DataFrame | None
    paired: pd.DataFrame | None
    folder: Path
    figures: list[Path]
    tables: list[Path]


def _pvalue_text(p: float) -> str:
    """A p-value for a table: four decimals, or two significant digits below 0.001."""
    if np.isnan(p):
        return ""
    return f"{p:.1e}" if p < 0.001 else f"{p:.4f}"


def ranks_table(comparisons: list[RankComparison]) -> pd.DataFrame:
    """One row per setting: data sets, Friedman statistic and p-value, the post hoc test,
    Nemenyi's critical difference, each agent's average rank and the pairs not different."""
    rows = []
    for c in comparisons:
        row: dict[str, Any] = {"setting": c.setting, "datasets": c.datasets,
                               "friedman": c.friedman, "friedman_p": c.friedman_p,
                               "posthoc": c.posthoc, "nemenyi_cd": c.critical_difference}
        row.update({f"rank {agent}": rank for agent, rank in c.ranks.items()})
        row["not different"] = "; ".join(f"{a} ~ {b}" for a, b in c.ties) or "none"
        rows.append(row)
    return pd.DataFrame(rows).set_index("setting")


def pairs_table(comparisons: list[RankComparison]) -> pd.DataFrame:
    """One row per setting and pair of agents: their average ranks and post hoc p-value."""
    rows = [{"setting": c.setting, "agent": a, "other": b, "rank": c.ranks[a],
             "other rank": c.ranks[b], "p": c.pvalues.loc[a, b],
             "significant": bool(c.pvalues.loc[a, b] < c.alpha)}
            for c in comparisons for i, a in enumerate(c.pvalues.index)
            for b in c.pvalues.index[i + 1:]]
    return pd.DataFrame(rows).set_index(["setting", "agent", "other"])


def write_stats(scores: pd.DataFrame, folder: str | os.PathLike, *,
                options: StatsOptions = StatsOptions(), prefix: str = "",
                figures: str | os.PathLike | None = None, draw: bool = True) -> StatsReport:
    """Compute the statistics of ``scores`` (:func:`~agents.reports.stats.
    seed_scores`) and write them to ``folder`` as ``<prefix><table>.csv/.md`` with the
    scores and options; the diagrams go to ``figures`` (default: ``folder``) as
    ``<prefix>cd-<setting>.png``, one per setting with at least two data sets (none
    without ``draw``)."""
    require_stats_extra()
    folder, o = Path(folder), options
    tables = [write_table(scores, folder, f"{prefix}{Path(SCORES).stem}", markdown=False)]
    (folder / f"{prefix}{OPTIONS}").write_text(json.dumps(asdict(o), indent=1) + "\n")

    def write(frame: pd.DataFrame, stem: str, title: str, note: str) -> None:
        shown = frame.copy()  # the Markdown shows small p-values as 1.2e-05, not 0.0000
        for column in (c for c in frame.columns if c in PVALUES):
            shown[column] = frame[column].map(_pvalue_text)
        if "seeds_needed" in frame:
            shown["seeds_needed"] = frame["seeds_needed"].map(
                lambda n: "" if np.isnan(n) else str(n if np.isinf(n) else int(n)))
        tables.append(write_table(shown, folder, f"{prefix}{stem}", title=title, note=note))
        write_table(frame, folder, f"{prefix}{stem}", markdown=False)  # the CSV exact

    settings = list(dict.fromkeys(scores.index.get_level_values("setting")))
    comparisons = [rank_comparison(scores, s, o.posthoc, o.alpha) for s in settings
                   if scores.xs(s, level="setting").index.get_level_values("dataset").nunique()
                   >= 2]
    figure_folder = folder if figures is None else Path(figures)
    drawn = [cd_diagram(c, figure_folder / f"{prefix}cd-{safe_name(c.setting)}.png")
             for c in comparisons if draw]
    if comparisons:
        write(ranks_table(comparisons), "ranks", "Average ranks over data sets",
              f"Lowest cost = rank 1; Friedman test; post hoc {o.posthoc} at alpha {o.alpha:g}.")
        write(pairs_table(comparisons), "posthoc", "Post hoc p-values",
              f"{o.posthoc}; significant: p < {o.alpha:g}.")
    level = f"{1 - o.alpha:.0%}"
    datasets = dataset_intervals(scores, o.baseline, o.seed, o.alpha, o.resamples)
    ratio = ("" if o.baseline is None else f"; ratio: the agent's mean cost over "
             f"{o.baseline}'s, its interval resampling the data sets in pairs")
    write(datasets, "datasets", "Mean cost over data sets",
          f"Data sets weigh equally; {level} percentile bootstrap intervals over data sets "
          f"({o.resamples} resamples, seed {o.seed}){ratio}.")
    intervals = paired = None
    if scores.groupby(level=["setting", "dataset"]).size().max() >= 2:
        intervals = seed_intervals(scores, o.seed, o.alpha, o.resamples)
        write(intervals, "intervals", "Mean cost over seeds",
              f"{level} percentile bootstrap intervals over seeds ({o.resamples} resamples, "
              f"seed {o.seed}); with few seeds they are too narrow (the percentile bootstrap "
              "undercovers small samples).")
        if o.baseline is not None:
            paired = paired_tests(scores, o.baseline, o.alpha)
            write(paired, "paired", f"Each agent against {o.baseline}",
                  f"Paired by seed (common random numbers): difference = agent - {o.baseline} "
                  f"(negative: cheaper) with its {level} t interval; paired t and Wilcoxon "
                  "p-values, the t-test's Holm-corrected over the data sets (p_holm, which "
                  f"the verdict reads); seeds_needed: seeds for a paired t-test to detect a "
                  f"difference this large with power {POWER:g}.")
    return StatsReport(comparisons, datasets, intervals, paired, folder, drawn, tables)


def summary_lines(report: StatsReport) -> list[str]:
    """The printout of :func:`write_stats`: per setting the Friedman test, the ranks and the
    pairs not significantly different; the verdicts against the baseline."""
    lines = []
    for c in report.comparisons:
        ranks = ", ".join(f"{a} {r:.2f}" for a, r in c.ranks.sort_values().items())
        friedman = ("Friedman test needs 3 agents" if np.isnan(c.friedman_p) else
                    f"Friedman chi2 = {c.friedman:.3f}, p = {c.friedman_p:.3g}")
        ties = "; ".join(f"{a} ~ {b}" for a, b in c.ties) or "none"
        lines += [f"{c.setting} ({c.datasets} data sets): {friedman}", f"  average ranks: {ranks}",
                  f"  not significantly different ({c.posthoc}, alpha {c.alpha:g}): {ties}"]
        if c.posthoc == "wilcoxon-holm" and wilcoxon_floor(c.datasets) >= c.alpha:
            lines.append(f"  note: on {c.datasets} data sets the Wilcoxon test's smallest p is "
                         f"{wilcoxon_floor(c.datasets):.3g}, so no pair can differ: add data "
                         "sets (6 or more), or use --posthoc nemenyi")
    if "ratio" in report.datasets:
        for (setting, agent), row in report.datasets.iterrows():
            if row["ratio_low"] == row["ratio_high"] == 1.0:
                continue  # the baseline itself
            lines.append(f"{setting}: {agent}'s mean cost over the baseline's: "
                         f"{row['ratio']:.3f} (interval {row['ratio_low']:.3f}-"
                         f"{row['ratio_high']:.3f} over {int(row['datasets'])} data sets)")
    if report.paired is not None:
        counts = report.paired.groupby(level=["setting", "agent"], sort=False)["verdict"]
        for (setting, agent), verdicts in counts:
            tally = verdicts.value_counts()
            lines.append(f"{setting}: {agent} against the baseline over {len(verdicts)} data "
                         f"sets: {tally.get('lower', 0)} lower, {tally.get('higher', 0)} "
                         f"higher, {tally.get('n.s.', 0)} not significant (Holm)")
    lines += [f"critical-difference diagram: {path}" for path in report.figures]
    names = ", ".join(path.stem for path in report.tables)
    lines.append(f"stats tables (.csv, .md): {names} in {report.folder}")
    return lines


__all__ = ["OPTIONS", "SCORES", "TABLES", "StatsOptions", "StatsReport", "pairs_table",
           "ranks_table", "summary_lines", "write_stats"]
