"""The policy study at scale: PPO, DQN and MaskablePPO trained on the replay environment.

The first study (``policy_study``) could afford 300 live episodes per run; on stored lattices
(``REPLAY.md``) a run takes 10^5 episodes. Three steps, each reading what the previous wrote
(``python -m scripts.studies.policy_scale`` is their command line):

* train: one ``training.train`` run per (algorithm, reward, observation, seed) on the
  training store (the 12 training sets x their stored seeds), in the executor's workers
  (:func:`train_policies`);
* evaluate: every policy, BALLAD, All-in-AL, All-in-LR, the one-step oracle and the hindsight
  optimum replayed on the evaluation store's lattices (``Lattice.replay``, exact for agents
  that read their observations), one tidy row per (data set, seed, agent, round) in the
  study's ``ResultStore`` (:func:`evaluate`); the evaluation seeds must not be training seeds;
* report: tables and figures from those files (:func:`write_report`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from agents.experiments.stores.results import writable_folder
from agents.experiments.training.curves import plot_training_curves
from agents.registry import make_agent
from agents.reports.tables import write_table
from ballad_env.episode import ACTION_NAMES
from ballad_env.replay.lattice import Lattice
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.common.policy_runs import (
    StudyError,
    by_training_seed,
    episode_table,
    load_rounds,
    model_path,
    plot_by_round,
    policy_dir,
    prepare_rounds,
    run_folders,
    run_name,
    stored_episodes,
    train_runs,
    trained_policies,
    training_times,
    write_episode,
)
from scripts.studies.common.ppo_sizes import STUDY_PPO_SIZES

if TYPE_CHECKING:
    from agents.experiments.training.config import TrainConfig

#: The rule agents replayed next to the policies, and the lattice yardsticks: the one-step
#: oracle and the hindsight optima of the mean cost over rounds and of the final cost (the
#: ``cost`` reward's return, with discount 1, is the start cost minus the final cost).
RULES = ("ballad", "all-in-al", "all-in-lr")
YARDSTICKS = ("oracle", "optimal", "optimal-final")
#: (algorithm, reward, observation) of the default runs: the three algorithms on the
#: test-cost reward, reading v0 (``--runs maskable_ppo:cost:v1`` adds the validation-sample
#: cost to what a policy sees).
DEFAULT_RUNS = (("maskable_ppo", "cost", "v0"), ("ppo", "cost", "v0"), ("dqn", "cost", "v0"))
COLUMNS = ("dataset", "seed", "split", "agent", "round", "action", "test_cost")
REPORT_ORDER = ("optimal", "optimal-final", "oracle", "ballad", "all-in-al", "all-in-lr")


@dataclass(frozen=True)
class ScalePlan:
    """The runs and how each one trains (sizes for 10^5 episodes on the replay store)."""

    train_store: Path
    split_file: Path
    runs: tuple[tuple[str, str, str], ...] = DEFAULT_RUNS
    train_seeds: int = 3
    episodes: int = 100_000
    # the bench times SB3 at these sizes (STUDY_PPO_SIZES, written once there)
    n_envs: int = STUDY_PPO_SIZES.n_envs
    n_steps: int = STUDY_PPO_SIZES.n_steps  # per worker: 1,024 steps per update
    batch_size: int = STUDY_PPO_SIZES.batch_size
    n_epochs: int = STUDY_PPO_SIZES.n_epochs
    learning_rate: float = STUDY_PPO_SIZES.learning_rate
    settings: Settings = Settings()  # the episode's options (the reward is each run's)


def training_sets(split_file: Path) -> list[str]:
    """The split's training data sets."""
    return list(json.loads(Path(split_file).read_text())["train"])


