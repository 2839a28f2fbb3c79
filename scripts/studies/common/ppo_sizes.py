"""PPO's sizes in the policy studies, shared by ``policy_scale`` (which trains at them) and
``timings`` (which times SB3 at them); and the speed protocol's ``ballad-env train``
options (``docs/training.md``), shared by ``training_speed`` and ``timings``."""

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

#: The speed protocol: SB3 PPO on the vector replay environment, 256 environments x 64
#: steps, minibatch 256, 4 epochs, 200,000 steps; the compiled trainer at its defaults with
#: 1,024 environments, 2,000,000 steps. A later ``--total-timesteps`` overrides these.
PROTOCOL_SB3 = ["--trainer", "sb3", "--algo", "ppo", "--vec-env", "vector", "--n-envs", "256",
                "--n-steps", "64", "--batch-size", "256", "--n-epochs", "4",
                "--total-timesteps", "200000"]
PROTOCOL_COMPILED = ["--trainer", "compiled", "--algo", "ppo", "--n-envs", "1024",
                     "--total-timesteps", "2000000"]


__all__ = ["PROTOCOL_COMPILED", "PROTOCOL_SB3", "STUDY_PPO_SIZES", "PPOSizes"]
