"""The allocator study (ALLOCATORS.md): can a deployable rule beat buying validation labels?

Every allocator is replayed on stored lattices (``ballad_env.replay.lattice``): one per data set,
seed, prior and cost setting, built once into a lattice store under ``<out>/lattices``
(refused, with an error naming the file, once the environment's code changes). Agents are
scored by their mean test cost over rounds, their regret against the hindsight-optimal
path and their rank within each cell; the study tunes on the policy split's training
data sets only and reports on the held-out ones and by leave-three-out folds.

The study is split by job: ``cells`` (settings, the lattice store, the candidates, and
what is replayed on each lattice: paths, signals, traits) and ``analysis`` (the trait
switch's fit, tuning, cross-validation, the paired changes and the report's tables).
"""

from __future__ import annotations

from scripts.studies.allocators.analysis import (
    RANKED,
    REPORT_ORDER,
    YARDSTICKS,
    cross_validated_paths,
    detection_rounds,
    fit_logistic,
    fit_trait_switch,
    goal_table,
    heldout_paths,
    leave_three_out_folds,
    paired_change_frame,
    paired_change_stats,
    paired_change_table,
    paired_rows,
    report_tables,
    select_params,
    signal_accuracy,
    summary,
    trait_switch_paths,
    tuned_paths,
    with_yardsticks,
)
from scripts.studies.allocators.cells import (
    BASELINES,
    CELL,
    COST_SETTINGS,
    NEW_ALLOCATORS,
    PARAM_GRIDS,
    PRIORS,
    REPLAY_TABLES,
    TRAIT_L2,
    TRAIT_PROBE,
    Candidate,
    ReplayKey,
    build_lattices,
    candidates,
    compute_replays,
    fixed_split,
    iter_lattices,
    lattice_store,
    path_row,
    planned_path,
    prepare_replay_store,
    replay_cell,
    replay_cells,
    replay_store,
    replay_work,
    signal_rows,
    stored_table,
    study_settings,
    table_cell,
    trait_row,
    trait_table,
)

__all__ = ["BASELINES", "CELL", "COST_SETTINGS", "NEW_ALLOCATORS", "PARAM_GRIDS", "PRIORS",
           "RANKED", "REPLAY_TABLES", "REPORT_ORDER", "TRAIT_L2", "TRAIT_PROBE", "YARDSTICKS",
           "Candidate", "ReplayKey", "build_lattices", "candidates", "compute_replays",
           "cross_validated_paths", "detection_rounds", "fit_logistic", "fit_trait_switch",
           "fixed_split", "goal_table", "heldout_paths", "iter_lattices", "lattice_store",
           "leave_three_out_folds", "paired_change_frame", "paired_change_stats",
           "paired_change_table", "paired_rows", "path_row", "planned_path",
           "prepare_replay_store", "replay_cell", "replay_cells", "replay_store", "replay_work",
           "report_tables", "select_params", "signal_accuracy", "signal_rows", "stored_table",
           "study_settings", "summary", "table_cell", "trait_row", "trait_switch_paths",
           "trait_table", "tuned_paths", "with_yardsticks"]
