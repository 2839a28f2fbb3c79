"""The allocator study's cells: its settings, its lattice store, the candidate allocators,
and what is replayed on each lattice (paths, signal accuracy, the trait switch's traits).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.allocators import (
    ExpectedImprovementGain,
    PairedProbe,
    ProbeSwitch,
    ThompsonGain,
    TraitSwitch,
)
from agents.base import Agent, RuleAgent, feature
from agents.experiments.executor import execute, worker_limits
from agents.experiments.lattice_build import build_store
from agents.experiments.stores.provenance import package_versions
from agents.experiments.stores.results import FORMAT_VERSION, ResultStore, TableCell
from agents.registry import make_agent
from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import SIGNAL_MODES, SIGNALS, Lattice
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.common.split import refuse_reserved

#: Settings of the study besides the prior, by the tag used in paths and in the tables'
#: ``costs`` column: three cost settings, and the default costs with random AL queries
#: (is it the uncertainty sampling that makes AL expensive?).
COST_SETTINGS: dict[str, dict[str, Any]] = {
    "default": {}, "cfn10": {"c_fn": 10.0}, "cfp10": {"c_fp": 10.0},
    "al-random": {"al_strategy": "random"}}
PRIORS = ("iforest", "knn")
#: The columns that name a cell (one lattice) in the study's tables.
CELL = ["costs", "prior", "dataset", "seed"]


def study_settings(costs: str, prior: str) -> Settings:
    """The episode settings of one tag and prior."""
    if costs not in COST_SETTINGS:
        raise ValueError(f"unknown setting tag {costs!r}: use one of {', '.join(COST_SETTINGS)}")
    return Settings(prior=prior, **COST_SETTINGS[costs])


# ---------------------------------------------------------------------------- lattice store
def lattice_store(root: Path) -> LatticeStore:
    """The study's lattices: a lattice store (``ballad_env.replay.store``) under ``root``,
    so lattices from other environment code are refused, not reused."""
    return LatticeStore(Path(root) / "lattices", create=True)


def build_lattices(root: Path, datasets: Sequence[str], seeds: Iterable[int],
                   priors: Sequence[str] = PRIORS, costs: Sequence[str] = ("default",),
                   data_dir: str | None = None, progress: bool = False) -> int:
    """Build every missing lattice (cost tag x prior x data set x seed) into the study's
    store (``lattice_build.build_store``: resumable); returns the number built. The
    reserved data sets of ``docs/allocation_split.json`` are refused by name."""
    refuse_reserved(datasets, "the allocator study")
    store = lattice_store(root)
    settings = [study_settings(tag, prior) for tag in costs for prior in priors]
    before = sum(len(store.cells(s)) for s in settings)
    build_store(store.root, list(datasets), list(seeds), settings, data_dir=data_dir,
                progress=progress)
    return sum(len(store.cells(s)) for s in settings) - before


def iter_lattices(root: Path, costs: str, prior: str, datasets: Sequence[str],
                  seeds: Iterable[int]) -> Iterable[tuple[str, int, Lattice]]:
    """(data set, seed, lattice) for every stored cell of one cost tag and prior."""
    store = lattice_store(root)
    settings = study_settings(costs, prior)
    for name in datasets:
        for seed in seeds:
            if store.path(name, seed, settings).exists():
                yield name, seed, store.load(name, seed, settings)


# ---------------------------------------------------------------------------- candidates
#: Allocators replayed as they are registered (no parameter to tune).
BASELINES = ("ballad", "all-in-lr", "all-in-al", "epsilon-greedy", "val-cost-greedy",
             "lr-first-50")
#: The new allocators' parameter grids, searched on the training data sets.
_PROBE_GRID: dict[str, list[Any]] = {"warmup": [1, 2, 3, 4, 6, 8, 10], "probe": [1, 2],
                                     "z": [-0.5, 0.0, 1.0, 2.0]}
PARAM_GRIDS: dict[str, dict[str, list[Any]]] = {
    "paired-probe": _PROBE_GRID,
    "paired-commit": _PROBE_GRID,
    "probe-switch": {"warmup": [1, 2, 3, 5],
                     "threshold": [0.03, 0.05, 0.07, 0.09, 0.11, 0.13, 0.15, 0.2]},
    "thompson-gain": {"prior_mean": [-1.0, -0.5, 0.0, 0.5, 1.0], "prior_sd": [0.25, 1.0, 2.0],
                      "noise": [0.5, 2.0], "lr_gain": [0.0, 2.0, 8.0]},
    "ei-gain": {"prior_mean": [-1.0, -0.5, 0.0, 0.5, 1.0], "prior_sd": [0.25, 1.0],
                "noise": [0.5, 2.0], "lr_gain": [0.0, 2.0], "kappa": [1.0, 4.0, 16.0]},
}
_FACTORIES: dict[str, Callable[..., Agent]] = {
    "paired-probe": lambda **p: PairedProbe(recheck=True, **p),
    "paired-commit": lambda **p: PairedProbe(recheck=False, **p),
    "probe-switch": lambda **p: ProbeSwitch(**p),
    "thompson-gain": lambda **p: ThompsonGain(**p),
    "ei-gain": lambda **p: ExpectedImprovementGain(**p),
}
#: The allocators the study proposes (the rest are yardsticks and earlier rules).
NEW_ALLOCATORS = ("paired-probe", "paired-commit", "probe-switch", "thompson-gain",
                  "ei-gain", "trait-switch")


@dataclass(frozen=True)
class Candidate:
    """One allocator to replay: a registered family and (for the tuned ones) parameters."""

    family: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """``family`` or ``family[name=value,...]``."""
        if not self.params:
            return self.family
        return self.family + "[" + ",".join(f"{k}={v:g}" for k, v in self.params) + "]"

    def make(self) -> Agent:
        """A fresh agent."""
        if not self.params:
            return make_agent(self.family)
        return _FACTORIES[self.family](**dict(self.params))


def candidates(grids: dict[str, dict[str, list[Any]]] | None = None,
               baselines: Sequence[str] = BASELINES) -> list[Candidate]:
    """The baselines, then every parameter combination of each grid."""
    out = [Candidate(name) for name in baselines]
    for family, grid in (PARAM_GRIDS if grids is None else grids).items():
        names = list(grid)
        for values in itertools.product(*(grid[n] for n in names)):
            out.append(Candidate(family, tuple(zip(names, values, strict=True))))
    return out


# ---------------------------------------------------------------------------- replays
def path_row(lattice: Lattice, actions: Sequence[int], optimum: float) -> dict[str, float]:
    """Mean and final test cost, regret and AL share of one path through ``lattice``."""
    costs = lattice.costs_along(actions)
    return {"mean_cost": float(costs.mean()), "final_cost": float(costs[-1]),
            "regret": float(costs.mean() - optimum),
            "al_share": float(np.mean(np.asarray(actions) == AL))}


def fixed_split(lattice: Lattice, m: int) -> tuple[int, ...]:
    """m LR rounds, then AL (the other side when a pool runs out)."""
    actions, i, j = [], 0, 0
    for t in range(lattice.n_rounds):
        action = LR if t < m else AL
        if not lattice.can_move(i, j, action):
            action = 1 - action
        actions.append(action)
        i, j = (i + 1, j) if action == AL else (i, j + 1)
    return tuple(actions)


def replay_cell(lattice: Lattice, cands: Sequence[Candidate], yardsticks: bool = True
                ) -> list[dict[str, Any]]:
    """One row per path in one lattice: each candidate's replay and (with ``yardsticks``)
    the optimal path, the one-step oracle and every fixed split ``fixed-lr<m>`` (family
    ``fixed``)."""
    optimal = lattice.optimal_path("mean")
    optimum = lattice.mean_cost(optimal)
    rows = [{"allocator": "optimal", "family": "optimal", **path_row(lattice, optimal, optimum)},
            {"allocator": "oracle", "family": "oracle",
             **path_row(lattice, lattice.one_step_oracle(), optimum)}] if yardsticks else []
    for m in range(lattice.n_rounds + 1 if yardsticks else 0):
        rows.append({"allocator": f"fixed-lr{m}", "family": "fixed",
                     **path_row(lattice, fixed_split(lattice, m), optimum)})
    for cand in cands:
        rows.append({"allocator": cand.label, "family": cand.family,
                     **path_row(lattice, lattice.replay(cand.make()), optimum)})
    return rows


def signal_rows(lattice: Lattice) -> list[dict[str, Any]]:
    """Every signal's score (``Lattice.score_signal``) in both modes."""
    return [{"signal": s, "mode": m, **lattice.score_signal(s, m)}
            for s in SIGNALS for m in SIGNAL_MODES]


