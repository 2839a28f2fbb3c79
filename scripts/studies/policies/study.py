"""The learned-policy study: do RL allocation policies beat BALLAD on data sets they never saw?

Four steps, each reading only what the previous one wrote (``python -m scripts.studies.policies`` is
their command line):

* split: hold out one benchmark per size block (:func:`make_split`), a rule fixed before
  any policy was trained;
* train: one ``training.train`` run per (algorithm, reward, seed) on the training sets,
  under the study's :class:`~ballad_env.settings.Settings`, in the executor's workers
  (:func:`train_policies`);
* evaluate: the policies and the baselines on the held-out sets x seeds through the one
  episode loop :func:`agents.evaluation.run_episode`, one tidy row per (data set, seed,
  agent, round) in the study's ``ResultStore`` (:func:`evaluate`); agents added later are
  run on the cells already finished;
* report: tables and figures from those files (:func:`write_report`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from agents.evaluation import run_episode
from agents.experiments.executor import execute, progress_bar
from agents.experiments.run import play_agents
from agents.experiments.stores.results import writable_folder
from agents.experiments.training.curves import plot_training_curves
from agents.policy_files import policy_fingerprint
from agents.registry import make_agent
from agents.reports.tables import write_table
from agents.spec import AgentSpec
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import RECORD_FIELDS
from ballad_env.settings import Settings
from scripts.studies.common.policy_runs import (
    RULES,
    StudyError,
    by_training_seed,
    episode_table,
    group_order,
    load_rounds,
    model_path,
    plot_by_round,
    policy_dir,
    prepare_rounds,
    rounds_store,
    run_folders,
    run_name,
    stored_episodes,
    train_runs,
    trained_policies,
    trained_settings,
    training_times,
    write_episode,
)

if TYPE_CHECKING:
    from agents.experiments.training.config import TrainConfig

SPLIT_SEED = 2023  # the paper's year; fixed before any policy was trained
N_BLOCKS = 6
ALGOS = ("ppo", "maskable_ppo")
REWARDS = ("cost", "val_cost")
BASELINES = RULES
GROUP_ORDER = ("oracle", "ballad", "all-in-al", "all-in-lr", "random",
               *(f"{a}-{r}" for a in ALGOS for r in REWARDS))
#: Columns of the round table: the cell's keys, then every scalar ``info`` figure.
ROUND_COLUMNS = ("dataset", "seed", "agent", *RECORD_FIELDS[1:])


# --------------------------------------------------------------------------- split
def make_split(manifest: dict[str, dict], seed: int = SPLIT_SEED,
               n_blocks: int = N_BLOCKS) -> dict[str, Any]:
    """Hold out one data set per size block: sort by rows, cut into ``n_blocks`` blocks of
    equal count, draw one per block with a seeded generator. Held-out sets thus span small
    to large data, and the rule never looks at any result.
    """
    names = sorted(manifest, key=lambda name: (manifest[name]["n"], name))
    if len(names) < 2 * n_blocks:
        raise StudyError(f"{len(names)} data sets cannot fill {n_blocks} blocks of two or more")
    blocks = np.array_split(np.array(names), n_blocks)
    rng = np.random.default_rng(seed)
    held_out = [str(block[rng.integers(len(block))]) for block in blocks]
    return {
        "rule": (f"sort the {len(names)} benchmarks by number of rows, cut into {n_blocks} "
                 f"consecutive blocks of {len(names) // n_blocks}, hold out one per block drawn "
                 f"with numpy.random.default_rng({seed}).integers(block size), in block order; "
                 "chosen before any policy was trained"),
        "seed": seed,
        "blocks": [[str(n) for n in block] for block in blocks],
        "train": [n for n in names if n not in held_out],
        "held_out": held_out,
        "rows": {n: manifest[n]["n"] for n in names},
    }


def write_split(split: dict[str, Any], path: Path, force: bool = False) -> None:
    """Write the split as JSON; a different split already there is kept unless ``force``."""
    if path.exists() and json.loads(path.read_text()) != split and not force:
        raise StudyError(f"{path} exists and differs: the split is fixed; --force to overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(split, indent=2) + "\n")


# --------------------------------------------------------------------------- train
@dataclass(frozen=True)
class TrainPlan:
    """The study's training runs: algorithms x rewards x seeds, and how each one trains."""

    settings: Settings = field(default_factory=Settings)
    algos: tuple[str, ...] = ALGOS
    rewards: tuple[str, ...] = REWARDS
    train_seeds: int = 3
    timesteps: int = 1200
    n_envs: int = 2
    vec_env: str = "dummy"
    n_steps: int = 30
    learning_rate: float = 1e-3


