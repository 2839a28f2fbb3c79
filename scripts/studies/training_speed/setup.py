"""How long ``ballad-env train --trainer compiled`` takes from its process's start to the
first training step, the first time on a machine and after, part by part.

Each run is ``ballad-env train``'s ``main`` (the command line, the store read, the run) in
a fresh process, so nothing compiled or imported stays in memory between runs, with
ballad-env's user cache folder (``BALLAD_DATA_HOME``) redirected to a new empty folder:
run 1 compiles the step from nothing, the later runs load the package ``step_cache`` left
there. This module imports nothing but the standard library, so the fresh process starts
as the command's would. Printed for each run, in seconds from the process's start (the
moment this study started it): the command's imports done; the run's ``train`` called
(the command line parsed and the store read; the rollout worker's process starts then);
in the worker, its imports done and its environments built; in the main process, the
model built and the step loaded (or built); the training's clock started; and the first
training step (after the first rollout: the main process's wait for it). Then the CPU
seconds each process had spent when the clock started, and the load.

``python -m scripts.studies.training_speed setup --replay-store S --runs 3``
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

#: The command of a run (``--replay-store``, ``--output-dir`` and the sizes are added).
COMMAND = ["--trainer", "compiled", "--algo", "ppo", "--run-name", "setup", "--overwrite",
           "--no-progress"]
#: The timeline's columns: (the record's name or this study's, the column's heading).
COLUMNS = [("imported", "command imported"), ("worker_started", "train called"),
           ("worker_imported", "worker imported"), ("worker_ready", "worker's envs built"),
           ("model_built", "model built"), ("step_loaded", "step loaded"),
           ("clock_started", "clock started"), ("first_step", "first step")]


def one_run(argv: list[str], started_at: float) -> dict[str, Any]:
    """``ballad-env train`` with ``argv`` in this (fresh) process, started at
    ``started_at`` (``time.time``); its timeline in seconds from then, the outcome of the
    step's load, the CPU seconds of both processes at the clock, and the load."""
    from agents.experiments.cli.train import main

    imported = time.time()
    if main(argv):
        raise RuntimeError(f"ballad-env train {' '.join(argv)} failed")
    out = Path(argv[argv.index("--output-dir") + 1])
    record = json.loads(next(out.rglob("setup.json")).read_text())
    update, times = record["update"], dict(record["update"]["timeline"])
    cpu = {k: times.pop(k) for k in ("main_cpu_seconds", "worker_cpu_seconds")}
    times["imported"] = imported
    # One rollout before the first update: the main process's wait for it.
    times["first_step"] = times["clock_started"] + record["seconds"]["wait"]
    return {"times": {k: v - started_at for k, v in times.items()}, "cpu": cpu,
            "compile_s": update.get("compile_seconds"), "built": update.get("compile_built"),
            "compiled": update.get("compiled"), "load": os.getloadavg()[0]}


def timed_fresh_run(argv: list[str]) -> dict[str, Any]:
    """:func:`one_run` in a fresh process, timed from the moment it is started."""
    from agents.experiments.bench.timing import in_fresh_process

    return in_fresh_process(one_run, argv, time.time())


def measure(store: str, n_envs: int, steps: int, runs: int) -> list[dict[str, Any]]:
    """``runs`` runs, the first on an empty cache folder; one rollout each by default."""
    from agents.ppo.step_cache import INDUCTOR_CACHE_ENV
    from ballad_env.data.adbench import DATA_HOME_ENV

    cache = Path(tempfile.mkdtemp(prefix="ballad-cache-"))
    os.environ[DATA_HOME_ENV] = str(cache)  # the compiled step's packages and inductor's cache
    os.environ.pop(INDUCTOR_CACHE_ENV, None)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as out:
            argv = [*COMMAND, "--replay-store", store, "--output-dir", out, "--n-envs",
                    str(n_envs), "--total-timesteps", str(steps)]
            rows = [timed_fresh_run(argv) for _ in range(runs)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """One line per run: the step's outcome, each point of the timeline, the CPU seconds of
    the main process and the worker when the clock started, the step's own seconds, the
    load."""
    lines = ["| run | step | " + " | ".join(head for _, head in COLUMNS)
             + " | CPU s at the clock: main / worker | the step's load or build | load |",
             "|---|---|" + "---|" * len(COLUMNS) + "---|---|---|"]
    for k, row in enumerate(rows, 1):
        how = "built" if row["built"] else "loaded" if row["compiled"] else "eager"
        times = " | ".join(f"{row['times'][name]:.1f}" for name, _ in COLUMNS)
        cpu = row["cpu"]
        lines.append(f"| {k} | {how} | {times} | {cpu['main_cpu_seconds']:.1f} / "
                     f"{cpu['worker_cpu_seconds']:.1f} | {row['compile_s']} | "
                     f"{row['load']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay-store", required=True)
    parser.add_argument("--n-envs", type=int, default=1024)
    parser.add_argument("--total-timesteps", type=int, default=15_360,
                        help="steps of each run (default: one rollout of 1,024 x 15)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(report(measure(args.replay_store, args.n_envs, args.total_timesteps, args.runs)))
