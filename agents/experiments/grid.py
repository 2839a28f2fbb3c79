"""What an experiment runs: a grid of data sets x seeds x agents x settings, cell by cell.

A *cell* is one episode: (data set, seed, agent, settings). Agents are named by the
registry (``agents.make_agent``) or given as the path of a saved policy (``.zip``). A data
set's key in the results is the name it loads under (``ballad_env.data.dataset_name``), so
``glass``, ``Glass`` and ``data/Glass.npz`` are one data set.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.spec import AgentSpec
from ballad_env.data import Dataset, dataset_name
from ballad_env.data.adbench import adbench_names
from ballad_env.data.bundled import bundled_names
from ballad_env.data.folder import folder_names, resolve_data_dir
from ballad_env.env import named_arrays
from ballad_env.files import colliding, safe_name
from ballad_env.settings import Settings

# ---------------------------------------------------------------------------------- agents
#: The paper's three allocators (its Q1): BALLAD and the two one-sided baselines.
PAPER_AGENTS = ("ballad", "all-in-al", "all-in-lr")


def agent_label(spec: str | AgentSpec) -> str:
    """The agent's name in the results (``AgentSpec.label``): registered names as given,
    ``policy:<name>`` for a saved policy (its file stem; ``<run>/best_model`` for a run's
    best model)."""
    return AgentSpec.of(spec).label


def check_agent(spec: str | AgentSpec, *, trust_pickle: bool = False) -> None:
    """Raise a clear error now, before any cell runs, if ``spec`` cannot be built
    (``AgentSpec.check``)."""
    AgentSpec.of(spec).check(trust_pickle=trust_pickle)


# ---------------------------------------------------------------------------------- grid
def setting_name(setting: Settings) -> str:
    """``setting.name``, computed once per distinct settings (a grid of a million seeds asks
    for it in every cell's file name); settings that cannot be hashed, each time."""
    try:
        return _setting_name(setting)
    except TypeError:  # a prior object that is not hashable
        return setting.name


@functools.lru_cache(maxsize=1024)
def _setting_name(setting: Settings) -> str:
    return setting.name


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
        return (self.dataset, setting_name(self.setting), agent_label(self.agent), self.seed)

    @property
    def filename(self) -> str:
        """The cell's file name under ``cells/``: its parts, each made a safe file name
        injectively (``ballad_env.files.safe_name``), joined by ``__``."""
        parts = [setting_name(self.setting), self.dataset, agent_label(self.agent),
                 f"seed{self.seed}"]
        return "__".join(safe_name(part) for part in parts) + ".parquet"


@dataclass(frozen=True)
class Grid:
    """Agents x data sets x seeds x settings.

    ``datasets`` are names (built-in or file stems in ``data_dir``), paths of data files or
    ``Dataset`` objects; ``agents`` are registered names or paths of saved policies; seeds
    are the integers given to ``env.reset(seed=...)``. ``keys`` are the data sets' names in
    the results: :meth:`resolve` (which ``run_grid`` calls) sets them to the names the data
    sets load under; until then a data set is keyed as given.
    """

    datasets: tuple[str | Dataset, ...]
    seeds: tuple[int, ...]
    agents: tuple[str, ...]
    settings: tuple[Settings, ...] = field(default=(Settings(),))
    keys: tuple[str, ...] = ()
    #: ``agents`` read once (``AgentSpec``): what each names, asked of it by the runner.
    agent_specs: tuple[AgentSpec, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # (X, y) tuples: complex values refused, several named arrays-0, arrays-1, ...
        object.__setattr__(self, "datasets", tuple(named_arrays(self.datasets)))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "agents", tuple(str(a) for a in self.agents))
        object.__setattr__(self, "agent_specs", tuple(map(AgentSpec.of, self.agents)))
        object.__setattr__(self, "settings", tuple(self.settings))
        object.__setattr__(self, "keys", tuple(self.keys))
        for axis in ("datasets", "seeds", "agents", "settings"):
            if not getattr(self, axis):
                raise ValueError(f"the grid has no {axis}")
        if self.keys and len(self.keys) != len(self.datasets):
            raise ValueError("keys: give one per data set")
        for axis, values in (("data set", self.dataset_names), ("seed", self.seeds),
                             ("agent", [a.label for a in self.agent_specs]),
                             ("setting", [s.name for s in self.settings])):
            repeated = sorted({str(v) for v, n in Counter(values).items() if n > 1})
            if repeated:
                raise ValueError(f"{axis} repeated in the grid: {', '.join(repeated)}")
            if axis != "seed" and (axis != "data set" or self.keys):  # keys: once resolved
                _refuse_collisions(axis, [str(v) for v in values])
        if any(s < 0 for s in self.seeds):
            raise ValueError("seeds must be non-negative integers")
        check_cell_count(len(self.datasets), len(self.seeds), len(self.agents),
                         len(self.settings))

    @property
    def dataset_names(self) -> tuple[str, ...]:
        """Each data set's key in the results (``keys``, else the name or string given)."""
        if self.keys:
            return self.keys
        return tuple(d.name if isinstance(d, Dataset) else str(d) for d in self.datasets)

    def resolve(self, data_dir: str | os.PathLike | None = None) -> Grid:
        """This grid with each data set keyed by the name it loads under
        (``ballad_env.data.dataset_name``); one data set given twice under two names
        (``Glass`` and ``glass``, or a name and its path) is refused."""
        keys = tuple(dataset_name(d, data_dir) for d in self.datasets)
        given: dict[str, list[str]] = {}
        for key, source in zip(keys, self.datasets, strict=True):
            given.setdefault(key, []).append(
                source.name if isinstance(source, Dataset) else str(source))
        twice = [f"{', '.join(names)} are the same data set {key!r}"
                 for key, names in given.items() if len(names) > 1]
        if twice:
            raise ValueError("; ".join(twice) + ": give each data set once")
        return dataclasses.replace(self, keys=keys)

    def cells(self) -> list[Cell]:
        """Every cell, in a fixed order (setting, data set, agent, seed)."""
        return [Cell(name, seed, agent, setting) for setting in self.settings
                for name in self.dataset_names for agent in self.agents for seed in self.seeds]

    def describe(self) -> dict[str, Any]:
        """The grid as JSON-able values, for run.json."""
        return {"datasets": list(self.dataset_names), "seeds": list(self.seeds),
                "agents": list(self.agents), "settings": [s.to_dict() for s in self.settings]}


def _refuse_collisions(axis: str, names: Sequence[str]) -> None:
    """A ``ValueError`` if two names of one axis would write one cell file (they differ only
    in case, and a case-insensitive file system keeps one file for both)."""
    pairs = colliding(names)
    if pairs:
        raise ValueError("; ".join(f"{axis}s {a!r} and {b!r}" for a, b in pairs) +
                         " would write one file per cell on a case-insensitive file system "
                         "(macOS, Windows), so one's results would be lost: rename one")


#: The most seeds a grid or a store takes (``--seeds``): planning lists every cell, and the
#: run's record every seed (``docs/trust.md`` has the time and memory planning takes).
MAX_SEEDS = 10**5
#: The most cells one grid or store build plans (data sets x seeds x agents x settings).
MAX_CELLS = 10**6


def check_cell_count(*axes: int) -> None:
    """A ``ValueError`` if the grid of these axes' lengths (data sets, seeds, agents,
    settings; a store has no agents) holds more than :data:`MAX_CELLS` cells."""
    cells = math.prod(axes)
    if cells > MAX_CELLS:
        raise ValueError(f"the grid holds {cells:,} cells ({' x '.join(f'{n:,}' for n in axes)}),"
                         f" more than {MAX_CELLS:,}: split it into several runs (fewer "
                         "--seeds, data sets, agents or setting values each)")


def seed_range(n: int) -> tuple[int, ...]:
    """The seeds 0..n-1 (a repetition of the protocol per seed), at most :data:`MAX_SEEDS`."""
    if n < 1:
        raise ValueError(f"need at least one seed, got {n}")
    if n > MAX_SEEDS:
        raise ValueError(f"--seeds must be at most {MAX_SEEDS:,} (the run's record lists every "
                         f"seed), got {n:,}")
    return tuple(range(n))


#: Group names ``--datasets`` expands (a file named like one is reached by its path); what
#: each holds is said in :data:`DATASETS_HELP`.
DATASET_GROUPS = ("all", "paper", "adbench")
#: The ``--datasets`` help of every script.
DATASETS_HELP = ("data sets: names (toy, wdbc, the paper's Glass, WBC, ..., adbench/<name> "
                 "for ADBench's, or file stems in --data-dir; any case), paths of data files, "
                 "or a group: 'all' (every file in --data-dir if given, else the paper's 18), "
                 "'paper' (the paper's 18), 'adbench' (ADBench's 47, downloaded once)")


def _group(name: str, data_dir: str | os.PathLike | None) -> list[str]:
    """The data sets of the group ``name`` (see ``DATASET_GROUPS``)."""
    if name == "paper":
        return bundled_names()
    if name == "adbench":
        return adbench_names()
    directory = resolve_data_dir(data_dir)
    if directory is None:
        return bundled_names()
    found = sorted(folder_names(directory), key=lambda n: (n.lower(), n))
    if not found:
        raise FileNotFoundError(f"--datasets all: no data files in {str(directory)!r}")
    return found


def dataset_names(names: Sequence[str], data_dir: str | os.PathLike | None = None
                  ) -> tuple[str, ...]:
    """The data sets of a command line: the groups of ``DATASET_GROUPS`` expanded (``all``,
    ``paper``, ``adbench``); other names and paths are checked to exist (without a
    download), and kept as given; a data set named twice is kept once."""
    expanded: list[str] = []
    for name in names:
        if name in DATASET_GROUPS:
            expanded.extend(_group(name, data_dir))
        else:
            dataset_name(name, data_dir)  # FileNotFoundError naming an unknown data set
            expanded.append(name)
    return tuple(dict.fromkeys(expanded))


__all__ = ["DATASETS_HELP", "DATASET_GROUPS", "MAX_CELLS", "MAX_SEEDS", "PAPER_AGENTS", "Cell",
           "Grid", "agent_label", "check_agent", "check_cell_count", "dataset_names",
           "seed_range"]
