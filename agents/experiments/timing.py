"""Timing helpers the benchmark studies share (``studies.bench``, ``studies.vector_bench``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def random_play(env: Any, n_steps: int, rng: np.random.Generator) -> float:
    """Seconds to take ``n_steps`` steps (whole episodes, resets included) of random valid
    actions in ``env`` (a coin per step; the other action when the pool is exhausted)."""
    coins = rng.integers(2, size=n_steps + 64).tolist()
    masks = env.unwrapped.action_masks
    start = time.perf_counter()
    taken = 0
    while taken < n_steps:
        env.reset()
        done = False
        while not done:
            action = coins[taken % len(coins)]
            if not masks()[action]:
                action = 1 - action
            done = env.step(action)[2]
            taken += 1
    return time.perf_counter() - start


__all__ = ["random_play"]
