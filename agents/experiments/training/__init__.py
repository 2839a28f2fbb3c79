"""Policy training: one :class:`~agents.experiments.training.config.TrainConfig` for every
trainer, :func:`train` running the one it names (stable-baselines3 on the live or replay
environment, or the torch trainers on the vector replay environment), the environments a
run steps, and trained runs as the harness keeps them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.experiments.training.config import TrainConfig, TrainResult


def train(config: TrainConfig) -> TrainResult:
    """Train one policy with ``config.trainer`` and write its run folder (model, settings
    JSON, curves; ``training.record``). The trainers are imported here, when asked for
    (they need the ``rl`` extra)."""
    if config.trainer == "sb3":
        from agents.experiments.training.sb3 import train as train_sb3

        return train_sb3(config)
    from agents.experiments.training.batched import train_torch

    return train_torch(config)


__all__ = ["train"]
