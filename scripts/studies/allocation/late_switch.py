"""A late switch back to LR on top of ``safe-split-3``, and whether grouped cross validation
on the training sets prefers it (docs/studies/ALLOCATION.md, "Seventh round").

The candidates are ``safe-split-3`` as it is (its candidate of the fifth round's grid, refit
per fold as the fifth round's cross validation fits it), the same fit at the other margins
and task weight of that grid (:data:`BASES`: the margin bought c_fp = 10's safety with
c_fn = 10's gains, and a switch might buy it back), each alone and with a ``LateSwitch``
(``agents.split_allocators``) for each of :data:`SWITCHES`: once the split's AL phase has
begun after LR rounds, back to LR for the rest when the validation-sample cost has not
fallen by ``threshold`` standard errors after ``after`` AL rounds. The switch reads the
episode, so every real training cell's cost is the agent's own lattice replay (the fold's
fit with the switch), not a table look-up; without a switch the replay must equal the fifth
round's table cost (checked).

The choice is the harmless safety rule (``tasks_fit.choose_safely(..., harmless=True)``:
lower bound >= 0 at every level, within one standard error of the best fold mean, the least
room lost), the switch's settings included. Because it chooses among many switches on the
folds it scores, the comparison with ``safe-split-3`` is nested: for each outer fold the
rule chooses on the other four folds and both are scored on the fold left out; the switch is
preferred only where its paired gain exceeds one standard error (``per_level.PREFER``). No
held-out or reserved data set is read.

    python -m scripts.studies.allocation.late_switch --out /tmp/s2fit-study --update-docs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.allocation import packaged_params
from agents.split_allocators import ALL_IN_LR, ALL_ROUNDS, SafeSplit
from ballad_env.episode import LR
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.allocation import per_level as P
from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation import tasks_report as R
from scripts.studies.allocation.safe_study import load_rows
from scripts.studies.allocation.tasks_cells import LEVELS
from scripts.studies.allocation.tasks_study import task_cells
from scripts.studies.common.options import REPO

#: The shipped allocator this round would extend.
BASE = "safe-split-3"
#: The switches tried: AL rounds before the first check, and the fall (in standard errors
#: of the validation-sample cost) below which the AL phase stops.
SWITCHES = [{"after": a, "threshold": t} for a in (1, 2, 3) for t in (-1.0, -0.5, 0.0, 0.5, 1.0)]
#: The fits a switch may sit on: ``safe-split-3``'s candidate at these margins and task
#: weights (the rest as shipped).
BASES = [{"margin": m, "task_weight": w} for w in (0.25, 1.0) for m in (0.005, 0.002, 0.0)]
#: Real-anomaly tasks per source that :func:`task_check` scores (those the store holds).
TASKS = 10
#: Rows of the cross-validation table in the docs (beside the choice and the base).
TOP = 10
#: Cell flags beside the switches': the base left All-in-LR; its split's AL phase follows LR.
SPLIT, LR_FIRST = "base leaves all-in-lr", "base plays lr, then al"


def base_candidate(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The fifth-round grid candidate of a packaged ``safe-split`` entry (``fit_safe``'s
    keywords)."""
    settings = entry["settings"]
    return {"alpha": float(settings["alpha"]), "task_weight": float(settings["task_weight"]),
            "z": float(entry["z"]), "margin": float(entry["margin"]),
            "ood": entry["ood"]["quantile"], "residual": entry.get("residual") is not None}


def switch_name(switch: Mapping[str, Any] | None, base: str = BASE) -> str:
    """A candidate's name: the base, or the base with its switch."""
    return base if switch is None else \
        f"{base} + switch after {switch['after']}, {switch['threshold']:g} se"


def base_name(shipped: Mapping[str, Any], candidate: Mapping[str, Any]) -> str:
    """:data:`BASE` for the shipped candidate, else its margin and task weight."""
    return BASE if candidate == shipped else \
        f"margin {candidate['margin']:g}, task weight {candidate['task_weight']:g}"


def _grid(shipped: Mapping[str, Any], bases: Sequence[Mapping[str, Any]],
          switches: Sequence[Mapping[str, Any]]
          ) -> tuple[list[Mapping[str, Any] | None], dict[str, dict[str, Any]]]:
    """(no switch and every switch, base name -> the shipped candidate varied by each
    base)."""
    return [None, *switches], {base_name(shipped, c): c
                               for c in ({**shipped, **b} for b in bases)}


