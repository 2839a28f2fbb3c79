"""The allocator study's cells: its settings, its lattice store, the candidate allocators,
and what is replayed on each lattice (paths, signal accuracy, the trait switch's traits).
"""

from __future__ import annotations

import itertools
import os
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
from agents.experiments.lattice_build import build_store
from agents.registry import make_agent
from ballad_env.episode import AL, LR
from ballad_env.lattice import SIGNAL_MODES, SIGNALS, Lattice
from ballad_env.lattice_store import LatticeStore
from ballad_env.settings import Settings

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
    """The study's lattices: a lattice store (``ballad_env.lattice_store``) under ``root``,
    so lattices from other environment code are refused, not reused."""
    return LatticeStore(Path(root) / "lattices", create=True)


def build_lattices(root: Path, datasets: Sequence[str], seeds: Iterable[int],
                   priors: Sequence[str] = PRIORS, costs: Sequence[str] = ("default",),
                   data_dir: str | None = None, progress: bool = False) -> int:
    """Build every missing lattice (cost tag x prior x data set x seed) into the study's
    store (``lattice_build.build_store``: resumable); returns the number built."""
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
                    cands: Sequence[Candidate],
                    log: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Replay ``cands`` on every cached lattice; (paths, signals), tidy. Each (cost tag,
    prior, data set) is written to ``<root>/replays`` as it finishes and reused on a rerun;
    candidates missing from a cached file are replayed and appended (delete that folder
    after changing an allocator or a grid value)."""
    seeds = list(seeds)
    paths, signals = [], []
    for tag, prior, name in itertools.product(costs, priors, datasets):
        folder = Path(root) / "replays" / tag / prior
        files = (folder / f"{name}_paths.parquet", folder / f"{name}_signals.parquet")
        if all(f.exists() for f in files):
            _append_missing(root, tag, prior, name, seeds, cands, files[0], log)
        else:
            rows, sig = [], []
            for _, seed, lattice in iter_lattices(root, tag, prior, [name], seeds):
                keys = {"costs": tag, "prior": prior, "dataset": name, "seed": seed}
                rows += [{**keys, **row} for row in replay_cell(lattice, cands)]
                sig += [{**keys, **row} for row in signal_rows(lattice)]
            if not rows:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            for frame, path in ((pd.DataFrame(rows), files[0]), (pd.DataFrame(sig), files[1])):
                tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
                frame.to_parquet(tmp, index=False)
                tmp.replace(path)
            if log is not None:
                log(f"replayed {tag} {prior} {name}: {len(rows)} paths")
        paths.append(pd.read_parquet(files[0]))
        signals.append(pd.read_parquet(files[1]))
    if not paths:
        raise FileNotFoundError(f"no lattices under {Path(root) / 'lattices'}: build them first")
    return pd.concat(paths, ignore_index=True), pd.concat(signals, ignore_index=True)


def _append_missing(root: Path, tag: str, prior: str, name: str, seeds: Sequence[int],
                    cands: Sequence[Candidate], path: Path,
                    log: Callable[[str], None] | None) -> None:
    """Replay the candidates a cached paths file lacks, and append their rows to it."""
    cached = pd.read_parquet(path)
    missing = [c for c in cands if c.label not in set(cached["allocator"])]
    if not missing:
        return
    rows = [{"costs": tag, "prior": prior, "dataset": name, "seed": seed, **row}
            for _, seed, lattice in iter_lattices(root, tag, prior, [name], seeds)
            for row in replay_cell(lattice, missing, yardsticks=False)]
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    pd.concat([cached, pd.DataFrame(rows)], ignore_index=True).to_parquet(tmp, index=False)
    tmp.replace(path)
    if log is not None:
        log(f"replayed {tag} {prior} {name}: {len(rows)} paths added")


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
    """:func:`trait_row` of every cached lattice, tidy (cached as ``<root>/traits.parquet``;
    delete it after changing the probe or the traits)."""
    path = Path(root) / "traits.parquet"
    cached = pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=CELL)
    seeds = list(seeds)
    done = set(zip(*(cached[k] for k in CELL), strict=True))
    rows = [{"costs": tag, "prior": prior, "dataset": name, "seed": seed, **trait_row(lattice)}
            for tag, prior in itertools.product(costs, priors)
            for name, seed, lattice in iter_lattices(
                root, tag, prior, [n for n in datasets
                                   if any((tag, prior, n, s) not in done for s in seeds)], seeds)
            if (tag, prior, name, seed) not in done]
    if rows:
        cached = pd.concat([cached, pd.DataFrame(rows)], ignore_index=True) if len(cached) \
            else pd.DataFrame(rows)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        cached.to_parquet(tmp, index=False)
        tmp.replace(path)
    keep = cached["costs"].isin(list(costs)) & cached["prior"].isin(list(priors)) \
        & cached["dataset"].isin(list(datasets)) & cached["seed"].isin(seeds)
    return cached[keep].reset_index(drop=True)
