"""A seed sweep: one configuration trained at N seeds in one command, each policy saved as a
run of its own, and the spread over seeds summarised as the interquartile mean (IQM) of the
evaluation cost with its stratified bootstrap interval (``reports.policy_stats``).

The seeds run one after the other, each an ordinary run (:func:`training.train`), so seed
k of a sweep is exactly the run ``--seed k`` would train alone. Stacking the seeds'
parameters into one batched update was measured on the 2-core CPU this was built on
(``docs/training.md``, "Seeds") and did not pay there; a GPU may change that.

Each policy's evaluation cost is measured after its run, the same way for every seed: one
greedy episode in each of ``eval_episodes`` replay environments reset with ``eval_seed``
(the evaluation the trainers run during training). Each seed's episodes are averaged per
data set, giving ``policy_stats``' runs x tasks matrix (seeds x data sets); the IQM is over
its cells and the bootstrap draws seeds within each data set. The episodes are not tasks of
their own: every seed plays the same ones, so drawing seeds within each episode
independently would average the seeds' spread away and leave an interval far narrower than
the seeds differ.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agents.experiments.training.config import TrainConfig, TrainResult
from agents.reports.policy_stats import interval
from ballad_env.files import atomic_write

#: The largest sweep one command runs (each seed is a whole run).
MAX_SEEDS = 64


def seed_configs(config: TrainConfig, n_seeds: int) -> list[TrainConfig]:
    """``config`` at seeds ``config.seed`` .. ``config.seed + n_seeds - 1``, each run named
    ``<name>-seed<k>``."""
    if not 1 <= n_seeds <= MAX_SEEDS:
        raise ValueError(f"--seeds must be between 1 and {MAX_SEEDS}, got {n_seeds}")
    return [dataclasses.replace(config, seed=seed, run_name=f"{config.name}-seed{seed}")
            for seed in range(config.seed, config.seed + n_seeds)]


def check_evaluable(config: TrainConfig) -> None:
    """Refuse a sweep whose policies cannot be evaluated (no replay store), before any of
    its runs trains rather than after all of them."""
    if config.replay_store is None:
        raise ValueError("a seed sweep evaluates its policies on the replay environment: give "
                         "--replay-store DIR")


def evaluation_costs(config: TrainConfig, model_paths: list[Path]
                     ) -> tuple[np.ndarray, list[str]]:
    """The final test cost of one greedy episode of each saved policy in each of
    ``config.eval_episodes`` replay environments reset with ``config.eval_seed`` (a policies
    x episodes matrix), and each episode's data set. The environments are built once and
    every policy plays the same episodes (the reset seed fixes them), as the trainers'
    evaluations do."""
    from agents.experiments.training.recorder import greedy_costs, policy_act
    from agents.experiments.training.rollouts import envs_arguments, make_envs
    from agents.policy import load_policy

    check_evaluable(config)
    masked = config.algo == "maskable_ppo"
    envs = make_envs(*envs_arguments(config, config.eval_episodes))
    try:
        envs.reset(seed=config.eval_seed)  # the cells greedy_costs's reset plays again
        datasets = [str(cell[0]) for cell in envs.unwrapped.playing()]
        costs = np.stack([greedy_costs(policy_act(load_policy(path).model.policy, masked), envs,
                                       config.eval_seed)[1] for path in model_paths])
        return costs, datasets
    finally:
        envs.close()


def summarise(seeds: list[int], costs: np.ndarray, datasets: list[str],
              rng_seed: int = 0) -> dict[str, Any]:
    """Per-seed mean costs over the episodes (``costs``: seeds x episodes; ``datasets``:
    each episode's data set), each seed's mean per data set (seeds x data sets, the data
    sets in their first episode's order), and the IQM over that matrix with its 95%
    bootstrap interval over whole seeds (a seed's policy plays every data set, so its costs
    move together; every data set keeps its count of seeds)."""
    if len(datasets) != costs.shape[1]:
        raise ValueError(f"{costs.shape[1]} evaluation episodes but {len(datasets)} data set "
                         "names: give one name per episode")
    names = list(dict.fromkeys(datasets))
    by_dataset = np.stack([costs[:, [d == name for d in datasets]].mean(axis=1)
                           for name in names], axis=1)
    value, low, high = interval(by_dataset, np.random.default_rng(rng_seed), whole_runs=True)
    return {"seeds": seeds, "mean_cost_by_seed": [float(c) for c in costs.mean(axis=1)],
            "episodes": int(costs.shape[1]), "datasets": names,
            "cost_by_seed_and_dataset": by_dataset.tolist(), "iqm_cost": value,
            "iqm_interval": [low, high]}


def train_seeds(config: TrainConfig, n_seeds: int,
                train: Callable[[TrainConfig], TrainResult] | None = None
                ) -> tuple[list[TrainResult], Path]:
    """Train ``config`` at ``n_seeds`` seeds (``train``: ``training.train``), evaluate each
    policy, and write ``<output_dir>/<name>-seeds.json`` (the summary); the runs and the
    summary's path."""
    from agents.experiments.training import train as train_one

    run: Callable[[TrainConfig], TrainResult] = train_one if train is None else train
    check_evaluable(config)
    configs = seed_configs(config, n_seeds)
    results = [run(c) for c in configs]
    costs, datasets = evaluation_costs(config, [r.model_path for r in results])
    summary = {"runs": [c.name for c in configs], "eval_episodes": config.eval_episodes,
               "eval_seed": config.eval_seed,
               **summarise([c.seed for c in configs], costs, datasets)}
    path = Path(config.output_dir) / f"{config.name}-seeds.json"
    text = json.dumps(summary, indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))
    return results, path


__all__ = ["MAX_SEEDS", "check_evaluable", "evaluation_costs", "seed_configs", "summarise",
           "train_seeds"]
