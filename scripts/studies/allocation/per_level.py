"""A decision rule per cost level, and whether cross validation prefers it to one rule
(docs/studies/ALLOCATION.md, "Sixth round").

The composite candidate takes, at each of the three cost levels, the ``safe-split``
candidate (penalty, task weight, z, margin, trait check, residual) that the harmless safety
rule (``tasks_fit.choose_safely(..., harmless=True)``) picks from that level's figures
alone: lower bound (fold mean - one standard error) >= 0, within one standard error of the
best fold share, the least room lost. Its fold shares at a level are its chosen
candidate's there. At other costs it would play the rule of the level whose ``cost_ratio``
((log10(c_fn / c_fp) + 2) / 4) is nearest (``agents.split_allocators.nearest_level``):
c_fn / c_fp above sqrt(10) plays the c_fn = 10 rule, below 1 / sqrt(10) the c_fp = 10
rule, the default rule between.

Choosing three times from hundreds of candidates fits the folds' noise more than choosing
once, so the comparison is nested: for every outer fold, both rules choose on the other
four folds' figures (the out-of-fold costs of the one cross validation, regrouped) and are
scored on the outer fold it left out. The in-sample figures (choice and score on the same
five folds) are reported beside, their difference being the optimism of the choice.

    python -m scripts.studies.allocation.per_level --out /tmp/s2fit-study --update-docs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation import tasks_report as R
from scripts.studies.allocation.safe_study import GRID, is_safe, load_rows
from scripts.studies.common.options import REPO

#: The curve point (real-anomaly tasks per source) of the shipped allocator.
POINT = 10
#: The composite is preferred where its paired nested gain over the single rule exceeds
#: this many standard errors (the one-standard-error discipline of the harmless rule).
PREFER = 1.0
#: Rounding slack of that comparison: a gain on one outer fold of n is exactly one standard
#: error of the mean (sd of (g, 0, ..., 0) over sqrt(n) is g / n), never beyond it, whatever
#: the last bit of the arithmetic says.
TOLERANCE = 1e-12


def level_table(cv: pd.DataFrame, level: str) -> pd.DataFrame:
    """``cv`` (rows of ``tasks_fit.cv_row``) seen from one level: its fold share, standard
    error, lower bound and room lost as the ``fold mean``, ``se mean``, only lower bound
    and ``loss`` that ``choose_safely`` reads."""
    keep = [c for c in cv.columns if not c.startswith(("fold ", "se ", "lower ", "loss"))]
    return cv[keep].assign(**{"fold mean": cv[f"fold {level}"], "se mean": cv[f"se {level}"],
                              f"lower {level}": cv[f"lower {level}"],
                              "loss": cv[f"loss {level}"]})


def choose_per_level(cv: pd.DataFrame, eligible: Sequence[str] | None = None,
                     levels: Sequence[str] = R.LEVELS) -> dict[str, pd.Series]:
    """Per level, the harmless safety rule's choice from that level's figures alone
    (:func:`level_table`)."""
    return {level: F.choose_safely(level_table(cv, level), eligible, harmless=True)
            for level in levels}


def composite_costs(real: pd.DataFrame, results: Mapping[str, np.ndarray],
                    choices: Mapping[str, str]) -> np.ndarray:
    """Each real cell's cost under the candidate chosen for its level (``choices``: level
    -> candidate name)."""
    costs = np.full(len(real), np.nan)
    for level, name in choices.items():
        mask = (real["level"] == level).to_numpy()
        costs[mask] = results[name][mask]
    if np.isnan(costs).any():
        raise ValueError(f"no choice for levels {sorted(set(real['level'][np.isnan(costs)]))}")
    return costs


def results_of(results: Mapping[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """Every candidate's costs on the cells of ``mask``."""
    return {name: costs[mask] for name, costs in results.items()}


def fold_table(real: pd.DataFrame, keys: Sequence[tuple[str, Mapping[str, Any]]],
               results: Mapping[str, np.ndarray], fold_list: Sequence[Sequence[str]]
               ) -> pd.DataFrame:
    """Every candidate's cross-validated figures (``tasks_fit.cv_row``) on the folds
    ``fold_list`` only (the real cells of their data sets)."""
    mask = real["dataset"].isin([d for fold in fold_list for d in fold]).to_numpy()
    part = real[mask].reset_index(drop=True)
    return pd.DataFrame([F.cv_row(name, candidate, part, results[name][mask], fold_list)
                         for name, candidate in keys])