def train_configs(plan: TrainPlan, split_file: Path, data_dir: str | Path, study: Path
                  ) -> dict[str, TrainConfig]:
    """One training run per (algorithm, reward, seed), keyed by run name."""
    from agents.experiments.training.config import TrainConfig

    train = tuple(json.loads(Path(split_file).read_text())["train"])
    configs = {}
    for algo in plan.algos:
        for reward in plan.rewards:
            for seed in range(plan.train_seeds):
                name = run_name(algo, reward, seed, len(train))
                configs[name] = TrainConfig(
                    algo=algo, datasets=train, data_dir=str(data_dir),
                    settings=plan.settings.replace(reward=reward),
                    total_timesteps=plan.timesteps, seed=seed, n_envs=plan.n_envs,
                    vec_env=plan.vec_env,
                    hyperparameters={"learning_rate": plan.learning_rate,
                                     "n_steps": plan.n_steps, "batch_size": plan.n_steps},
                    eval_freq=0,
                    checkpoint_freq=plan.timesteps // 2, output_dir=str(policy_dir(study)),
                    run_name=name, progress_bar=False)
    return configs


def same_options(a: Settings, b: Settings) -> bool:
    """Whether two settings agree on everything but the reward (the study's axis)."""
    reward = Settings().reward
    return a.replace(reward=reward) == b.replace(reward=reward)


def check_trained(models: Iterable[Path], settings: Settings) -> None:
    """Every saved policy must have been trained under ``settings`` (reward aside)."""
    for model in models:
        trained = trained_settings(model)
        if not same_options(trained, settings):
            raise StudyError(f"{model.name} was trained with settings {trained.name}, this "
                             f"step runs {settings.name}: pass the same settings options, or "
                             "use another --study-dir")


def train_policies(plan: TrainPlan, split_file: Path, data_dir: str | Path, study: Path,
                   jobs: int = 2) -> list[str]:
    """Train the plan's runs that have no saved model yet; saved ones must match the plan's
    settings. A run interrupted earlier (no model) is trained again from the start: the
    study asks for that run, so its unfinished folder is replaced (``overwrite``). Returns
    the names of failed runs."""
    configs = train_configs(plan, split_file, data_dir, study)
    done = [model_path(study, name) for name in configs if model_path(study, name).exists()]
    check_trained(done, plan.settings)
    todo = {name: replace(c, overwrite=True) for name, c in configs.items()
            if not model_path(study, name).exists()}
    return train_runs(todo, jobs, Path(study) / "logs")


# --------------------------------------------------------------------------- evaluate


def agent_name(spec: str | AgentSpec) -> str:
    """An agent's name in the round table: the registry name, or a policy file's stem."""
    read = AgentSpec.of(spec)
    return Path(read.text).stem if read.is_policy else read.text


def evaluation_settings(settings: Settings) -> Settings:
    """The environment's settings for evaluation: the reward does not change any recorded
    figure or observation, so it stays at its default (as the study always evaluated)."""
    return settings.replace(reward=Settings().reward)


def evaluate_cell(dataset: str, seed: int, specs: Sequence[str], data_dir: str | Path,
                  settings: Settings, trust_pickle: bool = False) -> list[dict[str, Any]]:
    """Every agent on one (data set, seed) from one shared reset; rows from round 0 (start).
    ``trust_pickle``: policies load with SB3's full loader (it runs code from the file)."""
    if any(AgentSpec.of(s).is_policy for s in specs):
        import torch

        torch.set_num_threads(1)
    env = BudgetAllocationEnv(dataset, data_dir=str(data_dir),
                              settings=evaluation_settings(settings))
    return [{"dataset": dataset, "seed": seed, "agent": agent_name(spec),
             **{k: record[k] for k in ROUND_COLUMNS[3:]}}
            for spec, _, records in play_agents(env, seed, specs, include_start=True,
                                                trust_pickle=trust_pickle)
            for record in records]


def _evaluate_task(task: tuple[str, int, Sequence[str], str | Path, Settings, bool],
                   single_thread: bool) -> list[dict[str, Any]]:
    """:func:`evaluate_cell` of one (data set, seed, agents, data folder, settings, whether
    to trust pickles)."""
    return evaluate_cell(*task)


def check_replay(dataset: str, seed: int, data_dir: str | Path, settings: Settings) -> None:
    """Playing from a copy of a reset environment must equal playing from a fresh reset."""
    got = [(r["action"], r["test_cost"])
           for r in evaluate_cell(dataset, seed, ["ballad"], data_dir, settings)[1:]]
    env = BudgetAllocationEnv(dataset, data_dir=str(data_dir),
                              settings=evaluation_settings(settings))
    want = [(r["action"], r["test_cost"]) for r in run_episode(env, make_agent("ballad", env),
                                                               seed)]
    if got != want:
        raise StudyError(f"replaying from a copied env differs from a fresh reset: {got} "
                         f"!= {want}")


