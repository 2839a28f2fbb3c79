"""Build a lattice store for the replay environment (``ballad_env/BudgetAllocationReplay-v0``).

One compressed file per (data set, seed, setting): every state (i AL, j LR rounds) of that
episode and the rewards of every move (``ballad_env.replay.lattice``). Local worker processes
(``--n-jobs``) or a Dask cluster (``--scheduler``); resumable: a rerun builds only the
missing cells, and refuses a store of other environment code, package versions or data,
or a stored file it cannot read, naming it. Prints the build time and size per cell, and
both extrapolated to ``--extrapolate-seeds`` seeds; ``--summary DIR`` writes that table.

    ballad-env lattices --out results/lattices --datasets Glass WBC \\
        --seeds 10 --prior iforest knn --n-jobs 1

Generated tasks (``ballad_env.data.tasks``) are data sets like any other
(``--datasets task/Glass/3``); ``--tasks-from SOURCE ... --tasks-per-source N`` adds the N
tasks ``task/<source>/0..N-1`` of each source, and ``--task-costs`` builds every task at its
own unit costs (``lookup.task_costs``) instead of the settings' c_fp and c_fn:

    ballad-env lattices --out results/tasks --tasks-from Glass WDBC \\
        --tasks-per-source 100 --task-costs --seeds 1 --n-jobs 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    add_plugin_argument,
    bounded,
    datasets_from,
    import_plugins,
)
from agents.experiments.cli.parsing import JobParser
from agents.experiments.grid import MAX_SEEDS, check_cell_count
from agents.experiments.lattice_build import build_cells, build_summary
from agents.experiments.stores.results import RunError
from agents.reports.tables import write_table
from ballad_env.data.lookup import task_costs
from ballad_env.data.tasks import is_task_name, task_name
from ballad_env.replay.store import StoreError
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args

#: The most generated tasks per source one command asks for.
MAX_TASKS = 100_000


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    p = JobParser(description=__doc__.split("\n\n")[0],
                  formatter_class=HelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the store's folder")
    p.add_argument("--datasets", nargs="+", default=None, help="data sets (names or paths)")
    p.add_argument("--datasets-from", type=Path, default=None,
                   help="JSON with a 'train' list of data sets (e.g. docs/policy_split.json)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder of data files (default: $BALLAD_DATA_DIR)")
    p.add_argument("--tasks-from", nargs="+", default=(),
                   help="sources of generated tasks: adds task/<source>/<k> for each")
    p.add_argument("--tasks-per-source", type=bounded(1, MAX_TASKS), default=10,
                   help="generated tasks per source (k = 0..N-1)")
    p.add_argument("--task-costs", action="store_true",
                   help="build each generated task at its own unit costs (c_fp, c_fn)")
    p.add_argument("--seeds", type=int, default=10, help="episode seeds 0..N-1")
    p.add_argument("--first-seed", type=int, default=0, help="seeds start here")
    add_execution_arguments(p, n_jobs=1, scheduler=True, progress=True)
    add_plugin_argument(p)
    p.add_argument("--extrapolate-seeds", type=int, default=100,
                   help="seeds to extrapolate the build time and size to")
    p.add_argument("--summary", type=Path, default=None,
                   help="folder receiving lattice_build.csv and .md (the summary table)")
    add_settings_arguments(p, several=True, several_defaults={"prior": ["iforest"]})
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line; no data sets or no seeds is a usage error."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.datasets_from is not None:
        try:
            args.datasets = list(datasets_from(args.datasets_from))
        except ValueError as err:
            p.error(str(err))
    args.datasets = [*(args.datasets or ()), *(
        task_name(source, k) for k in range(args.tasks_per_source) for source in args.tasks_from)]
    if not args.datasets:
        p.error("give --datasets, --datasets-from or --tasks-from")
    if not 1 <= args.seeds <= MAX_SEEDS:
        p.error(f"--seeds must be from 1 to {MAX_SEEDS:,}, got {args.seeds}")
    try:
        check_cell_count(len(args.datasets), args.seeds, len(settings_from_args(args)))
    except ValueError as err:
        p.error(str(err))
    return args


def planned_cells(args: argparse.Namespace, seeds: list[int]
                  ) -> list[tuple[str, int, Settings]]:
    """(data set, seed, setting) of every cell asked for: each generated task at its own
    unit costs under ``--task-costs``."""
    cells = []
    for name in args.datasets:
        for setting in settings_from_args(args):
            if args.task_costs and is_task_name(name):
                setting = setting.replace(**task_costs(name, args.data_dir))
            cells += [(name, seed, setting) for seed in seeds]
    return cells


def main(argv: list[str] | None = None) -> int:
    """Build the store and print what it holds; a bad option or store returns 2."""
    import_plugins(argv)
    args = parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    try:
        cells = build_cells(args.out, planned_cells(args, list(seeds)), data_dir=args.data_dir,
                            n_jobs=args.n_jobs, scheduler=args.scheduler,
                            progress=not args.no_progress)
    except (RunError, StoreError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = build_summary(cells, args.extrapolate_seeds)
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"{len(cells)} cells in {args.out}: {cells['bytes'].sum() / 1e6:.1f} MB, built in "
          f"{cells['build_seconds'].sum():.0f} s of one process")
    if args.summary is not None:
        write_table(summary, args.summary, "lattice_build", index=False,
                    title="Lattice store: build time and size per cell",
                    note=f"Median per cell, one process; extrapolated to "
                         f"{args.extrapolate_seeds} seeds.")
    return 0

