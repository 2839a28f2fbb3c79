"""Held-out cost at the speed protocol's sizes: SB3 PPO against the compiled trainer at
several minibatch sizes, over seeds, with the IQM and its stratified-bootstrap interval.

Each (trainer, seed) run is ``ballad-env train``'s configuration in a fresh process, the
seeds run one after another (never two at once on the shared cores): SB3 PPO as the
protocol runs it (``protocol.SB3``: 256 environments x 64 steps, minibatch 256, 4 epochs)
for ``--sb3-steps``, and the compiled trainer at its defaults with 1,024 environments and
each ``--batch-size`` for ``--steps``, both with a checkpoint every ``--every`` steps (by
default 13 of the compiled trainer's 15,360-step rollouts, 199,680 steps: at or just under
SB3's budget). Every checkpoint's and every final greedy policy is replayed on each cell of the
held-out store (``Lattice.replay``: the final test cost at the end of the episode); the
table gives, per trainer and step count, the IQM over seeds x cells of that cost with its
95% stratified-bootstrap interval (``reports.policy_stats.interval``: seeds resampled
within each cell), the mean, the IQM less SB3's at the same steps with the interval of that
difference, and each seed's mean, beside All-in-LR's on the same cells.

``python -m scripts.studies.training_speed learning --replay-store S --eval-store E``
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.experiments.bench.timing import in_fresh_process
from scripts.studies.training_speed.protocol import SB3

#: The compiled trainer's rollout at 1,024 environments (15 steps each).
ROLLOUT = 15 * 1024


def train_run(argv: list[str], out: str, name: str) -> str:
    """``ballad-env train`` with ``argv`` into ``out`` as run ``name``; its folder."""
    from agents.experiments.cli.train import main as train_main

    code = train_main([*argv, "--output-dir", out, "--run-name", name, "--overwrite",
                       "--no-progress"])
    if code:
        raise RuntimeError(f"ballad-env train {' '.join(argv)} failed ({code})")
    return str(next(Path(out).rglob(f"{name}.json")).parent)


def held_out_costs(run: str, eval_store: str) -> dict[int, list[float]]:
    """Each checkpoint's and the final policy's final test cost on every cell of
    ``eval_store`` (in the store's order) by the steps it had trained; key 0 holds
    All-in-LR's on the same cells."""
    from agents.registry import make_agent
    from ballad_env.replay.store import LatticeStore
    from ballad_env.settings import Settings

    folder = Path(run)
    record = json.loads((folder / f"{folder.name}.json").read_text())
    settings = Settings.from_dict(record["config"]["settings"])
    store = LatticeStore(eval_store)
    lattices = [store.load(d, s, settings) for d, s in store.cells(settings)]
    if not lattices:
        raise ValueError(f"the held-out store {eval_store} has no cells of the run's setting: "
                         "build it with the training store's costs and prior")
    points: dict[int, Any] = {0: "all-in-lr"}
    points.update({int(re.search(r"_(\d+)_steps", p.name)[1]): str(p)  # type: ignore[index]
                   for p in (folder / "checkpoints").glob("*_steps.zip")})
    points[int(record["num_timesteps"])] = str(folder / f"{folder.name}.zip")
    out = {}
    for steps, path in sorted(points.items()):
        agent = make_agent(path)
        out[steps] = [float(lat.costs_along(lat.replay(agent))[-1]) for lat in lattices]
    return out


def plan(batch_sizes: Sequence[int], steps: int, sb3_steps: int, every: int,
         extra: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The ``ballad-env train`` options of each trainer the study runs, by label: SB3, the
    compiled trainer at each minibatch size, and each of ``extra`` (options added to the
    compiled trainer's at its default minibatch). ``sb3_steps`` 0 leaves SB3 out (a study
    of more trainers beside an earlier one's SB3 runs, its file merged at the report)."""
    runs = {"SB3 PPO": [*SB3[:-1], str(sb3_steps), "--checkpoint-freq", str(every)]
            } if sb3_steps else {}
    compiled = ["--trainer", "compiled", "--algo", "ppo", "--n-envs", "1024",
                "--total-timesteps", str(steps), "--checkpoint-freq", str(every)]
    for size in batch_sizes:
        runs[f"compiled, minibatch {size}"] = [*compiled, "--batch-size", str(size)]
    for label, options in (extra or {}).items():
        runs[label] = [*compiled, *options]
    return runs


def measure(store: str, eval_store: str, seeds: Sequence[int], runs: dict[str, list[str]],
            save: str | None = None) -> dict[str, dict[int, dict[int, list[float]]]]:
    """Every (trainer, seed) run in a fresh process, one after another, then its policies'
    held-out costs: per trainer, per seed, {steps: per-cell costs}. With ``save`` the costs
    are written there after every run and a rerun skips the runs the file holds, so a long
    study can stop and go on, and a trainer can be added later."""
    costs = load_costs(save) if save and Path(save).exists() else {}
    with tempfile.TemporaryDirectory() as out:
        for seed in seeds:
            for k, (label, argv) in enumerate(runs.items()):
                if seed in costs.get(label, {}):
                    continue
                run = in_fresh_process(train_run, [*argv, "--replay-store", store,
                                                   "--seed", str(seed)], out, f"r{k}-s{seed}")
                costs.setdefault(label, {})[seed] = held_out_costs(run, eval_store)
                if save:
                    Path(save).write_text(json.dumps(costs))
                print(f"seed {seed} {label}: " + ", ".join(
                    f"{n:,} {np.mean(c):.4f}" for n, c in costs[label][seed].items()), flush=True)
    return costs


def load_costs(path: str) -> dict[str, dict[int, dict[int, list[float]]]]:
    """The costs ``measure`` saved (JSON turns its integer keys into strings: back to
    integers)."""
    raw = json.loads(Path(path).read_text())
    if not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"{path} is not a learning study's costs (label -> seed -> steps): "
                         "give --save a new file")
    return {label: {int(seed): {int(n): c for n, c in points.items()}
                    for seed, points in by_seed.items()}
            for label, by_seed in raw.items()}


def variants(specs: Sequence[str]) -> dict[str, list[str]]:
    """``LABEL=OPTIONS`` pairs (e.g. ``split=--schedule split``): each a compiled run at its
    defaults with ``OPTIONS`` added, under ``compiled, LABEL``."""
    out = {}
    for spec in specs:
        label, sep, options = spec.partition("=")
        if not sep or not label:
            raise ValueError(f"--variant {spec!r}: write LABEL=OPTIONS, e.g. "
                             "'split=--schedule split'")
        out[f"compiled, {label}"] = options.split()
    return out


def report(costs: dict[str, list[dict[int, list[float]]]], seed: int = 0,
           reference: str = "SB3 PPO", shown: Sequence[int] = ()) -> str:
    """One row per trainer and step count present in every seed's run: the IQM over seeds x
    cells with its 95% bootstrap interval over whole seeds, the mean, the IQM less
    ``reference``'s at the same steps (where it has them) with the interval of that
    difference, each seed's mean. The difference is what "no worse than SB3 after as many
    steps" asks: an interval whose upper end is below or near 0. ``shown``, when given,
    keeps only the rows of those step counts."""
    from agents.reports.policy_stats import interval

    rng = np.random.default_rng(seed)
    lines = ["| trainer | steps | IQM held-out cost [95% interval] | mean | "
             f"IQM less {reference}'s [95%] | per seed |", "|---|---|---|---|---|---|"]
    lr = np.array(next(iter(costs.values()))[0][0])
    lines.append(f"| All-in-LR | | {_iqm_cell(np.array([lr]), rng, interval)} | "
                 f"{lr.mean():.4f} | | |")
    matrices = {label: {steps: np.array([s[steps] for s in seeds])  # seeds x cells
                        for steps in sorted(set.intersection(*(set(s) for s in seeds)) - {0})}
                for label, seeds in costs.items()}
    for label, by_steps in matrices.items():
        for steps, matrix in by_steps.items():
            if shown and steps not in shown:
                continue
            other = matrices.get(reference, {}).get(steps)
            versus = ("" if other is None or label == reference
                      else _difference_cell(matrix, other, rng))
            lines.append(f"| {label} | {steps:,} | {_iqm_cell(matrix, rng, interval)} | "
                         f"{matrix.mean():.4f} | {versus} | "
                         f"{' '.join(f'{m:.4f}' for m in matrix.mean(axis=1))} |")
    return "\n".join(lines)


def _iqm_cell(matrix: np.ndarray, rng: np.random.Generator, interval: Any) -> str:
    value, low, high = interval(matrix, rng, whole_runs=True)
    return f"{value:.4f} [{low:.4f}, {high:.4f}]"


def _difference_cell(matrix: np.ndarray, other: np.ndarray, rng: np.random.Generator) -> str:
    """IQM(matrix) - IQM(other) and its 95% interval: each side's seeds resampled as whole
    seeds (one policy per seed plays every cell, so a seed's costs move together), the two
    sides on their own (their runs are independent), the difference taken draw by draw."""
    from agents.reports.policy_stats import CONFIDENCE, iqm, stratified_bootstrap

    draws = (stratified_bootstrap(matrix, rng, whole_runs=True)
             - stratified_bootstrap(other, rng, whole_runs=True))
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return f"{float(iqm(matrix)) - float(iqm(other)):+.4f} [{low:+.4f}, {high:+.4f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay-store", help="the protocol's training store")
    parser.add_argument("--eval-store",
                        help="held-out cells (the same sets at other seeds, same settings)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, nargs="*", default=[1024, 2048],
                        help="the compiled trainer's minibatch sizes (none: no such runs)")
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--sb3-steps", type=int, default=200_000, help="0: no SB3 runs")
    parser.add_argument("--every", type=int, default=13 * ROLLOUT,
                        help="compiled runs' checkpoint interval (default 13 rollouts)")
    parser.add_argument("--variant", nargs="*", default=[], metavar="LABEL=OPTIONS",
                        help="compiled runs with options added, e.g. 'split=--schedule split'")
    parser.add_argument("--save", help="write the per-cell costs to this JSON file after "
                        "every run; a rerun skips the runs it holds")
    parser.add_argument("--rows", type=int, nargs="*", default=[], metavar="STEPS",
                        help="show only the rows of these step counts (default: every one)")
    parser.add_argument("--merge", nargs="*", default=[], metavar="FILE",
                        help="with --report-only: other studies' --save files, their trainers "
                             "added to the table")
    parser.add_argument("--report-only", action="store_true",
                        help="only print the table of the costs in --save")
    args = parser.parse_args(argv)
    if args.report_only:
        if not args.save:
            parser.error("--report-only reads --save: name the file")
        costs = load_costs(args.save)
        for other in args.merge:
            costs.update(load_costs(other))
    else:
        if not (args.replay_store and args.eval_store):
            parser.error("name the training store (--replay-store) and the held-out one "
                         "(--eval-store)")
        runs = plan(args.batch_size, args.steps, args.sb3_steps, args.every,
                    variants(args.variant))
        costs = measure(args.replay_store, args.eval_store, range(args.seeds), runs, args.save)
    print(report({label: [by_seed[s] for s in sorted(by_seed)]
                  for label, by_seed in costs.items()}, shown=args.rows))
