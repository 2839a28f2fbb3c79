"""The experiment harness: grids of episodes, the result stores, provenance, the one executor
and policy training; the summary tables of ``agents.reports`` are re-exported here.

It sits on top of ``ballad_env`` (the environment), ``agents`` (the allocators) and
``agents.reports`` (what analyses results); nothing below imports it. The command line
(``agents.experiments.cli``, ``ballad-env``) and ``agents.interop`` sit on top of it, and the
studies (``scripts.studies``, run from a clone) are its clients.

The names below are imported when first used (PEP 562), so the package itself, and with it
the ``ballad-env`` command's ``--help`` and ``data`` job, works on a base install; using one
without the 'experiments' extra (pandas & co.) is an error naming the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.extras import missing_extra
from ballad_env.registry import lazy_dir, lazy_exports

#: Each public name -> the module that defines it.
_SOURCES = {
    **dict.fromkeys(("Cell", "Grid", "agent_label", "check_agent", "dataset_names",
                     "seed_range"), "agents.experiments.grid"),
    **dict.fromkeys(("action_shares", "markdown_table", "per_round_table", "summary_table",
                     "win_counts"), "agents.reports.tables"),
    **dict.fromkeys(("prepare_run", "run_grid"), "agents.experiments.run"),
    **dict.fromkeys(("COLUMNS", "KEY_COLUMNS", "ResultStore", "RunError", "load_results"),
                    "agents.experiments.stores.results"),
}

if TYPE_CHECKING:
    from agents.experiments.grid import (
        Cell,
        Grid,
        agent_label,
        check_agent,
        dataset_names,
        seed_range,
    )
    from agents.experiments.run import prepare_run, run_grid
    from agents.experiments.stores.results import (
        COLUMNS,
        KEY_COLUMNS,
        ResultStore,
        RunError,
        load_results,
    )
    from agents.reports.tables import (
        action_shares,
        markdown_table,
        per_round_table,
        summary_table,
        win_counts,
    )


__getattr__ = lazy_exports(__name__, _SOURCES,
                           lambda err: missing_extra(err, "agents.experiments"))
__dir__ = lazy_dir(__name__, _SOURCES)


__all__ = ["COLUMNS", "KEY_COLUMNS", "Cell", "Grid", "ResultStore", "RunError", "action_shares",
           "agent_label", "check_agent", "dataset_names", "load_results", "markdown_table",
           "per_round_table", "prepare_run", "run_grid", "seed_range", "summary_table",
           "win_counts"]
