"""The allocator study's analysis over the replayed tables: the trait switch's fit, tuning on
the training data sets, held-out and leave-three-out evaluation, the paired changes and
the report's tables.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.allocators import TraitSwitch
from ballad_env.episode import AL
from ballad_env.replay.lattice import Lattice
from scripts.studies.allocators.cells import (
    BASELINES,
    CELL,
    NEW_ALLOCATORS,
    PARAM_GRIDS,
    TRAIT_L2,
    TRAIT_PROBE,
    iter_lattices,
)


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = TRAIT_L2,
                 iterations: int = 50) -> tuple[np.ndarray, float]:
    """Weighted logistic regression with an L2 penalty on the coefficients (not the
    intercept), by Newton's method: minimises sum w (log(1 + e^s) - y s) + l2/2 |coef|^2
    with s = intercept + x @ coef. Returns (coef, intercept)."""
    x = np.asarray(x, dtype=float)
    design = np.column_stack([np.ones(len(x)), x])
    penalty = np.full(design.shape[1], float(l2))
    penalty[0] = 0.0
    beta = np.zeros(design.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (weight * (p - y)) + penalty * beta
        hessian = (design * (weight * p * (1 - p))[:, None]).T @ design + np.diag(penalty)
        hessian[0, 0] += 1e-9
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta[1:], float(beta[0])


def fit_trait_switch(traits: pd.DataFrame, datasets: Sequence[str]) -> dict[str, Any]:
    """The trait switch's parameters fitted on the cells of ``datasets``: label 1 where
    continuing with AL is cheaper (mean cost) than with LR, each cell weighted by the cost
    difference, so the fit minds the cells where the choice matters; traits standardised."""
    rows = traits[traits["dataset"].isin(list(datasets))]
    x = rows[list(TraitSwitch.TRAITS)].to_numpy(dtype=float)
    center, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    diff = (rows["lr_mean_cost"] - rows["al_mean_cost"]).to_numpy()
    weight = np.abs(diff) / max(np.abs(diff).mean(), 1e-12)
    coef, intercept = fit_logistic((x - center) / scale, (diff > 0).astype(float), weight)
    return {"coef": coef.tolist(), "intercept": intercept, "center": center.tolist(),
            "scale": scale.tolist(), "probe": TRAIT_PROBE}


def trait_switch_paths(traits: pd.DataFrame, train: Sequence[str], evaluate: Sequence[str]
                       ) -> pd.DataFrame:
    """Per cost tag, the trait switch fitted on ``train``: its path rows on ``evaluate``
    (the continuation it chooses), as ``tuned_paths`` gives them (``chosen``: the fit)."""
    parts = []
    for _, rows in traits.groupby("costs", sort=True):
        params = fit_trait_switch(rows, train)
        agent = TraitSwitch(**params)
        cells = rows[rows["dataset"].isin(list(evaluate))]
        x = cells[list(TraitSwitch.TRAITS)].to_numpy(dtype=float)
        al = agent.intercept + ((x - agent.center) / agent.scale) @ agent.coef > 0.0
        out = cells[CELL].copy()
        for key in ("mean_cost", "final_cost", "regret", "al_share"):
            out[key] = np.where(al, cells[f"al_{key}"], cells[f"lr_{key}"])
        label = "trait-switch[" + ",".join(f"{c:.2f}" for c in agent.coef) \
            + f";{agent.intercept:.2f}]"
        parts.append(out.assign(allocator="trait-switch", family="trait-switch", chosen=label))
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------- tuning


def select_params(paths: pd.DataFrame, datasets: Sequence[str]) -> dict[tuple[str, str], str]:
    """(cost tag, family) -> the candidate label with the lowest mean cost over the cells of
    ``datasets`` (both priors pooled), for every family with a parameter grid."""
    rows = paths[paths["dataset"].isin(list(datasets)) & paths["family"].isin(list(PARAM_GRIDS))]
    means = rows.groupby(["costs", "family", "allocator"], sort=True)["mean_cost"].mean()
    best = means.groupby(level=["costs", "family"]).idxmin()
    return {(c, f): label for (c, f), (_, _, label) in best.items()}


def with_yardsticks(paths: pd.DataFrame) -> pd.DataFrame:
    """The paths plus two hindsight yardsticks: ``best-fixed-per-dataset`` (the fixed split
    with the lowest mean over a data set's seeds, per cost tag and prior) and
    ``best-fixed-per-cell``."""
    fixed = paths[paths["family"] == "fixed"]
    per_dataset = fixed.groupby(["costs", "prior", "dataset", "allocator"])["mean_cost"].mean()
    chosen = per_dataset.groupby(level=["costs", "prior", "dataset"]).idxmin()
    keep = set(chosen.tolist())
    keys = list(zip(fixed["costs"], fixed["prior"], fixed["dataset"], fixed["allocator"],
                    strict=True))
    by_dataset = fixed[[k in keep for k in keys]].assign(
        allocator="best-fixed-per-dataset", family="hindsight")
    idx = fixed.groupby(CELL)["mean_cost"].idxmin()
    by_cell = fixed.loc[idx].assign(allocator="best-fixed-per-cell", family="hindsight")
    return pd.concat([paths, by_dataset, by_cell], ignore_index=True)


def tuned_paths(paths: pd.DataFrame, selection: dict[tuple[str, str], str],
                datasets: Sequence[str]) -> pd.DataFrame:
    """The rows of ``datasets`` with each tuned family reduced to its selected candidate
    (named by the family, its label in ``chosen``); the fixed splits dropped (All-in-LR is
    a replayed agent) and the hindsight yardsticks added."""
    rows = with_yardsticks(paths[paths["dataset"].isin(list(datasets))])
    keep = ~rows["family"].isin(list(PARAM_GRIDS)) & (rows["family"] != "fixed")
    parts = [rows[keep].assign(chosen=rows.loc[keep, "allocator"])]
    for (tag, family), label in selection.items():
        part = rows[(rows["costs"] == tag) & (rows["allocator"] == label)]
        parts.append(part.assign(allocator=family, chosen=label))
    return pd.concat(parts, ignore_index=True)


def heldout_paths(paths: pd.DataFrame, train: Sequence[str], held_out: Sequence[str]
                  ) -> pd.DataFrame:
    """Allocators tuned on ``train``, their paths on ``held_out``."""
    return tuned_paths(paths, select_params(paths, train), held_out).assign(fold=0)


def leave_three_out_folds(datasets_by_size: Sequence[str], n_folds: int = 6) -> list[list[str]]:
    """Folds of data sets: fold f holds every n_folds-th data set from the f-th, so each
    fold mixes small and large ones and each data set is held out once."""
    names = list(datasets_by_size)
    return [names[f::n_folds] for f in range(n_folds)]


def cross_validated_paths(paths: pd.DataFrame, folds: Sequence[Sequence[str]]) -> pd.DataFrame:
    """For each fold: allocators tuned on the other data sets, their paths on the fold."""
    names = sorted(set(paths["dataset"]))
    parts = []
    for f, fold in enumerate(folds):
        train = [n for n in names if n not in fold]
        parts.append(tuned_paths(paths, select_params(paths, train), fold).assign(fold=f))
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------- tables
#: Allocators that rank against each other within a cell (deployable: no test labels).
RANKED = (*BASELINES, *PARAM_GRIDS, "trait-switch")
YARDSTICKS = ("optimal", "best-fixed-per-cell", "best-fixed-per-dataset", "oracle")


def summary(tuned: pd.DataFrame, by: Sequence[str] = ("costs", "prior")) -> pd.DataFrame:
    """Per ``by`` and allocator: mean cost, regret, rank among the deployable allocators,
    AL share, cost and regret relative to All-in-LR, and the share of cells where it is
    cheaper than All-in-LR."""
    by = list(by)
    frame = tuned.copy()
    ranked = frame["allocator"].isin(RANKED)
    frame.loc[ranked, "rank"] = frame[ranked].groupby(CELL)["mean_cost"].rank(method="average")
    lr = frame[frame["allocator"] == "all-in-lr"].set_index(CELL)["mean_cost"]
    frame["beats_lr"] = frame["mean_cost"].to_numpy() < lr.reindex(
        pd.MultiIndex.from_frame(frame[CELL])).to_numpy() - 1e-12
    out = frame.groupby([*by, "allocator"]).agg(
        cost=("mean_cost", "mean"), regret=("regret", "mean"), rank=("rank", "mean"),
        al_share=("al_share", "mean"), beats_lr=("beats_lr", "mean"), cells=("mean_cost", "size"))
    base = out.xs("all-in-lr", level="allocator")
    keys = [tuple(k) if isinstance(k, tuple) else (k,) for k in out.index.droplevel("allocator")]
    out["cost_vs_lr"] = [c / base.loc[k if len(k) > 1 else k[0], "cost"] - 1
                         for c, k in zip(out["cost"], keys, strict=True)]
    out["regret_vs_lr"] = [r / base.loc[k if len(k) > 1 else k[0], "regret"]
                           for r, k in zip(out["regret"], keys, strict=True)]
    return out.reset_index()


def goal_table(tuned: pd.DataFrame) -> pd.DataFrame:
    """The issue's goal per allocator: cost and regret relative to All-in-LR's, averaged
    over both priors, per cost tag; ``goal`` is true at <= -10% cost and <= 0.5 regret."""
    per = summary(tuned, ("costs", "prior"))
    out = per.groupby(["costs", "allocator"])[["cost_vs_lr", "regret_vs_lr"]].mean()
    out["goal"] = (out["cost_vs_lr"] <= -0.10) & (out["regret_vs_lr"] <= 0.5)
    return out.reset_index()


def signal_accuracy(signals: pd.DataFrame, datasets: Sequence[str] | None = None
                    ) -> pd.DataFrame:
    """Per cost tag, prior, signal and mode: states, accuracy (correct / voted), coverage
    (voted / states) and the share of states where AL is the better action."""
    rows = signals if datasets is None else signals[signals["dataset"].isin(list(datasets))]
    sums = rows.groupby(["costs", "prior", "signal", "mode"], sort=False)[
        ["states", "voted", "correct", "al_better"]].sum()
    out = pd.DataFrame({"states": sums["states"],
                        "accuracy": sums["correct"] / sums["voted"].where(sums["voted"] > 0),
                        "coverage": sums["voted"] / sums["states"].where(sums["states"] > 0),
                        "al_better": sums["al_better"] / sums["states"].where(sums["states"] > 0)})
    return out.reset_index()


# ---------------------------------------------------------------------------- paired changes
def paired_rows(lattice: Lattice) -> list[dict[str, Any]]:
    """One row per state (i, j), j >= 1, where AL can be taken: the AL round's change of the
    validation-sample cost (``dv``: paired, the same V labels before and after) and of the
    test cost (``dt``), the standard error there (``se``), and for i >= 1 the previous AL
    round's ``dv_prev``, which a rule sees before deciding (NaN at i = 0)."""
    vs, se, cost = lattice.grid["val_sample_cost"], lattice.grid["val_sample_se"], lattice.cost
    rows = []
    for i in range(lattice.n_rounds):
        for j in range(1, lattice.n_rounds - i):
            if not lattice.can_move(i, j, AL):
                continue
            rows.append({"i": i, "j": j, "dv": float(vs[i + 1, j] - vs[i, j]),
                         "dt": float(cost[i + 1, j] - cost[i, j]), "se": float(se[i, j]),
                         "dv_prev": float(vs[i, j] - vs[i - 1, j]) if i else float("nan")})
    return rows


def paired_change_stats(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cost tag and prior: how well an AL round's paired validation-sample change
    tracks its test change (``corr``; ``sign_agreement`` where both moved), how often it
    is 0, the median standard error against the median test change, the mean test change
    when V says better or worse, and how well the previous round's change predicts the next
    (``corr_lagged``, what a rule can use)."""
    def stats(g: pd.DataFrame) -> pd.Series:
        moved = (g["dv"] != 0) & (g["dt"] != 0)
        lag = g.dropna(subset=["dv_prev"])
        return pd.Series({
            "states": len(g), "corr": g["dv"].corr(g["dt"]),
            "sign_agreement": float(np.mean(np.sign(g.loc[moved, "dv"])
                                            == np.sign(g.loc[moved, "dt"]))),
            "dv_zero": float(np.mean(g["dv"] == 0)),
            "median_se": float(g["se"].median()), "median_abs_dt": float(g["dt"].abs().median()),
            "dt_if_v_better": float(g.loc[g["dv"] < 0, "dt"].mean()),
            "dt_if_v_worse": float(g.loc[g["dv"] > 0, "dt"].mean()),
            "corr_lagged": lag["dv_prev"].corr(lag["dt"])})
    out = rows.groupby(["costs", "prior"])[list(rows.columns)].apply(stats).reset_index()
    return out.astype({"states": int})


def paired_change_frame(root: Path, costs: Sequence[str], priors: Sequence[str],
                        datasets: Sequence[str], seeds: Iterable[int]) -> pd.DataFrame:
    """:func:`paired_rows` of every cached lattice, tidy."""
    seeds = list(seeds)
    return pd.DataFrame([{"costs": tag, "prior": prior, "dataset": name, "seed": seed, **row}
                         for tag, prior in itertools.product(costs, priors)
                         for name, seed, lattice in iter_lattices(root, tag, prior, datasets,
                                                                  seeds)
                         for row in paired_rows(lattice)])


def paired_change_table(root: Path, costs: Sequence[str], priors: Sequence[str],
                        datasets: Sequence[str], seeds: Iterable[int]) -> pd.DataFrame:
    """:func:`paired_change_stats` over every cached lattice."""
    return paired_change_stats(paired_change_frame(root, costs, priors, datasets, seeds))


def detection_rounds(rows: pd.DataFrame, first: int = 3, z: float = 2.0) -> pd.DataFrame:
    """Per cost tag, prior and data set: how many paired AL-round measurements it takes to
    tell the sign of AL's mean effect at ``z`` standard errors, n = (z sd(dv) / mean(dv))^2,
    over all states (``rounds``) and over the first ``first`` AL rounds (i < first,
    ``rounds_early``: what a rule that must decide early sees); with the mean test change
    of an AL round (``dt``) and the mean paired change (``dv``)."""
    def stats(g: pd.DataFrame) -> pd.Series:
        early = g[g["i"] < first]
        need = [(z * part["dv"].std() / abs(part["dv"].mean())) ** 2
                if part["dv"].mean() != 0 else float("inf") for part in (g, early)]
        return pd.Series({"dt": g["dt"].mean(), "dv": g["dv"].mean(), "sd_dv": g["dv"].std(),
                          "rounds": need[0], "rounds_early": need[1]})
    keys = ["costs", "prior", "dataset"]
    return rows.groupby(keys)[list(rows.columns)].apply(stats).reset_index()


# ---------------------------------------------------------------------------- report
#: Allocators shown in the report's tables, in order.
REPORT_ORDER = (*YARDSTICKS, "all-in-lr", "ballad", "all-in-al", "epsilon-greedy",
                "val-cost-greedy", "lr-first-50", *NEW_ALLOCATORS)


def _ordered(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    order = {name: k for k, name in enumerate(REPORT_ORDER)}
    table = table[table["allocator"].isin(order)]
    return table.sort_values([*keys, "allocator"], key=lambda col: col.map(order)
                             if col.name == "allocator" else col).reset_index(drop=True)


def report_tables(paths: pd.DataFrame, signals: pd.DataFrame, train: Sequence[str],
                  held_out: Sequence[str], folds: Sequence[Sequence[str]],
                  traits: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """The study's tables by stem: held-out and leave-three-out summaries, the goal, the
    parameters chosen, per-data-set costs and the signals' accuracy; with ``traits``
    (:func:`trait_table`) the trait switch too, fitted like the others are tuned."""
    heldout = heldout_paths(paths, train, held_out)
    cv = cross_validated_paths(paths, folds)
    if traits is not None:
        names = sorted(set(paths["dataset"]))
        heldout = pd.concat([heldout, trait_switch_paths(traits, train, held_out).assign(fold=0)],
                            ignore_index=True)
        cv = pd.concat([cv, *(trait_switch_paths(traits, [n for n in names if n not in fold],
                                                 fold).assign(fold=f)
                              for f, fold in enumerate(folds))], ignore_index=True)
    cols = ["costs", "prior", "allocator", "cost", "cost_vs_lr", "regret", "regret_vs_lr",
            "rank", "beats_lr", "al_share"]
    goal = pd.concat([goal_table(heldout).assign(evaluation="held-out"),
                      goal_table(cv).assign(evaluation="leave-three-out")])
    chosen = pd.concat([heldout, cv])
    chosen = chosen[chosen["allocator"].isin([*PARAM_GRIDS, "trait-switch"])]
    params = chosen.groupby(["costs", "fold", "allocator"])["chosen"].first().unstack("fold")
    params.columns = [f"fold {f}" for f in params.columns]
    on_train = select_params(paths, train)
    if traits is not None:
        on_train.update({(c, "trait-switch"): label for c, label in trait_switch_paths(
            traits, train, train).groupby("costs")["chosen"].first().items()})
    params.insert(0, "train (12)", [on_train[(c, a)] for c, a in params.index])
    per_dataset = cv[cv["allocator"].isin(["optimal", "best-fixed-per-dataset", "oracle",
                                           "all-in-lr", "ballad", *NEW_ALLOCATORS])]
    per_dataset = per_dataset.groupby(["costs", "prior", "dataset", "allocator"])[
        "mean_cost"].mean().unstack("allocator")
    return {
        "allocators_heldout": _ordered(summary(heldout)[cols], ["costs", "prior"]),
        "allocators_cv": _ordered(summary(cv)[cols], ["costs", "prior"]),
        "allocators_goal": _ordered(goal[["evaluation", "costs", "allocator", "cost_vs_lr",
                                          "regret_vs_lr", "goal"]], ["evaluation", "costs"]),
        "allocators_params": params.reset_index(),
        "allocators_per_dataset": per_dataset[[c for c in REPORT_ORDER
                                               if c in per_dataset.columns]].reset_index(),
        "allocators_signals": signal_accuracy(signals),
    }
