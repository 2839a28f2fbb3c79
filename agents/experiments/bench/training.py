"""The training benchmark: the batched trainer against stable-baselines3 PPO on one store.

``ballad-env bench --training --replay-store DIR`` (``cli/bench.py``) prints, in one run:

* the torch thread count: the forward pass and one training step (forward, backward, Adam)
  of the 64-64 MLP pair at N rows, with 1 and 2 intra-op threads, each in a fresh process;
* end-to-end training steps a second on the store: SB3 PPO at the policy study's sizes
  (16 environments x 64 steps, minibatch 256, 4 epochs: ``policy_scale.ScalePlan``'s,
  which the command line passes as ``study_ppo``) and
  at the batched trainer's sizes (N x 15 steps, minibatch 1,024, 4 epochs), against the
  batched trainer's PPO and MaskablePPO at each N; each run in a fresh process, the
  median of the repeats, and the ratio to the first SB3 row;
* where each run's time went: the batched trainer's own split (environment steps, the rest
  of the rollouts, updates) and cProfile's for SB3 (``timing.time_ppo``);
* the learning check: the greedy policies of training runs replayed on an evaluation
  store beside All-in-LR and the hindsight optima (:func:`quality_table`).

Speed targets live here and in ``docs/training.md``, never in a timed test.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from agents.experiments.bench.timing import PPO_PARTS, in_fresh_process, time_ppo
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.settings import Settings

#: The goal on a CPU: ten times SB3 PPO's steps a second (the study's sizes).
SPEEDUP_GOAL = 10.0
#: PPO's sizes in the policy studies (``scripts.studies.policy_scale``: 10^5 episodes on the
#: replay store), which the bench times SB3 at: environments, steps per environment and
#: update, minibatch, epochs, learning rate.
class PPOSizes(NamedTuple):
    """How PPO trains: environments, steps per environment and update, minibatch, epochs,
    learning rate."""

    n_envs: int
    n_steps: int
    batch_size: int
    n_epochs: int
    learning_rate: float


STUDY_PPO_SIZES = PPOSizes(n_envs=16, n_steps=64, batch_size=256, n_epochs=4,
                           learning_rate=3e-4)
TRAINING_SIZES = (1024, 4096)



def time_threads(threads: int, n_rows: int, repeats: int = 30) -> dict[str, Any]:
    """Median seconds of the forward pass and of one training step of SB3's 64-64 actor
    and critic at ``n_rows`` rows with ``threads`` intra-op threads (the first fifth of the
    repeats left out as warm-up)."""
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)

    def mlp(n_out: int) -> nn.Sequential:
        return nn.Sequential(nn.Linear(18, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                             nn.Linear(64, n_out))

    actor, critic = mlp(2), mlp(1)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-4, eps=1e-5)
    x = torch.rand(n_rows, 18, generator=gen)
    forward, step = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            actor(x), critic(x)
        forward.append(time.perf_counter() - start)
        start = time.perf_counter()
        loss = actor(x).logsumexp(dim=1).mean() + critic(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step.append(time.perf_counter() - start)
    skip = repeats // 5
    return {"threads": threads, "rows": n_rows,
            "forward_ms": 1e3 * statistics.median(forward[skip:]),
            "step_ms": 1e3 * statistics.median(step[skip:]), "load": os.getloadavg()[0]}


def time_batched(store: str, algo: str, n_envs: int, steps: int,
                 settings: Settings) -> dict[str, Any]:
    """One batched run: steps a second and its time split (from the run's JSON)."""
    from agents.experiments.training.batched import train_batched

    with tempfile.TemporaryDirectory() as out:
        run = train_batched(store, algo=algo, n_envs=n_envs, total_timesteps=steps,
                            settings=settings, output_dir=out, run_name="bench")
        record = json.loads((run / "bench.json").read_text())
    seconds = record["train_seconds"]
    return {"trainer": f"batched {algo}", "n_envs": n_envs, "steps": record["num_timesteps"],
            "seconds": seconds, "steps_per_s": record["num_timesteps"] / seconds,
            "parts": record["seconds"], "load": os.getloadavg()[0]}


def time_sb3(store: str, datasets: Sequence[str], n_envs: int, n_steps: int, batch_size: int,
             learning_rate: float, steps: int, settings: Settings) -> dict[str, Any]:
    """One SB3 PPO run on the vector replay environment (``timing.time_ppo``)."""
    row = time_ppo(store, datasets, "vector", steps, n_envs=n_envs, n_steps=n_steps,
                   settings=settings, batch_size=batch_size, n_epochs=4,
                   learning_rate=learning_rate)
    parts = row["parts"]
    return {"trainer": f"SB3 ppo (minibatch {batch_size})", "n_envs": n_envs,
            "steps": row["steps"], "seconds": row["seconds"], "steps_per_s": row["steps_per_s"],
            "parts": {"env": parts["environment steps"],
                      "rollout": parts["rollouts (policy and environment)"]
                      - parts["environment steps"], "update": parts["updates"]},
            "load": row["load"][0]}


def measure_training(store: str, settings: Settings, study_ppo: tuple[int, int, int, float],
                     sizes: Sequence[int] = TRAINING_SIZES, steps: int = 307_200,
                     sb3_steps: int = 102_400, repeats: int = 1,
                     thread_sizes: Sequence[int] = TRAINING_SIZES) -> dict[str, Any]:
    """Everything the report prints: thread timings, then ``repeats`` rounds of every
    training run (each in a fresh process, the rounds interleaved). ``study_ppo``: SB3
    PPO's environments, steps per environment per update, minibatch and learning rate at
    the policy study's sizes (the first row, the baseline)."""
    threads = [in_fresh_process(time_threads, t, n) for n in thread_sizes for t in (1, 2)]
    datasets = sorted({d for d, _ in BudgetAllocationReplayEnv(store, settings=settings).cells})
    runs: list[tuple[str, Any, tuple[Any, ...]]] = [
        ("sb3-study", time_sb3, (store, datasets, *study_ppo, sb3_steps, settings))]
    for n in sizes:
        runs.append((f"sb3-{n}", time_sb3, (store, datasets, n, 15, 1024, 1e-3,
                                             max(sb3_steps, 15 * n), settings)))
        runs += [(f"{algo}-{n}", time_batched, (store, algo, n, steps, settings))
                 for algo in ("ppo", "maskable-ppo")]
    rows: dict[str, list[dict[str, Any]]] = {key: [] for key, _, _ in runs}
    for _ in range(repeats):
        for key, function, args in runs:
            rows[key].append(in_fresh_process(function, *args))
    return {"threads": threads, "rows": rows, "store": store, "cells": len(
        BudgetAllocationReplayEnv(store, settings=settings).cells)}


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median steps a second among the repeats, with the range."""
    ordered = sorted(rows, key=lambda r: r["steps_per_s"])
    middle = dict(ordered[len(ordered) // 2])
    middle["range"] = (ordered[0]["steps_per_s"], ordered[-1]["steps_per_s"])
    return middle


def training_report(result: dict[str, Any]) -> str:
    """The thread table, the steps-a-second table with ratios to SB3 and each run's split."""
    lines = ["torch threads: median ms of the actor-critic pair at N rows (fresh processes)",
             f"{'rows':>6} {'threads':>7} {'forward':>9} {'train step':>11} {'load':>5}"]
    for r in result["threads"]:
        lines.append(f"{r['rows']:>6} {r['threads']:>7} {r['forward_ms']:>9.2f} "
                     f"{r['step_ms']:>11.2f} {r['load']:>5.1f}")
    medians = {key: _median_row(rows) for key, rows in result["rows"].items()}
    base = medians["sb3-study"]["steps_per_s"]
    lines += ["", f"end-to-end training on {result['store']} ({result['cells']} cells), median "
              f"of {len(next(iter(result['rows'].values())))} run(s), fresh processes",
              f"{'trainer':<28} {'N':>5} {'steps':>9} {'steps/s':>9} {'range':>19} "
              f"{'x SB3':>6} {'env':>5} {'rollout':>7} {'update':>6} {'load':>5}"]
    for r in medians.values():
        total = sum(r["parts"].values()) or 1.0
        share = "  ".join(f"{100 * r['parts'][k] / total:4.0f}%" for k in
                          ("env", "rollout", "update"))
        low, high = r["range"]
        lines.append(f"{r['trainer']:<28} {r['n_envs']:>5} {r['steps']:>9,} "
                     f"{r['steps_per_s']:>9,.0f} {low:>9,.0f}-{high:<9,.0f} "
                     f"{r['steps_per_s'] / base:>6.1f} {share}  {r['load']:>5.1f}")
    best = max(r["steps_per_s"] for k, r in medians.items() if not k.startswith("sb3"))
    verdict = "met" if best >= SPEEDUP_GOAL * base else "missed"
    lines.append(f"\ngoal: {SPEEDUP_GOAL:.0f} x SB3 PPO at the study's sizes "
                 f"({SPEEDUP_GOAL * base:,.0f} steps/s): {verdict} (best {best / base:.1f} x); "
                 f"time split: {', '.join(PPO_PARTS)} for SB3 (cProfile)")
    return "\n".join(lines)




# --------------------------------------------------------------------------- learning quality
def quality_table(groups: dict[str, list[Path]], eval_store: str | Path,
                  settings: Settings) -> list[dict[str, Any]]:
    """Each group's greedy policies (one per training seed) replayed on every cell of the
    evaluation store (``Lattice.replay``), beside All-in-LR, All-in-AL and the hindsight
    optima: per group, the mean final test cost of each policy (then their mean and range)
    and the mean training seconds."""
    import numpy as np

    from agents.registry import make_agent
    from ballad_env.replay.store import LatticeStore

    store = LatticeStore(eval_store)
    agents = {"all-in-lr": make_agent("all-in-lr"), "all-in-al": make_agent("all-in-al")}
    for label, runs in groups.items():
        agents.update({f"{label}#{k}": make_agent(str(run / f"{run.name}.zip"))
                       for k, run in enumerate(runs)})
    finals: dict[str, list[float]] = {}
    for dataset, seed in store.cells(settings):
        lattice = store.load(dataset, seed, settings)
        paths = {"optimal": lattice.optimal_path("mean"),  # the hindsight yardsticks
                 "optimal-final": lattice.optimal_path("final"),
                 "oracle": lattice.one_step_oracle()}
        paths.update({name: lattice.replay(agent) for name, agent in agents.items()})
        for name, path in paths.items():
            finals.setdefault(name, []).append(float(lattice.costs_along(path)[-1]))
    yardsticks = ("optimal-final", "optimal", "oracle", "all-in-lr", "all-in-al")
    rows: list[dict[str, Any]] = [{"policy": name, "final_cost": float(np.mean(finals[name])),
                                   "range": None, "seconds": None} for name in yardsticks]
    for label, runs in groups.items():
        means = [float(np.mean(finals[f"{label}#{k}"])) for k in range(len(runs))]
        seconds = [json.loads((run / f"{run.name}.json").read_text())["train_seconds"]
                   for run in runs]
        rows.append({"policy": label, "final_cost": float(np.mean(means)),
                     "range": (min(means), max(means)), "seconds": float(np.mean(seconds))})
    return rows


def run_groups(folder: str | Path) -> dict[str, list[Path]]:
    """The run folders under ``folder`` that hold a model, grouped by name less the training
    seed (``<group>-s<seed>``), in name order."""
    import re

    groups: dict[str, list[Path]] = {}
    for run in sorted(Path(folder).iterdir()):
        match = re.fullmatch(r"(?P<group>.+)-s\d+", run.name)
        if match and (run / f"{run.name}.zip").is_file():
            groups.setdefault(match["group"], []).append(run)
    return groups


def quality_report(rows: list[dict[str, Any]], cells: int) -> str:
    """``quality_table``'s rows as text."""
    lines = [f"mean final test cost of the greedy policies on {cells} evaluation cells",
             f"{'policy':<34} {'final cost':>10} {'range (seeds)':>17} {'train s':>8}"]
    for r in rows:
        span = f"{r['range'][0]:.4f}-{r['range'][1]:.4f}" if r["range"] else ""
        seconds = f"{r['seconds']:.0f}" if r["seconds"] is not None else ""
        lines.append(f"{r['policy']:<34} {r['final_cost']:>10.4f} {span:>17} {seconds:>8}")
    return "\n".join(lines)


__all__ = ["SPEEDUP_GOAL", "TRAINING_SIZES", "measure_training", "quality_report", "run_groups",
           "quality_table", "time_batched", "time_sb3", "time_threads", "training_report"]