def fold_fit(both: pd.DataFrame, arrays: Mapping[str, np.ndarray], train: np.ndarray,
             candidate: Mapping[str, Any]) -> dict[str, Any]:
    """``candidate``'s safe-split fitted on the rows of ``train``, as the fifth round's cross
    validation fits it (one residual-carrying ensemble, then the decision rule)."""
    sub = {k: v[train] for k, v in arrays.items()}
    ensemble = F.fit_safe(both[train], arrays=sub, alpha=candidate["alpha"], z=0.0, margin=0.0,
                          ood=None, task_weight=candidate["task_weight"], residual=True)
    return F.with_decision(ensemble, sub["T"], candidate["z"], candidate["margin"],
                           candidate["ood"], candidate["residual"])


def replay_costs(store: LatticeStore, rows: pd.DataFrame,
                 fits: Mapping[str, Mapping[str, Any]],
                 switches: Sequence[Mapping[str, Any] | None],
                 settings: Sequence[Settings] | None = None
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(name -> each row's mean cost, name -> whether the switch cut the AL phase): each fit
    of ``fits`` (its name -> its parameters) with each switch, replayed on each row's
    lattice (stored under ``settings``, one per row; default: its level's)."""
    names = [(base, s, switch_name(s, base)) for base in fits for s in switches]
    costs = {name: np.empty(len(rows)) for *_, name in names}
    fired = {name: np.zeros(len(rows), dtype=bool) for *_, name in names}
    if settings is None:
        settings = [LEVELS[level] for level in rows["level"]]
    for n, (_, row) in enumerate(rows.iterrows()):
        lattice = store.load(row["dataset"], int(row["seed"]), settings[n])
        for base, switch, name in names:
            agent = SafeSplit.from_entry({**fits[base], "switch": switch})
            costs[name][n] = lattice.mean_cost(lattice.replay(agent))
            fired[name][n] = agent.switched
    return costs, fired


def out_of_fold(store: LatticeStore, real: pd.DataFrame, tasks: pd.DataFrame,
                shipped: Mapping[str, Any],
                bases: Sequence[Mapping[str, Any]] = BASES,
                switches: Sequence[Mapping[str, Any]] = SWITCHES
                ) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, np.ndarray],
                           dict[str, np.ndarray], list[list[str]]]:
    """(candidates as (name, settings), each one's cost on every real cell scored by the fit
    on the other folds, whether its switch fired there (and, as :data:`SPLIT` and
    :data:`LR_FIRST`, whether the shipped fit left All-in-LR, and for a split whose AL
    phase follows LR rounds, the only one a switch can cut), the folds). ``shipped``: the
    shipped candidate, which ``bases`` vary (margin, task weight). Raises if a fit's replay
    without a switch differs from the fifth round's table cost of its split."""
    fold_list = F.folds(list(real["dataset"]))
    both = pd.concat([real, tasks], ignore_index=True)
    arrays = F.design(both)
    every, fits_of = _grid(shipped, bases, switches)
    keys = [(switch_name(s, name), {"margin": c["margin"], "task_weight": c["task_weight"],
                                    **(s or {})})
            for name, c in fits_of.items() for s in every]
    results = {name: np.full(len(real), np.nan) for name, _ in keys}
    fired = {name: np.zeros(len(real), dtype=bool) for name in [*results, SPLIT, LR_FIRST]}
    for fold in fold_list:
        out = real["dataset"].isin(fold).to_numpy()
        train = ~np.isin(arrays["groups"], list(set(real["group"][out])))
        fits = {name: fold_fit(both, arrays, train, c) for name, c in fits_of.items()}
        costs, cut = replay_costs(store, real[out], fits, every)
        for name, params in fits.items():
            splits = F.safe_choices(params, real[out])
            table = F.costs_of(real[out], splits)
            if not np.array_equal(costs[name], table):
                raise RuntimeError(f"{name}'s replay differs from its table cost on fold "
                                   f"{fold}: largest gap {np.abs(costs[name] - table).max():g}")
            if name == BASE:
                fired[SPLIT][out] = [split != ALL_IN_LR for split in splits]
                fired[LR_FIRST][out] = [split[0] == LR and 0 < split[1] < ALL_ROUNDS
                                        for split in splits]
        for name in costs:
            results[name][out], fired[name][out] = costs[name], cut[name]
    results["all-in-lr"] = real["all-in-lr"].to_numpy()
    return [*keys, ("all-in-lr", {})], results, fired, fold_list


def task_check(store: LatticeStore, real: pd.DataFrame, tasks: pd.DataFrame, point: int,
               shipped: Mapping[str, Any], switches: Sequence[Mapping[str, Any]],
               bases: Sequence[Mapping[str, Any]] = BASES) -> pd.DataFrame:
    """A look beyond the choice (it chooses nothing): every base alone and with each of
    ``switches``, scored out of fold on the real-anomaly task cells of the fold's groups
    (every task in ``tasks``, the fit reading the other groups' real cells and first
    ``point`` tasks). Per candidate: the share of the tasks' room (pooled), its standard
    error over the folds, the room lost where it loses, the share of tasks it loses on
    and where its switch fired."""
    fold_list = F.folds(list(real["dataset"]))
    both = pd.concat([real, tasks[tasks["k"] < point]], ignore_index=True)
    arrays = F.design(both)
    lookup = dict(task_cells(int(tasks["k"].max()) + 1, real=True))
    every, fits_of = _grid(shipped, bases, switches)
    names = [switch_name(s, b) for b in fits_of for s in every]
    costs = {name: np.full(len(tasks), np.nan) for name in names}
    fired = {name: np.zeros(len(tasks), dtype=bool) for name in names}
    fold_of = np.full(len(tasks), -1)
    for k, fold in enumerate(fold_list):
        groups = list(set(real["group"][real["dataset"].isin(fold)]))
        train = ~np.isin(arrays["groups"], groups)
        fits = {name: fold_fit(both, arrays, train, c) for name, c in fits_of.items()}
        scored = tasks["group"].isin(groups).to_numpy()
        part = tasks[scored]
        cost, cut = replay_costs(store, part, fits, every,
                                 [lookup[name] for name in part["dataset"]])
        for name in names:
            costs[name][scored], fired[name][scored] = cost[name], cut[name]
        fold_of[scored] = k
    return task_summary(tasks, costs, fired, fold_of)


def task_summary(tasks: pd.DataFrame, costs: Mapping[str, np.ndarray],
                 fired: Mapping[str, np.ndarray], fold_of: np.ndarray) -> pd.DataFrame:
    """:func:`task_check`'s table from each candidate's cost and switch on every task and
    each task's fold: the pooled share of the room (each task its own data set), its
    standard error over the folds, the room lost where it loses, the share of tasks it is
    dearer than All-in-LR on, and where its switch fired."""
    rows = []
    for name, cost in costs.items():
        per_fold = [F.level_shares(tasks[fold_of == k], cost[fold_of == k])["task"]
                    for k in np.unique(fold_of)]
        rows.append({"candidate": name, "share": F.level_shares(tasks, cost)["task"],
                     "se": float(np.std(per_fold, ddof=1) / np.sqrt(len(per_fold))),
                     "loss": F.loss_shares(tasks, cost)["task"],
                     "loses on": float(np.mean(cost > tasks["all-in-lr"].to_numpy() + 1e-12)),
                     "switch fired": float(fired[name].mean()), "tasks": len(tasks)})
    return pd.DataFrame(rows)


def nested(real: pd.DataFrame, keys: Sequence[tuple[str, Mapping[str, Any]]],
           results: Mapping[str, np.ndarray], fold_list: Sequence[Sequence[str]]
           ) -> pd.DataFrame:
    """Per outer fold and level: the harmless rule's choice on the other folds among every
    candidate (``choice``) and its share on the outer fold, beside the base's."""
    rows = []
    for k, outer in enumerate(fold_list):
        inner = [f for j, f in enumerate(fold_list) if j != k]
        choice = str(F.choose_safely(P.fold_table(real, keys, results, inner),
                                     harmless=True)["candidate"])
        mask = real["dataset"].isin(outer).to_numpy()
        chosen = F.level_shares(real[mask], results[choice][mask])
        base = F.level_shares(real[mask], results[BASE][mask])
        rows += [{"outer fold": k, "level": lv, "switch": chosen[lv], "base": base[lv],
                  "choice": choice} for lv in R.LEVELS]
    return pd.DataFrame(rows)


def reach(real: pd.DataFrame, fired: Mapping[str, np.ndarray], name: str) -> pd.DataFrame:
    """Per level and over all: the share of cells (out of fold) where the base leaves
    All-in-LR, where its split's AL phase follows LR rounds (what a switch can cut) and
    where ``name``'s switch cut it."""
    frame = pd.DataFrame({"level": real["level"].to_numpy(), SPLIT: fired[SPLIT],
                          LR_FIRST: fired[LR_FIRST], "switch fired": fired[name]}).astype(
        {SPLIT: float, LR_FIRST: float, "switch fired": float})
    table = frame.groupby("level", sort=False).mean()
    table.loc["all"] = frame.drop(columns="level").mean()
    return table.assign(cells=[*frame.groupby("level", sort=False).size(), len(frame)]
                        ).reset_index()


def per_dataset(real: pd.DataFrame, results: Mapping[str, np.ndarray],
                fired: Mapping[str, np.ndarray], name: str) -> pd.DataFrame:
    """Per level and training data set (out of fold, seed means): All-in-LR's cost, the
    base's and ``name``'s minus it, and the share of seeds where ``name``'s switch fired;
    only the rows where either leaves All-in-LR (elsewhere all three columns are 0)."""
    frame = real[["level", "dataset", "all-in-lr"]].assign(
        base=results[BASE], chosen=results[name], fired=fired[name].astype(float))
    means = frame.groupby(["level", "dataset"], sort=False).mean()
    table = pd.DataFrame({"all-in-lr": means["all-in-lr"],
                          "base - lr": means["base"] - means["all-in-lr"],
                          "switch - lr": means["chosen"] - means["all-in-lr"],
                          "switch fired": means["fired"]}).reset_index()
    moved = table[["base - lr", "switch - lr", "switch fired"]].ne(0.0).any(axis=1)
    return table[moved].reset_index(drop=True)


def study(out: Path, point: int = P.POINT, task_count: int = TASKS
          ) -> dict[str, pd.DataFrame]:
    """The comparison on ``safe_study``'s cached rows in ``out`` and its lattice store:
    the cross-validated figures of every candidate, the nested and paired comparison, the
    chosen switch's per-data-set figures (training sets, out of fold) and, beside, the
    chosen switch and the best in cross validation on ``task_count`` real-anomaly tasks
    per source (:func:`task_check`)."""
    real, tasks = load_rows(out, "train", 5), load_rows(out, "real", max(point, 1))
    tasks = tasks[tasks["k"] < point]
    candidate = base_candidate(packaged_params()["families"][BASE])
    store = LatticeStore(out / "lattices")
    keys, results, fired, fold_list = out_of_fold(store, real, tasks, candidate)
    table = P.fold_table(real, keys, results, fold_list)
    table["fired"] = [float(fired[n].mean()) if n in fired else 0.0 for n, _ in keys]
    ranked = table.sort_values("fold mean", ascending=False, kind="stable")
    chosen = str(F.choose_safely(table, harmless=True)["candidate"])
    outer = nested(real, keys, results, fold_list)
    shown = chosen if "switch" in chosen else switch_name(SWITCHES[0])  # a switch's figures
    keys_of: dict[str, dict[str, Any]] = {
        name: {k: c[k] for k in ("after", "threshold") if k in c} for name, c in keys}
    best = str(ranked[ranked["candidate"].str.contains("switch")].iloc[0]["candidate"])
    columns = ["candidate", "margin", "task_weight", "after", "threshold", "fired",
               *(f"{k} {lv}" for k in ("fold", "lower") for lv in R.LEVELS),
               "fold mean", "se mean", "loss"]
    summary = pd.concat([table[table["candidate"].isin([chosen, BASE])], ranked.head(TOP)]
                        ).drop_duplicates("candidate")[columns]
    return {"cv": summary, "choice": pd.DataFrame([{"rule": "harmless safety rule",
                                                     "choice": chosen}]),
            "outer": outer, "paired": P.paired(outer, new="switch", old="base"),
            "reach": reach(real, fired, shown),
            "tasks": task_check(store, real, load_rows(out, "real", task_count), point,
                                candidate, [keys_of[shown], keys_of[best]]),
            "per_dataset": per_dataset(real, results, fired, shown)}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "results" / "allocation_safe",
                   help="safe_study's folder (its cached rows and lattice store)")
    p.add_argument("--point", type=int, default=P.POINT, help="real tasks per source")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tables into docs/tables as allocation7_*")
    args = p.parse_args(argv)
    R.show_and_write(study(args.out, args.point),
                     R.tables_folder(args.out, args.update_docs),
                     prefix="allocation7", digits=4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
