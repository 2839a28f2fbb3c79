"""Intervals and tests for the studies' headline claims, computed from their stored tables
(``docs/tables``): nothing is rerun, so the check is fast and the numbers are the reports'.

- ``paper18``: BALLAD, All-in-AL and All-in-LR on the paper's 18 data sets, per prior and
  cost level (``q1_mean_cost_<prior>``, ``q4_<prior>_<costs>_per_dataset``: means over 10
  seeds): average ranks, the Friedman test, Wilcoxon-Holm post hoc p-values, a
  critical-difference diagram per setting and each agent's mean cost over All-in-LR's with
  an interval over data sets (:func:`~agents.reports.stats_report.write_stats`,
  tables ``claims_paper18_*``);
- ``rejex``: All-in-AL with RejEx (which rejects without labels) against All-in-LR and
  BALLAD with BALLAD's rejector, per cost level, on the crossed study's 29 sets
  (``crossed_rejex_per_dataset``: means over 3 seeds), the same tables (``claims_rejex_*``);
- ``tie``: BALLAD and All-in-LR with SADAL's two-sided rejector breaking ties towards
  rejecting most, against All-in-LR with BALLAD's rejector, on the paper's 18 at 10 seeds
  (``crossed_tie_per_dataset``), the same tables (``claims_tie_*``);
- ``room``: each allocation's share of the room over All-in-LR per cost level on the 13
  held-out sets (``allocation_per_dataset``), with a bootstrap interval resampling the data
  sets (``claims_room``).

``python -m scripts.studies.claims`` writes them; ``--check`` lists the stale ones (the test
suite runs the check).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pandas as pd

from agents.reports.stats import ALPHA, RESAMPLES, ratio_interval, stream
from agents.reports.stats_report import StatsOptions, write_stats
from agents.reports.tables import write_table
from scripts.studies.claims.stale import read_scores, stale_stats

ROOT = Path(__file__).resolve().parents[3]
TABLES = ROOT / "docs" / "tables"
FIGURES = ROOT / "docs" / "figures"
AGENTS = ["ballad", "all-in-al", "all-in-lr"]
PRIORS = ("iforest", "knn")
COSTS = ("cfn10", "cfp10")
#: The crossed study's claims: its table, and each compared agent's (agent, rejector).
CROSSED = {
    "rejex": ("crossed_rejex_per_dataset",
              {"all-in-al rejex": ("all-in-al", "rejex"),
               "all-in-lr confidence": ("all-in-lr", "confidence"),
               "ballad confidence": ("ballad", "confidence")}),
    "tie": ("crossed_tie_per_dataset",
            {"ballad two-sided-most": ("ballad", "two-sided-most"),
             "all-in-lr two-sided-most": ("all-in-lr", "two-sided-most"),
             "all-in-lr confidence": ("all-in-lr", "confidence")}),
}
#: The allocations whose share of the room gets an interval (allocation_per_dataset).
ROOM_AGENTS = ("maskable-ppo", "split-rule", "imitation", "ballad", "best-fixed-per-cell")
SEED = 0


def _scores(frame: pd.DataFrame) -> pd.DataFrame:
    """Per-data-set means as scores (one 'seed' per data set), the ``mean`` rows dropped."""
    frame = frame[frame["dataset"] != "mean"].assign(seed=0)
    return frame.set_index(["setting", "dataset", "seed"])


def paper18_scores(tables: Path = TABLES) -> pd.DataFrame:
    """BALLAD, All-in-AL and All-in-LR per prior and cost level, one row per data set."""
    frames = []
    for prior in PRIORS:
        default = pd.read_csv(tables / f"q1_mean_cost_{prior}.csv").assign(setting=prior)
        frames.append(default[["setting", "dataset", *AGENTS]])
        for costs in COSTS:
            table = pd.read_csv(tables / f"q4_{prior}_{costs}_per_dataset.csv")
            frames.append(table[["setting", "dataset", *AGENTS]])
    return _scores(pd.concat(frames, ignore_index=True))


def crossed_scores(claim: str, tables: Path = TABLES) -> pd.DataFrame:
    """One of :data:`CROSSED`'s comparisons per cost level, one row per data set: SSDO, our
    protocol and our queries, each agent with its rejector."""
    name, agents = CROSSED[claim]
    table = pd.read_csv(tables / f"{name}.csv")
    parts = table["combination"].str.split("/", expand=True)
    table = table.assign(rejector=parts[1], setting=parts[3])
    table = table[(parts[0] == "ssdo") & (parts[2] == "ours") & (parts[4] == "ours")
                  & (table["status"] == "posed")]
    columns = {}
    for column, (agent, rejector) in agents.items():
        rows = table[table["rejector"] == rejector]
        columns[column] = rows.set_index(["setting", "dataset"])[agent]
    return _scores(pd.DataFrame(columns).dropna().reset_index())


def room_shares(tables: Path = TABLES, seed: int = SEED, alpha: float = ALPHA,
                resamples: int = RESAMPLES) -> pd.DataFrame:
    """Each allocation's share of the room per cost level, summed over the held-out data
    sets (sum of its savings over All-in-LR / sum of the room), and its interval."""
    table = pd.read_csv(tables / "allocation_per_dataset.csv")
    rows = []
    for costs, block in table.groupby("costs", sort=False):
        for agent in ROOM_AGENTS:
            share, low, high = ratio_interval(-block[f"{agent} - lr"], block["room"],
                                              stream(seed, "room", str(costs), agent),
                                              1 - alpha, resamples)
            rows.append({"costs": costs, "agent": agent, "datasets": len(block),
                         "share": share, "low": low, "high": high})
    return pd.DataFrame(rows).set_index(["costs", "agent"])


CLAIMS: dict[str, tuple[Callable[[Path], pd.DataFrame], StatsOptions]] = {
    "paper18": (paper18_scores, StatsOptions(baseline="all-in-lr")),
    "rejex": (partial(crossed_scores, "rejex"), StatsOptions(baseline="all-in-lr confidence")),
    "tie": (partial(crossed_scores, "tie"), StatsOptions(baseline="all-in-lr confidence")),
}


def write_claims(tables: Path = TABLES, figures: Path = FIGURES) -> list[Path]:
    """Write every claim's tables (and diagrams); returns the Markdown tables written."""
    written = []
    for name, (scores, options) in CLAIMS.items():
        report = write_stats(scores(tables), tables, options=options,
                             prefix=f"claims_{name}_", figures=figures)
        written += [p for p in report.tables if p.suffix == ".md"]
    written.append(write_table(room_shares(tables), tables, "claims_room",
                               title="Share of the room, with an interval over data sets",
                               note="Held-out sets; share = sum of savings over All-in-LR / "
                                    "sum of the room; 95% percentile bootstrap interval "
                                    f"resampling the data sets ({RESAMPLES} resamples)."))
    return written


def stale_claims(tables: Path = TABLES) -> list[str]:
    """The claims' tables that differ from a recomputation from the studies' tables."""
    stale = []
    for name, (scores, _) in CLAIMS.items():
        prefix = f"claims_{name}_"
        stored = tables / f"{prefix}scores.csv"
        if not stored.is_file() or not read_scores(stored).equals(scores(tables)):
            stale.append(stored.name)
            continue
        stale += stale_stats(tables, prefix)
    room = tables / "claims_room.csv"
    fresh = room_shares(tables)
    if not room.is_file() or not pd.read_csv(room, index_col=[0, 1]).round(12).equals(
            fresh.round(12)):
        stale.append(room.name)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="list the stale tables instead of writing them (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_claims()
        print("\n".join(stale) or "all current")
        return 1 if stale else 0
    for path in write_claims():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