def finished_agents(study: Path) -> dict[tuple[str, int], set[str]]:
    """Agents already evaluated per (data set, seed): the episodes the study's store holds."""
    done: dict[tuple[str, int], set[str]] = {}
    for dataset, seed, agent in stored_episodes(study):
        done.setdefault((dataset, seed), set()).add(agent)
    return done


def pending_cells(datasets: Sequence[str], seeds: int, specs: Sequence[str],
                  done: dict[tuple[str, int], set[str]]
                  ) -> list[tuple[str, int, tuple[str, ...]]]:
    """(data set, seed, agents still to run there) for every cell with something to run."""
    cells = []
    for dataset in datasets:
        for seed in range(seeds):
            ran = done.get((dataset, seed), set())
            todo = tuple(s for s in specs if agent_name(s) not in ran)
            if todo:
                cells.append((dataset, seed, todo))
    return cells


def stored_record(study: Path) -> dict[str, Any]:
    """The study's store record (``run.json``: its settings and policies), empty if none."""
    return rounds_store(study).read_manifest() or {}


def check_evaluated_settings(study: Path, settings: Settings) -> None:
    """Episodes already stored must come from the same settings (reward aside)."""
    record = stored_record(study)
    if "settings" not in record:
        return
    before = Settings.from_dict(record["settings"])
    if not same_options(before, settings):
        raise StudyError(f"{rounds_store(study).root} holds results under settings "
                         f"{before.name}, this evaluation runs {settings.name}: use another "
                         "--study-dir")


def check_evaluated_policies(study: Path, specs: Sequence[str]) -> dict[str, dict[str, str]]:
    """Policies with stored episodes must be the files evaluated then (a policy retrained
    under its old path is another policy). Returns the file and content hash of every
    policy with episodes, those stored and these, for the store's record."""
    hashes = {agent_name(s): {"file": str(s), "sha256": policy_fingerprint(s)}
              for s in specs if AgentSpec.of(s).is_policy}
    stored = stored_record(study).get("policies", {})
    for name, entry in hashes.items():
        if name in stored and stored[name]["sha256"] != entry["sha256"]:
            raise StudyError(f"{name}.zip has changed since it was evaluated (content "
                             f"{stored[name]['sha256']} then, {entry['sha256']} now): its "
                             f"episodes in {rounds_store(study).root} belong to the policy that "
                             "was there before. Evaluate into another --study-dir, or delete "
                             "that folder to evaluate every agent again.")
    return {**stored, **hashes}


def evaluate(study: Path, datasets: Sequence[str], seeds: int, specs: Sequence[str],
             data_dir: str | Path, settings: Settings, jobs: int = 1,
             progress: bool = True, trust_pickle: bool = False) -> dict[str, Any]:
    """Run every agent not yet evaluated on each (data set, seed) through the executor and
    store each episode as its cell finishes (``policy_runs.rounds_store``); returns the
    evaluation's record. ``trust_pickle`` loads the policies with SB3's full loader, which
    runs any code stored in their files."""
    check_trained([Path(s) for s in specs if AgentSpec.of(s).is_policy], settings)
    check_evaluated_settings(study, settings)
    policies = check_evaluated_policies(study, specs)
    cells = pending_cells(datasets, seeds, specs, finished_agents(study))
    check_replay(datasets[0], 0, data_dir, settings)
    print(f"{len(specs)} agents: {sum(len(c[2]) for c in cells)} episodes to run in "
          f"{len(cells)} cells", flush=True)
    writable_folder(study, "--study-dir")
    meta = {"settings": evaluation_settings(settings).to_dict(), "policies": policies}
    store = prepare_rounds(study, datasets, range(seeds), [agent_name(s) for s in specs],
                           **meta)
    start = time.perf_counter()
    tasks = [(d, s, todo, data_dir, settings, trust_pickle) for d, s, todo in cells]
    bar = progress_bar(len(cells), 0, progress)
    try:
        for rows in execute(tasks, _evaluate_task, jobs):
            for agent in dict.fromkeys(row["agent"] for row in rows):
                write_episode(store, [row for row in rows if row["agent"] == agent])
            bar.update(1)
    finally:
        bar.close()
    return {"agents": list(specs), "held_out": list(datasets), "seeds": seeds, **meta,
            "evaluate_seconds": round(time.perf_counter() - start, 1)}


# --------------------------------------------------------------------------- report