def nested(real: pd.DataFrame, keys: Sequence[tuple[str, Mapping[str, Any]]],
           results: Mapping[str, np.ndarray], fold_list: Sequence[Sequence[str]],
           eligible: Sequence[str]) -> pd.DataFrame:
    """Per outer fold and level: the single rule's and the per-level rule's choices on the
    other folds and their shares on the outer fold."""
    rows = []
    for k, outer in enumerate(fold_list):
        inner = [f for j, f in enumerate(fold_list) if j != k]
        table = fold_table(real, keys, results, inner)
        single = str(F.choose_safely(table, eligible, harmless=True)["candidate"])
        per = {lv: str(row["candidate"]) for lv, row in choose_per_level(table, eligible).items()}
        mask = real["dataset"].isin(outer).to_numpy()
        part = real[mask]
        one = F.level_shares(part, results[single][mask])
        many = F.level_shares(part, composite_costs(part, results_of(results, mask), per))
        for level in R.LEVELS:
            rows.append({"outer fold": k, "level": level, "single": one[level],
                         "per level": many[level], "single choice": single,
                         "per-level choice": per[level]})
    return pd.DataFrame(rows)


def summary(real: pd.DataFrame, results: Mapping[str, np.ndarray],
            fold_list: Sequence[Sequence[str]], table: pd.DataFrame, outer: pd.DataFrame,
            eligible: Sequence[str]) -> pd.DataFrame:
    """Per rule and level: the in-sample fold share (choice and score on all folds), the
    nested one (mean over outer folds, its standard error) and the optimism between."""
    single = str(F.choose_safely(table, eligible, harmless=True)["candidate"])
    per = {lv: str(r["candidate"]) for lv, r in choose_per_level(table, eligible).items()}
    in_sample = {"single": F.fold_shares(real, results[single], fold_list),
                 "per level": F.fold_shares(real, composite_costs(real, results, per),
                                            fold_list)}
    rows = []
    for rule in ("single", "per level"):
        record: dict[str, Any] = {"rule": rule}
        for level in [*R.LEVELS, "mean"]:
            values = outer.groupby("outer fold")[rule].mean() if level == "mean" else \
                outer[outer["level"] == level][rule]
            fit = float(np.mean([in_sample[rule][lv][0] for lv in R.LEVELS])) \
                if level == "mean" else in_sample[rule][level][0]
            nest, se = float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))
            record |= {f"in-sample {level}": fit, f"nested {level}": nest,
                       f"se {level}": se, f"lower {level}": nest - se,
                       f"optimism {level}": fit - nest}
        rows.append(record)
    return pd.DataFrame(rows)


def paired(outer: pd.DataFrame, new: str = "per level", old: str = "single") -> pd.DataFrame:
    """Per level and their mean: the ``new`` rule's nested share minus the ``old`` one's
    (columns of ``outer``; by default the per-level rule against the single rule), its mean
    over the outer folds and standard error (the same folds score both, so the difference
    is paired), and whether it clears one standard error: the new rule is preferred only
    where it gains by more than the folds' noise (:data:`PREFER`, :data:`TOLERANCE`)."""
    diff = outer.assign(gain=outer[new] - outer[old])
    parts = [(level, diff[diff["level"] == level]["gain"]) for level in R.LEVELS]
    parts.append(("mean", diff.groupby("outer fold")["gain"].mean()))
    rows = []
    for level, values in parts:
        mean, se = float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))
        rows.append({"level": level, f"{new} - {old}": mean, "se": se,
                     "preferred": bool(mean - PREFER * se > TOLERANCE)})
    return pd.DataFrame(rows)


def study(out: Path, point: int = POINT) -> dict[str, pd.DataFrame]:
    """The comparison on the cached rows of ``safe_study`` in ``out`` at ``point`` real
    tasks per source: the summary, the paired difference, the per-fold nested table and the
    per-level choices on every fold."""
    real, tasks = load_rows(out, "train", 5), load_rows(out, "real", max(point, 1))
    tasks = tasks[tasks["k"] < point]
    keys, results, fold_list = F.out_of_fold_costs(real, tasks, GRID)
    eligible = [n for n, c in keys if n == "all-in-lr" or (n.startswith("safe") and is_safe(c))]
    table = fold_table(real, keys, results, fold_list)
    outer = nested(real, keys, results, fold_list, eligible)
    per = choose_per_level(table, eligible)
    choices = pd.DataFrame([{"level": lv, "candidate": row["candidate"],
                             **{k: row.get(k) for k in GRID},
                             "fold": row["fold mean"], "se": row["se mean"],
                             "lower": row[f"lower {lv}"], "loss": row["loss"]}
                            for lv, row in per.items()])
    return {"nested": summary(real, results, fold_list, table, outer, eligible),
            "paired": paired(outer), "outer": outer, "choices": choices}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "results" / "allocation_safe",
                   help="safe_study's folder (its cached rows)")
    p.add_argument("--point", type=int, default=POINT, help="real tasks per source")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tables into docs/tables as allocation6_*")
    args = p.parse_args(argv)
    R.show_and_write(study(args.out, args.point),
                     R.tables_folder(args.out, args.update_docs),
                     prefix="allocation6", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
