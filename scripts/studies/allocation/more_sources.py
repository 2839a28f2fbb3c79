"""More real sources: ADBench's CV and NLP embedding sets as training groups, and whether
grouped cross validation prefers an allocator fitted with them (docs/studies/ALLOCATION.md,
"Eighth round").

The scored cells stay the fifth round's: the 15 real training sets at the three cost levels
(5 seeds), in its 5 folds. What grows is what a fold's fit learns from. Each learning-curve
point (:data:`POINTS`) adds, beside the other folds' real cells and their real-anomaly tasks,
the embedding sources' own cells (``embedding_sources``: 5 seeds, three levels, weight 1
like a real cell) and their real-anomaly tasks (weight ``task_weight``). The embedding
groups are never in a fold, so they join every fold's fit and are never scored.

At every point the fifth round's grid (``safe_study.GRID``) is cross-validated, and
``safe-split-3`` is its candidate at the 15 sets with 10 tasks per source (refit per fold as
the fifth round fits it). The harmless safety rule chooses among every shippable candidate
of every point and All-in-LR (``tasks_fit.choose_safely(..., harmless=True)``). Because it
chooses among many on the folds it scores, the comparison with ``safe-split-3`` is nested
(``late_switch.nested``, ``per_level.paired``): a new candidate is preferred only where its
paired gain on the outer folds exceeds one standard error. The held-out sets are read for no
candidate: only the test-label ceilings (:func:`oracle_shares`) are computed on them.

Beside it, :func:`shipped_on_new` scores the shipped allocator on the embedding sources'
own cells: groups it never saw, read only as a measurement.

    python -m scripts.studies.allocation.more_sources --out /tmp/s4-alloc-study \\
        --data-dir /tmp/embeddings --update-docs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from agents.allocation import packaged_params
from agents.split_allocators import ALL_IN_LR, SafeSplit
from scripts.studies.allocation import embedding_sources as E
from scripts.studies.allocation import per_level as P
from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation import tasks_report as R
from scripts.studies.allocation.late_switch import base_candidate, nested
from scripts.studies.allocation.safe_study import GRID, digest, is_safe, load_rows

#: The shipped allocator a new candidate must beat.
BASE = "safe-split-3"


class Point(NamedTuple):
    """A learning-curve point: real-anomaly tasks per classical training source, whether
    the embedding sources' own cells join the fit, and their tasks per source."""

    label: str
    tasks: int
    new_cells: bool
    new_tasks: int


#: The learning curve: the 15 sets (``safe-split-3``'s point first), then the new sources
#: (their tasks alone, their cells, both).
POINTS = (Point("15 sets, 10 tasks", 10, False, 0), Point("15 sets, 40 tasks", 40, False, 0),
          Point("+ 10 new tasks, no new cells", 10, False, 10),
          Point("+ new cells, 10 tasks", 10, True, 0),
          Point("+ new cells and 10 new tasks", 10, True, 10),
          Point("+ new cells and 40 new tasks", 40, True, 40))


def extra_rows(point: Point, tasks: pd.DataFrame, new_real: pd.DataFrame,
               new_tasks: pd.DataFrame) -> pd.DataFrame:
    """The training rows beside the real training cells at ``point``: the classical
    sources' first tasks, and the embedding sources' cells and first tasks."""
    parts = [tasks[tasks["k"] < point.tasks]]
    if point.new_cells:
        parts.append(new_real)
    parts.append(new_tasks[new_tasks["k"] < point.new_tasks])
    return pd.concat(parts, ignore_index=True)


def point_results(real: pd.DataFrame, extra: pd.DataFrame, cache: Path | None = None
                  ) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, np.ndarray],
                             list[list[str]]]:
    """``tasks_fit.out_of_fold_costs`` of one point; with ``cache`` (a folder) kept as
    ``cv8_<digest>.pkl`` and read back for the very same rows and grid
    (``safe_study.digest``)."""
    path = None if cache is None else Path(cache) / f"cv8_{digest(real, extra)}.pkl"
    if path is not None and path.exists():
        return pd.read_pickle(path)
    found = F.out_of_fold_costs(real, extra, GRID)
    if path is not None:
        pd.to_pickle(found, path)
    return found


