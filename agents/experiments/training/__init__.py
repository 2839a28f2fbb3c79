"""Policy training: one :class:`~agents.experiments.training.config.TrainConfig` for every
trainer; :func:`train` runs the trainer it names (stable-baselines3 on the live or replay
environment, or the torch trainers on the vector replay environment), and
:func:`train_and_plot` adds the run's learning curve.

The trainers are imported when asked for (they need the ``rl`` extra).
"""

from __future__ import annotations

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

    # The second process (the rollout worker, or the split schedule's helper) starts before
    # torch and the trainer are imported here, so its own imports overlap them
    # (``worker_process``).
    process = WorkerProcess() if config.second_process else None
    try:
        from agents.experiments.training.torch_trainer import train_torch

        return train_torch(config, process=process)
    finally:
        if process is not None:
            process.end()


def train_and_plot(config: TrainConfig) -> tuple[TrainResult, Path]:
    """Train one policy (``training.train``, any trainer) and draw its learning curve to
    ``<run>/curve.png``; the result and the curve's path. The plotting libraries are
    imported after the training, so their import is not part of the run's setup."""
    result = train(config)
    from agents.experiments.training.curves import plot_training_curves

    window = max(1, min(30, config.total_timesteps // 150))
    curve = plot_training_curves({config.name: [result.run_dir]}, result.run_dir / "curve.png",
                                 window=window, title=config.name)
    return result, curve


__all__ = ["train", "train_and_plot"]