def train_configs(plan: ScalePlan, study: Path) -> dict[str, TrainConfig]:
    """One training run per (algorithm, reward, observation, seed) on the replay store,
    seed-major (every group's seed 0 first); the run's group (its name without the seed)
    is ``<algo>-<reward>-<observation>``."""
    from agents.experiments.training.config import TrainConfig

    sets = tuple(training_sets(plan.split_file))
    configs = {}
    for seed in range(plan.train_seeds):
        for algo, reward, observation in plan.runs:
            name = run_name(algo, f"{reward}-{observation}", seed, len(sets))
            configs[name] = TrainConfig(
                algo=algo, datasets=sets, settings=plan.settings.replace(reward=reward),
                total_timesteps=plan.episodes * plan.settings.n_rounds, seed=seed,
                n_envs=plan.n_envs, vec_env="dummy",
                hyperparameters={"learning_rate": plan.learning_rate, "n_steps": plan.n_steps,
                                 "batch_size": plan.batch_size, "n_epochs": plan.n_epochs},
                observation=observation, eval_freq=0, checkpoint_freq=0,
                output_dir=str(policy_dir(study)), run_name=name,
                replay_store=str(plan.train_store), progress_bar=False)
    return configs


def train_policies(plan: ScalePlan, study: Path, jobs: int = 1) -> list[str]:
    """Train the runs without a saved model (in the plan's order; one interrupted earlier
    again from the start, its unfinished folder replaced); the failed run names."""
    todo = {name: replace(config, overwrite=True)
            for name, config in train_configs(plan, study).items()
            if not model_path(study, name).exists()}
    print(f"{len(todo)} runs to train", flush=True)
    return train_runs(todo, jobs, Path(study) / "logs")


# --------------------------------------------------------------------------- evaluate
def check_unseen(train_store: Path, eval_store: Path, settings: Settings) -> None:
    """No evaluation cell may be a training cell: same data set and seed in both stores."""
    trained = set(LatticeStore(train_store).cells(settings))
    overlap = trained & set(LatticeStore(eval_store).cells(settings))
    if overlap:
        raise StudyError(f"{len(overlap)} evaluation cells were trained on, e.g. "
                         f"{sorted(overlap)[:3]}: evaluate on seeds the training store lacks")


def path_rows(lattice: Lattice, agent: str, actions: Sequence[int], split: str
              ) -> list[dict[str, Any]]:
    """One row per round of one path through ``lattice``: the action and the test cost."""
    costs = lattice.costs_along(actions)
    return [{"dataset": lattice.dataset, "seed": lattice.seed, "split": split, "agent": agent,
             "round": t + 1, "action": ACTION_NAMES[a], "test_cost": float(c)}
            for t, (a, c) in enumerate(zip(actions, costs, strict=True))]