def curve_results(real: pd.DataFrame, extras: Mapping[str, pd.DataFrame],
                  shipped: Mapping[str, Any], first: str, cache: Path | None = None
                  ) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, np.ndarray],
                             list[list[str]]]:
    """Every point's out-of-fold costs (``tasks_fit.out_of_fold_costs``) in one set of
    candidates named ``<point>|safe <n>`` (All-in-LR once); the ``shipped`` candidate at
    point ``first`` is named :data:`BASE`; ``cache``: :func:`point_results`'."""
    keys: list[tuple[str, dict[str, Any]]] = []
    results: dict[str, np.ndarray] = {}
    fold_list: list[list[str]] = []
    for label, extra in extras.items():
        point_keys, found, fold_list = point_results(real, extra, cache)
        for name, candidate in point_keys:
            if not name.startswith("safe"):
                continue
            tag = BASE if label == first and candidate == shipped else f"{label}|{name}"
            keys.append((tag, {**candidate, "point": label}))
            results[tag] = found[name]
    if BASE not in results:
        raise ValueError(f"{BASE}'s candidate {dict(shipped)} is not in the grid at {first!r}")
    keys.append(("all-in-lr", {}))
    results["all-in-lr"] = real["all-in-lr"].to_numpy()
    return keys, results, fold_list


def shippable(keys: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Any]]:
    """The candidates that may ship: All-in-LR and those carrying the whole fallback."""
    return [(n, c) for n, c in keys if n == "all-in-lr" or is_safe(c)]


