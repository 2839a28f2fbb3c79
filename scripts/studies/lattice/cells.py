"""The lattice study's cells: its options and store, one cell (a lattice replayed by every
agent), the cross-check through the real environment, and the driver that runs pending
cells through the harness's executor into the store.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.executor import execute, worker_limits
from agents.experiments.stores.provenance import package_versions, source_fingerprint
from agents.experiments.stores.results import FORMAT_VERSION, ResultStore, TableCell
from scripts.studies.common.lattice_paths import episode_row, reference_paths

STUDY_AGENTS = ("ballad", "ballad-cosine", "all-in-al", "all-in-lr", "random", "discounted",
                "ucb1", "epsilon-greedy", "sliding-window", "val-cost-greedy", "half",
                "lr-first-20", "lr-first-33", "lr-first-50")
#: The tidy tables every cell writes, one file each; ``cells`` (last) marks it finished.
TABLES = ("states", "episodes", "signals", "cells")
#: The table of a cell re-run through the real environment.
CROSSCHECK = "crosscheck"
CELL_KEYS = ["dataset", "seed", "prior"]
#: The data set whose lattice LATTICE.md draws.
FIGURE_DATASET = "Cardiotocography"

#: One cell of the study: (data set, seed, prior).
CellKey = tuple[str, int, str]


@dataclass
class StudyOptions:
    """The study's options (one command-line option each)."""

    data_dir: Path
    out: Path
    docs: Path
    datasets: list[str] = field(default_factory=list)
    seeds: int = 10
    priors: list[str] = field(default_factory=lambda: ["iforest", "knn"])
    agents: list[str] = field(default_factory=lambda: list(STUDY_AGENTS))
    n_jobs: int = 2
    crosscheck: int = 1
    figure_dataset: str = FIGURE_DATASET
    report_only: bool = False


# ---------------------------------------------------------------------------- the store
def table_cell(table: str, cell: CellKey) -> TableCell:
    """The stored file of one table of one cell."""
    return TableCell(table, tuple(zip(CELL_KEYS, cell, strict=True)))


def prepare_store(options: StudyOptions) -> ResultStore:
    """The study's store at ``options.out``, its ``run.json`` grown to this run's data sets,
    seeds, priors and agents; ``RunError`` if it holds results of other source code or
    package versions."""
    store = ResultStore(options.out)
    stored = (store.read_manifest() or {}).get("grid", {})

    def grown(axis: str, values: Sequence[Any]) -> list[Any]:
        return list(dict.fromkeys([*stored.get(axis, []), *values]))

    grid = {"datasets": grown("datasets", options.datasets),
            "seeds": grown("seeds", range(options.seeds)),
            "agents": grown("agents", options.agents),
            "priors": grown("priors", options.priors)}
    store.prepare({"format": FORMAT_VERSION, "study": "lattice", "grid": grid,
                   "versions": package_versions(),
                   "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")})
    return store


def stored_agents(store: ResultStore, cell: CellKey) -> list[str] | None:
    """The agents a finished cell was computed with (in its order), ``None`` if unfinished."""
    if not store.path(table_cell("cells", cell)).exists():
        return None
    episodes = store.read(table_cell("episodes", cell))
    return list(episodes[episodes.kind == "agent"].name)


def agents_to_compute(store: ResultStore, cell: CellKey, agents: Sequence[str]
                      ) -> tuple[str, ...]:
    """The agents to (re)compute a cell with: none if it is finished with every requested
    agent; else the requested ones, then any others the finished cell already held."""
    stored = stored_agents(store, cell)
    if stored is None:
        return tuple(agents)
    if all(name in stored for name in agents):
        return ()
    return (*agents, *(name for name in stored if name not in agents))


# ---------------------------------------------------------------------------- one cell
def run_cell(task: tuple[Path, CellKey, tuple[str, ...]], single_thread: bool = True
             ) -> tuple[CellKey, dict[str, pd.DataFrame]]:
    """Build one lattice, replay the agents on it, score the signals: the cell's tables.
    ``task`` is (data folder, cell, agents); one BLAS thread, in a worker or not."""
    from agents.registry import make_agent
    from ballad_env.data import load_dataset
    from ballad_env.replay.lattice import SIGNAL_MODES, SIGNALS, build_lattice
    from ballad_env.settings import Settings

    data_dir, cell, agent_names = task
    dataset, seed, prior = cell
    keys = {"dataset": dataset, "seed": seed, "prior": prior}
    start, cpu_start = time.perf_counter(), time.process_time()
    with worker_limits(True):  # two workers on two cores: BLAS threads only oversubscribe
        data = load_dataset(dataset, data_dir=data_dir)
        lattice = build_lattice(data, seed, Settings(prior=prior))
        built = time.perf_counter() - start
        paths = {name: ("agent", lattice.replay(make_agent(name))) for name in agent_names}
    paths.update(reference_paths(lattice))
    episodes = [{**keys, **episode_row(lattice, name, kind, actions)}
                for name, (kind, actions) in paths.items()]
    signals = [{**keys, "signal": s, "mode": m, **lattice.score_signal(s, m)}
               for s in SIGNALS for m in SIGNAL_MODES]
    states = [{**keys, **row} for row in lattice.state_records()]
    cells = [{**keys, "n_rounds": lattice.n_rounds, "build_seconds": built,
              "seconds": time.perf_counter() - start,
              "cpu_seconds": time.process_time() - cpu_start, "n_samples": data.n_samples}]
    tables = {"states": states, "episodes": episodes, "signals": signals, "cells": cells}
    return cell, {name: pd.DataFrame(rows) for name, rows in tables.items()}


