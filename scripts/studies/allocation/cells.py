"""The allocation study's lattices and what each one gives the fits and the scores.

One lattice store (``<out>/lattices``) holds every pool data set of
``docs/allocation_split.json`` at the three cost levels (:data:`COST_LEVELS`), built by the
harness's executor (``lattice_build.build_store``: local workers or Dask). From each lattice
:func:`cell_record` reads, once, what the fits need: the observation at the decision state
of each probe and the mean cost of every split after it (``split-rule``), and the
yardsticks (All-in-LR, the hindsight optimum, the best fixed split). Reserved data sets are
refused by name before anything is built or read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.lattice_build import build_store
from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import Lattice
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.common.lattice_paths import reference_paths
from scripts.studies.common.split import load_split, played_names, refuse_reserved

#: The cost levels: the paper's costs, a false negative 10 times dearer, a false positive 10
#: times dearer (c_r = gamma throughout, as in the crossed study).
COST_LEVELS: dict[str, Settings] = {"default": Settings(), "cfn10": Settings(c_fn=10.0),
                                    "cfp10": Settings(c_fp=10.0)}
#: Seeds per training cell and per held-out cell.
TRAIN_SEEDS, EVAL_SEEDS = 10, 5
#: The probes a split rule may take before it chooses: none (label-free traits only), or one
#: AL round (how far labels move the detector).
PROBES: dict[str, tuple[int, ...]] = {"none": (), "al": (AL,)}
#: The registered agents replayed on every cell beside the yardsticks.
BASELINES = ("all-in-al", "all-in-lr", "ballad", "sadal", "trait-switch")


def lattice_store(out: Path) -> LatticeStore:
    """The study's lattice store, ``<out>/lattices``."""
    return LatticeStore(Path(out) / "lattices", create=True)


def side_cells(split: Mapping[str, Any], side: str) -> tuple[list[str], list[int]]:
    """The data-set names and seeds of one side of the split (``train`` or ``held_out``)."""
    seeds = TRAIN_SEEDS if side == "train" else EVAL_SEEDS
    return played_names(split[side], split), list(range(seeds))


def build_lattices(out: Path, split: Mapping[str, Any] | None = None, *,
                   data_dir: str | os.PathLike | None = None, n_jobs: int = 1,
                   scheduler: str | None = None, progress: bool = False) -> pd.DataFrame:
    """Build every missing lattice of both sides at every cost level (resumable); the
    store's table of cells (``lattice_build.store_table``)."""
    split = split or load_split()
    tables = []
    for side in ("held_out", "train"):
        names, seeds = side_cells(split, side)
        refuse_reserved(names, "the allocation study")
        tables.append(build_store(lattice_store(out).root, names, seeds,
                                  list(COST_LEVELS.values()), data_dir=data_dir,
                                  n_jobs=n_jobs, scheduler=scheduler, progress=progress))
    return pd.concat(tables, ignore_index=True)


def iter_lattices(out: Path, names: Sequence[str], seeds: Sequence[int],
                  levels: Sequence[str] = tuple(COST_LEVELS)
                  ) -> Iterator[tuple[str, Lattice]]:
    """(cost level, lattice) of every stored cell asked for; a missing one is an error."""
    refuse_reserved(names, "the allocation study")
    store = lattice_store(out)
    for level in levels:
        for name in names:
            for seed in seeds:
                yield level, store.load(name, seed, COST_LEVELS[level])


def probe_path(probe: Sequence[int], lr_rounds: int, n_rounds: int) -> tuple[int, ...]:
    """The probe, ``lr_rounds`` LR rounds, then AL to the end of the budget."""
    rest = n_rounds - len(probe) - lr_rounds
    if rest < 0:
        raise ValueError(f"{lr_rounds} LR rounds do not fit after a probe of {len(probe)} "
                         f"in {n_rounds} rounds")
    return (*probe, *(LR,) * lr_rounds, *(AL,) * rest)


def decision_observation(lattice: Lattice, probe: Sequence[int]) -> np.ndarray:
    """The v2 observation a split rule reads after ``probe``: what the live environment
    shows after those rounds (``Lattice.observation`` on that path)."""
    i = j = 0
    latest: dict[int, dict[str, float] | None] = {AL: None, LR: None}
    previous: int | None = None
    for action in probe:
        i, j = lattice.next_state(i, j, action)
        if action == AL:
            latest[AL] = {s: float(v[i]) for s, v in lattice.al_reward.items()}
        else:
            latest[LR] = {s: float(v[i, j, i]) for s, v in lattice.lr_reward_from.items()}
        previous = action
    return lattice.observation(i, j, latest, previous, "v2")


def split_costs(lattice: Lattice, probe: Sequence[int]) -> np.ndarray:
    """Mean cost of every split after ``probe`` (index m: m LR rounds, then AL); NaN where
    the pools cannot hold it."""
    k = lattice.n_rounds
    costs = np.full(k - len(probe) + 1, np.nan)
    for m in range(costs.size):
        try:
            costs[m] = lattice.mean_cost(probe_path(probe, m, k))
        except ValueError:
            continue
    return costs


def yardsticks(lattice: Lattice) -> dict[str, float]:
    """Mean costs of the hindsight optimum and the best fixed split ("m LR rounds, then AL"
    chosen after the fact)."""
    refs = reference_paths(lattice)
    fixed = [lattice.mean_cost(a) for kind, a in refs.values() if kind == "fixed"]
    return {"optimal": lattice.mean_cost(refs["optimal"][1]),
            "best-fixed-per-cell": float(min(fixed))}


def cell_record(level: str, lattice: Lattice,
                agents: Sequence[str] = BASELINES) -> dict[str, Any]:
    """What the study keeps of one lattice: its keys, the yardsticks and the baselines' mean
    costs, and per probe the decision observation and every split's mean cost."""
    from agents.registry import make_agent

    record: dict[str, Any] = {"level": level, "dataset": lattice.dataset, "seed": lattice.seed,
                              **yardsticks(lattice)}
    for name in agents:
        record[name] = lattice.mean_cost(lattice.replay(make_agent(name)))
    for probe_name, probe in PROBES.items():
        record[f"obs_{probe_name}"] = decision_observation(lattice, probe)
        record[f"splits_{probe_name}"] = split_costs(lattice, probe)
    return record


def cell_records(out: Path, names: Sequence[str], seeds: Sequence[int],
                 levels: Sequence[str] = tuple(COST_LEVELS)
                 ) -> tuple[pd.DataFrame, list[tuple[str, Lattice]]]:
    """:func:`cell_record` of every stored cell asked for, one row each, and the (cost
    level, lattice) pairs in the same order."""
    lattices = list(iter_lattices(out, names, seeds, levels))
    return pd.DataFrame([cell_record(level, lat) for level, lat in lattices]), lattices


__all__ = ["BASELINES", "COST_LEVELS", "EVAL_SEEDS", "PROBES", "TRAIN_SEEDS", "build_lattices",
           "cell_record", "cell_records", "decision_observation", "iter_lattices",
           "lattice_store", "probe_path", "side_cells", "split_costs", "yardsticks"]
