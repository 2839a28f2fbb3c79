"""The published code's variant: ablate its differences, and compare with the code itself.

    # each option alone and the preset, both priors, BALLAD / All-in-AL / All-in-LR
    # (resumable, seed after seed; one process), then its table in
    # docs/tables/authors_code_ablation.* (a partial run's tables say what they hold)
    python -m scripts.studies.authors_code ablation \\
        --seeds 10 --output results/authors_code_10 --update-docs

    # ours with the preset on the episodes a run of the published code recorded
    python -m scripts.studies.authors_code agreement --published results/published \\
        --output results/authors_agreement

    # the published code itself (your copy of the authors' BALLAD.py; needs anomatools 3.0.3
    # and scikit-optimize in this Python): a results folder, an episode a file, resumable
    python -m scripts.studies.authors_code published --ballad-py path/to/BALLAD.py \\
        --published results/published --datasets Glass WPBC --seeds 3 --strategies AL LR ballad

The logic is in ``scripts.studies.authors_code.ablation``; ``docs/studies/REPRODUCTION.md`` reads
the tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.experiments import ResultStore, load_results, run_grid, seed_range
from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    run_job,
)
from agents.experiments.grid import DATASETS_HELP, dataset_names
from agents.experiments.stores.results import RUN_FILE
from agents.reports.tables import write_table
from ballad_env.settings import Settings
from ballad_env.settings.cli import query_seed_value
from scripts.studies.authors_code.ablation import (
    AGENTS,
    ablation_episodes,
    ablation_grid,
    ablation_settings,
    ablation_table,
    agreement_per_dataset,
    agreement_table,
    published_grids,
    seeds_text,
)
from scripts.studies.authors_code.published import (
    PUBLISHED_STREAM_SEED,
    STRATEGIES,
    PublishedCodeError,
    check_published,
    load_published,
    run_published,
    stored_stream_seed,
)

DOCS_TABLES = Path(__file__).resolve().parents[3] / "docs" / "tables"


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("command", choices=["ablation", "agreement", "published"],
                        help="ablation: each option and the preset; agreement: the preset "
                             "against the published code's recorded episodes; published: "
                             "record episodes of the published code itself")
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    parser.add_argument("--datasets", nargs="+", default=["all"],
                        help="ablation, published: " + DATASETS_HELP)
    parser.add_argument("--seeds", type=int, default=3,
                        help="ablation, published: seeds 0..N-1, one after the other")
    parser.add_argument("--priors", nargs="+", default=["iforest", "knn"],
                        help="ablation: the priors")
    parser.add_argument("--published", default=None,
                        help="the published code's episodes (a results folder): agreement "
                             "reads them, published adds to them")
    parser.add_argument("--ballad-py", default=None,
                        help="published: the authors' BALLAD.py (not part of this project)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES,
                        help="published: forced AL, forced LR, or BALLAD's choice")
    parser.add_argument("--rounds", type=int, default=15, help="published: rounds an episode")
    parser.add_argument("--threshold-search", default="exact",
                        choices=["exact", "authors-bayes"],
                        help="agreement: the preset's threshold search")
    parser.add_argument("--tau-position", default="as-found",
                        choices=["as-found", "bottom", "middle", "top"],
                        help="agreement: where the preset's tau sits in its optimal interval")
    parser.add_argument("--query-seed", type=query_seed_value, default=argparse.SUPPRESS,
                        help="agreement: the seed of the preset's one query stream (default: "
                             "the one the published run's stream was seeded with, from its "
                             "run.json); another is refused")
    parser.add_argument("--stream-seed", type=query_seed_value,
                        default=PUBLISHED_STREAM_SEED,
                        help="published: the seed of numpy's global stream the published "
                             "label queries draw from: 331 (default, as the published "
                             "load_dataset seeds it) or split (the split seed, as this runner "
                             "did before; the stores of issue 12)")
    parser.add_argument("--output", default="results/authors_code", help="results folder")
    parser.add_argument("--stem", default="authors_code_ablation",
                        help="ablation: the tables' file name (a second run's tables beside "
                             "the first's)")
    add_execution_arguments(parser, n_jobs=1, progress=True)
    parser.add_argument("--update-docs", action="store_true",
                        help="write the tables into docs/tables (else into <output>/tables)")
    parser.add_argument("--report-only", action="store_true",
                        help="tables from the stored results only (a partial run too)")
    return parser


def ablation(args: argparse.Namespace, tables: Path) -> None:
    settings = ablation_settings(args.priors)
    if args.report_only:
        results = load_results(args.output, allow_partial=True)
    else:
        datasets = dataset_names(args.datasets, args.data_dir)
        # Seed by seed, from the seeds already stored: an interrupted run then holds seeds
        # 0..k-1 of every setting and data set (the runner orders cells by data set size).
        stored = ResultStore(args.output).read_manifest()
        first = min(len(stored["grid"]["seeds"]) if stored else 1, args.seeds)
        for n_seeds in range(max(first, 1), args.seeds + 1):
            results = run_grid(ablation_grid(datasets, seed_range(n_seeds), args.priors),
                               args.output, data_dir=args.data_dir, n_jobs=args.n_jobs,
                               progress=not args.no_progress)
    played, left_out = ablation_episodes(results, settings)
    partial = (f" A partial run: only the (data set, seed) pairs that every setting and "
               f"strategy finished count; {left_out} other pairs are left out."
               if left_out else "")
    note = (f"{played['dataset'].nunique()} data sets x {seeds_text(played)} seeds x 15 "
            "rounds, exact threshold search, every setting and strategy on the same episodes. "
            "Mean test cost per example over data sets (each weighs equally), seeds and "
            "rounds; seeds: per data set; d_<strategy>: change from the same prior's "
            "defaults; wins_<strategy>: data sets won; ballad_vs_*: BALLAD's gain. "
            "`python -m scripts.studies.authors_code ablation`." + partial)
    if left_out:
        print(f"partial run: {left_out} (data set, seed) pairs left out of the tables",
              file=sys.stderr)
    for metric, stem in (("test_cost_per_example", args.stem),
                         ("test_cost_class_conditional", f"{args.stem}_class_conditional")):
        table = ablation_table(results, settings, metric)
        path = write_table(table, tables, stem, title=f"The published code's options: {metric}",
                           note=note)
        print(path)
        print(table[["change", "seeds", *AGENTS, "wins_ballad", "wins_all-in-al",
                     "wins_all-in-lr"]].to_string(float_format=lambda v: f"{v:.4f}"))


def agreement(args: argparse.Namespace, tables: Path) -> None:
    if not args.published:
        raise SystemExit("agreement needs --published (the published code's episodes)")
    published = load_published(args.published)
    # The labels must come from the stream the published run drew them from.
    query_seed = stored_stream_seed(args.published)
    if "query_seed" in vars(args) and args.query_seed != query_seed:
        given = "split" if args.query_seed is None else args.query_seed
        raise SystemExit(f"--query-seed {given}: the published episodes in "
                         f"{args.published} drew from a stream seeded with "
                         f"{'the split seed' if query_seed is None else query_seed}; the "
                         "preset must draw from the same one (leave --query-seed out)")
    setting = Settings.authors_code(threshold_search=args.threshold_search,
                                    tau_position=args.tau_position, query_seed=query_seed)
    # Ours plays the episodes the published code finished, one results folder per setting,
    # strategy and seed (each grows as the published run goes on).
    # --report-only reads what is there, leaving out the folders a run has not started.
    parts = []
    for name, grid in published_grids(published, setting).items():
        folder = Path(args.output) / setting.name / name
        if not args.report_only:
            parts.append(run_grid(grid, folder, data_dir=args.data_dir, n_jobs=args.n_jobs,
                                  progress=not args.no_progress))
        elif (folder / RUN_FILE).exists():
            parts.append(load_results(folder, allow_partial=True))
    if not parts:
        raise SystemExit(f"no results of {setting.name} under {args.output}: run without "
                         "--report-only first")
    import pandas as pd  # here, so that agents.experiments names a missing extra first

    results = pd.concat(parts, ignore_index=True)
    stem = f"authors_code_agreement_{setting.name}"
    stream = ("the split seed" if setting.query_seed is None
              else f"{setting.query_seed}")
    note = (f"Setting {setting.name}; the same splits (random_state = seed); the labels as "
            f"the setting draws them (query_rng={setting.query_rng!r}: 'authors' draws the "
            f"published code's, from the legacy stream seeded with {stream}). Mean test cost "
            "per example over rounds, seeds, then data sets, on the episodes both codes "
            "played; the published code's from `python -m scripts.studies.authors_code published` "
            "(docs/studies/REPRODUCTION.md).")
    table = agreement_table(results, published, setting.name)
    print(write_table(table, tables, stem, title="The preset against the published code",
                      note=note + " dataset_difference_*: the range of the relative "
                                  "difference of one data set's means."))
    print(table.to_string())
    per_dataset = agreement_per_dataset(results, published, setting.name)
    print(write_table(per_dataset, tables, f"{stem}_per_dataset",
                      title="The preset against the published code, per data set", note=note))


def published_run(args: argparse.Namespace, tables: Path) -> None:
    if not args.ballad_py or not args.published:
        raise SystemExit("published needs --ballad-py (the authors' BALLAD.py) and --published "
                         "(the results folder to write)")
    try:
        check_published(args.ballad_py)  # before looking for the data
        played = run_published(args.ballad_py, args.published,
                               dataset_names(args.datasets, args.data_dir),
                               seed_range(args.seeds), args.strategies,
                               data_dir=args.data_dir, n_rounds=args.rounds,
                               progress=not args.no_progress, stream_seed=args.stream_seed)
    except PublishedCodeError as err:
        raise SystemExit(f"error: {err}") from None
    print(f"{played} episode(s) of the published code added to {args.published}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tables = DOCS_TABLES if args.update_docs else Path(args.output) / "tables"
    {"ablation": ablation, "agreement": agreement, "published": published_run}[args.command](
        args, tables)
    return 0



if __name__ == "__main__":
    sys.exit(run_job(main))
