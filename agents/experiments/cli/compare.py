"""Compare allocation agents over data sets x seeds x settings; write tidy results and a summary.

Example (the Makefile's ``run`` target)::

    ballad-env compare --datasets wdbc --seeds 10 \\
        --agents ballad all-in-al all-in-lr --per-round --output results/run

Each setting option takes one or more values; the grid runs every combination. Running the
same command again resumes: finished cells are kept, only missing ones run. A finished run
grows the same way: more data sets, seeds, agents or setting values run only the new cells.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agents.experiments import (
    Grid,
    RunError,
    dataset_names,
    per_round_table,
    run_grid,
    seed_range,
    summary_table,
    win_counts,
)
from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    add_plugin_argument,
    import_plugins,
)
from agents.experiments.cli.parsing import JobParser
from agents.experiments.grid import DATASETS_HELP, agent_label
from agents.policy_files import add_trust_pickle_argument
from agents.reports.tables import standard_errors, with_standard_errors
from ballad_env.files import atomic_write
from ballad_env.settings.cli import add_settings_arguments, settings_from_args


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = JobParser(description=__doc__.split("\n\n")[0],
                       formatter_class=HelpFormatter)
    grid = parser.add_argument_group("grid")
    grid.add_argument("--datasets", nargs="+", required=True,
                      help=DATASETS_HELP)
    grid.add_argument("--data-dir", default=None,
                      help="folder of data files (default: $BALLAD_DATA_DIR)")
    grid.add_argument("--seeds", type=int, default=10, help="run seeds 0..N-1")
    grid.add_argument("--agents", nargs="+", default=["ballad", "all-in-al", "all-in-lr"],
                      help="agent names (ballad, ballad-cosine, all-in-al, all-in-lr, random, "
                           "oracle, lr-first-<percent>, ...) or paths of saved policies (.zip, "
                           "also checkpoints and eval/best_model.zip of a training run)")
    add_trust_pickle_argument(grid)
    add_settings_arguments(parser, several=True)
    run = parser.add_argument_group("execution and output")
    add_execution_arguments(run, n_jobs=-1, scheduler=True, progress=True)
    add_plugin_argument(parser)
    run.add_argument("--output", default="results/run",
                     help="results folder; the same folder again resumes the run, or grows it "
                          "(more data sets, seeds, agents or settings)")
    run.add_argument("--per-round", action="store_true",
                     help="also print mean cost per round (rows) and agent (columns)")
    run.add_argument("--plot", nargs="?", const="", default=None, metavar="PNG",
                     help="also draw the cost by round with a band of one standard error over "
                          "seeds (default file: <output>/cost_by_round.png)")
    add_stats_arguments(parser)
    return parser


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    """``--stats`` and its options (the ``stats`` extra)."""
    from agents.reports.stats import ALPHA, POSTHOC_TESTS

    stats = parser.add_argument_group("statistics (the stats extra: pip install -e '.[stats]')")
    stats.add_argument("--stats", action="store_true",
                       help="also write <output>/stats/: average ranks over data sets, the "
                            "Friedman test, post hoc p-values and a critical-difference diagram "
                            "per setting, each agent's mean with a bootstrap interval over seeds")
    stats.add_argument("--baseline", default=None, metavar="AGENT",
                       help="with --stats, also test each agent against this one per data set, "
                            "paired by seed (e.g. all-in-lr)")
    stats.add_argument("--posthoc", choices=POSTHOC_TESTS, default=POSTHOC_TESTS[0],
                       help="post hoc test of every pair over data sets: Wilcoxon signed-rank "
                            "with Holm's correction, or Nemenyi's test of the average ranks")
    stats.add_argument("--significance", type=float, default=ALPHA,
                       help="significance level of the tests (intervals cover 1 minus it)")
    stats.add_argument("--stats-seed", type=int, default=0,
                       help="seed of the bootstrap intervals")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_grid(args: argparse.Namespace) -> Grid:
    """The grid the options describe."""
    return Grid(dataset_names(args.datasets, args.data_dir), seed_range(args.seeds),
                tuple(args.agents), settings_from_args(args))


def check_stats_args(args: argparse.Namespace) -> None:
    """Before the run: the ``stats`` extra is installed, the baseline is one of the agents (a
    saved policy's path becomes its name in the results), the significance level is a
    probability and the bootstrap's seed one numpy takes (each a one-line error)."""
    if args.baseline is not None and not args.stats:
        raise ValueError("--baseline needs --stats")
    if args.stats_seed < 0:  # numpy refuses it, after the whole run
        raise ValueError(f"--stats-seed must be a whole number >= 0, got {args.stats_seed}")
    if not args.stats:
        return
    from agents.reports.stats import require_stats_extra

    require_stats_extra()
    if not 0 < args.significance < 1:
        raise ValueError(f"--significance must be between 0 and 1, got {args.significance}")
    if args.baseline is None:
        return
    labels = {spec: agent_label(spec) for spec in args.agents}
    if args.baseline not in labels and args.baseline not in labels.values():
        raise ValueError(f"--baseline {args.baseline!r} is not among --agents "
                         f"({' '.join(args.agents)}): add it or name one of them")
    args.baseline = labels.get(args.baseline, args.baseline)


def report_stats(results: Any, output: Path, args: argparse.Namespace) -> None:
    """Write ``<output>/stats/`` (:func:`agents.reports.stats_report.write_stats`)
    and print its summary."""
    from agents.reports.stats import seed_scores
    from agents.reports.stats_report import StatsOptions, summary_lines, write_stats

    options = StatsOptions(baseline=args.baseline, posthoc=args.posthoc,
                           alpha=args.significance, seed=args.stats_seed)
    stats = write_stats(seed_scores(results), output / "stats", options=options)
    print("\nStatistics (mean test cost per seed; ranks over data sets, lowest = 1)")
    print("\n".join(summary_lines(stats)))


def report(results: Any, output: Path, per_round: bool, plot: str | None = None) -> None:
    """Print (and save as CSV) the summary table with each agent's standard error over seeds,
    the win counts, optionally the rounds; with ``plot`` (a path, or ``""`` for
    ``<output>/cost_by_round.png``) draw the cost by round with error bands."""
    summary = with_standard_errors(summary_table(results), standard_errors(results))
    atomic_write(output / "summary.csv", summary.to_csv)  # a FIFO there is replaced
    import pandas as pd  # here, so that agents.experiments names a missing extra first

    with pd.option_context("display.width", 200, "display.max_columns", 50,
                           "display.float_format", "{:.4f}".format):
        print("\nMean test cost per data set (over seeds and rounds; se: standard error over "
              "seeds); lowest wins")
        print(summary.to_string())
        if "winner" in summary:
            print("\nData sets won per agent")
            print(win_counts(summary).to_string())
        if per_round:
            rounds = per_round_table(results)
            atomic_write(output / "per_round.csv", rounds.to_csv)
            print("\nMean test cost per round (data sets weigh equally)")
            print(rounds.to_string())
    if plot is not None:
        from agents.reports.plots import cost_by_round_with_errors

        figure = cost_by_round_with_errors(results, plot or output / "cost_by_round.png")
        print(f"\nCost by round (mean ± standard error over seeds): {figure}")
    print(f"\nTidy results: {output / 'cells'} (pandas.read_parquet or "
          f"agents.experiments.load_results); summary: {output / 'summary.csv'}")


def main(argv: list[str] | None = None) -> int:
    import_plugins(argv)
    args = parse_args(argv)
    try:
        check_stats_args(args)
    except (ValueError, ModuleNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        grid = build_grid(args)
        results = run_grid(grid, args.output, data_dir=args.data_dir, n_jobs=args.n_jobs,
                           scheduler=args.scheduler, progress=not args.no_progress,
                           trust_pickle=args.trust_pickle)
    except (RunError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished cells are kept in {args.output}; run the same command "
              "again to resume", file=sys.stderr)
        return 130
    report(results, Path(args.output), args.per_round, args.plot)
    if args.stats:
        try:
            report_stats(results, Path(args.output), args)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return 0

