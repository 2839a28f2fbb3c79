"""Cross validation of the RL family on the training data sets (the study's second round).

The first round trained one MaskablePPO policy per cost level on all 15 training data sets
and chose it as the allocator on the held-out sets. Here the same recipe (``rl.train_policies``:
SB3's defaults, the same steps, seed, environments and reward) is run once per fold of
``analysis.folds`` on the training data sets outside the fold, and each fold's policies are
replayed on the fold's own lattices: the family's cross-validated share of the room, the
score every other candidate is compared with, on training data only.

The fold policies also give the fallback candidate (``agents.allocation.ConfidentPolicy``):
the policy's AL only where it puts more than a threshold of probability on it, else LR
(All-in-LR's move); the threshold is chosen by the same cross validation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ballad_env.replay.lattice import Lattice
from scripts.studies.allocation import rl
from scripts.studies.allocation.analysis import folds, level_shares

#: The fallback thresholds tried (0.5: the greedy policy itself).
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


def fold_folder(out: Path, k: int) -> Path:
    """Where fold ``k``'s policies are trained (``<out>/cv_rl/fold<k>``)."""
    return Path(out) / "cv_rl" / f"fold{k}"


def train_folds(out: Path, names: Sequence[str], steps: int,
                which: Sequence[int] | None = None) -> dict[int, dict[str, float]]:
    """Train (or reuse) each fold's per-level policies on the training ``names`` outside the
    fold, on the study's store ``<out>/lattices``; the CPU seconds per fold and level."""
    all_folds = folds(names)
    seconds = {}
    for k in range(len(all_folds)) if which is None else which:
        inside = [n for n in names if n not in all_folds[k]]
        seconds[k] = rl.train_policies(fold_folder(out, k), inside, steps,
                                       store=Path(out) / "lattices")
    return seconds


def fold_costs(out: Path, lattices: Sequence[tuple[str, Lattice]],
               thresholds: Sequence[float] = THRESHOLDS) -> pd.DataFrame:
    """Per lattice (in order) the mean cost of its fold's level policy played greedily
    (column ``greedy``: the policy itself, as the allocator plays) and with each fallback
    threshold (column ``t<threshold>``)."""
    from agents.allocation import ConfidentPolicy
    from agents.registry import make_agent

    names = [lat.dataset for _, lat in lattices]
    fold_of = {name: k for k, fold in enumerate(folds(names)) for name in fold}
    policies: dict[tuple[int, str], object] = {}
    rows = []
    for level, lat in lattices:
        key = (fold_of[lat.dataset], level)
        if key not in policies:
            policies[key] = make_agent(str(rl.policy_path(fold_folder(out, key[0]), level)))
        rows.append({"greedy": lat.mean_cost(lat.replay(policies[key])),
                     **{f"t{t:g}": lat.mean_cost(lat.replay(ConfidentPolicy(policies[key], t)))
                        for t in thresholds}})
    return pd.DataFrame(rows)


def threshold_table(records: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """Cross-validated shares per level of each column of :func:`fold_costs` (``records``
    in the lattices' order), best first by the smallest share over the levels; the greedy
    column has threshold NaN."""
    rows = []
    for column in costs:
        shares = level_shares(records.assign(agent=costs[column].to_numpy()))
        rows.append({"threshold": float(column[1:]) if column != "greedy" else float("nan"),
                     **{f"cv {k}": v for k, v in shares.items()},
                     "cv min": min(shares.values())})
    return pd.DataFrame(rows).sort_values("cv min", ascending=False, kind="stable")


def cv_seconds(out: Path, n_folds: int) -> float:
    """The recorded training CPU seconds of every fold and level (NaN where none)."""
    total = 0.0
    for k in range(n_folds):
        for record in (fold_folder(out, k) / "policies").glob("*/*.seconds"):
            total += float(record.read_text())
    return total if total else float(np.nan)


__all__ = ["THRESHOLDS", "cv_seconds", "fold_costs", "fold_folder", "threshold_table",
           "train_folds"]
