"""The crossed study's analysis over its stored paths: the tidy table (one row per factor
combination, data set, seed and strategy, not-posable combinations included with their
reason), the strategies per combination, the room per factor level and the rule that takes
it, and the figure.

The room of a cell is All-in-LR's mean test cost minus the hindsight optimum's: what any
allocation could gain over never buying a training label. A rule's share of the room is
(All-in-LR - rule) / room, on means in which data sets weigh equally (seeds averaged within
a data set first): 1 takes all of it, 0 none, below 0 is worse than All-in-LR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from agents.experiments.lattice_paths import BEST_FIXED, best_fixed_per_cell
from agents.experiments.studies.crossed.cells import CELL, StudyOptions, stored_paths
from agents.experiments.studies.crossed.factors import (
    FACTOR_NAMES,
    FACTORS,
    NOT_POSABLE,
    POSED,
    Combination,
    split_posable,
)
from agents.experiments.tables import write_table

#: The strategies of the tables, in their order: the rules, then the yardsticks.
STRATEGIES = ("all-in-al", "all-in-lr", "ballad", "sadal", BEST_FIXED, "oracle", "optimal")
#: The rules whose share of the room the tables give (All-in-LR is the room's zero).
TAKERS = ("all-in-al", "ballad", "sadal", BEST_FIXED, "oracle")
#: The deployable rules among them (no hindsight, no look at the test set).
DEPLOYABLE = ("all-in-al", "ballad", "sadal")
#: The tidy table's columns.
TIDY_COLUMNS = [*CELL, "combination", "strategy", "status", "reason", "mean_cost",
                "final_cost", "regret", "n_al", "path"]


# ---------------------------------------------------------------------------- tidy
def tidy_table(paths: pd.DataFrame, refused: Mapping[Combination, str],
               datasets: Sequence[str], seeds: Sequence[int],
               strategies: Sequence[str] = STRATEGIES) -> pd.DataFrame:
    """One row per combination, data set, seed and strategy: the stored paths' scores (with
    each cell's best fixed split and its regret against the cell's optimum), then a
    ``not-posable`` row with the reason for every strategy of each refused combination."""
    paths = pd.concat([paths, best_fixed_per_cell(paths, CELL)], ignore_index=True)
    paths = paths[paths.name.isin(list(strategies))].rename(columns={"name": "strategy"})
    optimum = paths[paths.strategy == "optimal"].set_index(CELL).mean_cost
    regret = paths.mean_cost.to_numpy() - optimum.reindex(
        pd.MultiIndex.from_frame(paths[CELL])).to_numpy()
    posed = paths.assign(regret=regret, status=POSED, reason="",
                         combination=paths[list(FACTOR_NAMES)].agg("/".join, axis=1))
    refused_rows = [{**combo.columns(), "dataset": name, "seed": int(seed),
                     "combination": combo.label, "strategy": strategy,
                     "status": NOT_POSABLE, "reason": reason}
                    for combo, reason in refused.items() for name in datasets
                    for seed in seeds for strategy in strategies]
    frames = [frame for frame in (posed, pd.DataFrame(refused_rows, columns=TIDY_COLUMNS))
              if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    tidy = pd.concat(frames, ignore_index=True)[TIDY_COLUMNS]
    orders = {f: {level: k for k, level in enumerate(FACTORS[f])} for f in FACTOR_NAMES}
    orders["dataset"] = {name: k for k, name in enumerate(datasets)}
    orders["strategy"] = {s: k for k, s in enumerate(strategies)}
    return tidy.sort_values([*FACTOR_NAMES, "dataset", "seed", "strategy"],
                            key=lambda c: c.map(orders[c.name]) if c.name in orders else c,
                            kind="stable").reset_index(drop=True)


def dataset_means(tidy: pd.DataFrame, by: Sequence[str], value: str = "mean_cost"
                  ) -> pd.DataFrame:
    """``value`` averaged over seeds within each data set, then over the data sets, per
    ``by`` and strategy (so data sets with more seeds do not weigh more); posed rows only.
    Columns: ``by``, one per strategy, ``datasets`` and ``seeds`` (per data set, at least)."""
    posed = tidy[tidy.status == POSED]
    per_set = posed.groupby([*by, "dataset", "strategy"], sort=False)[value].mean()
    wide = per_set.unstack("strategy").groupby(level=list(by), sort=False).mean()
    seeds = posed.groupby([*by, "dataset"], sort=False).seed.nunique()
    counts = pd.DataFrame({
        "datasets": posed.groupby(list(by), sort=False).dataset.nunique(),
        "seeds": seeds.groupby(level=list(by), sort=False).min()})
    first = posed[list(by)].drop_duplicates()  # the tidy table's order, not unstack's
    order = pd.MultiIndex.from_frame(first) if len(by) > 1 else pd.Index(first[by[0]])
    return wide.join(counts).reindex(order).reset_index()


def room_shares(means: pd.DataFrame, takers: Sequence[str] = TAKERS) -> pd.DataFrame:
    """``room`` (All-in-LR minus the optimum) and each taker's share of it,
    ``share <taker>`` = (All-in-LR - taker) / room (NaN where the room is 0), and the
    deployable rule with the largest share (``takes it``; ``none`` when no deployable
    rule beats All-in-LR)."""
    out = means.copy()
    out["room"] = out["all-in-lr"] - out["optimal"]
    safe = out.room.where(out.room > 1e-12)
    for taker in takers:
        if taker in out:
            out[f"share {taker}"] = (out["all-in-lr"] - out[taker]) / safe
    deployable = [f"share {t}" for t in DEPLOYABLE if f"share {t}" in out]

    def largest(row: pd.Series) -> str:
        values = row[deployable].astype(float)
        if values.isna().all() or not values.max() > 0:
            return "none"
        return str(values.idxmax()).removeprefix("share ")

    out["takes it"] = [largest(row) for _, row in out.iterrows()]
    return out


# ---------------------------------------------------------------------------- tables
def strategies_table(tidy: pd.DataFrame, refused: Mapping[Combination, str]) -> pd.DataFrame:
    """Per combination: each strategy's mean test cost, the room and the rule that takes it;
    a refused combination is a row with its status and reason and no costs."""
    by = list(FACTOR_NAMES)
    posed = room_shares(dataset_means(tidy, by)) if (tidy.status == POSED).any() \
        else pd.DataFrame(columns=by)
    posed = posed.assign(status=POSED, reason="")
    refused_rows = pd.DataFrame([{**c.columns(), "status": NOT_POSABLE, "reason": r,
                                  "datasets": 0, "seeds": 0} for c, r in refused.items()],
                                columns=[*by, "status", "reason", "datasets", "seeds"])
    columns = [*by, "status", "datasets", "seeds",
               *[s for s in STRATEGIES if s in posed], "room", "takes it", "reason"]
    frames = [f for f in (posed, refused_rows) if not f.empty]
    table = pd.concat(frames, ignore_index=True) if frames else posed
    return table.reindex(columns=columns)


def room_table(tidy: pd.DataFrame, factors: Sequence[str] = FACTOR_NAMES) -> pd.DataFrame:
    """Per factor and level (over the posed combinations of the other factors): All-in-LR,
    the optimum, the room, the optimum's share of AL rounds, the share of cells whose room
    exceeds 0.01, each taker's share of the room and the deployable rule that takes most of
    it."""
    rows = []
    posed = tidy[tidy.status == POSED]
    cells = posed[posed.strategy.isin(["all-in-lr", "optimal"])].pivot_table(
        index=[*CELL], columns="strategy", values="mean_cost").reset_index()
    optimal = posed[posed.strategy == "optimal"].set_index(CELL)
    cells["optimal AL share"] = (optimal.n_al / optimal.path.str.len()).reindex(
        pd.MultiIndex.from_frame(cells[CELL])).to_numpy()
    for factor in factors:
        levels = posed[factor].unique()
        if len(levels) == 0:
            continue
        shares = room_shares(dataset_means(posed, [factor]))
        for _, row in shares.iterrows():
            level_cells = cells[cells[factor] == row[factor]]
            rows.append({"factor": factor, "level": row[factor],
                         "combinations": posed.loc[posed[factor] == row[factor],
                                                   list(FACTOR_NAMES)].drop_duplicates().shape[0],
                         "all-in-lr": row["all-in-lr"], "optimal": row["optimal"],
                         "room": row["room"],
                         "optimal AL share": float(level_cells["optimal AL share"].mean()),
                         "room > 0.01": float(np.mean(level_cells["all-in-lr"]
                                                      - level_cells["optimal"] > 0.01)),
                         **{f"share {t}": row.get(f"share {t}", np.nan) for t in TAKERS},
                         "takes it": row["takes it"]})
    return pd.DataFrame(rows)


def per_dataset_table(tidy: pd.DataFrame) -> pd.DataFrame:
    """Per combination and data set (seeds averaged): All-in-LR, the optimum and the room."""
    posed = tidy[tidy.status == POSED]
    wide = posed.pivot_table(index=["combination", "dataset"], columns="strategy",
                             values="mean_cost", sort=False)
    wide = wide[[s for s in STRATEGIES if s in wide.columns]]
    wide["room"] = wide["all-in-lr"] - wide["optimal"]
    return wide.reset_index()


def not_posable_table(refused: Mapping[Combination, str]) -> pd.DataFrame:
    """The combinations the lattice cannot pose, one row per reason: how many, the levels
    of each factor among them, and the reason."""
    rows = []
    for reason in dict.fromkeys(refused.values()):
        combos = [c for c, r in refused.items() if r == reason]
        levels = {f: ", ".join(dict.fromkeys(c.columns()[f] for c in combos))
                  for f in FACTOR_NAMES}
        rows.append({"combinations": len(combos), **levels, "reason": reason})
    return pd.DataFrame(rows, columns=["combinations", *FACTOR_NAMES, "reason"])


# ---------------------------------------------------------------------------- report
def report_tables(options: StudyOptions) -> dict[str, pd.DataFrame]:
    """The study's tables (``tidy``, ``strategies``, ``room``, ``per_dataset``,
    ``not_posable``) from the stored cells of ``options``."""
    _, refused = split_posable(options.combinations(), options.base)
    tidy = tidy_table(stored_paths(options), refused, options.names(), options.seeds)
    return {"tidy": tidy, "strategies": strategies_table(tidy, refused),
            "room": room_table(tidy), "per_dataset": per_dataset_table(tidy),
            "not_posable": not_posable_table(refused)}


def write_report(options: StudyOptions, docs: Path, prefix: str = "crossed"
                 ) -> dict[str, pd.DataFrame]:
    """Tables (``<docs>/tables/<prefix>_<table>``) and the figure
    (``<docs>/figures/<prefix>_regret.png``), from the stored cells alone; the tidy table,
    one row per combination, data set, seed and strategy, goes beside the stores
    (``<out>/tables/<prefix>_tidy.csv``: megabytes, not a report's). A ``prefix`` of its
    own keeps a slice's tables apart from another's."""
    tables = report_tables(options)
    for name, table in tables.items():
        folder = Path(options.out if name == "tidy" else docs) / "tables"
        write_table(table, folder, f"{prefix}_{name}", index=False, missing="–",
                    csv_float_format="%.6g", markdown=name != "tidy")
    if (tables["tidy"].status == POSED).any():
        draw_regrets(tables["tidy"], Path(docs) / "figures" / f"{prefix}_regret.png")
    return tables


def draw_regrets(tidy: pd.DataFrame, path: Path) -> Path:
    """Each posed combination's mean regret (mean cost minus the optimum's) of every rule
    and yardstick, as grouped horizontal bars; the All-in-LR bar is the room."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = dataset_means(tidy, ["combination"], "regret").set_index("combination")
    shown = [s for s in STRATEGIES if s in means and s != "optimal"]
    fig, ax = plt.subplots(figsize=(8.5, 1.0 + 0.55 * len(means) * max(1, len(shown)) / 4))
    height = 0.8 / max(1, len(shown))
    ypos = np.arange(len(means))
    for k, strategy in enumerate(shown):
        ax.barh(ypos + k * height, means[strategy], height, label=strategy)
    ax.set_yticks(ypos + 0.4 - height / 2, means.index, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("mean test cost minus the hindsight optimum (All-in-LR: the room)")
    ax.set_title("Regret per factor combination (detector/rejector/queries/costs/protocol)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


__all__ = ["DEPLOYABLE", "STRATEGIES", "TAKERS", "TIDY_COLUMNS", "dataset_means",
           "draw_regrets", "not_posable_table", "per_dataset_table", "report_tables",
           "room_shares", "room_table", "strategies_table", "tidy_table", "write_report"]
