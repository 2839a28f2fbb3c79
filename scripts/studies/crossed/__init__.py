"""The crossed study (CROSSED.md): is All-in-LR's win a property of SSDO, or of the problem?

The parts of the two published methods are crossed as factors (``factors.FACTORS``: the
detector, the rejector, the query strategies, the costs and the protocol; a new level is
one entry). For every combination the lattice can pose, data set and seed, one lattice
(built through the harness's ``lattice_build.build_store``, resumable) gives the mean test
cost of All-in-AL, All-in-LR, BALLAD and SADAL (replayed), and of the yardsticks
(``scripts.studies.common.lattice_paths``): the best fixed split in hindsight, the one-step
oracle and the hindsight optimum. Combinations whose labels depend on the order of the
rounds (SADAL's query strategies) cannot be posed on a lattice: they are played in live
episodes instead (``live``: the four agents and every fixed split, status ``live``), and
what still cannot be posed is a row marked ``not-posable`` with the lattice's reason, never
dropped silently.

The study is split by job: ``factors`` (levels and combinations), ``cells`` (options,
stores, one lattice cell), ``live`` (one live cell, its store), ``driver`` (both through
the executor) and ``analysis`` (the tidy table, the room per factor level and the rule
that takes it, the figure).
"""

from __future__ import annotations

from scripts.studies.crossed.analysis import (
    DEPLOYABLE,
    STRATEGIES,
    TAKERS,
    TIDY_COLUMNS,
    dataset_means,
    draw_regrets,
    groups_table,
    not_posable_table,
    per_dataset_table,
    report_tables,
    room_shares,
    room_table,
    strategies_table,
    tidy_table,
    write_report,
)
from scripts.studies.crossed.cells import (
    AGENTS,
    CELL,
    TABLE,
    StudyOptions,
    build_lattices,
    lattice_store,
    paths_store,
    pending_cells,
    prepare_paths_store,
    replay_rows,
    replay_work,
    stored_paths,
    table_cell,
)
from scripts.studies.crossed.driver import run_study
from scripts.studies.crossed.factors import (
    FACTOR_NAMES,
    FACTORS,
    LIVE,
    NOT_POSABLE,
    POSED,
    Combination,
    check_levels,
    combination_settings,
    combinations,
    dataset_group,
    path_refused,
    split_live,
    split_posable,
)
from scripts.studies.crossed.live import (
    LIVE_TABLE,
    fixed_split_agent,
    live_combinations,
    live_plays,
    live_rows,
    live_store,
    live_work,
    n_rounds,
    pending_live,
    prepare_live_store,
    run_live,
    stored_live,
)

__all__ = ["AGENTS", "CELL", "DEPLOYABLE", "FACTORS", "FACTOR_NAMES", "LIVE", "LIVE_TABLE",
           "NOT_POSABLE", "POSED", "STRATEGIES", "TABLE", "TAKERS", "TIDY_COLUMNS",
           "Combination", "StudyOptions", "build_lattices", "check_levels",
           "combination_settings", "combinations", "dataset_group", "dataset_means",
           "draw_regrets", "fixed_split_agent", "groups_table", "lattice_store",
           "live_combinations", "live_plays",
           "live_rows", "live_store", "live_work", "n_rounds", "not_posable_table",
           "path_refused", "paths_store", "pending_cells", "pending_live",
           "per_dataset_table", "prepare_live_store", "prepare_paths_store", "replay_rows",
           "replay_work", "report_tables", "room_shares", "room_table", "run_live",
           "run_study", "split_live", "split_posable", "stored_live", "stored_paths",
           "strategies_table", "table_cell", "tidy_table", "write_report"]
