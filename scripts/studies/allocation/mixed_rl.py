"""The RL family on mixed tasks and costs, beside the split families
(docs/studies/ALLOCATION_MIXED_RL.md).

One MaskablePPO policy plays every task and cost: it trains on a ``ReplayVectorEnv`` of
mixed cells (``cells=``, each sub-environment playing its drawn cell at that cell's own
costs, its traits and costs in observation v2): the real-anomaly tasks of the training
sources at their own drawn costs (``task/<source>/real-<k>``, k < :data:`TASKS_PER_SOURCE`;
the real training sets at the three levels are what it is scored on). Its reward is
``round_cost`` (the return is minus the mean cost the study scores). It ships only behind the split
family's fallback (``agents.gated_policy.GatedPolicy``): the safe split's gain lower bound
and trait-distance check (the shipped ``safe-split-2`` candidate, refitted on the same
training rows) decide whether to leave All-in-LR, and the policy's AL needs at least a
threshold of its probability (:data:`THRESHOLDS`, 0.5 the greedy policy).

Cross validation uses the allocation study's folds of the 15 training data sets
(``tasks_fit.folds``): each fold's policy and gate learn from the other folds' data sets and
the tasks of their groups only, and play the fold's real cells (lattice replay, exact). The
RL candidates join the split families' table (``safe_study.cross_validations``: every
``safe-split`` candidate, ``fixed-split-by-cost`` and All-in-LR) and
``tasks_fit.choose_safely`` picks among the shippable ones (a fallback by construction).
Every RL candidate of the policy trained on every training group's tasks (its gate
refitted on every training row) is then replayed on the held-out cells beside the split
family's choice, shares with standard errors per level: a measurement beside the choice,
which the training folds alone make. No reserved data set is read; no task comes from a
held-out group.

    python -m scripts.studies.allocation.mixed_rl --out results/allocation_safe --update-docs
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.allocation import ConfidentPolicy, packaged_params
from agents.gated_policy import GatedPolicy
from agents.split_allocators import SafeSplit
from ballad_env.data.lookup import task_costs
from ballad_env.data.tasks import parse_task
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.allocation import safe_study as S
from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation import tasks_report as R
from scripts.studies.allocation.tasks_cells import LEVELS, group_of, real_rows
from scripts.studies.allocation.tasks_study import task_cells
from scripts.studies.common.options import REPO
from scripts.studies.common.split import load_split, played_names, refuse_reserved

#: Real-anomaly tasks per training source the policy and the gate learn from (the point
#: the shipped ``safe-split-2`` was chosen at).
TASKS_PER_SOURCE = 10
#: Environment steps per policy, sub-environments and the seed; PPO's rollout length per
#: sub-environment, minibatch and epochs (SB3's 2,048 x 64 would give one update in
#: 100,000 steps; these give 12 updates of 160 minibatches: the shared 2-core machine's
#: budget); SB3's defaults otherwise. Fixed before any run, not tuned.
STEPS, N_ENVS, SEED = 100_000, 64, 0
PPO: dict[str, Any] = {"n_steps": 128, "batch_size": 256, "n_epochs": 5}
#: The fallback's thresholds on the policy's AL probability.
THRESHOLDS = (0.5, 0.7, 0.9)
#: The observation the policy reads.
OBSERVATION = ("v2")


def gate_candidate() -> dict[str, Any]:
    """The shipped ``safe-split-2``'s candidate (ridge penalty, bound width, margin, distance
    quantile, task weight): the gate every RL candidate plays behind."""
    return dict(packaged_params()["families"]["safe-split-2"]["candidate"])


def training_cells(tasks: Sequence[str]) -> list[tuple[str, int, Settings]]:
    """The mixed cells of these tasks, each at its own costs (seed 0)."""
    refuse_reserved([parse_task(name)[0] for name in tasks], "the mixed RL family's training")
    return [(name, 0, Settings().replace(**task_costs(name))) for name in tasks]


def fold_groups() -> list[list[str]]:
    """The groups each policy learns from: those of the training data sets outside each
    of the study's folds (``tasks_fit.folds``), then every training group (the last)."""
    names = played_names(load_split()["train"])
    outside = [[group_of(n) for n in names if n not in fold] for fold in F.folds(names)]
    return [*outside, sorted({group_of(n) for n in names})]


def policy_path(out: Path, k: int) -> Path:
    """Where fold ``k``'s policy is saved (``k`` = the number of folds: every group)."""
    return Path(out) / "mixed_rl" / (f"fold{k}.zip" if k < F.N_FOLDS else "all.zip")


