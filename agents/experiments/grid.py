"""What an experiment runs: a grid of data sets x seeds x agents x settings, cell by cell.

A *cell* is one episode: (data set, seed, agent, settings). Agents are named by the
registry (``agents.make_agent``) or given as the path of a saved policy (``.zip``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.registry import agent_names, is_agent_name, is_policy_path
from ballad_env.data import BUILTIN_DATASETS, Dataset, available_datasets
from ballad_env.settings import Settings

_SAFE = re.compile(r"[^A-Za-z0-9.=+-]+")


# ---------------------------------------------------------------------------------- agents
def agent_label(spec: str) -> str:
    """The agent's name in the results: registered names as given, ``policy:<stem>`` for paths."""
    return f"policy:{Path(spec).stem}" if is_policy_path(spec) else str(spec)


def _policy_loader() -> Any:
    """``agents.policy.load_policy``; it needs the ``rl`` extra (stable-baselines3, torch)."""
    try:
        from agents.policy import load_policy
    except ImportError as err:
        raise NotImplementedError(
            "running a saved policy (.zip) needs stable-baselines3 and torch: install the "
            "project's 'rl' extra (pip install -e '.[rl]')") from err
    return load_policy


def check_agent(spec: str) -> None:
    """Raise a clear error now, before any cell runs, if ``spec`` cannot be built."""
    if is_policy_path(spec):
        if not Path(spec).is_file():
            raise FileNotFoundError(f"saved policy {spec!r} does not exist")
        _policy_loader()
    elif not is_agent_name(spec):
        raise ValueError(f"unknown agent {spec!r}: use one of {', '.join(agent_names())} "
                         "or the path of a saved policy (.zip)")


# ---------------------------------------------------------------------------------- grid
@dataclass(frozen=True)
class Cell:
    """One episode of the grid: its results are rows ``round = 1..n_rounds`` of the table."""

    dataset: str
    seed: int
    agent: str
    setting: Settings

    @property
    def key(self) -> tuple[str, str, str, int]:
        """(data set, setting name, agent label, seed): unique within a grid."""
        return (self.dataset, self.setting.name, agent_label(self.agent), self.seed)

    @property
    def filename(self) -> str:
        """The cell's file name under ``cells/``."""
        parts = [self.setting.name, self.dataset, agent_label(self.agent), f"seed{self.seed}"]
        return "__".join(_SAFE.sub("_", part) for part in parts) + ".parquet"


@dataclass(frozen=True)
class Grid:
    """Agents x data sets x seeds x settings.

    ``datasets`` are names (built-in or file stems in ``data_dir``) or ``Dataset`` objects;
    ``agents`` are registered names or paths of saved policies; seeds are the integers given
    to ``env.reset(seed=...)``.
    """

    datasets: tuple[str | Dataset, ...]
    seeds: tuple[int, ...]
    agents: tuple[str, ...]
    settings: tuple[Settings, ...] = field(default=(Settings(),))

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", tuple(self.datasets))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "agents", tuple(str(a) for a in self.agents))
        object.__setattr__(self, "settings", tuple(self.settings))
        for axis in ("datasets", "seeds", "agents", "settings"):
            if not getattr(self, axis):
                raise ValueError(f"the grid has no {axis}")
        for axis, values in (("data set", self.dataset_names), ("seed", self.seeds),
                             ("agent", [agent_label(a) for a in self.agents]),
                             ("setting", [s.name for s in self.settings])):
            repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
            if repeated:
                raise ValueError(f"{axis} repeated in the grid: {', '.join(repeated)}")
        if any(s < 0 for s in self.seeds):
            raise ValueError("seeds must be non-negative integers")

    @property
    def dataset_names(self) -> tuple[str, ...]:
        return tuple(d.name if isinstance(d, Dataset) else str(d) for d in self.datasets)

    def cells(self) -> list[Cell]:
        """Every cell, in a fixed order (setting, data set, agent, seed)."""
        return [Cell(name, seed, agent, setting) for setting in self.settings
                for name in self.dataset_names for agent in self.agents for seed in self.seeds]

    def describe(self) -> dict[str, Any]:
        """The grid as JSON-able values, for run.json."""
        return {"datasets": list(self.dataset_names), "seeds": list(self.seeds),
                "agents": list(self.agents), "settings": [s.to_dict() for s in self.settings]}


def seed_range(n: int) -> tuple[int, ...]:
    """The seeds 0..n-1 (a repetition of the protocol per seed)."""
    if n < 1:
        raise ValueError(f"need at least one seed, got {n}")
    return tuple(range(n))


def dataset_names(names: Sequence[str], data_dir: str | os.PathLike | None = None
                  ) -> tuple[str, ...]:
    """Expand ``all`` to every data file in the data directory (built-ins excluded)."""
    if list(names) != ["all"]:
        return tuple(names)
    found = [n for n in available_datasets(data_dir) if n not in BUILTIN_DATASETS]
    if not found:
        raise FileNotFoundError("--datasets all: no data files found; pass --data-dir or set "
                                "$BALLAD_DATA_DIR")
    return tuple(found)


__all__ = ["Cell", "Grid", "agent_label", "check_agent", "dataset_names", "seed_range"]
