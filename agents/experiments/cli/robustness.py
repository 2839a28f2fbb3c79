"""Robustness sweep: play whole episodes on hundreds of generated awkward data sets.

Each case (duplicated rows, constant columns, a single anomaly, |D| around the 30 neighbours
of eta, feature scales from 1e-300 to 1e200, ...; ``agents.experiments.studies.robustness``) must
either play a whole episode with finite, well-formed figures or be refused at construction
with the error it calls for. The suite runs a few dozen such cases; this runs the full sweep
and prints how the cases ended. Exit status 1 if any case failed (the first is shown, with
Hypothesis's smallest failing example).

    .venv/bin/python scripts/robustness_sweep.py --examples 500
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

from agents.experiments.studies.robustness import Case, check_case, episodes


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=500, help="generated cases (>= 1)")
    parser.add_argument("--max-rows", type=int, default=300, help="largest data set drawn")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis's seed")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.examples < 1:
        print("error: --examples must be at least 1", file=sys.stderr)
        return 2
    from hypothesis import HealthCheck, given, seed, settings

    outcomes: collections.Counter[str] = collections.Counter()
    start = time.perf_counter()

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=episodes(args.max_rows))
    def sweep(case: Case) -> None:
        outcomes[check_case(case)] += 1

    try:
        sweep()
    except AssertionError as err:
        print(f"FAILED after {sum(outcomes.values())} cases: {err}", file=sys.stderr)
        return 1
    print(f"{sum(outcomes.values())} cases in {time.perf_counter() - start:.0f} s:")
    for outcome, count in outcomes.most_common():
        print(f"  {count:5d}  {outcome}")
    return 0

