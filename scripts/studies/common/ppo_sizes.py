"""PPO's sizes in the policy studies, shared by ``policy_scale`` (which trains at them) and
``timings`` (which times SB3 at them)."""

from __future__ import annotations

from typing import NamedTuple


class PPOSizes(NamedTuple):
    """How PPO trains: environments, steps per environment and update, minibatch, epochs,
    learning rate."""

    n_envs: int
    n_steps: int
    batch_size: int
    n_epochs: int
    learning_rate: float


STUDY_PPO_SIZES = PPOSizes(n_envs=16, n_steps=64, batch_size=256, n_epochs=4,
                           learning_rate=3e-4)


__all__ = ["STUDY_PPO_SIZES", "PPOSizes"]
