"""Policy training: one :class:`~agents.experiments.training.config.TrainConfig` for every
trainer; :func:`train` runs the trainer it names (stable-baselines3 on the live or replay
environment, or the torch trainers on the vector replay environment), :func:`train_and_plot`
adds the run's learning curve and :func:`train_runs` trains many runs in the executor's
worker processes (one a task, its output in a log file: no study starts a command line to
train).

The trainers are imported when asked for (they need the ``rl`` extra).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.experiments.training.config import TrainConfig, TrainResult


def train(config: TrainConfig) -> TrainResult:
    """Train one policy with ``config.trainer`` and write its run folder (model, settings
    JSON, curves; ``training.record``)."""
    if config.trainer == "sb3":
        from agents.experiments.training.sb3 import train as train_sb3

        return train_sb3(config)
    from agents.experiments.training.worker_process import WorkerProcess

    # The rollout worker's process starts before torch and the trainer are imported here,
    # so its own imports overlap them (``worker_process``).
    process = WorkerProcess() if config.run_overlapped else None
    try:
        from agents.experiments.training.torch_trainer import train_torch

        return train_torch(config, process=process)
    finally:
        if process is not None:
            process.end()


def train_and_plot(config: TrainConfig) -> tuple[TrainResult, Path]:
    """Train one policy (``training.train``, any trainer) and draw its learning curve to
    ``<run>/curve.png``; the result and the curve's path."""
    from agents.experiments.training.curves import plot_training_curves

    result = train(config)
    window = max(1, min(30, config.total_timesteps // 150))
    curve = plot_training_curves({config.name: [result.run_dir]}, result.run_dir / "curve.png",
                                 window=window, title=config.name)
    return result, curve


def _train_task(task: tuple[str, TrainConfig, str], single_thread: bool
                ) -> tuple[str, str | None, float]:
    """Train one run with its output in its log file: (name, error or None, seconds). One
    BLAS/OpenMP thread even in this process, as every study run has always trained."""
    from agents.experiments.executor import worker_limits

    name, config, log = task
    start = time.perf_counter()
    with open(log, "w") as out, redirect_stdout(out), redirect_stderr(out), \
            worker_limits(True):
        try:
            train_and_plot(config)
        except Exception as err:  # a failed run is reported, the others go on
            traceback.print_exc()
            return name, f"{type(err).__name__}: {err}", time.perf_counter() - start
    return name, None, time.perf_counter() - start


def train_runs(configs: Mapping[str, TrainConfig], n_jobs: int, logs: Path) -> list[str]:
    """Train every run of ``configs`` (by run name), ``n_jobs`` at a time in the executor's
    worker processes (1: in this process), each one's output in ``<logs>/<name>.log``;
    prints each run's end and returns the names of those that failed."""
    from agents.experiments.executor import execute

    logs.mkdir(parents=True, exist_ok=True)
    tasks = [(name, config, str(logs / f"{name}.log")) for name, config in configs.items()]
    failed, start = [], time.perf_counter()
    for name, error, seconds in execute(tasks, _train_task, n_jobs):
        if error:
            failed.append(name)
        status = "ok" if error is None else f"FAILED ({error})"
        print(f"{name}: {status} in {seconds:.0f} s [{time.perf_counter() - start:.0f} s total]",
              flush=True)
    return failed


__all__ = ["train", "train_and_plot", "train_runs"]
