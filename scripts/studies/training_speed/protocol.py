"""SB3 PPO against the compiled trainer in the speed protocol of ``docs/training.md``.

Each round runs ``ballad-env train`` (its ``main``, in a fresh process) for SB3 PPO on the
vector replay environment (256 environments x 64 steps, minibatch 256, 4 epochs, 200,000
steps) and for the compiled trainer at its defaults with 1,024 environments (2,000,000
steps), plus any ``--variant`` (extra options for the compiled trainer, e.g.
``--batch-size 2048``); the rounds interleaved, so a change in the machine's load falls on
every trainer. Printed per run: steps a second from its JSON (``num_timesteps /
train_seconds``), steps a CPU second where the JSON has them, the ratio to SB3's run of the
same round, the share of one core's matrix-product peak, and the load.

``python -m scripts.studies.training_speed protocol --replay-store S --rounds 2``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from agents.experiments.bench.timing import in_fresh_process
from agents.experiments.cli.train import main as train_main
from agents.ppo.updates import FlatLayout
from scripts.studies.common.matmul import matmul_peak
from scripts.studies.common.ppo_sizes import PROTOCOL_COMPILED as COMPILED
from scripts.studies.common.ppo_sizes import PROTOCOL_SB3 as SB3


def one_run(argv: list[str], out: str) -> dict[str, Any]:
    """``ballad-env train`` with ``argv`` into ``out`` (in this fresh process); its JSON's
    steps, seconds and CPU seconds, and the load at its end."""
    code = train_main([*argv, "--output-dir", out, "--run-name", "run", "--overwrite"])
    if code:
        raise RuntimeError(f"ballad-env train {' '.join(argv)} failed ({code})")
    record = json.loads(next(Path(out).rglob("run.json")).read_text())
    return {"steps": record["num_timesteps"], "seconds": record["train_seconds"],
            "cpu": record.get("cpu_seconds"), "load": os.getloadavg()[0]}


def measure(store: str, rounds: int, variants: list[str]) -> dict[str, Any]:
    """``rounds`` interleaved rounds of every trainer on ``store``."""
    runs = {"SB3 PPO": SB3, "compiled": COMPILED}
    runs.update({f"compiled {v}": [*COMPILED, *v.split()] for v in variants})
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, argv in runs.items():
            with tempfile.TemporaryDirectory() as out:
                rows[name].append(in_fresh_process(one_run, [*argv, "--replay-store", store],
                                                   out))
    return {"rows": rows, "peak": in_fresh_process(matmul_peak)["1024x64x64"]}


def report(result: dict[str, Any]) -> str:
    """One line per trainer: steps/s per round and median, ratio to SB3 (median of the
    rounds' ratios), steps a CPU second (where the run's JSON has its CPU seconds), the
    share of one core's matmul peak per CPU second and of both cores' by wall-clock."""
    flops = FlatLayout.mlp_pair(18, (64, 64)).flops_per_sample(4)
    sb3 = result["rows"]["SB3 PPO"]
    lines = [f"one core's matmul peak: {result['peak']:.0f} GFLOP/s; {flops:,} FLOP a sample",
             "| trainer | steps/s per round | median | x SB3 (median of rounds) | "
             "steps a CPU s (median) | share of one core's peak (CPU s) | "
             "share of two cores' peak (wall) | load |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in result["rows"].items():
        speeds = [r["steps"] / r["seconds"] for r in rows]
        ratios = [s / (b["steps"] / b["seconds"]) for s, b in zip(speeds, sb3, strict=True)]
        cpu = [r["steps"] / r["cpu"] for r in rows if r["cpu"]]
        per_cpu = statistics.median(cpu) if cpu else float("nan")
        lines.append(f"| {name} | {' / '.join(f'{s:,.0f}' for s in speeds)} | "
                     f"{statistics.median(speeds):,.0f} | {statistics.median(ratios):.1f} | "
                     f"{per_cpu:,.0f} | {per_cpu * flops / 1e9 / result['peak']:.0%} | "
                     f"{statistics.median(speeds) * flops / 1e9 / (2 * result['peak']):.1%} | "
                     f"{' '.join(format(r['load'], '.1f') for r in rows)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay-store", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variant", action="append", default=[],
                        help="extra options for one more compiled run, e.g. '--batch-size 2048'")
    args = parser.parse_args(argv)
    print(report(measure(args.replay_store, args.rounds, args.variant)))

