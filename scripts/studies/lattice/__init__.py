"""The lattice study (LATTICE.md): how far are allocation rules from the best allocation?

For every data set, seed and prior, one lattice (``ballad_env.replay.lattice``) gives the test
cost of every state (i AL, j LR rounds). Agents are replayed on it (exact for agents that
read only observations; a few cells are re-run through the real environment to show it),
and scored against the hindsight-optimal path, the fixed LR-then-AL splits and the
one-step oracle; each reward signal is scored by how often its larger side is the truly
better action.

Results are tidy and resumable: each cell (data set, seed, prior) runs through the
harness's executor and writes its four tables into the study's ``ResultStore`` (``<out>``:
``run.json`` and one Parquet file per table and cell, the cell's ``cells`` table last). A
rerun skips a finished cell only if it holds every requested agent (else it is recomputed
with them), and the store refuses to mix results of other source code or package versions,
so results of two code versions or agent lists never mix silently.

The study is split by job: ``cells`` (options, the store, one cell, the cross-check and the
driver that runs the cells through the executor) and ``analysis`` (the stored tables
collected, the report's tables and figures).
"""

from __future__ import annotations

from scripts.studies.common.lattice_paths import episode_row, reference_paths
from scripts.studies.lattice.analysis import (
    add_regrets,
    agents_table,
    best_fixed_overall,
    collect,
    crosscheck_table,
    draw_figures,
    draw_heatmap,
    draw_lattice,
    finished_cells,
    fixed_curve,
    lattice_grid,
    path_scores,
    per_dataset_table,
    report_tables,
    select_agents,
    signals_table,
    stored_crosscheck,
    summary_table,
    write_report,
)
from scripts.studies.lattice.cells import (
    CELL_KEYS,
    CROSSCHECK,
    FIGURE_DATASET,
    STUDY_AGENTS,
    TABLES,
    CellKey,
    StudyOptions,
    agents_to_compute,
    crosscheck_cell,
    crosscheck_cells,
    crosscheck_is_current,
    dataset_sizes,
    figure_dataset,
    plan_cells,
    prepare_store,
    record_run,
    run_cell,
    run_study,
    stored_agents,
    study_cells,
    table_cell,
)

__all__ = ["CELL_KEYS", "CROSSCHECK", "FIGURE_DATASET", "STUDY_AGENTS", "TABLES", "CellKey",
           "StudyOptions", "add_regrets", "agents_table", "agents_to_compute",
           "best_fixed_overall", "collect", "crosscheck_cell", "crosscheck_cells",
           "crosscheck_is_current", "crosscheck_table", "dataset_sizes", "draw_figures",
           "draw_heatmap", "draw_lattice", "episode_row", "figure_dataset", "finished_cells",
           "fixed_curve", "lattice_grid", "path_scores", "per_dataset_table", "plan_cells",
           "prepare_store", "record_run", "reference_paths", "report_tables", "run_cell",
           "run_study", "select_agents", "signals_table", "stored_agents", "stored_crosscheck",
           "study_cells", "summary_table", "table_cell", "write_report"]
