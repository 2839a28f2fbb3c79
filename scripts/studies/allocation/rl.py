"""The RL family of the allocation study: MaskablePPO on the vector replay environment.

One policy per cost level, trained on the training data sets' lattices of the study's
store (``<out>/lattices``) with observation v2 and the ``round_cost`` reward (its return is
the mean cost the study scores), through the harness's SB3 trainer
(``agents.experiments.training.sb3``; the study's policies predate the batched trainer,
``training.torch_trainer``, which takes the same store). A level
whose run is already in ``<out>/policies`` is reused, not retrained. Each policy is scored
at its own level by replaying it on the lattices (exact: a policy reads only its
observation).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ballad_env.replay.lattice import Lattice
from scripts.studies.allocation.cells import COST_LEVELS
from scripts.studies.common.split import refuse_reserved

#: The algorithm and its budget's defaults (SB3's default hyperparameters otherwise).
ALGO, N_ENVS, SEED = "maskable_ppo", 64, 0
#: The package folder (in ``agents``) the policies ship in.
POLICY_FOLDER = "allocation_policies"


def policy_path(out: Path, level: str) -> Path:
    """Where the level's policy is saved."""
    return Path(out) / "policies" / f"mppo_{level}" / f"mppo_{level}.zip"


def train_policies(out: Path, datasets: Sequence[str], steps: int,
                   levels: Sequence[str] = tuple(COST_LEVELS),
                   store: Path | None = None) -> dict[str, float]:
    """Train the missing levels' policies (``steps`` environment steps each) on the lattices
    of ``store`` (default ``<out>/lattices``) into ``<out>/policies``; the training CPU
    seconds of each level (for one reused, those its run recorded beside it)."""
    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.sb3 import train

    refuse_reserved(datasets, "the allocation study's training")
    seconds = {}
    for level in levels:
        record = policy_path(out, level).with_suffix(".seconds")
        if policy_path(out, level).exists():  # reused: what training it cost then
            seconds[level] = float(record.read_text()) if record.exists() else float("nan")
            continue
        config = TrainConfig(
            algo=ALGO, datasets=tuple(datasets),
            settings=COST_LEVELS[level].replace(reward="round_cost"), total_timesteps=steps,
            seed=SEED, n_envs=N_ENVS, vec_env="vector",
            replay_store=str(Path(out) / "lattices" if store is None else store),
            episode_seeds=10, observation="v2",
            output_dir=str(Path(out) / "policies"), run_name=f"mppo_{level}",
            progress_bar=False, torch_threads=1)
        start = time.process_time()
        train(config)
        seconds[level] = time.process_time() - start
        record.write_text(f"{seconds[level]:.3f}\n")
    return seconds


def policy_entry(steps: int) -> dict[str, Any]:
    """The packaged file's entry of the family (``agents.allocation.packaged_policies``)."""
    from scripts.studies.allocation.fit import LEVEL_RATIO

    return {"levels": {level: LEVEL_RATIO[level] for level in COST_LEVELS},
            "folder": POLICY_FOLDER, "algo": ALGO, "steps_per_level": int(steps),
            "n_envs": N_ENVS, "seed": SEED, "reward": "round_cost"}


def ship_policies(out: Path, folder: Path) -> None:
    """Copy each level's saved model and settings JSON into the package's ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for level in COST_LEVELS:
        model = policy_path(out, level)
        for source in (model, model.with_suffix(".json")):
            shutil.copyfile(source, folder / source.name)


def policy_costs(out: Path, lattices: Sequence[tuple[str, Lattice]]) -> np.ndarray:
    """Mean cost of each lattice's level policy replayed on it."""
    from agents.registry import make_agent

    agents: dict[str, Any] = {}
    costs = []
    for level, lattice in lattices:
        if level not in agents:
            agents[level] = make_agent(str(policy_path(out, level)))
        costs.append(lattice.mean_cost(lattice.replay(agents[level])))
    return np.array(costs)


def add_policy_column(out: Path, tables: Mapping[str, Any], lattices: Mapping[str, Any],
                      name: str = "maskable-ppo") -> None:
    """Add the policies' mean costs as column ``name`` to each side's table."""
    for side, table in tables.items():
        table[name] = policy_costs(out, lattices[side])


__all__ = ["ALGO", "POLICY_FOLDER", "add_policy_column", "policy_costs", "policy_entry",
           "policy_path", "ship_policies", "train_policies"]
