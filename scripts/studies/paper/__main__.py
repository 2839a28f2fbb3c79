"""Reproduce the four questions of the BALLAD paper (docs/studies/REPRODUCTION.md) and write
figures and tables.

Three runs, each a resumable grid of ``agents.experiments`` in its own folder under
``--output``: ``main`` (Q1-Q3: BALLAD with both rewards and the All-in baselines, per prior),
``costs`` (Q4: c_fp = 10 and c_fn = 10) and ``bayes`` (Q1 with the paper's gp_minimize
threshold search on a few data sets and seeds). The analysis lives in
``scripts.studies.paper``.

Figures go to ``figures/``, tables (Markdown and CSV) to ``tables/`` under the results folder
(``--output``), or under ``--docs PATH``; ``--update-docs`` writes them into the repository's
``docs/``, the committed report. Both are drawn from the stored results only
(``--report-only`` redraws them without running).

    python -m scripts.studies.paper --n-jobs 2
    python -m scripts.studies.paper --report-only \
        --update-docs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.experiments import RunError, dataset_names
from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    run_job,
)
from agents.experiments.grid import DATASETS_HELP
from ballad_env.data import dataset_name
from ballad_env.settings.cli import add_settings_arguments
from scripts.studies.common.options import REPO
from scripts.studies.paper import (
    DEFAULT_BAYES_DATASETS,
    QUESTIONS,
    Experiment,
    experiments,
    report,
    run_experiments,
)


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--data-dir", default=None,
                        help="folder of the benchmark files (default: $BALLAD_DATA_DIR)")
    parser.add_argument("--datasets", nargs="+", default=["all"],
                        help=DATASETS_HELP)
    parser.add_argument("--seeds", type=int, default=10, help="repetitions: seeds 0..N-1")
    parser.add_argument("--questions", nargs="+", default=list(QUESTIONS), choices=QUESTIONS,
                        help="what to run and report")
    parser.add_argument("--bayes-datasets", nargs="+", default=list(DEFAULT_BAYES_DATASETS),
                        help="data sets of the bayes-search run (a subset of --datasets)")
    parser.add_argument("--bayes-seeds", type=int, default=2,
                        help="seeds 0..N-1 of the bayes-search run")
    add_settings_arguments(parser, several=True, only=["prior"],
                           several_defaults={"prior": ["iforest", "knn"]})
    add_settings_arguments(parser, only=["bayes_calls"])
    add_execution_arguments(parser, n_jobs=-1, scheduler=True, progress=True)
    parser.add_argument("--output", default="results/paper",
                        help="raw results folder (one sub-folder per run; resumable)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--docs", default=None,
                       help="folder receiving figures/ and tables/ (default: --output)")
    where.add_argument("--update-docs", action="store_true",
                       help="write figures/ and tables/ into the repository's docs/ (the "
                            "committed report)")
    parser.add_argument("--report-only", action="store_true",
                        help="redraw figures and tables from stored results, run nothing")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def report_folder(args: argparse.Namespace) -> Path:
    """Where figures/ and tables/ go: ``--docs``, the repository's docs/ with
    ``--update-docs``, else the results folder."""
    if args.update_docs:
        return REPO / "docs"
    return Path(args.docs if args.docs is not None else args.output)


def planned(args: argparse.Namespace) -> list[Experiment]:
    """The runs the chosen questions need, from the parsed options (each data set checked to
    exist; a bayes data set matches a --datasets entry naming the same data set)."""
    names = dataset_names(args.datasets, args.data_dir)
    by_key = {dataset_name(name, args.data_dir).lower(): name for name in names}
    bayes = [by_key[key] for key in (Path(b).stem.lower() for b in args.bayes_datasets)
             if key in by_key]
    return experiments(names, args.seeds, args.prior, args.questions,
                       bayes_datasets=bayes or args.bayes_datasets, bayes_seeds=args.bayes_seeds,
                       bayes_calls=args.bayes_calls)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run_experiments(planned(args), args.output, data_dir=args.data_dir,
                                  n_jobs=args.n_jobs, scheduler=args.scheduler,
                                  progress=not args.no_progress, report_only=args.report_only)
        docs = report_folder(args)
        report(results, args.questions, docs)
    except (RunError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished cells are kept under {args.output}; run the same "
              "command again to resume", file=sys.stderr)
        return 130
    print(f"figures: {docs / 'figures'}, tables: {docs / 'tables'}", file=sys.stderr)
    return 0



if __name__ == "__main__":
    sys.exit(run_job(main))
