"""Fitting ``fixed-split-by-cost`` and ``safe-split`` on training cells, and their grouped
cross validation (issue 40; plain numpy).

Rows are :func:`tasks_cells.cell_row` records (a DataFrame): the real training sets at the three
cost levels and generated tasks at their own costs, each with its source's ``group``. Every
choice is made by cross validation over the allocation study's folds of the real training
data sets (sorted by name, every fifth in a fold; each is its own group): a fold's real cells
are scored by a fit on the other folds' real cells and on the tasks generated from the other
folds' groups only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.split_allocators import ALL_IN_LR, FixedSplitByCost, SafeSplit, feature_vector
from scripts.studies.allocation.tasks_cells import candidate_splits

#: The cost levels of the real cells and their ``cost_ratio``.
LEVEL_RATIO = {"default": 0.5, "cfn10": 0.75, "cfp10": 0.25}
#: The task's label-free traits (the distance check reads these).
TRAITS = ("log_size", "log_dimension", "log_contamination", "budget_share", "prior_flagged",
          "prior_confidence")
#: The gain model's features: the traits, the cost ratio, its square and its products with
#: the traits (so the best split may turn with the costs).
FEATURES = (*TRAITS, "cost_ratio", "cost_ratio*cost_ratio",
            *(f"{t}*cost_ratio" for t in TRAITS))
#: Folds of the cross validation.
N_FOLDS = 5
#: Members of the bootstrap ensemble.
MEMBERS = 16
#: The candidates: ridge penalty, bound width z, margin (gain per example over the largest
#: unit cost), the distance check's quantile of the training distances (None: no check).
#: ``task_weight``: a generated task's weight in the fit (a real cell's is 1).
GRID: dict[str, Sequence[Any]] = {"alpha": (1.0, 10.0, 100.0), "z": (0.0, 0.5, 1.0),
                                  "margin": (0.0, 0.002), "ood": (None, 0.95, 0.99),
                                  "task_weight": (0.1, 0.25, 1.0)}


def folds(names: Sequence[str], n: int = N_FOLDS) -> list[list[str]]:
    """``n`` folds of the names: sorted, every n-th in one fold."""
    ordered = sorted(set(names))
    return [ordered[k::n] for k in range(min(n, len(ordered)))]


def splits_of(rows: pd.DataFrame) -> list[tuple[int, int]]:
    """The candidate splits of the rows (all have the same budget)."""
    rounds = set(rows["n_rounds"])
    if len(rounds) != 1:
        raise ValueError(f"cells of several budgets ({sorted(rounds)}): fit one at a time")
    return candidate_splits(rounds.pop())


def costs_of(rows: pd.DataFrame, choices: Sequence[tuple[int, int]]) -> np.ndarray:
    """Each row's mean cost under its chosen split (All-in-LR's for ``ALL_IN_LR``)."""
    splits = splits_of(rows)
    index = {s: n for n, s in enumerate(splits)}
    out = []
    for (_, row), choice in zip(rows.iterrows(), choices, strict=True):
        split = (int(choice[0]), int(choice[1]))
        out.append(row["all-in-lr"] if split == ALL_IN_LR else row["split_costs"][index[split]])
    return np.array(out)


def level_shares(rows: pd.DataFrame, costs: np.ndarray) -> dict[str, float]:
    """Per level, the share of the room (All-in-LR - agent) / (All-in-LR - optimum) on
    data-set means of seed means."""
    frame = rows[["level", "dataset", "all-in-lr", "optimal"]].assign(agent=costs)
    means = frame.groupby(["level", "dataset"]).mean(numeric_only=True).groupby("level").mean()
    shares = (means["all-in-lr"] - means["agent"]) / (means["all-in-lr"] - means["optimal"])
    return {str(k): float(v) for k, v in shares.items()}


# --------------------------------------------------------------------------- fixed split
def fit_fixed(rows: pd.DataFrame) -> dict[str, Any]:
    """``fixed-split-by-cost``: per level, the split (All-in-LR included) of the least mean
    cost over data sets (means of seed means) on the real ``rows``."""
    splits = splits_of(rows)
    levels = []
    for level, part in rows.groupby("level"):
        table = pd.DataFrame(np.stack(list(part["split_costs"])), index=part.index)
        table["lr"] = part["all-in-lr"]
        mean = table.groupby(part["dataset"]).mean().mean()
        best = mean.idxmin()
        split = ALL_IN_LR if best == "lr" or mean[best] >= mean["lr"] else splits[int(best)]
        levels.append({"level": str(level), "cost_ratio": LEVEL_RATIO[str(level)],
                       "split": [int(split[0]), int(split[1])]})
    return {"levels": levels}


def fixed_choices(params: Mapping[str, Any], rows: pd.DataFrame) -> list[tuple[int, int]]:
    """The split ``fixed-split-by-cost`` plays on each row."""
    agent = FixedSplitByCost.from_entry(params)
    return [agent.decide(obs) for obs in rows["obs"]]


# --------------------------------------------------------------------------- safe split
def gain_matrix(rows: pd.DataFrame) -> np.ndarray:
    """[row, split]: All-in-LR's mean cost minus the split's, over the row's largest unit
    cost."""
    costs = np.stack(list(rows["split_costs"]))
    return np.asarray((rows["all-in-lr"].to_numpy()[:, None] - costs)
                      / rows["unit"].to_numpy()[:, None])


def _ridge(Z: np.ndarray, Y: np.ndarray, w: np.ndarray, alpha: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Weighted ridge for every column of Y at once (row weights ``w``, scaled to sum to
    the rows; the intercept unpenalised): (coef [outputs, features], intercept)."""
    w = w * (len(w) / w.sum())
    zm, ym = w @ Z / w.sum(), w @ Y / w.sum()
    Zc = Z - zm
    coef = np.linalg.solve((Zc * w[:, None]).T @ Zc + alpha * np.eye(Z.shape[1]),
                           (Zc * w[:, None]).T @ (Y - ym)).T
    return coef, ym - coef @ zm


