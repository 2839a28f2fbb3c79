"""The experiment harness: grids of episodes, the result stores, provenance, the one executor,
summary tables, figures and policy training.

It sits on top of ``ballad_env`` (the environment) and ``agents`` (the allocators); nothing
below imports it. The studies (``agents.experiments.studies``) are its clients, and the
command line (``agents.experiments.cli``, ``ballad-env``) sits on top of both.
"""

from agents.extras import missing_extra

try:
    from agents.experiments.grid import (
        Cell,
        Grid,
        agent_label,
        check_agent,
        dataset_names,
        seed_range,
    )
    from agents.experiments.reports.tables import (
        action_shares,
        markdown_table,
        per_round_table,
        summary_table,
        win_counts,
    )
    from agents.experiments.run import prepare_run, run_grid
    from agents.experiments.stores.results import (
        COLUMNS,
        KEY_COLUMNS,
        ResultStore,
        RunError,
        load_results,
    )
except ModuleNotFoundError as err:  # pandas & co. come with the 'experiments' extra
    raise missing_extra(err, "agents.experiments") from err

__all__ = ["COLUMNS", "KEY_COLUMNS", "Cell", "Grid", "ResultStore", "RunError", "action_shares",
           "agent_label", "check_agent", "dataset_names", "load_results", "markdown_table",
           "per_round_table", "prepare_run", "run_grid", "seed_range", "summary_table",
           "win_counts"]
