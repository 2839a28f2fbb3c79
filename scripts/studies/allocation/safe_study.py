"""The allocator safe by construction, chosen by the safety rule over grouped cross
validation and learned from real-anomaly tasks (docs/studies/ALLOCATION.md, "Fourth round"
and "Fifth round").

``--build`` builds the lattices (resumable, ``<out>/lattices``, in the stages of
``tasks_study.build``): the 15 training data sets of ``docs/allocation_split.json`` at the
three cost levels (``--train-seeds``), the held-out data sets (``--held-seeds``) and
``--real-tasks-per-source`` real-anomaly tasks of each training source at their own costs
(``task/<source>/real-<k>``, seed 0). The run then, at every point of the learning curve
(:data:`CURVE` real tasks per source, those built), cross-validates every ``safe-split``
candidate of :data:`GRID` over the training folds (``tasks_fit.cross_validate``: fold
means, standard errors and lower bounds per level), and chooses the allocator by
``tasks_fit.choose_safely`` among the candidates safe by construction (a lower bound on the
gain, z > 0, and the trait-distance check) and All-in-LR, over every point at once, by its
harmless variant (``harmless=True``: within one standard error of the best fold mean, the
least room lost where the candidate loses; the fourth round took the largest fold mean,
shown beside it). The choice is refitted on every training row, replayed on the held-out
cells (table costs must equal the agent's replay) and, with ``--update-docs``, packaged as
``safe-split-3`` and named ``allocator`` in agents/allocation_params.json, its tables
written as ``docs/tables/allocation5_*``. No reserved data set is read; no task comes from a
held-out or reserved group.

    python -m scripts.studies.allocation.safe_study --build --build-only \\
        --real-tasks-per-source 100 --n-jobs 2
    python -m scripts.studies.allocation.safe_study --real-tasks-per-source 100 --update-docs
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.split_allocators import SafeSplit
from ballad_env.replay.store import LatticeStore
from scripts.studies.allocation import calibration as C
from scripts.studies.allocation import meta_features as M
from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation import tasks_report as R
from scripts.studies.allocation.tasks_cells import real_rows, task_rows
from scripts.studies.allocation.tasks_study import build, replay_check, task_cells
from scripts.studies.common.options import REPO
from scripts.studies.common.split import load_split, played_names

#: Learning-curve points: real-anomaly tasks per training source (a point is skipped
#: unless every source's tasks up to it are built).
CURVE = (0, 10, 20, 40, 50, 60, 70, 100, 150, 200)
#: The candidates: every ``safe-split`` setting of the third round's kind, with and without
#: the fallback's two parts (z = 0: no lower bound; ood None: no trait check), so the
#: ablation can show what the fallback does; wider bounds and margins, and the bound with
#: the out-of-bag residual (``residual``). Only candidates with both parts may ship.
GRID: dict[str, Sequence[Any]] = {"alpha": (10.0, 100.0), "z": (0.0, 0.5, 1.0, 1.5),
                                  "margin": (0.0, 0.002, 0.005),
                                  "ood": (None, 0.9, 0.95, 0.99),
                                  "task_weight": (0.25, 1.0), "residual": (False, True)}
#: Registered agents replayed on every real cell beside the new fit.
AGENTS = ("all-in-al", "ballad", "maskable-ppo", "imitation", "split-rule", "safe-split",
          "fixed-split-by-cost")
#: The packaged entry of the chosen fit.
ENTRY = "safe-split-3"
#: The fourth round's rule (the largest fold mean among the safe candidates) on this grid:
#: it chooses the fit packaged as ``safe-split-2``, the allocator this round replaces.
SECOND = "safe-split-2 (safety rule, largest fold mean)"
#: Agents of the per-data-set table.
PER_DATASET = ("allocator", SECOND, "maskable-ppo")


def is_safe(candidate: Mapping[str, Any]) -> bool:
    """Whether a safe-split candidate carries the whole fallback: a lower bound (z > 0) and
    the trait-distance check (an ``ood`` quantile)."""
    ood = candidate.get("ood")
    return bool(candidate.get("z", 0.0) > 0 and ood is not None and not pd.isna(ood))


def load_rows(out: Path, kind: str, count: int) -> pd.DataFrame:
    """Rows of the training sets (``train``) or held-out sets (``held_out``) at ``count``
    seeds, or of the first ``count`` real-anomaly tasks per source (``real``), read from the
    store once and cached in ``<out>/rows4_<kind>_<count>.pkl``."""
    path = out / f"rows4_{kind}_{count}.pkl"
    if path.exists():
        return pd.read_pickle(path)
    store = LatticeStore(out / "lattices")
    if kind == "real":
        rows = task_rows(store, task_cells(count, real=True))
        rows["k"] = [int(n.rsplit("-", 1)[1]) for n in rows["dataset"]]
    else:
        rows = real_rows(store, played_names(load_split()[kind]), range(count), AGENTS)
    rows.to_pickle(path)
    return rows


def _settings(row: pd.Series) -> dict[str, Any]:
    """A cross-validation row's candidate as ``fit_safe``'s keywords."""
    return {k: (None if k == "ood" and pd.isna(row[k]) else
                bool(row[k]) if k == "residual" else row[k]) for k in GRID}


def digest(*frames: pd.DataFrame) -> str:
    """A short hash of what the cross validation reads of the rows (names, levels, seeds,
    costs, observations) and of :data:`GRID`: a cached cross validation is read back only
    for the very same inputs."""
    h = hashlib.sha256(repr(sorted((k, tuple(map(str, v))) for k, v in GRID.items())).encode())
    for frame in frames:
        for _, row in frame.iterrows():
            h.update(f"{row['dataset']}|{row['level']}|{row['seed']}|{row['all-in-lr']!r}|"
                     f"{row['optimal']!r}".encode())
            h.update(np.ascontiguousarray(row["split_costs"], float).tobytes())
            h.update(np.ascontiguousarray(row["obs"], float).tobytes())
    return h.hexdigest()[:16]


def cross_validations(real: pd.DataFrame, tasks: pd.DataFrame, cache: Path | None = None
                      ) -> pd.DataFrame:
    """Every curve point's cross validation in one table (``point``: tasks per source;
    ``safe``: whether the candidate may ship), with the CPU seconds of each point; with
    ``cache`` (a folder), each point's table is kept as ``cv5_<point>_<digest>.pkl`` and
    read back for the same inputs (:func:`digest`)."""
    tables = []
    for n in CURVE:
        chosen = tasks[tasks["k"] < n]
        if n and (chosen.groupby("group")["k"].nunique().reindex(
                sorted(set(real["group"])), fill_value=0) < n).any():
            continue
        path = None if cache is None else cache / f"cv5_{n}_{digest(real, chosen)}.pkl"
        if path is not None and path.exists():
            tables.append(pd.read_pickle(path))
            continue
        start = time.process_time()
        cv = F.cross_validate(real, chosen, GRID)
        cv["safe"] = [name == "all-in-lr" or (name.startswith("safe") and is_safe(row))
                      for name, (_, row) in zip(cv["candidate"], cv.iterrows(), strict=True)]
        cv = cv.assign(point=n, tasks=int(len(chosen)), cpu_s=time.process_time() - start)
        if path is not None:
            cv.to_pickle(path)
        tables.append(cv)
    return pd.concat(tables, ignore_index=True)


def pick(cv: pd.DataFrame, safe_only: bool = True, rule: str = "harmless") -> pd.Series:
    """The chosen row over every point: the safety rule among the shippable candidates
    (``safe_only``) or all, in its harmless variant (``rule="harmless"``) or the fourth
    round's (``"safe"``: the largest fold mean), or (``"pooled"``) the third round's rule
    (largest pooled mean among candidates pooled >= 0 at every level)."""
    table = cv[cv["safe"]] if safe_only else cv
    table = table.assign(candidate=[f"{p}|{c}" for p, c in zip(table["point"],
                                                                table["candidate"],
                                                                strict=True)])
    if rule == "pooled":
        return F.best_candidate(table.assign(candidate="safe " + table["candidate"]))
    return F.choose_safely(table, harmless=rule == "harmless")


def paper_table(both: pd.DataFrame, costs: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Per paper data set at default costs: All-in-LR's mean cost, each agent's minus it,
    and whether the set is a training set (in-sample for the fit)."""
    frame = R.paper_means(both, both["all-in-lr"].to_numpy())[["all-in-lr"]]
    for name, values in costs.items():
        frame[f"{name} - lr"] = R.paper_means(both, values)["agent"] - frame["all-in-lr"]
    train = set(played_names(load_split()["train"]))
    return frame.reset_index().assign(training=lambda f: f["dataset"].isin(train))