def compute_replays(root: Path, costs: Sequence[str], priors: Sequence[str],
                    datasets: Sequence[str], seeds: Iterable[int],
                    cands: Sequence[Candidate], log: Callable[[str], None] | None = None,
                    n_jobs: int = 1, scheduler: str | None = None
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Replay ``cands`` on every stored lattice; (paths, signals), tidy. Each cell (cost
    tag, prior, data set, seed) runs through the harness's executor and is written to the
    study's ``ResultStore`` under ``<root>/replays`` as it finishes (``replay_cells``), so a
    rerun reuses it; candidates missing from a stored cell are replayed and appended
    (delete that folder after changing an allocator or a grid value)."""
    keys = replay_cells(root, costs, priors, datasets, seeds, cands, log, n_jobs, scheduler)
    if not keys:
        raise FileNotFoundError(f"no lattices under {Path(root) / 'lattices'}: build them first")
    return stored_table(root, "paths", keys), stored_table(root, "signals", keys)


# ---------------------------------------------------------------------------- the replay store
#: The tables each cell writes, one file each; ``paths`` (last) marks the cell finished.
REPLAY_TABLES = ("signals", "traits", "paths")
#: One cell of the replays: (cost tag, prior, data set, seed), the values of ``CELL``.
ReplayKey = tuple[str, str, str, int]


def replay_store(root: Path) -> ResultStore:
    """The study's replays: a ``ResultStore`` under ``<root>/replays``, a ``TableCell`` per
    table (``REPLAY_TABLES``) of each cell."""
    return ResultStore(Path(root) / "replays")


def table_cell(table: str, key: ReplayKey) -> TableCell:
    """The stored file of one table of one cell."""
    return TableCell(table, tuple(zip(CELL, key, strict=True)))


def stored_table(root: Path, table: str, keys: Sequence[ReplayKey]) -> pd.DataFrame:
    """One table of the given cells from the replay store, in their order."""
    store = replay_store(root)
    return pd.concat([store.read(table_cell(table, key)) for key in keys], ignore_index=True)


def prepare_replay_store(root: Path, costs: Sequence[str], priors: Sequence[str],
                         datasets: Sequence[str], seeds: Sequence[int],
                         cands: Sequence[Candidate]) -> ResultStore:
    """The replay store, its ``run.json`` grown to this run's grid; ``RunError`` if it holds
    results of other package versions or source."""
    store = replay_store(root)
    stored = (store.read_manifest() or {}).get("grid", {})

    def grown(axis: str, values: Iterable[Any]) -> list[Any]:
        return list(dict.fromkeys([*stored.get(axis, []), *values]))

    grid = {"costs": grown("costs", costs), "priors": grown("priors", priors),
            "datasets": grown("datasets", datasets), "seeds": grown("seeds", seeds),
            "allocators": grown("allocators", (c.label for c in cands))}
    store.prepare({"format": FORMAT_VERSION, "study": "allocators", "grid": grid,
                   "versions": package_versions(),
                   "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")})
    return store


def replay_work(task: tuple[Path, ReplayKey, tuple[Candidate, ...], pd.DataFrame | None],
                single_thread: bool = True) -> tuple[ReplayKey, dict[str, pd.DataFrame]]:
    """One cell's tables: its lattice's paths (``replay_cell``), signals (``signal_rows``)
    and traits (``trait_row``); or, for a finished cell (its stored ``paths`` given), those
    paths with the missing candidates' rows appended."""
    root, key, cands, stored = task
    tag, prior, name, seed = key
    keys = dict(zip(CELL, key, strict=True))
    with worker_limits(single_thread):
        lattice = lattice_store(root).load(name, seed, study_settings(tag, prior))
        if stored is not None:
            missing = [c for c in cands if c.label not in set(stored["allocator"])]
            new = pd.DataFrame([{**keys, **row}
                                for row in replay_cell(lattice, missing, yardsticks=False)])
            return key, {"paths": pd.concat([stored, new], ignore_index=True)}
        return key, {
            "signals": pd.DataFrame([{**keys, **row} for row in signal_rows(lattice)]),
            "traits": pd.DataFrame([{**keys, **trait_row(lattice)}]),
            "paths": pd.DataFrame([{**keys, **row} for row in replay_cell(lattice, cands)])}


def replay_cells(root: Path, costs: Sequence[str], priors: Sequence[str],
                 datasets: Sequence[str], seeds: Iterable[int], cands: Sequence[Candidate],
                 log: Callable[[str], None] | None = None, n_jobs: int = 1,
                 scheduler: str | None = None) -> list[ReplayKey]:
    """Run every pending cell (a stored lattice not replayed, or replayed without some of
    ``cands``) through the executor into the replay store; the cells with a lattice, in
    the tables' order (cost tag, prior, data set, seed)."""
    seeds = list(seeds)
    lattices = lattice_store(root)
    keys = [(tag, prior, name, seed)
            for tag, prior, name, seed in itertools.product(costs, priors, datasets, seeds)
            if lattices.path(name, seed, study_settings(tag, prior)).exists()]
    store = prepare_replay_store(root, costs, priors, datasets, seeds, cands)
    labels = {c.label for c in cands}
    tasks = []
    for key in keys:
        cell = table_cell("paths", key)
        stored = store.read(cell) if store.path(cell).exists() else None
        if stored is None or not labels <= set(stored["allocator"]):
            tasks.append((Path(root), key, tuple(cands), stored))
    for key, tables in execute(tasks, replay_work, n_jobs, scheduler):
        for table in REPLAY_TABLES:  # "paths" last: the cell is finished once it is there
            if table in tables:
                store.write(table_cell(table, key), tables[table])
        if log is not None:
            log(f"replayed {' '.join(map(str, key))}: {len(tables['paths'])} paths")
    return keys


# ---------------------------------------------------------------------------- trait switch
#: The trait switch's probe (one AL round: the decision that matters comes first) and the
#: L2 penalty of its logistic fit (on standardised traits).
TRAIT_PROBE = (AL,)
TRAIT_L2 = 1.0


def planned_path(lattice: Lattice, planned: Sequence[int]) -> tuple[int, ...]:
    """``planned`` actions, each replaced by the other one where its pool is exhausted."""
    actions, i, j = [], 0, 0
    for action in planned:
        if not lattice.can_move(i, j, action):
            action = 1 - action
        actions.append(action)
        i, j = (i + 1, j) if action == AL else (i, j + 1)
    return tuple(actions)


class _TraitRecorder(RuleAgent):
    """Plays the probe, then LR; keeps the observation the trait switch decides on."""

    observation_version = "v1"

    def __init__(self, probe: Sequence[int]) -> None:
        self.probe = tuple(probe)
        self.seen: np.ndarray | None = None
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self.rounds = 0

    def act(self, observation: np.ndarray) -> int:
        if self.rounds == len(self.probe):
            self.seen = observation.copy()
        self.rounds += 1
        return self.probe[self.rounds - 1] if self.rounds <= len(self.probe) else LR


def trait_row(lattice: Lattice, probe: Sequence[int] = TRAIT_PROBE) -> dict[str, float]:
    """The traits the trait switch reads after ``probe``, and the mean cost, final cost,
    regret and AL share of its two continuations (``al_*``: AL to the end, ``lr_*``)."""
    recorder = _TraitRecorder(probe)
    lattice.replay(recorder)
    assert recorder.seen is not None

    row = {name: feature(recorder.seen, name) for name in TraitSwitch.TRAITS}
    optimum = lattice.mean_cost(lattice.optimal_path("mean"))
    rest = lattice.n_rounds - len(probe)
    for action, side in ((AL, "al"), (LR, "lr")):
        path = planned_path(lattice, (*probe, *[action] * rest))
        row.update({f"{side}_{k}": v for k, v in path_row(lattice, path, optimum).items()})
    return row


def trait_table(root: Path, costs: Sequence[str], priors: Sequence[str],
                datasets: Sequence[str], seeds: Iterable[int]) -> pd.DataFrame:
    """:func:`trait_row` of every stored lattice, tidy: the ``traits`` table the replay
    store holds for each cell (written with its replays, :func:`compute_replays`)."""
    seeds = list(seeds)
    lattices, store = lattice_store(root), replay_store(root)
    keys = [(tag, prior, name, seed)
            for tag, prior, name, seed in itertools.product(costs, priors, datasets, seeds)
            if lattices.path(name, seed, study_settings(tag, prior)).exists()]
    missing = [key for key in keys if not store.path(table_cell("traits", key)).exists()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} cells have no replays under {store.root} "
                                f"(the first: {missing[0]}): run compute_replays first")
    return stored_table(root, "traits", keys) if keys else pd.DataFrame(columns=CELL)
