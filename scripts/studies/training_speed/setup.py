"""How long a compiled run takes to start training, the first time on a machine and after.

Each run is ``train_batched(trainer="compiled")`` in a fresh process (so nothing compiled
stays in memory between runs) with inductor's cache in a folder this script empties
first: run 1 compiles from nothing, runs 2 and 3 find the cache ``fused`` keeps in the
user's cache folder (here redirected to the empty folder). Printed for each run: the
seconds importing the trainer, the seconds from the call to the training's clock (the
environments, the model, the compile or cache load, the rollout worker), the compile
alone, and the training seconds.

``python -m scripts.studies.training_speed.setup --replay-store S``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from agents.experiments.bench.timing import in_fresh_process


def one_run(store: str, n_envs: int, steps: int, out: str, name: str) -> dict[str, Any]:
    """A compiled run in this (fresh) process: its import, setup and training seconds."""
    start = time.perf_counter()
    from agents.experiments.training.batched import train_batched

    imported = time.perf_counter()
    run = train_batched(store, algo="ppo", n_envs=n_envs, total_timesteps=steps,
                        output_dir=out, run_name=name, trainer="compiled")
    total = time.perf_counter() - imported
    record = json.loads((run / f"{name}.json").read_text())
    return {"import_s": imported - start, "call_s": total,
            "train_s": record["train_seconds"],
            "setup_s": total - record["train_seconds"],
            "compile_s": record["update"].get("compile_seconds"),
            "compiled": record["update"].get("compiled"), "load": os.getloadavg()[0]}


def measure(store: str, n_envs: int, steps: int, runs: int) -> list[dict[str, Any]]:
    """``runs`` runs, the first on an empty inductor cache."""
    cache = Path(tempfile.mkdtemp(prefix="ballad-inductor-"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as out:
            for k in range(runs):
                rows.append(in_fresh_process(one_run, store, n_envs, steps, out, f"setup{k}"))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay-store", required=True)
    parser.add_argument("--n-envs", type=int, default=1024)
    parser.add_argument("--total-timesteps", type=int, default=15_360)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    rows = measure(args.replay_store, args.n_envs, args.total_timesteps, args.runs)
    print("| run | import s | call to clock s | compile s | training s | load |")
    print("|---|---|---|---|---|---|")
    for k, row in enumerate(rows, 1):
        print(f"| {k}{' (empty cache)' if k == 1 else ''} | {row['import_s']:.1f} | "
              f"{row['setup_s']:.1f} | {row['compile_s']} | {row['train_s']:.1f} | "
              f"{row['load']:.1f} |")


if __name__ == "__main__":
    main()
