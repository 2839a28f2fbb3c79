"""Choosing, fitting and scoring the allocation families (docs/studies/ALLOCATION.md).

Every choice is made on the training data sets only, by cross validation over
:data:`N_FOLDS` folds of data sets (:func:`folds`; :func:`select_split_rule`,
:func:`select_imitation`): the score of a candidate is its smallest share of the room over
the three cost levels, each data set scored by a fit that never saw it. The chosen
candidates are refitted on every training data set and scored once on the held-out ones by
replaying the agents on their lattices (:func:`replay_table`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.allocation import ImitationPolicy, SplitRule
from ballad_env.replay.lattice import Lattice
from scripts.studies.allocation import fit as F
from scripts.studies.allocation.cells import BASELINES

#: Folds of the cross validation (data sets sorted by name, every fifth in one fold).
N_FOLDS = 5

#: The split rule's candidates: probe, ridge penalty, features (all, or one group left out),
#: margin (a cost per example).
SPLIT_GRID: dict[str, Sequence[Any]] = {
    "probe": ("none", "al"), "alpha": (3.0, 10.0, 30.0, 100.0),
    "features": ("all", "-data", "-prior", "-probe"), "margin": (0.0, 0.002, 0.005)}
#: The imitation policy's candidates: L2 penalty and DAgger rounds (0: behaviour cloning).
IMITATION_GRID: dict[str, Sequence[Any]] = {"l2": (10.0, 100.0), "dagger": (0, 3)}


def feature_set(name: str, features: Sequence[str] = F.SPLIT_FEATURES) -> tuple[str, ...]:
    """``all`` the features, ``-<group>`` all but a group, ``only-<group>`` one group."""
    if name == "all":
        return tuple(features)
    if name.startswith("-"):
        return tuple(f for f in features if f not in F.FEATURE_GROUPS[name[1:]])
    if name.startswith("only-"):
        return F.FEATURE_GROUPS[name[5:]]
    raise ValueError(f"unknown feature set {name!r}: use all, -<group> or only-<group> "
                     f"with a group of {', '.join(F.FEATURE_GROUPS)}")


def level_shares(costs: pd.DataFrame, agent: str = "agent") -> dict[str, float]:
    """Per cost level, ``agent``'s share of the room: (All-in-LR - agent) / (All-in-LR -
    optimum) on the means over data sets of the seed means (the crossed study's rule)."""
    means = costs.groupby(["level", "dataset"], sort=False)[
        [agent, "all-in-lr", "optimal"]].mean().groupby(level="level", sort=False).mean()
    room = means["all-in-lr"] - means["optimal"]
    return {str(k): float(v) for k, v in ((means["all-in-lr"] - means[agent]) / room).items()}


def folds(names: Sequence[str], n: int = N_FOLDS) -> list[list[str]]:
    """``n`` folds of the data-set names: sorted, every n-th name in one fold."""
    ordered = sorted(set(names))
    return [ordered[k::n] for k in range(min(n, len(ordered)))]


def _candidates(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def split_params(records: pd.DataFrame, candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The split rule fitted on ``records`` with a candidate's settings."""
    return F.fit_split_rule(records, feature_set(candidate["features"]), candidate["probe"],
                            candidate["alpha"], margin=candidate["margin"])


def select_split_rule(records: pd.DataFrame, grid: Mapping[str, Sequence[Any]] = SPLIT_GRID
                      ) -> pd.DataFrame:
    """Every candidate's cross-validated shares on the training records, best first (by
    the smallest share over the levels)."""
    rows = []
    for candidate in _candidates(grid):
        costs = np.full(len(records), np.nan)
        for fold in folds(list(records.dataset)):
            out = records.dataset.isin(fold).to_numpy()
            params = split_params(records[~out], candidate)
            costs[out] = F.split_rule_costs(params, records[out], candidate["probe"])
        shares = level_shares(records.assign(agent=costs))
        rows.append({**candidate, **{f"cv {k}": v for k, v in shares.items()},
                     "cv min": min(shares.values())})
    return pd.DataFrame(rows).sort_values("cv min", ascending=False, kind="stable")


def imitation_costs(params: Mapping[str, Any], lattices: Sequence[tuple[str, Lattice]]
                    ) -> np.ndarray:
    """Mean cost of the imitation policy replayed on each lattice."""
    agent = ImitationPolicy(params["models"])
    return np.array([lat.mean_cost(lat.replay(agent)) for _, lat in lattices])


def select_imitation(records: pd.DataFrame, lattices: Sequence[tuple[str, Lattice]],
                     grid: Mapping[str, Sequence[Any]] = IMITATION_GRID) -> pd.DataFrame:
    """Every candidate's cross-validated shares (``lattices`` in ``records``' order), best
    first."""
    rows = []
    names = np.array([lat.dataset for _, lat in lattices])
    for candidate in _candidates(grid):
        costs = np.full(len(lattices), np.nan)
        for fold in folds(list(names)):
            out = np.isin(names, fold)
            params = F.fit_imitation([c for c, o in zip(lattices, out, strict=True) if not o],
                                     l2=candidate["l2"], dagger_rounds=candidate["dagger"])
            costs[out] = imitation_costs(params, [c for c, o in zip(lattices, out,
                                                                     strict=True) if o])
        shares = level_shares(records.assign(agent=costs))
        rows.append({**candidate, **{f"cv {k}": v for k, v in shares.items()},
                     "cv min": min(shares.values())})
    return pd.DataFrame(rows).sort_values("cv min", ascending=False, kind="stable")


def replay_table(lattices: Sequence[tuple[str, Lattice]], agents: Mapping[str, Any],
                 records: pd.DataFrame) -> pd.DataFrame:
    """``records``' keys and yardsticks with one column per agent: its mean cost replayed on
    each lattice (``lattices`` in ``records``' order). Agents are fresh per lattice."""
    out = records[["level", "dataset", "seed", "optimal", "best-fixed-per-cell",
                   *[c for c in records if c in BASELINES]]].copy()
    for name, make in agents.items():
        out[name] = [lat.mean_cost(lat.replay(make())) for _, lat in lattices]
    return out


#: The baseline columns ``cells.cell_record`` adds.


def fitted_agents(params: Mapping[str, Any]) -> dict[str, Any]:
    """Agent factories for the fitted families (``params``: the packaged file's layout)."""
    families = params["families"]
    rule, imitation = families["split-rule"], families["imitation"]
    return {"split-rule": lambda: SplitRule.from_entry(rule),
            "imitation": lambda: ImitationPolicy(imitation["models"])}


def fit_families(records: pd.DataFrame, lattices: Sequence[tuple[str, Lattice]],
                 split_cv: pd.DataFrame, imitation_cv: pd.DataFrame) -> dict[str, Any]:
    """The packaged parameters: each family's best candidate refitted on every training
    cell, and ``allocator`` the family with the larger cross-validated smallest share (the
    study's run replaces it by the held-out choice, ``report.best_family``)."""
    best_rule, best_imitation = split_cv.iloc[0], imitation_cv.iloc[0]
    start = time.process_time()
    rule = split_params(records, best_rule)
    rule_seconds = time.process_time() - start
    start = time.process_time()
    imitation = F.fit_imitation(lattices, l2=float(best_imitation["l2"]),
                                dagger_rounds=int(best_imitation["dagger"]))
    imitation_seconds = time.process_time() - start
    allocator = "split-rule" if best_rule["cv min"] >= best_imitation["cv min"] else "imitation"
    return {
        "allocator": allocator,
        "chosen_by": f"each family's settings: {N_FOLDS}-fold cross validation over the "
                     "training data sets of docs/allocation_split.json (largest smallest "
                     "share of the room over the three cost levels); no held-out or "
                     "reserved data set",
        "families": {
            "split-rule": {**rule, "candidate": plain_row(best_rule),
                           "fit_cpu_seconds": round(rule_seconds, 3)},
            "imitation": {**imitation, "candidate": plain_row(best_imitation),
                          "fit_cpu_seconds": round(imitation_seconds, 3)}}}


def plain_row(row: pd.Series) -> dict[str, Any]:
    """A candidate row as JSON-able values."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}


__all__ = ["IMITATION_GRID", "N_FOLDS", "SPLIT_GRID", "feature_set", "fit_families",
           "fitted_agents", "folds", "imitation_costs", "level_shares", "plain_row", "replay_table",
           "select_imitation", "select_split_rule", "split_params"]
