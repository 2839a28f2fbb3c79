"""The crossed study's live cells: the combinations the lattice refuses only because their
queries depend on the path (SADAL's ``threshold-distance`` and ``stratified-probability``),
played in live episodes instead.

Per combination, data set and seed, one environment is reset once and every allocation
plays its own copy of it (the harness's ``run.play_agents``, common random numbers): the
registered agents (All-in-AL, All-in-LR, BALLAD, SADAL) and every fixed split "m LR rounds,
then AL", m = 1 .. k - 1 (the registered ``lr-first-<percent>`` rule with m / k of the
rounds; m = 0 and m = k are All-in-AL's and All-in-LR's own episodes, not played twice). A
fixed split is one path, so it is playable live, and the best one in hindsight
(``best-fixed-per-cell``) is a yardstick here too; the hindsight optimum and the one-step
oracle are not, since they range over the 2^k ordered paths. Each path is scored as on the
lattice (``lattice_paths.path_row``: the mean test cost over rounds 1..k), and each cell is
one file of ``<out>/live`` (a ``ResultStore``; resumable like the paths store).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from agents.experiments.executor import worker_limits
from agents.experiments.lattice_build import sharing_order
from agents.experiments.run import load_data, play_agents
from agents.experiments.stores.results import ResultStore, TableCell
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import ACTION_NAMES, AL, LR
from ballad_env.protocol import Budget
from ballad_env.settings import Settings
from scripts.studies.common.lattice_paths import fixed_split_name, path_row
from scripts.studies.crossed.cells import (
    StudyOptions,
    cell_done,
    prepare_store,
    stored_cells,
    table_cell,
    write_cells,
)
from scripts.studies.crossed.factors import Combination, split_live, split_posable

#: The one table each live cell writes.
LIVE_TABLE = "live"


def live_store(out: Path) -> ResultStore:
    """The study's live episodes, ``<out>/live``: one ``TableCell`` per cell."""
    return ResultStore(Path(out) / "live")


def n_rounds(settings: Settings) -> int:
    """The episode's number of rounds k under ``settings`` (the budget over the round
    fraction, whatever the budget rule: 15 in our protocol, 10 in SADAL's)."""
    return Budget.from_fractions(1, settings.budget_fraction, settings.round_fraction).n_rounds


def fixed_split_agent(m: int, k: int) -> str:
    """The registered agent that plays "m LR rounds, then AL" in a k-round episode: the
    ``lr-first`` rule with m / k of the rounds (it reads ``budget_used`` = rounds / k)."""
    return f"lr-first-{100.0 * m / k:g}"


def live_plays(agents: Sequence[str], k: int) -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """name -> (kind, the agent that plays it, the path it must take or ``()`` for an
    agent's own choice): the agents, then the fixed splits m = 0..k (m = 0 and m = k by
    All-in-AL and All-in-LR)."""
    plays: dict[str, tuple[str, str, tuple[int, ...]]] = {
        name: ("agent", name, ()) for name in agents}
    for m in range(k + 1):
        spec = "all-in-al" if m == 0 else "all-in-lr" if m == k else fixed_split_agent(m, k)
        plays[fixed_split_name(m)] = ("fixed", spec, (LR,) * m + (AL,) * (k - m))
    return plays


def live_rows(env: BudgetAllocationEnv, seed: int, agents: Sequence[str]
              ) -> list[dict[str, Any]]:
    """Every agent's and every fixed split's live episode from one reset of ``env``, scored
    (``path_row``). A fixed split whose pools cannot hold it (its rule fell back to the
    other action) is left out, as on the lattice."""
    plays = live_plays(agents, n_rounds(env.settings))
    specs = list(dict.fromkeys(spec for _, spec, _ in plays.values()))
    episodes = {spec: records for spec, _, records in play_agents(env, seed, specs)}
    rows = []
    for name, (kind, spec, intended) in plays.items():
        records = episodes[spec]
        actions = tuple(ACTION_NAMES.index(record["action"]) for record in records)
        if intended and actions != intended:
            continue  # a pool too small for this split
        rows.append(path_row(name, kind, actions, [r["test_cost"] for r in records]))
    return rows


LiveTask = tuple[Combination, Settings, str, str, int, str | None, tuple[str, ...]]


def live_work(task: LiveTask, single_thread: bool = True) -> tuple[TableCell, pd.DataFrame]:
    """One live cell's table: the data set loaded, one environment reset, every agent and
    fixed split played; every row carries the cell's columns."""
    combo, settings, source, dataset, seed, data_dir, agents = task
    with worker_limits(single_thread):
        env = BudgetAllocationEnv(load_data(source, data_dir), settings=settings)
        keys = {**combo.columns(), "dataset": dataset, "seed": int(seed)}
        rows = [{**keys, **row} for row in live_rows(env, seed, agents)]
    return table_cell(combo, dataset, seed, LIVE_TABLE), pd.DataFrame(rows)


def live_combinations(options: StudyOptions) -> dict[Combination, Settings]:
    """The options' combinations played live: those the lattice refuses only because their
    queries depend on the path (none when ``options.live`` is off)."""
    if not options.live:
        return {}
    _, refused = split_posable(options.combinations(), options.base)
    return split_live(refused, options.base)


def prepare_live_store(options: StudyOptions, live: dict[Combination, Settings]
                       ) -> ResultStore:
    """The live store, its ``run.json`` grown to this run (``cells.prepare_store``)."""
    return prepare_store(live_store(options.out), options, list(live), "crossed-live")


def pending_live(options: StudyOptions, store: ResultStore,
                 live: dict[Combination, Settings]) -> list[LiveTask]:
    """The live tasks of the cells not stored yet, or stored without some agent; the
    combinations of one data set and seed follow each other (in the lattices'
    ``sharing_order``), so their label-free reset comes from the environment's reset cache
    (``ballad_env.compute``) after the first, and SSIF's starting fits from its fit memo."""
    rank = {settings: k for k, settings in enumerate(sharing_order(list(live.values())))}
    ordered = sorted(live.items(), key=lambda item: rank[item[1]])
    tasks = []
    for source, name in zip(options.datasets, options.names(), strict=True):
        for seed in options.seeds:
            for combo, settings in ordered:
                if not cell_done(store, table_cell(combo, name, seed, LIVE_TABLE),
                                 options.agents):
                    tasks.append((combo, settings, source, name, seed, options.data_dir,
                                  tuple(options.agents)))
    return tasks


def run_live(options: StudyOptions, live: dict[Combination, Settings]) -> None:
    """Play every pending live cell into ``<out>/live`` (each written as it finishes)."""
    if not live:
        return
    store = prepare_live_store(options, live)
    tasks = pending_live(options, store, live)
    total = len(live) * len(options.names()) * len(options.seeds)
    write_cells(store, tasks, live_work, options, total, "live cells")


def stored_live(options: StudyOptions) -> pd.DataFrame:
    """Every stored live cell's rows among the options' live combinations, data sets and
    seeds (cells not played yet are absent)."""
    return stored_cells(live_store(options.out), options, list(live_combinations(options)),
                        LIVE_TABLE)


__all__ = ["LIVE_TABLE", "LiveTask", "fixed_split_agent", "live_combinations", "live_plays",
           "live_rows", "live_store", "live_work", "n_rounds", "pending_live",
           "prepare_live_store", "run_live",
           "stored_live"]