def train_all(out: Path, steps: int = STEPS) -> list[float]:
    """Train (or keep) every fold's policy and the final one on the tasks of their groups
    (:func:`fold_groups`, real-anomaly tasks k < :data:`TASKS_PER_SOURCE`) from the store
    ``<out>/lattices``; the CPU seconds of each (NaN where kept)."""
    tasks = [name for name, _ in task_cells(TASKS_PER_SOURCE, real=True)]
    return [train(out / "lattices", training_cells([t for t in tasks if group_of(t) in groups]),
                  policy_path(out, k), steps) for k, groups in enumerate(fold_groups())]


def train(store: Path, cells: Sequence[tuple[str, int, Settings]], path: Path,
          steps: int = STEPS) -> float:
    """Train MaskablePPO on the mixed ``cells`` of ``store`` and save it at ``path`` (kept
    if it is there already); the CPU seconds it took (NaN if kept)."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.utils import set_random_seed

    from agents.experiments.training.vec_adapter import make_replay_vec_env

    if path.exists():
        return float("nan")
    torch.set_num_threads(1)
    set_random_seed(SEED)
    env = make_replay_vec_env(N_ENVS, store, cells=list(cells), observation=OBSERVATION,
                              reward="round_cost")
    start = time.process_time()
    model = MaskablePPO("MlpPolicy", env, seed=SEED, device="cpu", verbose=0, **PPO)
    model.learn(total_timesteps=steps)
    seconds = time.process_time() - start
    env.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return seconds


def load(path: Path) -> Any:
    """The saved policy as an agent (``PolicyAgent``), read without unpickling."""
    from sb3_contrib import MaskablePPO

    from agents.policy import PolicyAgent
    from agents.policy_zip import load_model_safely
    from ballad_env.observation import OBSERVATIONS

    model = load_model_safely(path, MaskablePPO, OBSERVATION)
    return PolicyAgent(model, {"algo": "maskable_ppo",
                               "observation_features": list(OBSERVATIONS[OBSERVATION])},
                       path.stem)


def candidates(policy: Any, gate: SafeSplit) -> dict[str, Any]:
    """The RL family's candidates: the greedy policy alone (no fallback) and behind the
    gate at each threshold."""
    made: dict[str, Any] = {"rl greedy": ConfidentPolicy(policy, 0.5)}
    made |= {f"rl gated {t:g}": GatedPolicy(gate, policy, t) for t in THRESHOLDS}
    return made


def replay_costs(store: LatticeStore, rows: pd.DataFrame, agents: dict[str, Any]
                 ) -> dict[str, np.ndarray]:
    """Each agent's mean cost on each row's lattice (the row's level's settings)."""
    costs: dict[str, list[float]] = {name: [] for name in agents}
    for row in rows.itertuples():
        lattice = store.load(str(row.dataset), int(row.seed), LEVELS[str(row.level)])
        for name, agent in agents.items():
            costs[name].append(lattice.mean_cost(lattice.replay(agent)))
    return {name: np.array(values) for name, values in costs.items()}


def cross_validate(out: Path, real: pd.DataFrame, tasks: pd.DataFrame) -> pd.DataFrame:
    """The RL candidates' cross-validated rows (``tasks_fit.cv_row``; ``safe``: behind the
    gate), each fold's policy (:func:`train_all`) and gate fitted outside the fold."""
    store, fold_list = LatticeStore(out / "lattices"), F.folds(list(real["dataset"]))
    chosen = tasks[tasks["k"] < TASKS_PER_SOURCE]
    if fold_list != F.folds(played_names(load_split()["train"])):
        raise ValueError("the rows lack a training data set: the folds differ from the "
                         "policies'; build every training cell")
    results: dict[str, np.ndarray] = {}
    for k, (fold, groups) in enumerate(zip(fold_list, fold_groups(), strict=False)):
        out_fold = real["dataset"].isin(fold).to_numpy()
        train_rows = F.training_rows(real[~out_fold], chosen, groups)
        gate = SafeSplit.from_entry(F.fit_safe(train_rows, **gate_candidate()))
        fold_costs = replay_costs(store, real[out_fold],
                                  candidates(load(policy_path(out, k)), gate))
        for name, values in fold_costs.items():
            results.setdefault(name, np.full(len(real), np.nan))[out_fold] = values
    rows = [F.cv_row(name, {}, real, values, fold_list) for name, values in results.items()]
    table = pd.DataFrame(rows).assign(point=TASKS_PER_SOURCE, tasks=len(chosen))
    table["safe"] = table["candidate"].str.startswith("rl gated")
    return table


def held_out(out: Path, real: pd.DataFrame, tasks: pd.DataFrame, held: pd.DataFrame
             ) -> dict[str, np.ndarray]:
    """Every RL candidate of the policy trained on every training group's tasks, its gate
    refitted on every training row, replayed on the held-out rows: their mean costs (a
    measurement beside the choice, which the training folds alone make)."""
    chosen = tasks[tasks["k"] < TASKS_PER_SOURCE]
    train_rows = F.training_rows(real, chosen, sorted(set(real["group"])))
    gate = SafeSplit.from_entry(F.fit_safe(train_rows, **gate_candidate()))
    agents = candidates(load(policy_path(out, F.N_FOLDS)), gate)
    return replay_costs(LatticeStore(out / "lattices"), held, agents)


