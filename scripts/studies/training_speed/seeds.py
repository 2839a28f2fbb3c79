"""What stacking seeds buys the update: ``updates.ppo_step`` over S seeds' parameters at once
(``torch.func.vmap`` over a leading seed axis, so each matrix product is a batched one)
against S separate steps, at S = 1, 4 and 16.

For each S: the stacked step, eagerly and compiled by ``torch.compile`` (where it compiles),
and the single step called S times (eagerly, and compiled); ``--rounds`` interleaved rounds
of ``--steps`` calls each. Printed: CPU milliseconds a call, minibatch rows a CPU second
per seed summed over the seeds (the update's throughput), and the ratio to S separate
compiled steps (above 1: stacking is faster).

``python -m scripts.studies.training_speed seeds --rounds 5``
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from agents.experiments.training.config import Hyperparameters
from agents.ppo import updates
from scripts.studies.training_speed.update_step import initial_weights, random_batches

Call = Callable[[], Any]


def stacked_calls(layout: updates.FlatLayout, hp: Hyperparameters, seeds: int, rows: int
                  ) -> dict[str, Call]:
    """The variants at ``seeds`` seeds, each a no-argument call doing one step per seed."""
    base = initial_weights(layout, 0)
    state = torch.stack([base, torch.zeros_like(base), torch.zeros_like(base)])
    states = state.expand(seeds, 3, -1).clone()
    counts = torch.zeros(seeds)
    batch = torch.stack(random_batches(rows, layout.shapes[0][1], seeds, 1))
    step = functools.partial(updates.ppo_step, layout, hp, False)
    stacked = torch.func.vmap(step)
    compiled_single = torch.compile(step, dynamic=False, fullgraph=True)
    singles = [(state.clone(), torch.zeros(())) for _ in range(seeds)]
    calls: dict[str, Call] = {
        "stacked, eager": lambda: stacked(states, counts, batch),
        "separate, eager": lambda: [step(s, c, batch[k]) for k, (s, c) in enumerate(singles)],
        "separate, compiled": lambda: [compiled_single(s, c, batch[k])
                                       for k, (s, c) in enumerate(singles)]}
    if seeds > 1:
        compiled_stacked = torch.compile(stacked, dynamic=False)
        calls["stacked, compiled"] = lambda: compiled_stacked(states, counts, batch)
    return calls


def cpu_per_call(call: Call, steps: int) -> float:
    start = time.process_time()
    for _ in range(steps):
        call()
    return (time.process_time() - start) / steps


def measure(rows: int, rounds: int, steps: int, seed_counts: tuple[int, ...]
            ) -> dict[int, dict[str, Any]]:
    """Per seed count: each variant's CPU seconds a call in each round (failures named)."""
    torch.set_num_threads(1)
    hp = Hyperparameters.of("compiled", "ppo", {"batch_size": rows})
    layout = updates.FlatLayout.mlp_pair(18, hp.net_arch)
    out: dict[int, dict[str, Any]] = {}
    for seeds in seed_counts:
        calls, failed = stacked_calls(layout, hp, seeds, rows), {}
        for name, call in list(calls.items()):
            try:
                call()
                call()
            except Exception as err:  # noqa: BLE001 - a variant that fails is named, not timed
                failed[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
                del calls[name]
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                times[name].append(cpu_per_call(call, steps))
        out[seeds] = {"times": times, "failed": failed}
    return out


def report(result: dict[int, dict[str, Any]], rows: int) -> str:
    lines = ["| seeds | variant | ms CPU a call (median) | rows a CPU s (all seeds) | "
             "x separate compiled |", "|---|---|---|---|---|"]
    for seeds, entry in result.items():
        base = statistics.median(entry["times"]["separate, compiled"])
        for name, times in entry["times"].items():
            t = statistics.median(times)
            lines.append(f"| {seeds} | {name} | {t * 1e3:.2f} | {seeds * rows / t:,.0f} | "
                         f"{base / t:.2f} |")
        lines += [f"| {seeds} | {name} | failed: {why} | | |"
                  for name, why in entry["failed"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args(argv)
    print(report(measure(args.rows, args.rounds, args.steps, tuple(args.seeds)), args.rows))