def curve_table(real: pd.DataFrame, keys: Sequence[tuple[str, Mapping[str, Any]]],
                results: Mapping[str, np.ndarray], fold_list: Sequence[Sequence[str]],
                extras: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per point: its training rows beyond the real cells, the harmless rule's choice among
    its shippable candidates and All-in-LR, and that choice's fold figures per level; then
    :data:`BASE`'s row."""
    table = P.fold_table(real, keys, results, fold_list)
    rows = []
    for label, extra in extras.items():
        part = table[[c.get("point") in (label, None) for _, c in keys]]
        best = F.choose_safely(part, harmless=True)
        rows.append(_curve_row(label, extra, best))
    base = table[table["candidate"] == BASE].iloc[0]
    rows.append(_curve_row(BASE, extras[str(base["point"])], base))
    return pd.DataFrame(rows)


def _curve_row(label: str, extra: pd.DataFrame, best: pd.Series) -> dict[str, Any]:
    """One row of :func:`curve_table`."""
    record: dict[str, Any] = {"point": label,
                              "real cells": int((extra["level"] != "task").sum()),
                              "tasks": int((extra["level"] == "task").sum()),
                              "groups": int(extra["group"].nunique()),
                              "choice": str(best["candidate"]).split("|")[-1]}
    record |= {k: best.get(k) for k in GRID}
    for kind in ("fold", "se", "lower"):
        record |= {f"{kind} {lv}": best[f"{kind} {lv}"] for lv in R.LEVELS}
    return record | {"fold mean": best["fold mean"], "se mean": best["se mean"],
                     "loss": best["loss"]}


def shipped_on_new(new_real: pd.DataFrame, entry: Mapping[str, Any]
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shipped allocator on the embedding sources' own cells: per level and group
    (seed means of the group's sources) All-in-LR's mean cost, the room, the allocator's
    cost minus All-in-LR's, its share and the best fixed split's (a share only where the
    room exceeds 0.005); and per level its share with the standard error over groups, the
    best fixed split's, the cells where it leaves All-in-LR and those its trait check sends
    back to it, and the groups where it loses to All-in-LR."""
    agent = SafeSplit.from_entry(entry)
    choices = [agent.choose(obs) for obs in new_real["obs"]]
    costs = F.costs_of(new_real, [split for split, _, _ in choices])
    threshold = entry["ood"]["threshold"]
    flags = new_real[["level"]].assign(
        leaves=[split != ALL_IN_LR for split, _, _ in choices],
        flagged=[threshold is not None and d > threshold for _, _, d in choices])
    frame = new_real[["level", "group", "all-in-lr", "optimal", "best-fixed-per-cell"]]
    means = frame.assign(agent=costs).groupby(["level", "group"]).mean()
    room = means["all-in-lr"] - means["optimal"]
    shares = {k: ((means["all-in-lr"] - means[k]) / room).where(room > 0.005)
              for k in ("best-fixed-per-cell", "agent")}
    per_group = means[["all-in-lr"]].assign(room=room, **{
        "allocator - lr": means["agent"] - means["all-in-lr"],
        "share allocator": shares["agent"], "share best fixed": shares["best-fixed-per-cell"]})
    by_group = new_real.assign(dataset=new_real["group"])
    share = R.shares_with_se(by_group, costs)
    best = R.shares_with_se(by_group, new_real["best-fixed-per-cell"].to_numpy())
    loses = (per_group["allocator - lr"] > 1e-12).groupby(level="level")
    rates = flags.groupby("level").mean()
    summary = pd.DataFrame([{"level": lv, "share allocator": share[lv][0], "se": share[lv][1],
                             "share best fixed": best[lv][0],
                             "cells it leaves all-in-lr": rates.loc[lv, "leaves"],
                             "cells the trait check flags": rates.loc[lv, "flagged"],
                             "groups it loses on": int(loses.sum()[lv]),
                             "groups": int(loses.size()[lv])} for lv in R.LEVELS
                            if lv in share])
    return per_group.reset_index(), summary


def oracle_shares(rows: pd.DataFrame) -> pd.DataFrame:
    """Ceilings that read the test labels, per level: the share of the room (and its
    standard error over data sets) of the one split per level, and of the one split per
    data set and level, each the least mean cost over that level's (or data set's) cells
    among every candidate split and All-in-LR. An allocator that plays one split per level
    whatever the task cannot beat the first."""
    costs = np.column_stack([np.stack(list(rows["split_costs"])), rows["all-in-lr"]])
    played = {"one split per level": np.empty(len(rows)),
              "one split per data set": np.empty(len(rows))}
    for keys, target in (("level", "one split per level"),
                         (["level", "dataset"], "one split per data set")):
        for _, index in rows.groupby(keys).indices.items():
            played[target][index] = costs[index, costs[index].mean(axis=0).argmin()]
    records = []
    for name, values in played.items():
        shares = R.shares_with_se(rows, values)
        records.append({"oracle": name, **{lv: shares[lv][0] for lv in R.LEVELS},
                        **{f"se {lv}": shares[lv][1] for lv in R.LEVELS},
                        "mean": float(np.mean([shares[lv][0] for lv in R.LEVELS]))})
    return pd.DataFrame(records)


def study(out: Path, data_dir: Path, seeds: int = 5) -> dict[str, pd.DataFrame]:
    """The eighth round's tables on the cached rows in ``out`` (the module docstring)."""
    sources = list(E.linked_sources(data_dir))
    real, tasks = load_rows(out, "train", seeds), load_rows(out, "real", 40)
    new_real = E.read_rows(out, data_dir, sources, "real", seeds)
    new_tasks = E.read_rows(out, data_dir, sources, "tasks",
                            max(p.new_tasks for p in POINTS))
    extras = {p.label: extra_rows(p, tasks, new_real, new_tasks) for p in POINTS}
    entry = packaged_params()["families"][BASE]
    keys, results, fold_list = curve_results(real, extras, base_candidate(entry),
                                             POINTS[0].label, cache=out)
    eligible = shippable(keys)
    outer = nested(real, eligible, results, fold_list).rename(columns={"switch": "new"})
    on_new = shipped_on_new(new_real, entry)
    held = load_rows(out, "held_out", 10)  # for the test-label ceilings only
    oracles = pd.concat([oracle_shares(frame).assign(cells=name) for name, frame in
                         (("held-out", held), ("training", real), ("new sources", new_real))],
                        ignore_index=True)
    return {"curve": curve_table(real, eligible, results, fold_list, extras),
            "paired": P.paired(outer, new="new", old="base"), "outer": outer,
            "new_sources": on_new[0], "new_summary": on_new[1], "oracles": oracles}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True,
                   help="the study's folder: its store and safe_study's cached rows")
    p.add_argument("--data-dir", type=Path, required=True,
                   help="the folder embedding_sources linked the sources into")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tables into docs/tables as allocation8_*")
    args = p.parse_args(argv)
    R.show_and_write(study(args.out, args.data_dir),
                     R.tables_folder(args.out, args.update_docs),
                     prefix="allocation8", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
