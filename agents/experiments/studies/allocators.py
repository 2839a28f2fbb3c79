"""The allocator study (ALLOCATORS.md): can a deployable rule beat buying validation labels?

Every allocator is replayed on stored lattices (``ballad_env.lattice``): one per data set,
seed, prior and cost setting, built once into a lattice store under ``<out>/lattices``
(refused, with an error naming the file, once the environment's code changes). Agents are
scored by their mean test cost over rounds, their regret against the hindsight-optimal
path and their rank within each cell; the study tunes on the policy split's training
data sets only and reports on the held-out ones and by leave-three-out folds.
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
CELL = ["costs", "prior", "dataset", "seed"]


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


__all__ = ["BASELINES", "COST_SETTINGS", "NEW_ALLOCATORS", "PARAM_GRIDS", "PRIORS", "RANKED",
           "YARDSTICKS", "Candidate", "build_lattices", "candidates", "compute_replays",
           "cross_validated_paths", "detection_rounds", "fit_logistic", "fit_trait_switch",
           "fixed_split", "goal_table", "heldout_paths", "iter_lattices", "lattice_store",
           "leave_three_out_folds", "paired_change_frame", "paired_change_stats",
           "paired_change_table", "paired_rows", "path_row", "planned_path", "replay_cell",
           "report_tables", "select_params", "signal_accuracy", "signal_rows", "study_settings",
           "summary", "trait_row", "trait_switch_paths", "trait_table", "tuned_paths",
           "with_yardsticks"]