def calibration(real: pd.DataFrame, tasks: pd.DataFrame, row: pd.Series) -> pd.DataFrame:
    """The lower bound's coverage over the training folds (``calibration.coverage``) for the
    chosen row's penalty and task weight at its point (the bound's width varies)."""
    chosen = tasks[tasks["k"] < int(row["point"])]
    settings = _settings(row) | {"z": 0.0, "margin": 0.0, "ood": None}
    return C.coverage(C.out_of_fold(real, chosen, settings))


def fit_choice(real: pd.DataFrame, tasks: pd.DataFrame, row: pd.Series) -> dict[str, Any]:
    """The chosen row's safe-split fitted on every training row of its point."""
    chosen = tasks[tasks["k"] < int(row["point"])]
    training = F.training_rows(real, chosen, sorted(set(real["group"])))
    return F.fit_safe(training, **_settings(row))


def curve(cv: pd.DataFrame, real: pd.DataFrame, tasks: pd.DataFrame,
          held: pd.DataFrame) -> pd.DataFrame:
    """Per curve point: the safety rule's choice among the shippable candidates there, its
    cross-validated and held-out shares with standard errors."""
    rows = []
    for n, part in cv.groupby("point", sort=True):
        best = pick(part)
        record: dict[str, Any] = {"tasks per source": n,
                                  "real tasks": int(part["tasks"].iloc[0]),
                                  "choice": str(best["candidate"]).split("|", 1)[1]}
        record |= {k: best.get(k) for k in GRID}
        record |= {f"cv {lv}": best[f"fold {lv}"] for lv in R.LEVELS}
        record |= {f"cv lower {lv}": best[f"lower {lv}"] for lv in R.LEVELS}
        costs = held["all-in-lr"].to_numpy()
        if best["candidate"].split("|", 1)[1] != "all-in-lr":
            costs = F.costs_of(held, F.safe_choices(fit_choice(real, tasks, best), held))
        shares = R.shares_with_se(held, costs)
        for level in R.LEVELS:
            record[f"held {level}"], record[f"se {level}"] = shares[level]
        record["held mean"] = float(np.mean([shares[lv][0] for lv in R.LEVELS]))
        record["cpu s"] = float(part["cpu_s"].iloc[0])
        rows.append(record)
    return pd.DataFrame(rows)


