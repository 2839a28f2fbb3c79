"""What every trainer writes about its run, in one layout: the settings JSON beside the model
(:func:`write_record`) and the held-out evaluations' table (:func:`write_eval`).

The settings JSON is what ``agents.policy.load_policy`` and the studies read back: the
run's name, algorithm and trainer, its whole ``TrainConfig`` (``config``:
``TrainConfig(**record["config"])`` rebuilds it), SB3's constructor arguments
(``algorithm_kwargs``), the observation's features, the steps and seconds of the training
(with the torch trainers' time split and their update's setup), and package versions.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ballad_env
from agents.experiments.training.config import TrainConfig
from ballad_env.files import atomic_write
from ballad_env.observation import OBSERVATIONS

#: The evaluation table's columns (``eval/evaluations.csv``).
EVAL_COLUMNS = ("timesteps", "mean_return", "mean_test_cost")


def versions() -> dict[str, str]:
    """Versions of the packages a saved model depends on."""
    import gymnasium
    import numpy
    import sb3_contrib
    import stable_baselines3
    import torch

    return {"ballad_env": ballad_env.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__,
            "gymnasium": gymnasium.__version__, "numpy": numpy.__version__,
            "python": platform.python_version()}


def record_dict(config: TrainConfig, *, num_timesteps: int, seconds: float,
                cpu_seconds: float | None = None, parts: Mapping[str, float] | None = None,
                update: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings JSON's content: the config, SB3's constructor arguments, the features,
    the training's wall-clock seconds and this process's CPU seconds (a rollout worker's
    included; a loaded machine moves them less), ``seconds``: the time split of the torch
    trainers (environment steps, the rest of the rollouts, updates, waiting), ``update``:
    whether their step ran compiled, the seconds its setup took before the clock and the
    setup's timeline."""
    return {"run_name": config.name, "algo": config.algo, "trainer": config.trainer,
            "config": config.to_dict(), "algorithm_kwargs": algorithm_kwargs(config),
            "observation_features": list(OBSERVATIONS[config.observation]),
            "num_timesteps": int(num_timesteps), "train_seconds": round(seconds, 2),
            "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 2),
            "seconds": {k: round(v, 3) for k, v in (parts or {}).items()},
            "update": dict(update or {}),
            "versions": versions(), "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def write_record(config: TrainConfig, **measured: Any) -> Path:
    """Write the run's settings JSON ``<run>/<run>.json`` (:func:`record_dict`'s keywords);
    its path."""
    path = config.run_dir / f"{config.name}.json"
    text = json.dumps(record_dict(config, **measured), indent=2) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))  # complete or absent, never half
    return path


def algorithm_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The SB3 algorithm's constructor arguments from the config's hyperparameters (DQN's
    replay buffer and exploration fixed: a short warm-up, so learning starts within a few
    hundred steps)."""
    hp = config.hp
    if config.algo in ("ppo", "maskable_ppo"):
        return hp.ppo_kwargs()
    common = {"learning_rate": hp.learning_rate, "gamma": hp.gamma,
              "policy_kwargs": {"net_arch": list(hp.net_arch)}}
    if config.algo == "a2c":
        return {**common, "n_steps": hp.n_steps, "ent_coef": hp.ent_coef}
    return {**common, "batch_size": hp.batch_size, "buffer_size": 50_000,
            "learning_starts": min(100, config.total_timesteps // 2),
            "train_freq": hp.train_freq, "gradient_steps": hp.gradient_steps,
            "target_update_interval": 150,
            "exploration_fraction": 0.3, "exploration_final_eps": 0.05}


def append_row(table: Path, columns: Sequence[str], values: Sequence[str]) -> None:
    """Append one CSV row to ``table`` (its folder made if missing), its ``columns`` written
    first when the file is new: the one appender of a run's tables (evaluations, progress,
    monitor rows)."""
    table.parent.mkdir(parents=True, exist_ok=True)
    new = not table.exists()
    with table.open("a") as out:
        if new:
            out.write(",".join(columns) + "\n")
        out.write(",".join(values) + "\n")


def write_eval(run_dir: Path, steps: int, mean_return: float, mean_cost: float) -> None:
    """Append a row to ``<run>/eval/evaluations.csv`` (:data:`EVAL_COLUMNS`: the steps, the
    greedy episodes' mean return and mean final test cost)."""
    append_row(run_dir / "eval" / "evaluations.csv", EVAL_COLUMNS,
               [str(steps), f"{mean_return:.6f}", f"{mean_cost:.6f}"])


__all__ = ["EVAL_COLUMNS", "algorithm_kwargs", "append_row", "record_dict", "versions",
           "write_eval", "write_record"]
