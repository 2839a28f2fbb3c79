"""Yardstick paths through a lattice and their scores: what every lattice study compares with.

On one lattice (``ballad_env.replay.lattice``) the hindsight-optimal allocation, the one-step
oracle and every fixed split ("m LR rounds, then AL") are paths like an agent's replay.
:func:`reference_paths` gives them, :func:`episode_row` scores any path the same way
(mean and final test cost, the moves it got right, its AL rounds; :func:`path_row` the
part a live episode's path has too), and
:func:`best_fixed_per_cell` picks, after the fact, each cell's cheapest fixed split as a
row of its own (``best-fixed-per-cell``). The lattice study and the crossed study score
their paths with these functions, so their numbers mean the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import Lattice, path_string

#: The name of the per-cell best fixed split's row (:func:`best_fixed_per_cell`).
BEST_FIXED = "best-fixed-per-cell"


def fixed_split_name(m: int) -> str:
    """The name of the fixed split "m LR rounds, then AL" (``fixed-lr03``)."""
    return f"fixed-lr{m:02d}"


def reference_paths(lattice: Lattice) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Hindsight optima, the one-step oracle and every fixed "m LR rounds, then AL" split,
    by name: (kind, actions), kind ``reference`` or ``fixed``. A split the pools cannot
    hold (a pool too small for m LR rounds, or for the AL rounds after them) is left out."""
    k = lattice.n_rounds
    refs = {"optimal": ("reference", lattice.optimal_path("mean")),
            "optimal-final": ("reference", lattice.optimal_path("final")),
            "oracle": ("reference", lattice.one_step_oracle())}
    for m in range(k + 1):
        actions = (LR,) * m + (AL,) * (k - m)
        try:
            lattice.states_along(actions)
        except ValueError:
            continue  # a pool too small for this split
        refs[fixed_split_name(m)] = ("fixed", actions)
    return refs


def path_row(name: str, kind: str, actions: Sequence[int],
             costs: Sequence[float] | np.ndarray) -> dict[str, Any]:
    """One path's scores from its test cost after each round (rounds 1..k): the mean (the
    path's score) and the final cost, and its AL rounds; a lattice's path and a live
    episode's are scored by this one function."""
    actions, scores = tuple(actions), np.asarray(costs, dtype=float)
    return {"name": name, "kind": kind, "path": path_string(actions),
            "mean_cost": float(scores.mean()), "final_cost": float(scores[-1]),
            "n_al": int(len(actions) - sum(actions))}


def episode_row(lattice: Lattice, name: str, kind: str, actions: Sequence[int]
                ) -> dict[str, Any]:
    """One path's scores: mean and final cost, the moves it got right, its action counts."""
    actions = tuple(actions)
    right, decided = lattice.right_moves(actions)
    return {**path_row(name, kind, actions, lattice.costs_along(actions)),
            "right_moves": right, "decided_moves": decided}


def best_fixed_per_cell(episodes: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per cell (the columns ``keys``), its cheapest fixed split's row (``kind == "fixed"``,
    lowest ``mean_cost``, the first on ties), renamed ``best-fixed-per-cell`` with kind
    ``reference``: the best fixed split chosen in hindsight."""
    fixed = episodes[episodes.kind == "fixed"]
    if fixed.empty:
        return fixed.iloc[0:0]
    best = fixed.loc[fixed.groupby(list(keys)).mean_cost.idxmin()]
    return best.assign(name=BEST_FIXED, kind="reference")


__all__ = ["BEST_FIXED", "best_fixed_per_cell", "episode_row", "fixed_split_name", "path_row",
           "reference_paths"]
