"""The training benchmark: the batched trainer against stable-baselines3 PPO on one store.

``python -m scripts.studies.timings --training --replay-store DIR`` prints, in one run:

* the torch thread count: the forward pass and one training step (forward, backward, Adam)
  of the 64-64 MLP pair at N rows, with 1 and 2 intra-op threads, each in a fresh process;
* end-to-end training steps a second on the store: SB3 PPO at the policy study's sizes
  (16 environments x 64 steps, minibatch 256, 4 epochs: ``policy_scale.ScalePlan``'s,
  which the command line passes as ``study_ppo``), at 256 environments, and
  at the batched trainer's sizes (N x 15 steps, minibatch 1,024, 4 epochs), against the
  batched and the compiled trainer's PPO and MaskablePPO at each N; each run in a fresh
  process, the median of the repeats, the ratios to the first two SB3 rows, steps a CPU
  second, and the share of the two cores' matrix-product peak (:func:`matmul_peak`) the
  trainer's arithmetic reaches;
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
from typing import Any

from agents.experiments.bench.timing import in_fresh_process
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.settings import Settings
from scripts.studies.common.matmul import matmul_peak
from scripts.studies.timings.sb3_ppo import PPO_PARTS, time_ppo

#: The goal on a CPU: ten times SB3 PPO's steps a second (the study's sizes).
SPEEDUP_GOAL = 10.0
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


def time_batched(store: str, algo: str, n_envs: int, steps: int, settings: Settings,
                 trainer: str = "batched") -> dict[str, Any]:
    """One run of a torch trainer (``batched`` or ``compiled``): steps a second, CPU
    seconds and its time split (from the run's JSON; the compiled trainer's compiling and
    worker start come before its clock, as its JSON's ``update`` records)."""
    from agents.experiments.lattice_build import store_datasets
    from agents.experiments.training import train
    from agents.experiments.training.config import TrainConfig

    with tempfile.TemporaryDirectory() as out:
        names = tuple(store_datasets(store, settings))
        config = TrainConfig(trainer=trainer, algo=algo, datasets=names, settings=settings,
                             replay_store=store, n_envs=n_envs, total_timesteps=steps,
                             output_dir=out, run_name="bench", progress_bar=False)
        record = json.loads(train(config).settings_path.read_text())
    seconds = record["train_seconds"]
    return {"trainer": f"{trainer} {algo}", "n_envs": n_envs, "steps": record["num_timesteps"],
            "seconds": seconds, "steps_per_s": record["num_timesteps"] / seconds,
            "cpu_seconds": record["cpu_seconds"],
            "parts": {k: record["seconds"][k] for k in ("env", "rollout", "update")},
            "load": os.getloadavg()[0]}


def time_sb3(store: str, datasets: Sequence[str], n_envs: int, n_steps: int, batch_size: int,
             learning_rate: float, steps: int, settings: Settings) -> dict[str, Any]:
    """One SB3 PPO run on the vector replay environment (``timing.time_ppo``)."""
    cpu = time.process_time()
    row = time_ppo(store, datasets, "vector", steps, n_envs=n_envs, n_steps=n_steps,
                   settings=settings, batch_size=batch_size, n_epochs=4,
                   learning_rate=learning_rate)
    cpu = time.process_time() - cpu
    parts = row["parts"]
    return {"trainer": f"SB3 ppo (minibatch {batch_size})", "n_envs": n_envs,
            "steps": row["steps"], "seconds": row["seconds"], "steps_per_s": row["steps_per_s"],
            "cpu_seconds": cpu, "parts": {"env": parts["environment steps"],
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
    peak = in_fresh_process(matmul_peak)
    datasets = sorted({d for d, _ in BudgetAllocationReplayEnv(store, settings=settings).cells})
    runs: list[tuple[str, Any, tuple[Any, ...]]] = [
        ("sb3-study", time_sb3, (store, datasets, *study_ppo, sb3_steps, settings)),
        ("sb3-256", time_sb3, (store, datasets, 256, study_ppo[1], study_ppo[2], study_ppo[3],
                               max(sb3_steps, 256 * study_ppo[1]), settings))]
    for n in sizes:
        runs.append((f"sb3-{n}", time_sb3, (store, datasets, n, 15, 1024, 1e-3,
                                             max(sb3_steps, 15 * n), settings)))
        runs += [(f"{trainer}-{algo}-{n}", time_batched,
                  (store, algo, n, steps, settings, trainer))
                 for trainer in ("batched", "compiled") for algo in ("ppo", "maskable_ppo")]
    rows: dict[str, list[dict[str, Any]]] = {key: [] for key, _, _ in runs}
    for _ in range(repeats):
        for key, function, args in runs:
            rows[key].append(in_fresh_process(function, *args))
    return {"threads": threads, "peak": peak, "rows": rows, "store": store, "cells": len(
        BudgetAllocationReplayEnv(store, settings=settings).cells)}


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median steps a second among the repeats, with the range."""
    ordered = sorted(rows, key=lambda r: r["steps_per_s"])
    middle = dict(ordered[len(ordered) // 2])
    middle["range"] = (ordered[0]["steps_per_s"], ordered[-1]["steps_per_s"])
    return middle


def training_report(result: dict[str, Any], n_features: int = 18) -> str:
    """The thread table, the steps-a-second table with ratios to SB3 (the study's sizes
    and 256 environments), steps a CPU second, the share of the two cores' matrix-product
    peak each trainer's arithmetic reaches, and each run's split."""
    from agents.ppo.updates import FlatLayout

    lines = ["torch threads: median ms of the actor-critic pair at N rows (fresh processes)",
             f"{'rows':>6} {'threads':>7} {'forward':>9} {'train step':>11} {'load':>5}"]
    for r in result["threads"]:
        lines.append(f"{r['rows']:>6} {r['threads']:>7} {r['forward_ms']:>9.2f} "
                     f"{r['step_ms']:>11.2f} {r['load']:>5.1f}")
    medians = {key: _median_row(rows) for key, rows in result["rows"].items()}
    base, base256 = (medians[k]["steps_per_s"] for k in ("sb3-study", "sb3-256"))
    flops = FlatLayout.mlp_pair(n_features, (64, 64)).flops_per_sample(4)
    peak = result["peak"]
    two_cores = 2 * peak["512^3"]
    lines += ["", f"matrix products of one thread: {peak['1024x64x64']:.0f} GFLOP a CPU second "
              f"at 1,024 x 64 x 64, {peak['512^3']:.0f} at 512^3 (the peak); a PPO sample "
              f"(4 epochs) is {flops:,} FLOP of matrix products",
              "", f"end-to-end training on {result['store']} ({result['cells']} cells), median "
              f"of {len(next(iter(result['rows'].values())))} run(s), fresh processes",
              f"{'trainer':<26} {'N':>5} {'steps':>9} {'steps/s':>9} {'range':>19} "
              f"{'x SB3':>6} {'x 256':>6} {'/cpu-s':>8} {'GFLOP/s':>7} {'peak':>5} "
              f"{'env':>5} {'rollout':>7} {'update':>6} {'load':>5}"]
    for r in medians.values():
        total = sum(r["parts"].values()) or 1.0
        share = "  ".join(f"{100 * r['parts'][k] / total:4.0f}%" for k in
                          ("env", "rollout", "update"))
        low, high = r["range"]
        gflops = r["steps_per_s"] * flops / 1e9
        lines.append(f"{r['trainer']:<26} {r['n_envs']:>5} {r['steps']:>9,} "
                     f"{r['steps_per_s']:>9,.0f} {low:>9,.0f}-{high:<9,.0f} "
                     f"{r['steps_per_s'] / base:>6.1f} {r['steps_per_s'] / base256:>6.1f} "
                     f"{r['steps'] / r['cpu_seconds']:>8,.0f} {gflops:>7.1f} "
                     f"{100 * gflops / two_cores:>4.1f}% {share}  {r['load']:>5.1f}")
    best = max(r["steps_per_s"] for k, r in medians.items() if not k.startswith("sb3"))
    for name, speed in (("the study's sizes", base), ("256 environments", base256)):
        verdict = "met" if best >= SPEEDUP_GOAL * speed else "missed"
        lines.append(f"goal: {SPEEDUP_GOAL:.0f} x SB3 PPO at {name} ({SPEEDUP_GOAL * speed:,.0f} "
                     f"steps/s): {verdict} (best {best / speed:.1f} x)")
    lines.append(f"peak: share of two cores at the 512^3 peak ({two_cores:.0f} GFLOP/s); "
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