def cell_paths(lattice: Lattice, agents: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The paths of the yardsticks and of every agent (``name -> agent``) in one lattice."""
    paths = {"optimal": lattice.optimal_path("mean"),
             "optimal-final": lattice.optimal_path("final"),
             "oracle": lattice.one_step_oracle()}
    for name, agent in agents.items():
        paths[name] = lattice.replay(agent)
    return paths


def evaluate(study: Path, eval_store: Path, split_file: Path, train_store: Path,
             settings: Settings | None = None, seen_seeds: int = 0,
             progress: bool = True, trust_pickle: bool = False) -> int:
    """Replay every agent not yet evaluated on every cell of the evaluation store, and on the
    first ``seen_seeds`` seeds of each training set in the training store (split
    ``training-cells``: how much of a policy's skill is memorised cells), each path stored
    as it is replayed (``policy_runs.rounds_store``); returns the number of paths added.
    ``trust_pickle`` loads the policies with SB3's full loader, which runs any code stored in
    their files."""
    from tqdm.auto import tqdm

    settings = settings or Settings()
    check_unseen(train_store, eval_store, settings)
    train = set(training_sets(split_file))
    unseen = LatticeStore(eval_store)
    cells = [(unseen, d, s, "train-unseen-seeds" if d in train else "held-out")
             for d, s in unseen.cells(settings)]
    if seen_seeds:
        seen = LatticeStore(train_store)
        by_set: dict[str, list[int]] = {}
        for d, s in seen.cells(settings):
            by_set.setdefault(d, []).append(s)
        cells += [(seen, d, s, "training-cells") for d in sorted(by_set)
                  for s in sorted(by_set[d])[:seen_seeds]]
    policies = {p.stem: str(p) for p in trained_policies(study)}
    names = [*YARDSTICKS, *RULES, *policies]
    writable_folder(Path(study), "--study-dir")
    rounds = prepare_rounds(study, list(dict.fromkeys(c[1] for c in cells)),
                            sorted({c[2] for c in cells}), names)
    done = set(stored_episodes(study))
    agents = {name: make_agent(policies.get(name, name), trust_pickle=trust_pickle)
              for name in [*RULES, *policies]}
    added = 0
    for store, dataset, seed, split in tqdm(cells, unit="cell", disable=not progress):
        todo = [n for n in names if (dataset, seed, n) not in done]
        if not todo:
            continue
        lattice = store.load(dataset, seed, settings)
        paths = cell_paths(lattice, {n: agents[n] for n in todo if n in agents})
        for name in todo:
            write_episode(rounds, path_rows(lattice, name, paths[name], split))
            added += 1
    return added


# --------------------------------------------------------------------------- report
def scale_episodes(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per (data set, seed, agent): ``episode_table``'s figures plus the split, the
    regret (mean cost over rounds minus the hindsight optimum's in the same cell) and the
    final regret (final cost minus the lowest final cost any path reaches there)."""
    episodes = episode_table(rounds)
    split = rounds.drop_duplicates(["dataset", "seed"]).set_index(["dataset", "seed"])["split"]
    keys = pd.MultiIndex.from_frame(episodes[["dataset", "seed"]])
    episodes["split"] = split.reindex(keys).to_numpy()
    optimal = episodes[episodes["agent"] == "optimal"].set_index(["dataset", "seed"])
    episodes["regret"] = (episodes["mean_cost"].to_numpy()
                          - optimal["mean_cost"].reindex(keys).to_numpy())
    best_final = episodes[episodes["agent"] == "optimal-final"].set_index(["dataset", "seed"])
    episodes["final_regret"] = (episodes["final_cost"].to_numpy()
                                - best_final["final_cost"].reindex(keys).to_numpy())
    return episodes


def report_groups(groups: Sequence[str]) -> list[str]:
    """The yardsticks and rules first, then the policy groups as found."""
    present = list(dict.fromkeys(groups))
    return [g for g in REPORT_ORDER if g in present] + [g for g in present
                                                        if g not in REPORT_ORDER]


def summary(episodes: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per split and agent group: mean cost over rounds and final cost (spread over training
    seeds), their regrets, both against All-in-LR (relative cost, regret ratio, a bootstrap
    interval of the paired difference of mean costs over cells, wins), and what the agent
    does."""
    rng = np.random.default_rng(seed)
    cells = ["dataset", "seed"]
    rows = []
    for split, part in episodes.groupby("split", sort=True):
        lr = part[part["group"] == "all-in-lr"].set_index(cells)
        for group in report_groups(part["group"]):
            e = part[part["group"] == group]
            per_seed = e.groupby("train_seed", dropna=False)[
                ["mean_cost", "final_cost", "regret", "final_regret"]].mean()
            per_cell = e.groupby(cells)[["mean_cost", "regret"]].mean()
            diff = (per_cell["mean_cost"] - lr["mean_cost"].reindex(per_cell.index)).to_numpy()
            boot = rng.choice(diff, size=(n_boot, len(diff))).mean(axis=1)
            paired = (e.set_index(cells)["mean_cost"]
                      - lr["mean_cost"].reindex(e.set_index(cells).index))
            rows.append({
                "split": split, "agent": group, "runs": len(per_seed), "cells": len(per_cell),
                "mean_cost": per_seed["mean_cost"].mean(),
                "mean_cost_sd_seeds": per_seed["mean_cost"].std() if len(per_seed) > 1 else np.nan,
                "regret": per_seed["regret"].mean(),
                "vs_all_in_lr_pct": 100 * (per_seed["mean_cost"].mean()
                                           / lr["mean_cost"].mean() - 1),
                "regret_ratio_vs_all_in_lr": per_seed["regret"].mean() / lr["regret"].mean(),
                "final_cost": per_seed["final_cost"].mean(),
                "final_cost_sd_seeds": (per_seed["final_cost"].std() if len(per_seed) > 1
                                        else np.nan),
                "final_regret": per_seed["final_regret"].mean(),
                "final_vs_all_in_lr_pct": 100 * (per_seed["final_cost"].mean()
                                                 / lr["final_cost"].mean() - 1),
                "diff_vs_all_in_lr": diff.mean(), "diff_ci_low": np.quantile(boot, 0.025),
                "diff_ci_high": np.quantile(boot, 0.975),
                "win_vs_all_in_lr": float(np.mean(paired < -1e-12)),
                "al_share": e["al_share"].mean(), "switches": e["switches"].mean(),
                "first_switch": e["first_switch"].mean(),
                "never_switch": e["first_switch"].isna().mean()})
    return pd.DataFrame(rows)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The summary's key columns, readable: costs with their spread over training seeds,
    percentages against All-in-LR, the regret ratio, the AL share."""
    def with_spread(value: float, sd: float) -> str:
        return f"{value:.4f}" if np.isnan(sd) else f"{value:.4f} ± {sd:.4f}"

    return pd.DataFrame({
        "split": table["split"], "agent": table["agent"], "runs": table["runs"],
        "mean cost": [with_spread(v, s) for v, s in
                      zip(table["mean_cost"], table["mean_cost_sd_seeds"], strict=True)],
        "vs All-in-LR": table["vs_all_in_lr_pct"].map("{:+.1f}%".format),
        "regret / All-in-LR's": table["regret_ratio_vs_all_in_lr"].map("{:.2f}".format),
        "final cost": [with_spread(v, s) for v, s in
                       zip(table["final_cost"], table["final_cost_sd_seeds"], strict=True)],
        "final vs All-in-LR": table["final_vs_all_in_lr_pct"].map("{:+.1f}%".format),
        "AL share": table["al_share"].map("{:.2f}".format)})


def per_dataset(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean cost over rounds per data set (rows, with its split) and agent group (columns)."""
    table = episodes.groupby(["split", "dataset", "group"])["mean_cost"].mean().unstack()
    return table[report_groups(table.columns)].reset_index()


def by_run(rounds: pd.DataFrame, episodes: pd.DataFrame) -> pd.DataFrame:
    """What each trained policy does on each split (``by_training_seed`` per split)."""
    frames = [by_training_seed(rounds[rounds["split"] == split],
                               episodes[episodes["split"] == split]).assign(split=split)
              for split in sorted(episodes["split"].unique())]
    table = pd.concat(frames, ignore_index=True)
    return table[["split", *[c for c in table.columns if c != "split"]]]


def write_report(study: Path, tables: Path, figures: Path, prefix: str = "policy_scale",
                 window: int = 500) -> dict[str, pd.DataFrame]:
    """Tables ``<tables>/<prefix>_*`` and figures ``<figures>/<prefix>_*`` from the study's
    files; returns the tables by name."""
    figures.mkdir(parents=True, exist_ok=True)
    rounds = load_rounds(Path(study))
    episodes = scale_episodes(rounds)
    models = trained_policies(study)
    table = summary(episodes)
    frames = {"summary": table, "headline": headline(table),
              "per_dataset": per_dataset(episodes)}
    if models:  # what the policies do, and what training them cost
        frames |= {"by_run": by_run(rounds, episodes), "training_time": training_times(models)}
    for name, frame in frames.items():
        write_table(frame, tables, f"{prefix}_{name}", index=False, csv_float_format="%.6g",
                    digits=1 if name == "training_time" else 4)
    groups = report_groups(rounds["group"])
    held_out = rounds[rounds["split"] == "held-out"]
    plot_by_round(held_out, "test_cost", "test cost", figures / f"{prefix}_cost_by_round.png",
                  groups)
    played = held_out.assign(is_al=(held_out["action"] == "AL").astype(float))
    plot_by_round(played, "is_al", "share of AL", figures / f"{prefix}_al_share.png",
                  [g for g in groups if g not in ("all-in-al", "all-in-lr")])
    runs = run_folders(models)
    if runs:
        plot_training_curves(runs, figures / f"{prefix}_learning_curves.png", window=window,
                             title="training on the replay store (12 training sets)")
    return frames


__all__ = ["DEFAULT_RUNS", "RULES", "ScalePlan", "YARDSTICKS", "by_run", "cell_paths",
           "check_unseen", "evaluate", "headline", "path_rows", "per_dataset",
           "scale_episodes", "summary", "train_configs", "train_policies", "training_sets",
           "write_report"]
