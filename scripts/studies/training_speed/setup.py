"""How long a compiled run takes to start training, the first time on a machine and after.

Each run is a ``--trainer compiled`` run (``training.train``) in a fresh process (so
nothing compiled stays in memory between runs) with ballad-env's user cache folder
(``BALLAD_DATA_HOME``) redirected to a new empty folder: run 1 compiles from nothing, the
later runs load the step's package ``step_cache`` left there. Printed for each run: the
seconds importing the trainer, the seconds from the call to the training's clock (the
environments, the model, the compile or cache load, the rollout worker), the compile
alone, and the training seconds.

``python -m scripts.studies.training_speed setup --replay-store S``
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
from agents.experiments.training.step_cache import INDUCTOR_CACHE_ENV
from ballad_env.data.adbench import DATA_HOME_ENV


def one_run(store: str, n_envs: int, steps: int, out: str, name: str) -> dict[str, Any]:
    """A compiled run in this (fresh) process: its import, setup and training seconds."""
    start = time.perf_counter()
    from agents.experiments.lattice_build import store_datasets
    from agents.experiments.training import train
    from agents.experiments.training.config import TrainConfig
    from ballad_env.settings import Settings

    imported = time.perf_counter()
    settings = Settings(reward="cost")
    config = TrainConfig(trainer="compiled", algo="ppo", replay_store=store,
                         datasets=tuple(store_datasets(store, settings)), settings=settings,
                         n_envs=n_envs, total_timesteps=steps, output_dir=out, run_name=name,
                         progress_bar=False)
    run = train(config).run_dir
    total = time.perf_counter() - imported
    record = json.loads((run / f"{name}.json").read_text())
    return {"import_s": imported - start, "call_s": total,
            "train_s": record["train_seconds"],
            "setup_s": total - record["train_seconds"],
            "compile_s": record["update"].get("compile_seconds"),
            "compiled": record["update"].get("compiled"),
            "built": record["update"].get("compile_built"), "load": os.getloadavg()[0]}


def measure(store: str, n_envs: int, steps: int, runs: int) -> list[dict[str, Any]]:
    """``runs`` runs, the first on an empty inductor cache."""
    cache = Path(tempfile.mkdtemp(prefix="ballad-cache-"))
    os.environ[DATA_HOME_ENV] = str(cache)  # the compiled step's packages and inductor's cache
    os.environ.pop(INDUCTOR_CACHE_ENV, None)
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
    print("| run | step | import s | call to clock s | of which the step s | training s | load |")
    print("|---|---|---|---|---|---|---|")
    for k, row in enumerate(rows, 1):
        how = "built" if row["built"] else "loaded" if row["compiled"] else "eager"
        print(f"| {k} | {how} | {row['import_s']:.1f} | {row['setup_s']:.1f} | "
              f"{row['compile_s']} | {row['train_s']:.1f} | {row['load']:.1f} |")