def meta_table(out: Path, names: Sequence[str]) -> pd.DataFrame:
    """The label-free meta-features of ``names``, computed once and cached in
    ``<out>/meta.pkl`` (names missing there are added)."""
    path = out / "meta.pkl"
    known = pd.read_pickle(path) if path.exists() else pd.DataFrame(columns=M.NAMES)
    missing = [n for n in dict.fromkeys(names) if n not in known.index]
    if missing:
        known = pd.concat([known, M.table(missing)]) if len(known) else M.table(missing)
        known.to_pickle(path)
    return known


def meta_ablation(out: Path, real: pd.DataFrame, tasks: pd.DataFrame,
                  held: pd.DataFrame, point: int) -> pd.DataFrame:
    """The meta-features' grouped ablation at ``point`` tasks per source (shippable
    candidates only), and each variant's choice refitted and replayed on the held-out
    cells (a measurement: the variants are not packaged, since the lattices do not hold
    the meta-features)."""
    chosen = tasks[tasks["k"] < point]
    meta = meta_table(out, [*real["dataset"], *chosen["dataset"], *held["dataset"]])
    grid = {**GRID, "z": tuple(z for z in GRID["z"] if z > 0),
            "ood": tuple(q for q in GRID["ood"] if q is not None)}
    table = M.ablation(real, chosen, meta, grid)
    training = F.training_rows(real, chosen, sorted(set(real["group"])))
    cv_rows = []
    for _, row in table.iterrows():
        names = {"none": (), "all": M.NAMES}.get(row["meta-features"],
                                                 M.GROUPS.get(row["meta-features"], ()))
        if row["choice"] == "all-in-lr":
            costs = held["all-in-lr"].to_numpy()
        else:
            settings = _settings(row["settings"])
            arrays, held_arrays = F.design(training), F.design(held)
            if names:
                arrays = M.with_meta(arrays, training, meta, names)
                held_arrays = M.with_meta(held_arrays, held, meta, names)
            params = F.fit_safe(training, arrays=arrays, **settings)
            costs = F.costs_of(held, F.safe_choices(params, held, held_arrays))
        shares = R.shares_with_se(held, costs)
        cv_rows.append({f"held {lv}": shares[lv][0] for lv in R.LEVELS}
                       | {f"held se {lv}": shares[lv][1] for lv in R.LEVELS})
    return pd.concat([table.drop(columns="settings"), pd.DataFrame(cv_rows)], axis=1)


