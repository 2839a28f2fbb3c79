"""Time BALLAD episodes per data set (exact and bayes threshold search) and find where time goes.

Each data set is measured in a fresh process, so its peak memory (resident set size) is its
own. Per data set: the median wall time of one episode (reset + 15 rounds) with the exact
and the bayes search, the reset alone, environment steps per second, and peak memory. Then
one exact episode of the slowest data set is profiled. ``--q1`` also times the whole Q1
grid through the harness. Targets (2 cores): Q1 under 5 minutes, every exact episode under
5 s, peak memory under 2 GB on KDDCup99. The measuring lives in ``agents.experiments.bench``.

    .venv/bin/python scripts/bench.py --data-dir ../shared/benchmarks
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agents.experiments import dataset_names
from agents.experiments.bench import (
    EPISODE_TARGET_S,
    MEMORY_TARGET_MB,
    Q1_TARGET_S,
    in_fresh_process,
    measure,
    profile,
    time_q1,
    timings_table,
)
from ballad_env.settings import Settings, add_settings_arguments


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["all"],
                        help="data sets, or 'all' for every file in the data folder")
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    add_settings_arguments(parser, only=["prior", "bayes_calls"])
    parser.add_argument("--repeats", type=int, default=3,
                        help="exact episodes per data set (seeds 0..N-1); the median is shown")
    parser.add_argument("--bayes-repeats", type=int, default=1,
                        help="bayes episodes per data set (0: skip the bayes search)")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads per process (the harness's workers use 1)")
    parser.add_argument("--no-profile", action="store_true",
                        help="skip profiling the slowest data set")
    parser.add_argument("--q1", action="store_true",
                        help="also time the whole Q1 grid (data sets x seeds x 3 agents, exact)")
    parser.add_argument("--q1-seeds", type=int, default=10, help="seeds of the --q1 grid")
    parser.add_argument("--n-jobs", type=int, default=-1, help="worker processes for --q1")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """The slowest exact episode and KDDCup99's peak memory against their targets."""
    slowest = max(rows, key=lambda r: r["exact_s"])
    worst = max(r["max_exact_s"] for r in rows)
    lines = [f"\nslowest exact episode: {worst:.2f} s on {slowest['dataset']} (target "
             f"{EPISODE_TARGET_S:.0f} s: {'met' if worst <= EPISODE_TARGET_S else 'missed'})"]
    for r in rows:
        if r["dataset"].lower() == "kddcup99":
            verdict = "met" if r["peak_mb"] <= MEMORY_TARGET_MB else "missed"
            lines.append(f"peak memory on KDDCup99: {r['peak_mb']:.0f} MB (target "
                         f"{MEMORY_TARGET_MB:.0f} MB: {verdict})")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        names = dataset_names(args.datasets, args.data_dir)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    settings = Settings(prior=args.prior)
    print(f"BALLAD episodes, {args.prior} prior, {args.threads} thread(s); exact: median of "
          f"{args.repeats}, bayes ({args.bayes_calls} calls): median of {args.bayes_repeats}\n")
    rows = []
    for name in names:
        rows.append(in_fresh_process(measure, name, args.data_dir, settings, args.repeats,
                                     args.bayes_repeats, args.bayes_calls, args.threads))
        print(f"  measured {name}", file=sys.stderr)
    print(timings_table(rows))
    print("\n".join(verdicts(rows)))
    if not args.no_profile:
        slowest = max(rows, key=lambda r: r["exact_s"])
        print()
        print(profile(slowest["dataset"], args.data_dir, settings, args.threads))
    if args.q1:
        seconds = time_q1(names, args.q1_seeds, settings, args.data_dir, args.n_jobs)
        print(f"\nQ1 grid ({len(names)} data sets x {args.q1_seeds} seeds x 3 agents, exact, "
              f"n_jobs={args.n_jobs}): {seconds:.0f} s (target {Q1_TARGET_S:.0f} s: "
              f"{'met' if seconds <= Q1_TARGET_S else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