def load_rows(out: Path, kind: str, seeds: int) -> pd.DataFrame:
    """The rows of the training (``train``) or held-out (``held_out``) cells at ``seeds``
    seeds, no registered agent replayed (``tasks_cells.real_rows``), cached in
    ``<out>/rows5_<kind>_<seeds>.pkl``; the tasks' rows as ``safe_study.load_rows``."""
    if kind == "real":
        return S.load_rows(out, kind, seeds)
    path = out / f"rows5_{kind}_{seeds}.pkl"
    if not path.exists():
        rows = real_rows(LatticeStore(out / "lattices"), played_names(load_split()[kind]),
                         range(seeds), ())
        rows.to_pickle(path)
    return pd.read_pickle(path)


def run(out: Path, train_seeds: int, held_seeds: int, steps: int = STEPS,
        docs: Path | None = None) -> dict[str, Any]:
    """The study (the module docstring): the joint table, the choice, the held-out shares."""
    seconds = train_all(out, steps)
    real, held = load_rows(out, "train", train_seeds), load_rows(out, "held_out", held_seeds)
    tasks = load_rows(out, "real", TASKS_PER_SOURCE)
    split_cv = S.cross_validations(real, tasks)
    split_cv = split_cv[split_cv["point"] == TASKS_PER_SOURCE]
    rl_cv = cross_validate(out, real, tasks)
    joint = pd.concat([split_cv, rl_cv], ignore_index=True)
    chosen = S.pick(joint)
    best_rl = S.pick(rl_cv).get("candidate", "")
    best_split = S.pick(split_cv)
    columns = {"split family's choice": F.costs_of(
        held, F.safe_choices(S.fit_choice(real, tasks, best_split), held))}
    columns |= held_out(out, real, tasks, held)
    shares = R.shares_frame(held, columns, {})
    cv_columns = ["candidate", "safe", *(f"{k} {lv}" for k in ("fold", "se", "lower")
                                         for lv in R.LEVELS), "fold mean"]
    ranked = joint.sort_values("fold mean", ascending=False)
    rl = ranked["candidate"].str.startswith("rl")
    named = ranked["candidate"].isin(["fixed-split-by-cost", "all-in-lr"])
    top = pd.concat([ranked[rl], ranked[~rl & ranked["safe"] & ~named].head(4), ranked[named]])
    tables = {"cv": top[cv_columns], "shares": shares,
              "per_dataset": R.per_dataset(held, {k: columns[k] for k in (
                  "split family's choice", "rl greedy", "rl gated 0.5")}),
              "choice": pd.DataFrame([{"rule": "safety rule, shippable, split and RL",
                                       "choice": _shown(chosen["candidate"])},
                                      {"rule": "RL family's best shippable",
                                       "choice": _shown(best_rl)},
                                      {"rule": "split family's best shippable",
                                       "choice": _shown(best_split["candidate"])}])}
    R.write_all(tables, (docs if docs is not None else out) / "tables", prefix="mixed_rl")
    return {**tables, "cpu_s": seconds, "chosen": chosen["candidate"]}


def _shown(choice: Any) -> str:
    """A choice (``<tasks per source>|<candidate>``, ``safe_study.pick``'s) as a table shows
    it (no ``|``, which would split a Markdown cell)."""
    point, _, candidate = str(choice).partition("|")
    return f"{candidate} ({point} tasks per source)"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "results" / "allocation_safe",
                   help="the study's folder: its store (<out>/lattices, built by safe_study "
                   "--build), cached rows, the policies (<out>/mixed_rl) and tables")
    p.add_argument("--steps", type=int, default=STEPS, help="environment steps per policy")
    p.add_argument("--train-seeds", type=int, default=5, help="seeds per training cell")
    p.add_argument("--held-seeds", type=int, default=10, help="seeds per held-out cell")
    p.add_argument("--train-only", action="store_true", help="train the policies and stop")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tables into docs/tables (mixed_rl_*)")
    args = p.parse_args(argv)
    if args.train_only:
        print(f"training CPU s per policy: {train_all(args.out, args.steps)}")
        return 0
    result = run(args.out, args.train_seeds, args.held_seeds, args.steps,
                 REPO / "docs" if args.update_docs else None)
    for name in ("cv", "shares", "choice"):
        print(result[name].round(3).to_string(index=False))
    print(f"chosen {result['chosen']}; training CPU s per policy {result['cpu_s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
