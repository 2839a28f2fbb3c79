"""The second round's run and tables (docs/studies/ALLOCATION.md, "Second round").

:func:`run_round2` reads the study's lattices (``<out>/lattices``, built by the first
round's ``cells.build_lattices``), runs the second round's cross validations on the
training cells only (``round2``; the RL family's folds through ``rl_cv``), picks the
candidate with the largest cross-validated smallest share over the three cost levels, and
ships it as ``allocator`` only if that beats the current allocator's own cross-validated
score (``maskable-ppo``, greedy). Then, once, every candidate is replayed on the held-out
cells. Nothing chosen here reads a held-out or reserved data set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from agents.allocation import ConfidentPolicy, ImitationPolicy, SplitRule, packaged_agent
from agents.experiments.allocation_split import load_split
from agents.experiments.reports.tables import write_table
from agents.experiments.studies.allocation import rl_cv
from agents.experiments.studies.allocation import round2 as R
from agents.experiments.studies.allocation.analysis import N_FOLDS, level_shares, replay_table
from agents.experiments.studies.allocation.cells import COST_LEVELS, cell_records, side_cells
from agents.experiments.studies.allocation.report import _cached, per_dataset_table

#: The current allocator's family (its CV is the bar a new candidate must beat).
CURRENT = "maskable-ppo"
#: The registered names of the second round's candidates.
NAMES = {"split-rule": "split-rule-2", "imitation": "imitation-2",
         "maskable-ppo-confident": "maskable-ppo-confident"}


@dataclass
class Round2:
    """What the second round computed."""

    cv: dict[str, pd.DataFrame]
    summary: pd.DataFrame
    entries: dict[str, dict[str, Any]]
    allocator: str
    held: pd.DataFrame
    timing: dict[str, float] = field(default_factory=dict)


def run_round2(out: Path, rl_steps: int = 300_000,
               log: Callable[[str], None] = print) -> Round2:
    """The second round (module docstring); the RL folds are trained where missing."""
    split, timing = load_split(), {}
    train, train_lat = cell_records(out, *side_cells(split, "train"))
    log(f"{len(train)} training cells read")
    cv = {"split-rule": _cached(Path(out) / "cv2_split_rule.csv", True, timing,
                                "split-rule cross validation (CPU s)",
                                lambda: R.select_split_rule2(train)),
          "imitation": _cached(Path(out) / "cv2_imitation.csv", True, timing,
                               "imitation cross validation (CPU s)",
                               lambda: R.select_imitation2(train, train_lat))}
    log("fitted families cross-validated")
    names = side_cells(split, "train")[0]
    rl_cv.train_folds(out, names, rl_steps)
    timing["maskable-ppo fold training (CPU s, 5 folds x 3 levels)"] = rl_cv.cv_seconds(
        out, N_FOLDS)
    thresholds = _cached(Path(out) / "cv2_maskable_ppo.csv", True, timing,
                         "maskable-ppo fold replays (CPU s)",
                         lambda: rl_cv.threshold_table(train, rl_cv.fold_costs(out, train_lat)))
    cv[CURRENT] = thresholds[thresholds.threshold == 0.5]
    cv["maskable-ppo-confident"] = thresholds
    log("maskable-ppo cross-validated")
    summary = R.summary(cv)
    entries = {"split-rule": R.split_rule_entry(train, cv["split-rule"].iloc[0]),
               "imitation": R.fit_imitation2(train_lat, cv["imitation"].iloc[0]),
               "maskable-ppo-confident": {
                   "family": CURRENT,
                   "threshold": float(cv["maskable-ppo-confident"].iloc[0].threshold)}}
    for family, entry in entries.items():
        entry["candidate"] = {k: _plain(v) for k, v in cv[family].iloc[0].items()}
    allocator = choose(summary)
    held, held_lat = cell_records(out, *side_cells(split, "held_out"))
    held_costs = replay_table(held_lat, candidate_agents(entries), held)
    log("held-out cells replayed once")
    return Round2(cv, summary, entries, allocator, held_costs, timing)


def choose(summary: pd.DataFrame) -> str:
    """The candidate with the largest cross-validated smallest share, if it beats the
    current allocator's; else the current allocator's family."""
    best = summary.iloc[0]
    bar = float(summary.loc[summary.candidate == CURRENT, "cv min"].iloc[0])
    return str(best.candidate) if float(best["cv min"]) > bar else CURRENT


def candidate_agents(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Factories of every candidate (fresh agents), by column name."""
    rule, imitation = entries["split-rule"], entries["imitation"]
    threshold = float(entries["maskable-ppo-confident"]["threshold"])
    return {
        CURRENT: lambda: packaged_agent(CURRENT),
        NAMES["split-rule"]: lambda: SplitRule(rule["models"], rule["splits"], rule["probe"],
                                               rule["margin"]),
        NAMES["imitation"]: lambda: ImitationPolicy(imitation["models"],
                                                    imitation["threshold"]),
        NAMES["maskable-ppo-confident"]: lambda: ConfidentPolicy(packaged_agent(CURRENT),
                                                                 threshold)}


def shares_table(r2: Round2) -> pd.DataFrame:
    """Per candidate: its cross-validated shares (training) and held-out shares per level."""
    rows = []
    for _, row in r2.summary.iterrows():
        column = NAMES.get(str(row.candidate), str(row.candidate))
        held = level_shares(r2.held, column)
        rows.append({"candidate": column, "shipped": column == NAMES.get(r2.allocator,
                                                                        r2.allocator),
                     **{f"cv {lv}": row[f"cv {lv}"] for lv in COST_LEVELS},
                     "cv min": row["cv min"],
                     **{f"held {lv}": held[lv] for lv in COST_LEVELS},
                     "held min": min(held.values())})
    return pd.DataFrame(rows)


def top_table(r2: Round2, top: int = 5) -> pd.DataFrame:
    """The best candidates of each family's cross validation."""
    parts = [table.head(top).assign(family=family) for family, table in r2.cv.items()
             if family != CURRENT]
    table = pd.concat(parts, ignore_index=True)
    first = ["family", *[c for c in table if c != "family" and not str(c).startswith("cv")]]
    return table[[*first, *[c for c in table if str(c).startswith("cv")]]]


def write_round2_tables(r2: Round2, folder: Path) -> list[Path]:
    """Write the second round's tables (``allocation2_*``) into ``folder``."""
    columns: Sequence[str] = (CURRENT, *NAMES.values(), "best-fixed-per-cell")
    tables = {
        "allocation2_shares": (shares_table(r2), "Second round: training CV and held-out "
                                                 "shares of the room per candidate"),
        "allocation2_cv": (top_table(r2), "Second round: best candidates per family, "
                                          "training cross validation"),
        "allocation2_per_dataset": (per_dataset_table(r2.held, columns),
                                    "Second round: per held-out data set"),
        "allocation2_training": (pd.DataFrame([{"step": k, "value": v}
                                               for k, v in r2.timing.items()]),
                                 "Second round: what it cost"),
    }
    return [write_table(frame, folder, stem, title=title, index=False)
            for stem, (frame, title) in tables.items()]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value



__all__ = ["CURRENT", "NAMES", "Round2", "candidate_agents", "choose", "run_round2",
           "shares_table", "top_table", "write_round2_tables"]