def run(out: Path, train_seeds: int, held_seeds: int, real_per_source: int,
        docs: Path | None, params: Path | None, meta_point: int | None = None
        ) -> dict[str, Any]:
    """The study on the built store (the module docstring); ``meta_point``: run the
    meta-features' ablation at that many tasks per source."""
    real, held = load_rows(out, "train", train_seeds), load_rows(out, "held_out", held_seeds)
    tasks = load_rows(out, "real", real_per_source)
    cv = cross_validations(real, tasks, cache=out)
    chosen = pick(cv)
    if str(chosen["candidate"]).endswith("|all-in-lr"):
        raise RuntimeError("the safety rule chose All-in-LR: no safe-split candidate clears "
                           "0 at every level; nothing new to ship")
    ablations = {SECOND: pick(cv, rule="safe"),
                 "harmless safety rule, any candidate (fallback optional)": pick(cv, False),
                 "third round's rule (pooled), any candidate": pick(cv, False, "pooled")}
    fitted = {"allocator": fit_choice(real, tasks, chosen)}
    fitted |= {name: fit_choice(real, tasks, row) for name, row in ablations.items()}
    columns = {name: F.costs_of(held, F.safe_choices(p, held)) for name, p in fitted.items()}
    columns |= {name: held[name].to_numpy() for name in AGENTS}
    columns["best-split-per-cell"] = held["best-fixed-per-cell"].to_numpy()
    both = pd.concat([real, held], ignore_index=True)
    paper = {name: R.paper_check(both, np.concatenate([F.costs_of(real, F.safe_choices(p, real)),
                                                       columns[name]]))
             for name, p in fitted.items()}
    paper |= {name: R.paper_check(both, both[name].to_numpy()) for name in AGENTS}
    paper_costs = {name: np.concatenate([F.costs_of(real, F.safe_choices(fitted[name], real)),
                                         columns[name]]) for name in ("allocator", SECOND)}
    shares = R.shares_frame(held, columns, paper)
    check = replay_check(LatticeStore(out / "lattices"), held,
                         {"allocator": lambda: SafeSplit.from_entry(fitted["allocator"])},
                         columns)
    if max(check.values()) > 1e-12:
        raise RuntimeError(f"a table cost differs from the agent's replay: {check}")
    if params is not None:
        entry = {**fitted["allocator"], "candidate": _settings(chosen),
                 "cv": {lv: float(chosen[f"fold {lv}"]) for lv in R.LEVELS},
                 "cv_lower": {lv: float(chosen[f"lower {lv}"]) for lv in R.LEVELS},
                 "real_tasks_per_source": int(chosen["point"]),
                 "chosen_by": "the harmless safety rule over grouped 5-fold cross validation "
                              "on the 15 training data sets of docs/allocation_split.json "
                              "(among candidates with a lower bound and the trait check whose "
                              "every level's mean over folds - one standard error is >= 0 "
                              "and whose mean share over the levels is within one standard "
                              "error of the best, the least room lost where it loses), "
                              "real-anomaly tasks from the training groups only; no held-out "
                              "or reserved data set"}
        R.write_entries(params, {ENTRY: entry}, allocator=ENTRY)
    target = docs if docs is not None else out
    learning = curve(cv, real, tasks, held)
    cv_columns = ["point", "candidate", *GRID, "safe",
                  *(f"{k} {lv}" for k in ("fold", "se", "lower") for lv in R.LEVELS),
                  "fold mean", "se mean", "loss"]
    ranked = cv.sort_values("fold mean", ascending=False)
    point, name = str(chosen["candidate"]).split("|", 1)
    top = pd.concat([cv[(cv["point"] == int(point)) & (cv["candidate"] == name)],
                     ranked[ranked["safe"]].head(8), ranked[~ranked["safe"]].head(4)])
    R.write_all({"shares": shares, "curve": learning, "cv": top[cv_columns],
                 "choice": pd.DataFrame([{"rule": "harmless safety rule, shippable (the "
                                                  "allocator)",
                                          "choice": chosen["candidate"]}] + [
                     {"rule": k, "choice": v["candidate"]} for k, v in ablations.items()]),
                 "per_dataset": R.per_dataset(held, {k: columns[k] for k in PER_DATASET}),
                 "calibration": calibration(real, tasks, chosen),
                 "paper": paper_table(both, paper_costs)},
                target / "tables", prefix="allocation5")
    if meta_point is not None:
        R.write_all({"meta": meta_ablation(out, real, tasks, held, meta_point)},
                    target / "tables", prefix="allocation5")
    fixed_held = R.shares_with_se(held, columns["safe-split"])
    R.curve_figure(learning, {lv: fixed_held[lv][0] for lv in R.LEVELS},
                   target / "figures" / "allocation5_curve.png",
                   labels=("safe-3", "safe-split (third round)",
                           "real-anomaly training tasks (beside the 15 real training sets)"))
    return {"shares": shares, "curve": learning, "check": check, "chosen": chosen}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "results" / "allocation_safe",
                   help="the store (<out>/lattices), the cached rows and the trial's tables")
    p.add_argument("--build", action="store_true", help="build the missing lattices first")
    p.add_argument("--build-only", action="store_true", help="stop after --build")
    p.add_argument("--train-seeds", type=int, default=5, help="seeds per training cell")
    p.add_argument("--held-seeds", type=int, default=10, help="seeds per held-out cell")
    p.add_argument("--real-tasks-per-source", type=int, default=40,
                   help="real-anomaly tasks per training source (built and read)")
    p.add_argument("--n-jobs", type=int, default=1, help="local worker processes")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tables and figure into docs/ and the chosen fit into "
                   "agents/allocation_params.json as the allocator")
    p.add_argument("--meta-point", type=int, default=None,
                   help="run the meta-features' ablation at this many tasks per source")
    args = p.parse_args(argv)
    if args.build:
        build(args.out, args.train_seeds, args.held_seeds, 0, args.n_jobs,
              args.real_tasks_per_source, ("train", "held_out", "real"))
        if args.build_only:
            return 0
    result = run(args.out, args.train_seeds, args.held_seeds, args.real_tasks_per_source,
                 REPO / "docs" if args.update_docs else None,
                 REPO / "agents" / "allocation_params.json" if args.update_docs else None,
                 args.meta_point)
    print(result["shares"].round(3).to_string(index=False))
    print(result["curve"].round(3).to_string(index=False))
    print(f"replay check {result['check']}; chosen {result['chosen']['candidate']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
