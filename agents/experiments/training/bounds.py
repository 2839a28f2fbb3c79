"""The upper bound of every size a training run takes (``ballad-env train``'s options,
``TrainConfig``'s fields), so that a mistyped
``--n-envs 1000000000`` or ``--net-arch 100000 100000`` is a one-line error naming the
option, not memory growing without end or a raw allocation error. The bounds are far above
any run of the project (``docs/trust.md`` lists them); a larger run is a code change here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The largest value of each size (at least 1 for each, 0 allowed where it means "never").
TRAINING_BOUNDS = {"total_timesteps": 10**10, "n_envs": 10**4, "n_steps": 10**7,
                   "batch_size": 10**7, "n_epochs": 1_000, "train_freq": 10**6,
                   "gradient_steps": 1_000, "eval_episodes": 10**5, "torch_threads": 1_024,
                   "episode_seeds": 2**31 - 1, "eval_freq": 10**10, "checkpoint_freq": 10**10}
#: Sizes where 0 is allowed (0: never, or a fresh seed per episode).
ZERO_ALLOWED = frozenset({"episode_seeds", "eval_freq", "checkpoint_freq"})
#: Worker processes of ``vec_env="subproc"`` (one process each).
SUBPROC_ENVS = 256
#: Steps a rollout buffer holds: n_steps x n_envs (``agents.policy_zip.ROLLOUT_LIMIT`` for a
#: saved policy's).
ROLLOUT_STEPS = 10**7
#: Hidden layers of ``net_arch``, and units in each.
NET_LAYERS, NET_WIDTH = 16, 4_096


def check_training_sizes(values: Mapping[str, Any], vec_env: str | None = None) -> None:
    """A ``ValueError`` naming the first size in ``values`` (field name -> value; None
    skipped) outside its bound, the rollout n_steps x n_envs, ``net_arch``, or subprocess
    workers past :data:`SUBPROC_ENVS`."""
    for name, bound in TRAINING_BOUNDS.items():
        value = values.get(name)
        if value is None:
            continue
        low = 0 if name in ZERO_ALLOWED else 1
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= bound:
            raise ValueError(f"{name} (--{name.replace('_', '-')}) must be a whole number from "
                             f"{low} to {bound:,}, got {value!r}")
    steps, envs = values.get("n_steps"), values.get("n_envs")
    if isinstance(steps, int) and isinstance(envs, int) and steps * envs > ROLLOUT_STEPS:
        raise ValueError(f"a rollout of n_steps x n_envs = {steps:,} x {envs:,} steps passes "
                         f"{ROLLOUT_STEPS:,}: lower --n-steps or --n-envs")
    if vec_env == "subproc" and isinstance(envs, int) and envs > SUBPROC_ENVS:
        raise ValueError(f"n_envs {envs:,} with --vec-env subproc starts one process each: at "
                         f"most {SUBPROC_ENVS}; use --vec-env dummy or vector for more")
    if values.get("net_arch") is not None:
        check_net_arch(values["net_arch"])


def check_net_arch(net_arch: Sequence[Any]) -> None:
    """Hidden layers: 1 to :data:`NET_LAYERS` of them, each 1 to :data:`NET_WIDTH` units."""
    layers = list(net_arch)
    if not 1 <= len(layers) <= NET_LAYERS or not all(
            isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= NET_WIDTH
            for n in layers):
        raise ValueError(f"net_arch (--net-arch) must be 1 to {NET_LAYERS} hidden layers of 1 "
                         f"to {NET_WIDTH:,} units each, got {layers}")


__all__ = ["NET_LAYERS", "NET_WIDTH", "ROLLOUT_STEPS", "SUBPROC_ENVS", "TRAINING_BOUNDS",
           "ZERO_ALLOWED", "check_net_arch", "check_training_sizes"]
