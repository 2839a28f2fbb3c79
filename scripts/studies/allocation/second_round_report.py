"""The second round's run and tables (docs/studies/ALLOCATION.md, "Second round").

:func:`run_second_round` reads the study's lattices (``<out>/lattices``, built by the first
round's ``cells.build_lattices``), runs the second round's cross validations on the
training cells only (``second_round``; the RL family's folds through ``rl_cv``), picks the
candidate with the largest cross-validated smallest share over the three cost levels, and
ships it as ``allocator`` only if that beats the current allocator's own cross-validated
score (``maskable-ppo``, greedy). Then, once, every candidate is replayed on the held-out
cells. Nothing chosen here reads a held-out or reserved data set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from agents.allocation import ConfidentPolicy, ImitationPolicy, SplitRule, packaged_agent
from agents.reports.tables import write_table
from scripts.studies.allocation import rl_cv
from scripts.studies.allocation import second_round as R
from scripts.studies.allocation.analysis import (
    N_FOLDS,
    level_shares,
    plain_row,
    replay_table,
)
from scripts.studies.allocation.cells import COST_LEVELS, cell_records, side_cells
from scripts.studies.allocation.report import cached_frame, per_dataset_table
from scripts.studies.common.split import load_split

#: The current allocator's family (its CV is the bar a new candidate must beat).
CURRENT = "maskable-ppo"
#: The registered names of the second round's candidates.
NAMES = {"split-rule": "split-rule-2", "imitation": "imitation-2",
         "maskable-ppo-confident": "maskable-ppo-confident"}


@dataclass
class SecondRound:
    """What the second round computed."""

    cv: dict[str, pd.DataFrame]
    summary: pd.DataFrame
    entries: dict[str, dict[str, Any]]
    allocator: str
    held: pd.DataFrame
    timing: dict[str, float] = field(default_factory=dict)
    #: The name the chosen candidate is packaged under (``update_params``), once written.
    packaged: str = ""


def run_second_round(out: Path, rl_steps: int = 0,
               log: Callable[[str], None] = print) -> SecondRound:
    """The second round (module docstring). With ``rl_steps`` > 0 the RL family's folds are
    trained where missing (15 runs of ``rl_steps`` steps) and cross-validated, greedy (the
    current allocator's score, the bar) and with the fallback threshold; with 0 they are
    left out, and no candidate can be shown to beat the current allocator."""
    split, timing = load_split(), dict[str, float]()
    train, train_lat = cell_records(out, *side_cells(split, "train"))
    log(f"{len(train)} training cells read")
    cv = {"split-rule": cached_frame(Path(out) / "cv2_split_rule.csv", True, timing,
                                "split-rule cross validation (CPU s)",
                                lambda: R.select_split_rule2(train)),
          "imitation": cached_frame(Path(out) / "cv2_imitation.csv", True, timing,
                               "imitation cross validation (CPU s)",
                               lambda: R.select_imitation2(train, train_lat))}
    log("fitted families cross-validated")
    entries = {"split-rule": R.split_rule_entry(train, cv["split-rule"].iloc[0]),
               "imitation": R.fit_imitation2(train_lat, cv["imitation"].iloc[0])}
    if rl_steps:
        rl_cv.train_folds(out, side_cells(split, "train")[0], rl_steps)
        timing["maskable-ppo fold training (CPU s, 5 folds x 3 levels)"] = \
            rl_cv.cv_seconds(out, N_FOLDS)
        thresholds = cached_frame(Path(out) / "cv2_maskable_ppo.csv", True, timing,
                             "maskable-ppo fold replays (CPU s)",
                             lambda: rl_cv.threshold_table(train, rl_cv.fold_costs(
                                 out, train_lat)))
        cv[CURRENT] = thresholds[thresholds.threshold.isna()]
        cv["maskable-ppo-confident"] = thresholds[thresholds.threshold.notna()]
        entries["maskable-ppo-confident"] = {
            "family": CURRENT,
            "threshold": float(cv["maskable-ppo-confident"].iloc[0].threshold)}
        log("maskable-ppo cross-validated")
    for family, entry in entries.items():
        entry["candidate"] = plain_row(cv[family].iloc[0])
    summary = R.summary(cv)
    held, held_lat = cell_records(out, *side_cells(split, "held_out"))
    held_costs = replay_table(held_lat, candidate_agents(entries), held)
    log("held-out cells replayed once")
    return SecondRound(cv, summary, entries, choose(summary), held_costs, timing)


def choose(summary: pd.DataFrame) -> str:
    """The candidate with the largest cross-validated smallest share, if it beats the
    current allocator's; else (or where the current allocator was not cross-validated)
    the current allocator's family."""
    if CURRENT not in set(summary.candidate):
        return CURRENT
    best = summary.iloc[0]
    bar = float(summary.loc[summary.candidate == CURRENT, "cv min"].iloc[0])
    return str(best.candidate) if float(best["cv min"]) > bar else CURRENT


def candidate_agents(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Factories of every candidate (fresh agents), by column name; the current allocator
    beside them."""
    rule, imitation = entries["split-rule"], entries["imitation"]
    makers: dict[str, Any] = {
        CURRENT: lambda: packaged_agent(CURRENT),
        NAMES["split-rule"]: lambda: SplitRule.from_entry(rule),
        NAMES["imitation"]: lambda: ImitationPolicy(imitation["models"],
                                                    imitation["threshold"])}
    if "maskable-ppo-confident" in entries:
        threshold = float(entries["maskable-ppo-confident"]["threshold"])
        makers[NAMES["maskable-ppo-confident"]] = lambda: ConfidentPolicy(
            packaged_agent(CURRENT), threshold)
    return makers


def update_params(path: Path, r2: SecondRound) -> str:
    """Point the packaged file's ``allocator`` at the round's choice and return its name.
    A new candidate (a fit no first-round family has) is added under its ``NAMES`` name and
    becomes the allocator. A chosen candidate whose fitted entry equals a first-round
    family's is that family, which the first round already measured beside the current
    allocator on the held-out cells, as the issue asks ("the best one is the allocator"):
    the current allocator stays. The other candidates are reported, not packaged."""
    params = json.loads(path.read_text())
    name = r2.allocator
    if name != CURRENT:
        entry = json.loads(json.dumps(r2.entries[name]))
        same = params["families"].get(name, {})
        if any(entry.get(k) != same.get(k) for k in PACKAGED_KEYS):
            name = NAMES[name]
            params["families"][name] = entry
        else:
            name = CURRENT
    params["allocator"] = name
    params["allocator_chosen_by"] = ROUND2_RULE
    path.write_text(json.dumps(params, indent=1) + "\n")
    r2.packaged = name
    return name


#: The keys that make two packaged entries the same agent.
PACKAGED_KEYS = ("models", "splits", "probe", "margin", "threshold", "family")


#: How the second round keeps or replaces the allocator.
ROUND2_RULE = ("second round: each candidate's settings and the choice among them by "
               "5-fold cross validation over the training data sets (largest smallest share "
               "of the room over the three cost levels); the allocator changes only to a new "
               "candidate (a fit no first-round family has) whose cross-validated score beats "
               "the current allocator's, computed the same way; a first-round family stays "
               "as the first round ranked it on the held-out cells; no reserved data set")


def shares_table(r2: SecondRound) -> pd.DataFrame:
    """Per candidate: its cross-validated shares (training) and held-out shares per level."""
    rows = []
    summary = r2.summary.set_index("candidate")
    for family in dict.fromkeys([*summary.index, CURRENT]):
        column = NAMES.get(family, family)
        row = summary.loc[family] if family in summary.index else pd.Series(dtype=float)
        held = level_shares(r2.held, column)
        chosen = family == r2.allocator
        rows.append({"candidate": column, "chosen by cv": chosen,
                     "packaged as allocator": (r2.packaged or "(not written)") if chosen
                     else "",
                     **{f"cv {lv}": row.get(f"cv {lv}", float("nan")) for lv in COST_LEVELS},
                     "cv min": row.get("cv min", float("nan")),
                     **{f"held {lv}": held[lv] for lv in COST_LEVELS},
                     "held min": min(held.values())})
    return pd.DataFrame(rows)


def top_table(r2: SecondRound, top: int = 5) -> pd.DataFrame:
    """The best candidates of each family's cross validation."""
    parts = [table.head(top).assign(family=family) for family, table in r2.cv.items()
             if family != CURRENT]
    table = pd.concat(parts, ignore_index=True)
    first = ["family", *[c for c in table if c != "family" and not str(c).startswith("cv")]]
    return table[[*first, *[c for c in table if str(c).startswith("cv")]]]


def write_second_round_tables(r2: SecondRound, folder: Path) -> list[Path]:
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



__all__ = ["CURRENT", "NAMES", "PACKAGED_KEYS", "ROUND2_RULE", "SecondRound", "candidate_agents",
           "choose", "run_second_round", "shares_table", "top_table", "update_params",
           "write_second_round_tables"]