def design(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """What the safe split's fit and the cross validation read of ``rows``, computed once:
    the gain model's features ``X``, the traits ``T``, the gains ``Y`` and the groups."""
    return {"X": np.stack([feature_vector(o, FEATURES) for o in rows["obs"]]),
            "T": np.stack([feature_vector(o, TRAITS) for o in rows["obs"]]),
            "Y": gain_matrix(rows), "groups": rows["group"].to_numpy(),
            "task": (rows["level"] == "task").to_numpy()}


def fit_safe(rows: pd.DataFrame, alpha: float, z: float, margin: float, ood: float | None,
             task_weight: float = 1.0, seed: int = 0, members: int = MEMBERS,
             arrays: Mapping[str, np.ndarray] | None = None, residual: bool = False
             ) -> dict[str, Any]:
    """``safe-split``'s parameters on ``rows`` (real cells and tasks; ``arrays`` their
    :func:`design` if computed already): ``members`` ridge fits (a task weighing
    ``task_weight``, a real cell 1), each on a bootstrap sample of the groups
    (``numpy.random.default_rng(seed)``); the distance check's center and precision from
    every row's traits, its threshold the ``ood`` quantile of the training rows'
    distances; ``residual``: the bound also counts the out-of-bag residual per split
    (:func:`out_of_bag_residual`)."""
    d = arrays if arrays is not None else design(rows)
    X, T, groups = d["X"], d["T"], d["groups"]
    center, scale = X.mean(axis=0), X.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    Z = (X - center) / scale
    names = np.unique(groups)
    rows_of = {g: np.flatnonzero(groups == g) for g in names}
    rng = np.random.default_rng(seed)
    coefs, intercepts, outside = [], [], []
    for _ in range(members):
        drawn = rng.choice(names, size=names.size, replace=True)
        take = np.concatenate([rows_of[g] for g in drawn])
        weights = np.where(d["task"][take], task_weight, 1.0)
        coef, intercept = _ridge(Z[take], d["Y"][take], weights, alpha)
        coefs.append(coef)
        intercepts.append(intercept)
        outside.append(~np.isin(groups, drawn))
    t_center = T.mean(axis=0)
    precision = np.linalg.inv(np.cov(T, rowvar=False) + 1e-6 * np.eye(T.shape[1]))
    distances = mahalanobis(T, t_center, precision)
    extra = [f"extra {k}" for k in range(X.shape[1] - len(FEATURES))]  # an ablation's columns
    return {"features": [*FEATURES, *extra], "center": center.tolist(), "scale": scale.tolist(),
            "coef": np.stack(coefs).tolist(), "intercept": np.stack(intercepts).tolist(),
            "splits": [list(s) for s in splits_of(rows)], "z": float(z),
            "margin": float(margin),
            "residual": out_of_bag_residual(Z, d["Y"], coefs, intercepts, outside).tolist()
            if residual else None,
            "ood": {"features": [*TRAITS, *extra[:T.shape[1] - len(TRAITS)]],
                    "center": t_center.tolist(),
                    "precision": precision.tolist(),
                    "threshold": None if ood is None else float(np.quantile(distances, ood)),
                    "quantile": ood},
            "settings": {"alpha": alpha, "task_weight": task_weight, "members": members,
                         "seed": seed,
                         "rows": int(len(groups)), "groups": int(names.size)}}


def with_decision(params: Mapping[str, Any], T: np.ndarray, z: float, margin: float,
                  ood: float | None, residual: bool = False) -> dict[str, Any]:
    """``params`` (a :func:`fit_safe` fit with ``residual=True``) with another decision rule:
    bound width, margin, the trait check's quantile of the training traits ``T``'s distances
    and whether the bound counts the residual. The ensemble depends only on the penalty and
    the task weight, so a grid over the rule needs one fit per pair (equal to fitting each
    candidate, a test holds)."""
    if params.get("residual") is None:
        raise ValueError("fit with residual=True to vary the decision rule")
    check = dict(params["ood"])
    distances = mahalanobis(T, np.asarray(check["center"]), np.asarray(check["precision"]))
    check |= {"threshold": None if ood is None else float(np.quantile(distances, ood)),
              "quantile": ood}
    return {**params, "z": float(z), "margin": float(margin), "ood": check,
            "residual": params["residual"] if residual else None}


def out_of_bag_residual(Z: np.ndarray, Y: np.ndarray, coefs: Sequence[np.ndarray],
                        intercepts: Sequence[np.ndarray], outside: Sequence[np.ndarray]
                        ) -> np.ndarray:
    """Per split, the root mean square of each member's residual on the rows of the groups
    its bootstrap sample left out: how far a new group's gain lies from a model that never
    saw it (the ensemble's spread measures only how far the models lie from each other)."""
    squares = [(Y[out] - (Z[out] @ coef.T + intercept)) ** 2
               for coef, intercept, out in zip(coefs, intercepts, outside, strict=True)
               if out.any()]
    if not squares:
        raise ValueError("no member left a group out: fit with more groups or members")
    return np.asarray(np.sqrt(np.concatenate(squares).mean(axis=0)))


def mahalanobis(T: np.ndarray, center: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """Each row's Mahalanobis distance from ``center``."""
    D = T - center
    return np.asarray(np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", D, precision, D), 0.0)))


def safe_choices(params: Mapping[str, Any], rows: pd.DataFrame,
                 arrays: Mapping[str, np.ndarray] | None = None) -> list[tuple[int, int]]:
    """The split ``safe-split`` plays on each row: with ``arrays`` (the rows' :func:`design`)
    computed in one go, as ``SafeSplit.choose`` computes it per observation (a test holds
    them equal); without, by the agent itself."""
    if arrays is None:
        agent = SafeSplit.from_entry(params)
        return [agent.choose(obs)[0] for obs in rows["obs"]]
    Z = (arrays["X"] - np.asarray(params["center"])) / np.asarray(params["scale"])
    gains = np.asarray(params["intercept"])[:, None, :] + np.einsum(
        "msf,rf->mrs", np.asarray(params["coef"]), Z)
    mean, spread = gains.mean(axis=0), gains.std(axis=0)
    if params.get("residual") is not None:
        spread = np.hypot(spread, np.asarray(params["residual"]))
    best = np.argmax(mean, axis=1)
    lower = mean[np.arange(len(best)), best] - params["z"] * spread[np.arange(len(best)), best]
    ood = params["ood"]
    trusted = np.ones(len(best), dtype=bool) if ood["threshold"] is None else \
        mahalanobis(arrays["T"], np.asarray(ood["center"]),
                    np.asarray(ood["precision"])) <= ood["threshold"]
    splits = [tuple(s) for s in params["splits"]]
    return [splits[b] if ok and low > params["margin"] else ALL_IN_LR
            for b, low, ok in zip(best, lower, trusted, strict=True)]


# --------------------------------------------------------------------------- cross validation
def candidates(grid: Mapping[str, Sequence[Any]] = GRID) -> list[dict[str, Any]]:
    """Every combination of the grid's values."""
    return [dict(zip(grid, v, strict=True)) for v in itertools.product(*grid.values())]


def training_rows(real: pd.DataFrame, tasks: pd.DataFrame, groups: Sequence[str]
                  ) -> pd.DataFrame:
    """The real cells and the tasks of ``groups``."""
    keep = set(groups)
    return pd.concat([real[real["group"].isin(keep)], tasks[tasks["group"].isin(keep)]],
                     ignore_index=True)


def _fold_table(real: pd.DataFrame, costs: np.ndarray, fold_list: Sequence[Sequence[str]]
                ) -> pd.DataFrame:
    """[fold, level]: each fold's share of the room (its data sets only)."""
    per_fold = []
    for fold in fold_list:
        mask = real["dataset"].isin(fold).to_numpy()
        per_fold.append(level_shares(real[mask], costs[mask]))
    return pd.DataFrame(per_fold)


def fold_shares(real: pd.DataFrame, costs: np.ndarray, fold_list: Sequence[Sequence[str]]
                ) -> dict[str, tuple[float, float]]:
    """Per level: the mean over folds of the fold's share of the room (its data sets only)
    and its standard error over the folds (sd / sqrt(folds))."""
    table = _fold_table(real, costs, fold_list)
    return {str(level): (float(values.mean()),
                         float(values.std(ddof=1) / np.sqrt(len(values))))
            for level, values in table.items()}


def loss_shares(rows: pd.DataFrame, costs: np.ndarray) -> dict[str, float]:
    """Per level, the room lost where the agent loses: the sum over data sets of
    max(0, agent - All-in-LR) (means of seed means) over the sum of the room (All-in-LR -
    optimum). It counts only the harm, so a candidate that leaves All-in-LR on data sets
    with no room shows it even where its gains elsewhere hide it in the share."""
    frame = rows[["level", "dataset", "all-in-lr", "optimal"]].assign(agent=costs)
    means = frame.groupby(["level", "dataset"]).mean(numeric_only=True)
    lost = (means["agent"] - means["all-in-lr"]).clip(lower=0.0).groupby("level").sum()
    room = (means["all-in-lr"] - means["optimal"]).groupby("level").sum()
    return {str(k): float(v) for k, v in (lost / room).items()}


def cv_row(name: str, candidate: Mapping[str, Any], real: pd.DataFrame, costs: np.ndarray,
           fold_list: Sequence[Sequence[str]]) -> dict[str, Any]:
    """One candidate's cross-validated figures: the pooled share per level (``cv <level>``,
    their mean and smallest), and per level the mean over folds, its standard error and
    the lower bound mean - se (``fold``, ``se``, ``lower``), with ``fold mean`` over levels
    and ``se mean``, the standard error over folds of each fold's mean over the levels;
    ``loss <level>`` and ``loss`` (their mean): the pooled room lost (:func:`loss_shares`)."""
    shares = level_shares(real, costs)
    row: dict[str, Any] = {"candidate": name, **candidate,
                           **{f"cv {k}": v for k, v in shares.items()},
                           "cv mean": float(np.mean(list(shares.values()))),
                           "cv min": min(shares.values())}
    per_fold = _fold_table(real, costs, fold_list)
    for level, values in per_fold.items():
        mean, se = float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))
        row |= {f"fold {level}": mean, f"se {level}": se, f"lower {level}": mean - se}
    row["fold mean"] = float(np.mean([row[f"fold {lv}"] for lv in shares]))
    means = per_fold.mean(axis=1)
    row["se mean"] = float(means.std(ddof=1) / np.sqrt(len(means)))
    losses = loss_shares(real, costs)
    row |= {f"loss {k}": v for k, v in losses.items()}
    row["loss"] = float(np.mean(list(losses.values())))
    return row


def out_of_fold_costs(real: pd.DataFrame, tasks: pd.DataFrame,
                      grid: Mapping[str, Sequence[Any]] = GRID,
                      extra: Callable[[dict[str, np.ndarray], pd.DataFrame],
                                      dict[str, np.ndarray]] | None = None
                      ) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, np.ndarray],
                                 list[list[str]]]:
    """(candidates as (name, settings), each one's cost on every real cell scored by the fit
    on the other folds, the folds): what :func:`cross_validate` summarises; ``extra`` (an
    ablation) maps the rows' :func:`design` to one with more columns."""
    fold_list = folds(list(real["dataset"]))  # the allocation study's folds, by data set
    both = pd.concat([real, tasks], ignore_index=True)
    arrays = design(both)
    if extra is not None:
        arrays = extra(arrays, both)
    keys: list[tuple[str, dict[str, Any]]] = [("fixed-split-by-cost", {})] + [
        (f"safe {n}", c) for n, c in enumerate(candidates(grid))]
    results = {name: np.full(len(real), np.nan) for name, _ in keys}
    for fold in fold_list:
        out = real["dataset"].isin(fold).to_numpy()
        held_groups = set(real["group"][out])
        fixed = fit_fixed(real[~out])
        results["fixed-split-by-cost"][out] = costs_of(real[out], fixed_choices(fixed, real[out]))
        train = ~np.isin(arrays["groups"], list(held_groups))
        sub = {k: v[train] for k, v in arrays.items()}
        evaluate = {k: v[:len(real)][out] for k, v in arrays.items()}
        ensembles: dict[tuple[float, float], dict[str, Any]] = {}
        for name, candidate in keys[1:]:
            rule: dict[str, Any] = {"z": candidate.get("z", 0.0),
                                    "margin": candidate.get("margin", 0.0),
                                    "ood": candidate.get("ood"),
                                    "residual": bool(candidate.get("residual", False))}
            pair = (candidate["alpha"], candidate.get("task_weight", 1.0))
            if pair not in ensembles:
                ensembles[pair] = fit_safe(both[train], arrays=sub, alpha=pair[0], z=0.0,
                                           margin=0.0, ood=None, task_weight=pair[1],
                                           residual=True)
            params = with_decision(ensembles[pair], sub["T"], **rule)
            results[name][out] = costs_of(real[out], safe_choices(params, real[out], evaluate))
    results["all-in-lr"] = real["all-in-lr"].to_numpy()
    return [*keys, ("all-in-lr", {})], results, fold_list


