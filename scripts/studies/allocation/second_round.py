"""The allocation study's second round: wider choices, all made by training cross validation.

The first round's allocators took 0.46-0.70 of the room in-sample and at most 0.44 on the
held-out sets. This round tries to close the gap without looking at the held-out sets:
every candidate below is scored by the first round's cross validation (``analysis.folds``:
five folds of the 15 training data sets, the smallest share of the room over the three
cost levels, each data set scored by a fit that never saw it), and the winner is replayed
once on the held-out cells.

- ``split-rule``: feature groups (all, without the data set's traits, the start
  detector's or the probe's traits alone) and much stronger ridge penalties and margins.
- ``imitation``: feature sets (all, without the data set's traits, without the prior's
  too, v1's features alone), L2 penalties up to 1000, behaviour cloning (the first round's
  cross validation ranked DAgger below it at the same penalty), and a fallback threshold
  (AL only where the model's probability of AL exceeds it).
- ``maskable-ppo``: the first round's recipe cross-validated (``rl_cv``), greedy and with
  the fallback threshold.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.allocation import ImitationPolicy
from ballad_env.observation import OBSERVATIONS
from ballad_env.replay.lattice import Lattice
from scripts.studies.allocation import fit as F
from scripts.studies.allocation.analysis import (
    feature_set,
    folds,
    level_shares,
    select_split_rule,
)

#: The split rule's second-round candidates.
SPLIT_GRID2: dict[str, Sequence[Any]] = {
    "probe": ("none", "al"), "alpha": (10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0),
    "features": ("all", "-data", "only-prior", "only-probe"),
    "margin": (0.0, 0.002, 0.005, 0.01)}
#: The imitation policy's second-round candidates (each fit scored at every threshold).
IMITATION_GRID2: dict[str, Sequence[Any]] = {
    "features": ("all", "-data", "-data-prior", "v1"), "l2": (10.0, 100.0, 1000.0),
    "dagger": (0,)}
#: The fallback thresholds: AL only where the probability of AL is at least this.
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def imitation_features(name: str) -> tuple[str, ...]:
    """The imitation policy's features: ``all`` (``fit.IMITATION_FEATURES``), ``-data``
    (without the data set's traits), ``-data-prior`` (without the start detector's too),
    ``v1`` (observation v1's features only: no v2 trait at all)."""
    groups = {"all": (), "-data": ("data",), "-data-prior": ("data", "prior")}
    if name == "v1":
        return tuple(f for f in F.IMITATION_FEATURES if f in OBSERVATIONS["v1"])
    if name not in groups:
        raise ValueError(f"unknown imitation feature set {name!r}: use one of "
                         f"{', '.join([*groups, 'v1'])}")
    dropped = {f for g in groups[name] for f in F.FEATURE_GROUPS[g]}
    return tuple(f for f in F.IMITATION_FEATURES if f not in dropped)


def select_split_rule2(records: pd.DataFrame) -> pd.DataFrame:
    """The split rule's second-round cross validation (``SPLIT_GRID2``), best first."""
    return select_split_rule(records, SPLIT_GRID2)


def threshold_costs(models: Sequence[Mapping[str, Any]],
                    lattices: Sequence[tuple[str, Lattice]],
                    thresholds: Sequence[float] = THRESHOLDS) -> np.ndarray:
    """[lattice, threshold]: mean cost of the imitation policy with each threshold."""
    return np.array([[lat.mean_cost(lat.replay(ImitationPolicy(models, t)))
                      for t in thresholds] for _, lat in lattices])


def select_imitation2(records: pd.DataFrame, lattices: Sequence[tuple[str, Lattice]],
                      grid: Mapping[str, Sequence[Any]] = IMITATION_GRID2,
                      thresholds: Sequence[float] = THRESHOLDS) -> pd.DataFrame:
    """Every (candidate, threshold)'s cross-validated shares (``lattices`` in ``records``'
    order), best first by the smallest share over the levels."""
    names = np.array([lat.dataset for _, lat in lattices])
    rows = []
    for values in itertools.product(*grid.values()):
        candidate = dict(zip(grid, values, strict=True))
        costs = np.full((len(lattices), len(thresholds)), np.nan)
        for fold in folds(list(names)):
            out = np.isin(names, fold)
            params = F.fit_imitation([c for c, o in zip(lattices, out, strict=True) if not o],
                                     imitation_features(candidate["features"]),
                                     l2=candidate["l2"], dagger_rounds=candidate["dagger"])
            costs[out] = threshold_costs(params["models"], [
                c for c, o in zip(lattices, out, strict=True) if o], thresholds)
        for t, column in zip(thresholds, costs.T, strict=True):
            shares = level_shares(records.assign(agent=column))
            rows.append({**candidate, "threshold": t,
                         **{f"cv {k}": v for k, v in shares.items()},
                         "cv min": min(shares.values())})
    return pd.DataFrame(rows).sort_values("cv min", ascending=False, kind="stable")


def fit_imitation2(lattices: Sequence[tuple[str, Lattice]], best: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """The chosen imitation candidate refitted on every training lattice, with its
    threshold (the packaged file's entry)."""
    params = F.fit_imitation(lattices, imitation_features(str(best["features"])),
                             l2=float(best["l2"]), dagger_rounds=int(best["dagger"]))
    return {**params, "threshold": float(best["threshold"])}


def split_rule_entry(records: pd.DataFrame, best: Mapping[str, Any]) -> dict[str, Any]:
    """The chosen split-rule candidate refitted on every training record."""
    return F.fit_split_rule(records, feature_set(str(best["features"])), str(best["probe"]),
                            float(best["alpha"]), margin=float(best["margin"]))


def summary(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Each family's best row (its cross-validated shares), best first: the choice."""
    rows = []
    for family, table in tables.items():
        best = table.iloc[0]
        rows.append({"candidate": family,
                     **{k: float(best[k]) for k in best.index if str(k).startswith("cv ")}})
    return pd.DataFrame(rows).sort_values("cv min", ascending=False, kind="stable")


__all__ = ["IMITATION_GRID2", "SPLIT_GRID2", "THRESHOLDS", "fit_imitation2",
           "imitation_features", "select_imitation2", "select_split_rule2",
           "split_rule_entry", "summary", "threshold_costs"]
