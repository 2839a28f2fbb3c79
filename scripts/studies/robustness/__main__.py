"""Robustness sweep: play whole episodes on hundreds of generated awkward data sets.

Each case (duplicated rows, constant columns, a single anomaly, |D| around the 30 neighbours
of eta, feature scales from 1e-300 to 1e200, ...; ``scripts.studies.robustness.datasets``) must
either play a whole episode with finite, well-formed figures or be refused at construction
with the error it calls for. The suite runs a few dozen such cases; this runs the full sweep
and prints how the cases ended. Exit status 1 if any case failed (the first is shown, with
Hypothesis's smallest failing example).

With ``--files`` it damages the files the project reads instead (``agents.experiments.
stores.corruption``): every byte of a lattice file, a ``store.json``, a result cell and a
``run.json`` flipped, and each cut at every length, and a sample of a saved policy's zip;
each damaged file must be read identically or refused with an error naming it. Then the
hostile cases (``scripts.studies.robustness.hostile_files``): manifests of every wrong shape,
policy zips that declare or ask for gigabytes, and a download server's tricks (an endless
body, a huge length, a trickle of the body or of the headers, redirects, a link at the
temporary name, a password in the address). Then files by class at every level a reader goes
through (``scripts.studies.robustness.hostile_nested``): a policy zip forged at every nesting
level, zoo YAML files refused before any library parses them. Then the commands' inputs by class
(``scripts.studies.robustness.hostile_inputs``): FIFOs wherever a path is read or written,
a silent Dask scheduler, every size option at an absurd value, names that are not names.
Then whole runs (``scripts.studies.robustness.hostile_runs``): every environment variable
that sets a bound or a folder at a value that overflows or is no number, Ctrl-C during
every job, every folder a job writes into read-only or full.

    python -m scripts.studies.robustness --examples 500
    python -m scripts.studies.robustness --files
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    run_job,
)
from scripts.studies.robustness.datasets import MIN_ROWS, Case, check_case, episodes


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--examples", type=int, default=500, help="generated cases (>= 1)")
    parser.add_argument("--max-rows", type=_max_rows, default=300,
                        help=f"largest data set drawn (>= {MIN_ROWS})")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis's seed (with --files: "
                        "the sample's)")
    parser.add_argument("--files", action="store_true", help="damage the project's files "
                        "(data .npz, .mat, .arff, .csv; lattice, store.json, result cell, "
                        "run.json, policy zip) instead")
    parser.add_argument("--max-damages", type=int, default=None, help="with --files: at most "
                        "this many flips and truncations of each file (default: every byte)")
    parser.add_argument("--policy-damages", type=int, default=2000, help="with --files: flips "
                        "and truncations of the policy zip (0: leave it out)")
    return parser


def _max_rows(text: str) -> int:
    value = int(text)
    if value < MIN_ROWS:
        raise argparse.ArgumentTypeError(f"give at least {MIN_ROWS} (the smallest data set "
                                         f"drawn), not {value}")
    return value


def sweep_files(args: argparse.Namespace) -> int:
    """Damage each file kind; print how each ended and the failures. 1 if any failed."""
    import itertools

    from scripts.studies.robustness.damaged_files import fuzz_files
    from scripts.studies.robustness.hostile_files import hostile_outcomes
    from scripts.studies.robustness.hostile_inputs import input_outcomes
    from scripts.studies.robustness.hostile_nested import nested_outcomes
    from scripts.studies.robustness.hostile_runs import run_outcomes

    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        for outcome in itertools.chain(
                fuzz_files(Path(folder), args.max_damages, args.policy_damages,
                           policy=args.policy_damages > 0, seed=args.seed),
                hostile_outcomes(Path(folder) / "hostile", policy=args.policy_damages > 0),
                input_outcomes(Path(folder) / "inputs"),
                nested_outcomes(Path(folder) / "nested", policy=args.policy_damages > 0),
                run_outcomes(Path(folder) / "runs")):
            counts = ", ".join(f"{n} {what}" for what, n in outcome.counts.most_common())
            print(f"{outcome.kind}: {counts}; {len(outcome.failures)} failed", flush=True)
            for failure in outcome.failures[:20]:
                print(f"  {failure}")
            failed += len(outcome.failures)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.examples < 1:
        print("error: --examples must be at least 1", file=sys.stderr)
        return 2
    if args.files:
        return sweep_files(args)
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



if __name__ == "__main__":
    sys.exit(run_job(main))