# ---------------------------------------------------------------------------- cross-check
def crosscheck_cell(task: tuple[Path, CellKey, tuple[str, ...]], single_thread: bool = True
                    ) -> tuple[CellKey, pd.DataFrame]:
    """Re-run every agent (and the oracle) through the real environment: same actions and
    per-round test costs as the lattice replay? ``task`` is (data folder, cell, agents)."""
    from agents.evaluation import run_episode
    from agents.registry import make_agent
    from ballad_env.data import load_dataset
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.replay.lattice import build_lattice, parse_path
    from ballad_env.settings import Settings

    data_dir, cell, agent_names = task
    dataset, seed, prior = cell
    with worker_limits(True):
        data = load_dataset(dataset, data_dir=data_dir)
        lattice = build_lattice(data, seed, Settings(prior=prior))
        env = BudgetAllocationEnv(data, settings=lattice.settings)
        rows = []
        for name in [*agent_names, "oracle"]:
            records = run_episode(env, make_agent(name, env), seed)
            actions = tuple(parse_path("".join(r["action"][0] for r in records)))
            replayed = lattice.one_step_oracle() if name == "oracle" else \
                lattice.replay(make_agent(name))
            env_costs = np.array([r["test_cost"] for r in records])
            rows.append({"dataset": dataset, "seed": seed, "prior": prior, "name": name,
                         "same_actions": actions == replayed,
                         "max_cost_gap": float(np.max(np.abs(
                             env_costs - lattice.costs_along(actions))))})
    return cell, pd.DataFrame(rows)


def crosscheck_is_current(store: ResultStore, check: CellKey, agent_names: Sequence[str]
                          ) -> bool:
    """Whether the store holds this cell's cross-check with every one of these agents."""
    path = store.path(table_cell(CROSSCHECK, check))
    return path.exists() and set(agent_names) <= set(store.read(table_cell(CROSSCHECK, check))
                                                       .name)


# ---------------------------------------------------------------------------- driver
def study_cells(options: StudyOptions) -> list[CellKey]:
    """Every cell of the study, largest data first (so the slowest start early)."""
    sizes = dataset_sizes(options)
    return [(d, s, p) for d in sorted(options.datasets, key=lambda n: -sizes[n])
            for p in options.priors for s in range(options.seeds)]


def dataset_sizes(options: StudyOptions) -> dict[str, int]:
    """Size of each data set's file, or a built-in's array bytes (a proxy for its lattice's
    cost)."""
    from ballad_env.data import BUILTIN_DATASETS, data_file, load_dataset

    return {name: (load_dataset(name).X.nbytes if name in BUILTIN_DATASETS
                   else data_file(name, options.data_dir).stat().st_size)
            for name in options.datasets}


def figure_dataset(datasets: Sequence[str]) -> str:
    """The data set whose lattice the heat map draws: Cardiotocography (LATTICE.md's) when it
    is studied, else the first one."""
    return FIGURE_DATASET if FIGURE_DATASET in datasets else datasets[0]


def plan_cells(options: StudyOptions, store: ResultStore
               ) -> list[tuple[CellKey, tuple[str, ...]]]:
    """The cells to compute and the agents for each: missing cells, and finished ones that
    lack a requested agent. A stored file that cannot be read is a ``RunError`` naming it."""
    plan = []
    for cell in study_cells(options):
        agent_names = agents_to_compute(store, cell, options.agents)
        if agent_names:
            plan.append((cell, agent_names))
    return plan


def crosscheck_cells(options: StudyOptions) -> list[CellKey]:
    """Seed 0 of the ``crosscheck`` smallest data sets, per prior."""
    sizes = dataset_sizes(options)
    small = sorted(options.datasets, key=lambda n: sizes[n])[:options.crosscheck]
    return [(d, 0, p) for p in options.priors for d in small]


def run_study(options: StudyOptions) -> None:
    """Compute every missing or incomplete cell through the executor, each written to the
    store as it finishes, then cross-check; record the run."""
    from tqdm import tqdm

    store = prepare_store(options)
    n_cells = len(study_cells(options))
    todo = plan_cells(options, store)
    redo = sum(stored_agents(store, cell) is not None for cell, _ in todo)
    print(f"{n_cells} cells, {n_cells - len(todo)} already done"
          + (f", {redo} to recompute for new agents" if redo else ""), flush=True)
    start = time.perf_counter()
    tasks = [(options.data_dir, cell, names) for cell, names in todo]
    for cell, tables in tqdm(execute(tasks, run_cell, options.n_jobs), total=len(todo),
                             desc="lattices", file=sys.stdout, mininterval=10):
        for name in TABLES:  # "cells" last: a cell is finished once it is there
            store.write(table_cell(name, cell), tables[name])
    agents = tuple(options.agents)
    checks = [(options.data_dir, c, agents) for c in crosscheck_cells(options)
              if not crosscheck_is_current(store, c, agents)]
    for cell, rows in execute(checks, crosscheck_cell, options.n_jobs):
        store.write(table_cell(CROSSCHECK, cell), rows)
    elapsed = time.perf_counter() - start
    print(f"computed in {elapsed:.0f} s", flush=True)
    record_run(options, n_cells, len(todo), elapsed, source_fingerprint())


def record_run(options: StudyOptions, n_cells: int, computed: int, elapsed: float,
               source: str) -> None:
    """Append this run to ``meta.json`` with the package versions and source fingerprint."""
    meta_file = options.out / "meta.json"
    runs = json.loads(meta_file.read_text())["runs"] if meta_file.exists() else []
    runs.append({"wall_seconds": round(elapsed, 1), "cells_computed": computed,
                 "n_jobs": options.n_jobs})
    meta = {"runs": runs, "cells": n_cells, "agents": list(options.agents), "source": source,
            "versions": package_versions()}
    meta_file.write_text(json.dumps(meta, indent=1))
