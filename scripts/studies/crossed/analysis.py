"""The crossed study's analysis over its stored paths: the tidy table (one row per factor
combination, data set, seed and strategy, not-posable combinations included with their
reason), the strategies per combination, the room per factor level and the rule that takes
it, and the figure.

The room of a cell is All-in-LR's mean test cost minus the hindsight optimum's: what any
allocation could gain over never buying a training label. A rule's share of the room is
(All-in-LR - rule) / room, on means in which data sets weigh equally (seeds averaged within
a data set first): 1 takes all of it, 0 none, below 0 is worse than All-in-LR.

Combinations played live (status ``live``: the lattice refuses them only for their
path-dependent queries) have no optimum and no oracle: their room is All-in-LR minus the
best fixed split in hindsight, a lower bound on the lattice's room (the optimum over all
2^k ordered paths is not computed), and the shares are of that lower bound.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from agents.reports.plots import save_figure
from agents.reports.tables import write_table
from scripts.studies.common.lattice_paths import BEST_FIXED, best_fixed_per_cell
from scripts.studies.crossed.cells import CELL, StudyOptions, stored_paths
from scripts.studies.crossed.factors import (
    FACTOR_NAMES,
    FACTORS,
    LIVE,
    NOT_POSABLE,
    POSED,
    Combination,
    dataset_group,
    split_posable,
)
from scripts.studies.crossed.label_free import applies, write_label_free
from scripts.studies.crossed.live import live_combinations, stored_live

#: The strategies of the tables, in their order: the rules, then the yardsticks.
STRATEGIES = ("all-in-al", "all-in-lr", "ballad", "sadal", BEST_FIXED, "oracle", "optimal")
#: The rules whose share of the room the tables give (All-in-LR is the room's zero).
TAKERS = ("all-in-al", "ballad", "sadal", BEST_FIXED, "oracle")
#: The deployable rules among them (no hindsight, no look at the test set).
DEPLOYABLE = ("all-in-al", "ballad", "sadal")
#: The tidy table's columns.
TIDY_COLUMNS = [*CELL, "combination", "strategy", "status", "reason", "mean_cost",
                "final_cost", "regret", "n_al", "path"]
#: The yardstick each status measures the room down to: the hindsight optimum on the
#: lattice; live, the best fixed split in hindsight (so the room is a lower bound).
FLOOR = {POSED: "optimal", LIVE: BEST_FIXED}


# ---------------------------------------------------------------------------- tidy
def scored_rows(paths: pd.DataFrame, strategies: Sequence[str], status: str
                ) -> pd.DataFrame:
    """Stored paths as tidy rows of ``status``: each cell's best fixed split added, the
    strategies kept, and each row's regret against its cell's optimum (NaN without one)."""
    if paths.empty:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    paths = pd.concat([paths, best_fixed_per_cell(paths, CELL)], ignore_index=True)
    paths = paths[paths.name.isin(list(strategies))].rename(columns={"name": "strategy"})
    optimum = paths[paths.strategy == "optimal"].set_index(CELL).mean_cost
    regret = paths.mean_cost.to_numpy() - optimum.reindex(
        pd.MultiIndex.from_frame(paths[CELL])).to_numpy()
    return paths.assign(regret=regret, status=status, reason="",
                        combination=paths[list(FACTOR_NAMES)].agg("/".join, axis=1))


def tidy_table(paths: pd.DataFrame, refused: Mapping[Combination, str],
               datasets: Sequence[str], seeds: Sequence[int],
               strategies: Sequence[str] = STRATEGIES, live: pd.DataFrame | None = None
               ) -> pd.DataFrame:
    """One row per combination, data set, seed and strategy: the stored paths' scores (with
    each cell's best fixed split and its regret against the cell's optimum), the live
    cells' (``live``: status ``live``, no optimum, so no regret), then a ``not-posable``
    row with the reason for every strategy of each refused combination (pass only those
    not played live)."""
    posed = scored_rows(paths, strategies, POSED)
    played = None if live is None or live.empty else scored_rows(live, strategies, LIVE)
    refused_rows = [{**combo.columns(), "dataset": name, "seed": int(seed),
                     "combination": combo.label, "strategy": strategy,
                     "status": NOT_POSABLE, "reason": reason}
                    for combo, reason in refused.items() for name in datasets
                    for seed in seeds for strategy in strategies]
    frames = [frame for frame in (posed, played,
                                  pd.DataFrame(refused_rows, columns=TIDY_COLUMNS))
              if frame is not None and not frame.empty]
    if not frames:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    tidy = pd.concat(frames, ignore_index=True)[TIDY_COLUMNS]
    orders = {f: {level: k for k, level in enumerate(FACTORS[f])} for f in FACTOR_NAMES}
    orders["dataset"] = {name: k for k, name in enumerate(datasets)}
    orders["strategy"] = {s: k for k, s in enumerate(strategies)}
    return tidy.sort_values([*FACTOR_NAMES, "dataset", "seed", "strategy"],
                            key=lambda c: c.map(orders[c.name]) if c.name in orders else c,
                            kind="stable").reset_index(drop=True)


def seed_means(rows: pd.DataFrame, by: Sequence[str], value: str = "mean_cost"
               ) -> pd.DataFrame:
    """``value`` averaged over seeds: one row per ``by`` and data set, one column per
    strategy."""
    return rows.groupby([*by, "dataset", "strategy"], sort=False)[value].mean().unstack(
        "strategy")


def dataset_means(tidy: pd.DataFrame, by: Sequence[str], value: str = "mean_cost",
                  status: str = POSED) -> pd.DataFrame:
    """``value`` averaged over seeds within each data set, then over the data sets, per
    ``by`` and strategy (so data sets with more seeds do not weigh more); rows of
    ``status`` only. Columns: ``by``, one per strategy, ``datasets`` and ``seeds`` (per data
    set, at least)."""
    posed = tidy[tidy.status == status]
    wide = seed_means(posed, by, value).groupby(level=list(by), sort=False).mean()
    seeds = posed.groupby([*by, "dataset"], sort=False).seed.nunique()
    counts = pd.DataFrame({
        "datasets": posed.groupby(list(by), sort=False).dataset.nunique(),
        "seeds": seeds.groupby(level=list(by), sort=False).min()})
    first = posed[list(by)].drop_duplicates()  # the tidy table's order, not unstack's
    order = pd.MultiIndex.from_frame(first) if len(by) > 1 else pd.Index(first[by[0]])
    return wide.join(counts).reindex(order).reset_index()


def room_shares(means: pd.DataFrame, takers: Sequence[str] = TAKERS,
                floor: str = "optimal") -> pd.DataFrame:
    """``room`` (All-in-LR minus ``floor``: the optimum, or live the best fixed split) and
    each taker's share of it, ``share <taker>`` = (All-in-LR - taker) / room (NaN where the
    room is 0), and the deployable rule with the largest share (``takes it``; ``none`` when
    no deployable rule beats All-in-LR)."""
    out = means.copy()
    out["room"] = out["all-in-lr"] - out[floor]
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
def status_means(tidy: pd.DataFrame, by: Sequence[str], status: str) -> pd.DataFrame:
    """:func:`room_shares` of the ``status`` rows' means per ``by`` (the room down to
    ``FLOOR[status]``), with a ``status`` column; empty without such rows."""
    if not (tidy.status == status).any():
        return pd.DataFrame(columns=[*by, "status"])
    return room_shares(dataset_means(tidy, by, status=status),
                       floor=FLOOR[status]).assign(status=status)


def strategies_table(tidy: pd.DataFrame, refused: Mapping[Combination, str],
                     live: Sequence[Combination] = ()) -> pd.DataFrame:
    """Per combination: each strategy's mean test cost, the room and the rule that takes it
    (posed rows, then live ones: their room is All-in-LR minus the best fixed split, a
    lower bound); a refused combination (``refused``: pass those not played live) is a row
    with its status and reason and no costs, as is a ``live`` one with no cell stored yet."""
    by = list(FACTOR_NAMES)
    posed = status_means(tidy, by, POSED).assign(reason="")
    played = status_means(tidy, by, LIVE).assign(reason="")
    stored = set(played[by].itertuples(index=False, name=None))
    empty = [(c, LIVE, "no live cell stored yet") for c in live if c.levels not in stored]
    refused_rows = pd.DataFrame([{**c.columns(), "status": status, "reason": r,
                                  "datasets": 0, "seeds": 0}
                                 for c, status, r in [*empty, *((c, NOT_POSABLE, r)
                                                                for c, r in refused.items())]],
                                columns=[*by, "status", "reason", "datasets", "seeds"])
    columns = [*by, "status", "datasets", "seeds",
               *[s for s in STRATEGIES if s in posed or s in played], "room", "takes it",
               "reason"]
    frames = [f for f in (posed, played, refused_rows) if not f.empty]
    table = pd.concat(frames, ignore_index=True) if frames else posed
    return table.reindex(columns=columns)


def room_table(tidy: pd.DataFrame, factors: Sequence[str] = FACTOR_NAMES) -> pd.DataFrame:
    """Per factor and level (over the posed combinations of the other factors): All-in-LR,
    the optimum, the room, the optimum's share of AL rounds, the share of cells whose room
    exceeds 0.01, each taker's share of the room and the deployable rule that takes most of
    it; then the same over the live combinations (status ``live``: the room down to the best
    fixed split, a lower bound; no optimum, oracle or optimum's AL share)."""
    frames = [room_rows(tidy, status, factors) for status in (POSED, LIVE)]
    return pd.concat([f for f in frames if not f.empty] or frames[:1], ignore_index=True)


def room_rows(tidy: pd.DataFrame, status: str, factors: Sequence[str] = FACTOR_NAMES
              ) -> pd.DataFrame:
    """:func:`room_table`'s rows over the combinations of ``status``."""
    rows = []
    floor = FLOOR[status]
    posed = tidy[tidy.status == status]
    cells = posed[posed.strategy.isin(["all-in-lr", floor])].pivot_table(
        index=[*CELL], columns="strategy", values="mean_cost").reset_index()
    optimal = posed[posed.strategy == "optimal"].set_index(CELL)
    cells["optimal AL share"] = (optimal.n_al / optimal.path.str.len()).reindex(
        pd.MultiIndex.from_frame(cells[CELL])).to_numpy() if len(cells) else []
    for factor in factors:
        levels = posed[factor].unique()
        if len(levels) == 0:
            continue
        shares = room_shares(dataset_means(posed, [factor], status=status), floor=floor)
        for _, row in shares.iterrows():
            level_cells = cells[cells[factor] == row[factor]]
            rows.append({"factor": factor, "level": row[factor], "status": status,
                         "combinations": posed.loc[posed[factor] == row[factor],
                                                   list(FACTOR_NAMES)].drop_duplicates().shape[0],
                         "all-in-lr": row["all-in-lr"], "optimal": row.get("optimal", np.nan),
                         "room": row["room"],
                         "optimal AL share": float(level_cells["optimal AL share"].mean()),
                         "room > 0.01": float(np.mean(level_cells["all-in-lr"]
                                                      - level_cells[floor] > 0.01)),
                         **{f"share {t}": row.get(f"share {t}", np.nan) for t in TAKERS},
                         "takes it": row["takes it"]})
    return pd.DataFrame(rows)


def per_dataset_table(tidy: pd.DataFrame) -> pd.DataFrame:
    """Per combination and data set (seeds averaged): each strategy, and the room (posed:
    All-in-LR minus the optimum; live: minus the best fixed split, a lower bound)."""
    frames = []
    for status, floor in FLOOR.items():
        rows = tidy[tidy.status == status]
        if rows.empty:
            continue
        wide = rows.pivot_table(index=["combination", "dataset"], columns="strategy",
                                values="mean_cost", sort=False)
        wide = wide[[s for s in STRATEGIES if s in wide.columns]]
        wide["room"] = wide["all-in-lr"] - wide[floor]
        frames.append(wide.reset_index().assign(status=status))
    if not frames:
        return pd.DataFrame(columns=["combination", "dataset", "status", "room"])
    table = pd.concat(frames, ignore_index=True)
    strategies = [s for s in STRATEGIES if s in table]
    return table[["combination", "dataset", "status", *strategies, "room"]]


def groups_table(tidy: pd.DataFrame) -> pd.DataFrame:
    """Per posed combination and group of data sets (:func:`dataset_group`): each
    strategy's mean test cost (data sets weigh equally, seeds averaged first) and, per
    deployable rule, on how many of the group's data sets its mean cost is below
    All-in-LR's (``beat <rule>``). The paper's sets and ADBench's can answer apart."""
    by = [*FACTOR_NAMES, "group"]
    posed = tidy[tidy.status == POSED]
    posed = posed.assign(group=posed.dataset.map(dataset_group))
    if posed.empty:
        return pd.DataFrame(columns=[*by, "datasets", "seeds"])
    means = dataset_means(posed, by)
    per_set = seed_means(posed, by)
    beats = pd.DataFrame({f"beat {rule}": (per_set[rule] < per_set["all-in-lr"]).groupby(
        level=by, sort=False).sum() for rule in DEPLOYABLE if rule in per_set})
    table = means.merge(beats.reset_index(), on=by)
    strategies = [s for s in STRATEGIES if s in table]
    return table[[*by, "datasets", "seeds", *strategies, *beats.columns]]


def not_posable_table(refused: Mapping[Combination, str],
                      live: Collection[Combination] = ()) -> pd.DataFrame:
    """The combinations the lattice cannot pose, one row per status (``live`` for those
    played live, else ``not-posable``) and reason: how many, the levels of each factor
    among them, and the reason."""
    status = {c: LIVE if c in live else NOT_POSABLE for c in refused}
    rows = []
    for state, reason in dict.fromkeys((status[c], r) for c, r in refused.items()):
        combos = [c for c, r in refused.items() if r == reason and status[c] == state]
        levels = {f: ", ".join(dict.fromkeys(c.columns()[f] for c in combos))
                  for f in FACTOR_NAMES}
        rows.append({"combinations": len(combos), **levels, "status": state,
                     "reason": reason})
    return pd.DataFrame(rows, columns=["combinations", *FACTOR_NAMES, "status", "reason"])


# ---------------------------------------------------------------------------- report
def report_tables(options: StudyOptions) -> dict[str, pd.DataFrame]:
    """The study's tables (``tidy``, ``strategies``, ``room``, ``per_dataset``, ``groups``,
    ``not_posable``) from the stored cells of ``options``."""
    _, refused = split_posable(options.combinations(), options.base)
    live = live_combinations(options)
    unplayed = {combo: reason for combo, reason in refused.items() if combo not in live}
    tidy = tidy_table(stored_paths(options), unplayed, options.names(), options.seeds,
                      live=stored_live(options))
    return {"tidy": tidy, "strategies": strategies_table(tidy, unplayed, list(live)),
            "room": room_table(tidy), "per_dataset": per_dataset_table(tidy),
            "groups": groups_table(tidy), "not_posable": not_posable_table(refused, live)}


def write_report(options: StudyOptions, docs: Path, prefix: str = "crossed"
                 ) -> dict[str, pd.DataFrame]:
    """Tables (``<docs>/tables/<prefix>_<table>``) and the figure
    (``<docs>/figures/<prefix>_regret.png``), from the stored cells alone; the tidy table,
    one row per combination, data set, seed and strategy, goes beside the stores
    (``<out>/tables/<prefix>_tidy.csv``: megabytes, not a report's). A ``prefix`` of its
    own keeps a slice's tables apart from another's. With BALLAD's rejector and RejEx both
    crossed, also the label-free comparison (``label_free``: ``<prefix>_label_free``)."""
    tables = report_tables(options)
    for name, table in tables.items():
        folder = Path(options.out if name == "tidy" else docs) / "tables"
        write_table(table, folder, f"{prefix}_{name}", index=False, missing="–",
                    csv_float_format="%.6g", markdown=name != "tidy")
    if (tables["tidy"].status == POSED).any():
        draw_regrets(tables["tidy"], Path(docs) / "figures" / f"{prefix}_regret.png")
        if applies(options.levels["rejector"]):
            tables["label_free"] = write_label_free(tables["tidy"], options.names(),
                                                    options.data_dir, docs, prefix)
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
    return save_figure(fig, path, bbox_inches=None)


__all__ = ["DEPLOYABLE", "FLOOR", "STRATEGIES", "TAKERS", "TIDY_COLUMNS",
           "dataset_means", "draw_regrets", "groups_table", "not_posable_table",
           "per_dataset_table", "report_tables", "room_rows", "room_shares", "room_table",
           "scored_rows", "seed_means", "status_means", "strategies_table", "tidy_table",
           "write_report"]
