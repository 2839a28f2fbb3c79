"""Issue 40's cells: per lattice, what the split allocators read and every split's exact cost.

A split ``(first, rounds)`` plays ``first`` for ``rounds`` rounds, then the other action to
the end (``agents.split_allocators``); where a pool runs out the other action is taken, as
every rule agent does (``RuleAgent._available``), so :func:`split_path` is the path the
agent's replay takes (a test holds them equal). The candidates (:func:`candidate_splits`)
are every LR-first and AL-first split of the budget; All-in-LR is the yardstick.
:func:`real_rows` and :func:`task_rows` read a store's cells into rows, the registered
baselines replayed on the real ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.split_allocators import ALL_IN_LR
from ballad_env.data.tasks import parse_task
from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import Lattice
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.common.split import load_split, refuse_reserved

#: The cost levels of the real cells (c_r = gamma throughout, as in the crossed study).
LEVELS = {"default": Settings(), "cfn10": Settings(c_fn=10.0), "cfp10": Settings(c_fp=10.0)}
#: Registered agents replayed on every real cell.
AGENTS = ("all-in-al", "ballad", "trait-switch", "split-rule", "imitation", "maskable-ppo")


def candidate_splits(n_rounds: int) -> list[tuple[int, int]]:
    """Every split but All-in-LR: LR first for 0..k-1 rounds (0: All-in-AL), AL first for
    1..k-1 rounds."""
    return [(LR, m) for m in range(n_rounds)] + [(AL, a) for a in range(1, n_rounds)]


def split_path(lattice: Lattice, split: Sequence[int]) -> tuple[int, ...]:
    """The actions of ``split`` on ``lattice``, the other action where the pool is out."""
    first, rounds = int(split[0]), int(split[1])
    i = j = 0
    path = []
    for r in range(lattice.n_rounds):
        action = first if r < rounds else 1 - first
        if not lattice.can_move(i, j, action):
            action = 1 - action
        i, j = lattice.next_state(i, j, action)
        path.append(action)
    return tuple(path)


def start_observation(lattice: Lattice) -> np.ndarray:
    """The v2 observation at the episode's start (what a split allocator decides on)."""
    return lattice.observation(0, 0, {AL: None, LR: None}, None, "v2")


def cell_row(lattice: Lattice, level: str, group: str) -> dict[str, Any]:
    """One lattice's row: keys, costs, the start observation, All-in-LR's, the optimum's and
    the best fixed split's mean cost, and every candidate split's (``split_costs``, in
    :func:`candidate_splits` order)."""
    settings = lattice.settings
    splits = candidate_splits(lattice.n_rounds)
    costs = np.array([lattice.mean_cost(split_path(lattice, s)) for s in splits])
    all_in_lr = lattice.mean_cost(split_path(lattice, ALL_IN_LR))
    return {"level": level, "dataset": lattice.dataset, "group": group, "seed": lattice.seed,
            "c_fp": float(settings.c_fp), "c_fn": float(settings.c_fn),
            "unit": float(max(settings.c_fp, settings.c_fn)), "n_rounds": lattice.n_rounds,
            "obs": start_observation(lattice), "all-in-lr": all_in_lr,
            "optimal": lattice.mean_cost(lattice.optimal_path("mean")),
            "best-fixed-per-cell": float(min(costs.min(), all_in_lr)),
            "split_costs": costs}


def group_of(name: str, split: Mapping[str, Any] | None = None) -> str:
    """The split file's group of a data set, a sample of one, or a task of one."""
    if name.startswith("task/"):
        name = parse_task(name)[0]
    base = name.split("@", 1)[0]
    for group, members in (split or load_split())["groups"].items():
        if base in members:
            return str(group)
    raise ValueError(f"{name!r} is in no group of docs/allocation_split.json")


def real_rows(store: LatticeStore, names: Sequence[str], seeds: Sequence[int],
              agents: Sequence[str] = AGENTS) -> pd.DataFrame:
    """Rows of every stored real cell asked for (a missing one skipped), with each agent's
    replayed mean cost."""
    from agents.registry import make_agent

    split = load_split()
    refuse_reserved(names, "issue 40's allocation study")
    made = {agent: make_agent(agent) for agent in agents}  # loading a policy takes seconds
    rows: list[dict[str, Any]] = []
    for level, settings in LEVELS.items():
        for name in names:
            for seed in seeds:
                if not store.path(name, seed, settings).exists():
                    continue
                lattice = store.load(name, seed, settings)
                row = cell_row(lattice, level, group_of(name, split))
                for agent in agents:
                    row[agent] = lattice.mean_cost(lattice.replay(made[agent]))
                rows.append(row)
    return pd.DataFrame(rows)


def task_rows(store: LatticeStore, cells: Sequence[tuple[str, Settings]]) -> pd.DataFrame:
    """Rows of every stored task cell asked for ((name, its settings); seed 0; a missing one
    skipped)."""
    split = load_split()
    rows = []
    for name, settings in cells:
        if not store.path(name, 0, settings).exists():
            continue
        lattice = store.load(name, 0, settings)
        rows.append(cell_row(lattice, "task", group_of(name, split)))
    return pd.DataFrame(rows)


__all__ = ["AGENTS", "LEVELS", "candidate_splits", "cell_row", "group_of", "real_rows",
           "split_path", "start_observation", "task_rows"]