def cross_validate(real: pd.DataFrame, tasks: pd.DataFrame,
                   grid: Mapping[str, Sequence[Any]] = GRID,
                   extra: Callable[[dict[str, np.ndarray], pd.DataFrame],
                                   dict[str, np.ndarray]] | None = None) -> pd.DataFrame:
    """Every safe-split candidate's, the fixed split's and All-in-LR's cross-validated
    shares per level on the real training cells (:func:`cv_row` of
    :func:`out_of_fold_costs`)."""
    keys, results, fold_list = out_of_fold_costs(real, tasks, grid, extra)
    return pd.DataFrame([cv_row(name, candidate, real, results[name], fold_list)
                         for name, candidate in keys])


def choose_safely(cv: pd.DataFrame, eligible: Sequence[str] | None = None,
                  harmless: bool = False) -> pd.Series:
    """The rule that rewards safety: among the candidates (``eligible`` names, default all)
    whose every level's lower bound (mean over folds - one standard error) is >= 0, the
    largest mean over the levels of the fold means (ties: the larger smallest lower bound,
    then the table's order). All-in-LR qualifies by construction (0 in every fold), so a
    table holding it always yields a choice; without any qualifying row, a ``ValueError``.

    ``harmless``: the one-standard-error rule turned to safety: among the qualifying
    candidates whose fold mean is within one standard error (``se mean`` of the best) of the
    best's, the one that loses the least room where it loses (``loss``; ties: the larger
    fold mean). The cross validation cannot tell such candidates apart by their share, so
    the rule takes the one that costs least where there is no room to take."""
    pool = cv if eligible is None else cv[cv["candidate"].isin(list(eligible))]
    lowers = pool[[c for c in pool.columns if c.startswith("lower ")]]
    ranked = pool.assign(worst=lowers.min(axis=1))
    ok = ranked[(lowers >= 0.0).all(axis=1).to_numpy()]
    if ok.empty:
        raise ValueError("no candidate's lower bound is >= 0 at every level: add All-in-LR "
                         "(always safe) to the table")
    ordered = ok.sort_values(["fold mean", "worst"], ascending=False, kind="stable")
    if not harmless:
        return ordered.iloc[0]
    missing = {"se mean", "loss"} - set(ordered.columns)
    if missing:
        raise ValueError(f"the harmless rule reads {sorted(missing)}: build the table with "
                         "cv_row")
    best = ordered.iloc[0]
    near = ordered[ordered["fold mean"] >= best["fold mean"] - best["se mean"]]
    return near.sort_values(["loss", "fold mean"], ascending=[True, False],
                            kind="stable").iloc[0]


def best_candidate(cv: pd.DataFrame) -> pd.Series:
    """The safe-split candidate chosen: the largest mean share over the levels among those
    whose every level's share is >= 0 (else the largest smallest share)."""
    safe = cv[cv["candidate"].str.startswith("safe")]
    ok = safe[safe["cv min"] >= 0.0]
    pool, key = (ok, "cv mean") if len(ok) else (safe, "cv min")
    return pool.sort_values([key, "cv min"], ascending=False, kind="stable").iloc[0]


__all__ = ["FEATURES", "GRID", "LEVEL_RATIO", "MEMBERS", "N_FOLDS", "TRAITS", "best_candidate",
           "candidates", "choose_safely", "costs_of", "cross_validate", "cv_row", "design",
           "fit_fixed", "fit_safe", "fixed_choices", "fold_shares", "folds", "gain_matrix",
           "level_shares", "loss_shares", "mahalanobis", "out_of_bag_residual", "out_of_fold_costs",
           "safe_choices",
           "splits_of", "training_rows", "with_decision"]
