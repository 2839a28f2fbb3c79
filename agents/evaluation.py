"""Run an agent through episodes and keep one record per round."""

from __future__ import annotations

from typing import Any

import numpy as np

#: The ``info`` figures copied into every record (the indices and mask are left out).
RECORD_FIELDS = ("dataset", "round", "action", "test_cost", "fpr", "fnr", "rejection_rate",
                 "auc", "reward_al", "reward_lr", "entropy_al", "entropy_lr", "cosine_al",
                 "cosine_lr", "al_measured", "lr_measured", "tau", "val_cost",
                 "n_labeled_train", "n_labeled_val", "n_anomalies_found")


def run_episode(env: Any, agent: Any, seed: int, include_start: bool = False
                ) -> list[dict[str, Any]]:
    """Play one episode of ``agent`` from ``env.reset(seed=seed)``; one record per round.

    Records carry every scalar ``info`` figure plus the step's reward. With
    ``include_start`` the state before any label comes first, as round 0.
    """
    obs, info = env.reset(seed=seed)
    agent.reset(seed)
    records = [_record(info, reward=np.nan)] if include_start else []
    terminated = truncated = False
    while not (terminated or truncated):
        action, _ = agent.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(int(np.asarray(action).item()))
        records.append(_record(info, reward))
    return records


def _record(info: dict[str, Any], reward: float) -> dict[str, Any]:
    record = {name: info[name] for name in RECORD_FIELDS}
    record["reward"] = float(reward)
    return record