def headline(episodes: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per agent group: cost (spread over training seeds), paired difference to BALLAD with a
    bootstrap interval over (data set, seed) cells, wins, and what the agent does.
    """
    rng = np.random.default_rng(seed)
    cells = ["dataset", "seed"]
    ballad = episodes[episodes["group"] == "ballad"].set_index(cells)["final_cost"]
    rows = []
    for group in group_order(episodes["group"], GROUP_ORDER):
        e = episodes[episodes["group"] == group]
        per_seed = e.groupby("train_seed", dropna=False)[["final_cost", "mean_cost"]].mean()
        per_cell = e.groupby(cells)["final_cost"].mean()
        diff = (per_cell - ballad.reindex(per_cell.index)).to_numpy()
        boot = rng.choice(diff, size=(n_boot, len(diff))).mean(axis=1)
        paired = e.set_index(cells)["final_cost"] - ballad.reindex(e.set_index(cells).index)
        rows.append({
            "agent": group, "runs": len(per_seed),
            "final_cost": per_seed["final_cost"].mean(),
            "final_cost_sd_seeds": per_seed["final_cost"].std() if len(per_seed) > 1 else np.nan,
            "mean_cost": per_seed["mean_cost"].mean(),
            "mean_cost_sd_seeds": per_seed["mean_cost"].std() if len(per_seed) > 1 else np.nan,
            "vs_ballad_pct": 100 * (per_seed["final_cost"].mean() / ballad.mean() - 1),
            "diff_vs_ballad": diff.mean(), "diff_ci_low": np.quantile(boot, 0.025),
            "diff_ci_high": np.quantile(boot, 0.975),
            "win": float(np.mean(paired < -1e-12)), "tie": float(np.mean(np.abs(paired) <= 1e-12)),
            "al_share": e["al_share"].mean(), "switches": e["switches"].mean(),
            "first_switch": e["first_switch"].mean(),
            "never_switch": e["first_switch"].isna().mean(),
        })
    return pd.DataFrame(rows)


def per_dataset(episodes: pd.DataFrame) -> pd.DataFrame:
    """Final test cost per held-out data set (rows) and agent group (columns)."""
    table = episodes.groupby(["dataset", "group"])["final_cost"].mean().unstack()
    return table[group_order(table.columns, GROUP_ORDER)]


def val_cost_bias(df: pd.DataFrame) -> pd.DataFrame:
    """Estimated cost (on the labels that set tau) next to the test cost, for the fixed rules."""
    rules = df[df["group"].isin(["all-in-al", "all-in-lr", "ballad"]) & (df["round"] > 0)]
    table = rules.groupby(["group", "round"])[["val_cost", "test_cost"]].mean().reset_index()
    return table[table["round"].isin([1, 2, 5, 10, 15])]


def curves_title(models: Sequence[Path], runs: dict[str, list[Path]]) -> str:
    """The learning curves' title: how many training sets and seeds (per group, at most)."""
    n_sets = len(json.loads(models[0].with_suffix(".json").read_text())["config"]["datasets"])
    n_seeds = max(len(r) for r in runs.values())
    seeds = f"{n_seeds} seeds" if n_seeds > 1 else "1 seed"
    return f"training on the {n_sets} training data sets ({seeds}: mean, min-max)"


def write_report(study: Path, tables: Path, figures: Path, prefix: str = "policy",
                 window: int = 10) -> dict[str, pd.DataFrame]:
    """Tables ``<tables>/<prefix>_*`` and figures ``<figures>/<prefix>_*`` from the study's
    saved files only; returns the tables by name."""
    figures.mkdir(parents=True, exist_ok=True)
    df = load_rounds(Path(study))
    episodes = episode_table(df)
    models = trained_policies(study)
    frames = {"heldout_summary": headline(episodes),
              "heldout_by_dataset": per_dataset(episodes).reset_index(),
              "by_training_seed": by_training_seed(df, episodes),
              "val_cost_bias": val_cost_bias(df), "training_time": training_times(models)}
    for name, frame in frames.items():
        write_table(frame, tables, f"{prefix}_{name}", index=False, csv_float_format="%.6g",
                    digits=1 if name == "training_time" else 4)
    groups = group_order(df["group"], GROUP_ORDER)
    plot_by_round(df, "test_cost", "test cost", figures / f"{prefix}_cost_by_round.png", groups)
    played = df[df["round"] > 0].assign(is_al=(df["action"] == "AL").astype(float))
    plot_by_round(played, "is_al", "share of AL", figures / f"{prefix}_al_share.png",
                  [g for g in groups if g not in ("all-in-al", "all-in-lr")])
    runs = run_folders(models, GROUP_ORDER)
    if runs:
        plot_training_curves(runs, figures / f"{prefix}_learning_curves.png", window=window,
                             title=curves_title(models, runs))
    return frames


__all__ = ["ALGOS", "BASELINES", "GROUP_ORDER", "REWARDS", "ROUND_COLUMNS",
           "TrainPlan", "agent_name", "check_evaluated_policies", "check_evaluated_settings",
           "check_replay", "check_trained", "evaluate", "evaluate_cell", "evaluation_settings",
           "finished_agents", "headline", "make_split", "pending_cells", "per_dataset",
           "same_options", "stored_record", "train_configs", "train_policies", "val_cost_bias",
           "write_report", "write_split"]
