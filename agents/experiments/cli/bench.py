"""Time BALLAD episodes per data set (exact and bayes threshold search) and find where time goes.

Each data set is measured in a fresh process, so its peak memory (resident set size) is its
own. Per data set: the median wall time of one episode (reset + 15 rounds) with the exact
and the bayes search, the reset alone, environment steps per second, and peak memory. Then
one exact episode of the slowest data set is profiled. Targets (2 cores): every exact
episode under 5 s, peak memory under 2 GB on KDDCup99. The measuring lives in
``agents.experiments.bench.episodes``. ``synthetic:<n>x<d>`` names a synthetic data set
anywhere a data set is asked for.

    ballad-env bench
    ballad-env bench --replay --datasets Glass WBC WDBC

``--replay`` builds a lattice store of the data sets and times the replay environment
(``ballad_env/BudgetAllocationReplay-v0``) against the live one, steps a second and their
ratio in one run (target: 50,000 replay steps a second in one process). ``--replay-store DIR``
times the replay environment on an existing store instead, cold (a fresh process: every
cell loaded, every transition computed on first visit) then warm, with its peak memory;
``--replay-runs N`` repeats that in N fresh processes and prints the median and range.

``--vector --replay-store DIR`` times the natively vectorised replay environment
(``ReplayVectorEnv``) at ``--vector-sizes`` beside the single replay environment and
gymnasium's ``SyncVectorEnv``, in one run (target: 1,000,000 steps a second at N = 1,024).
The vector measuring lives in ``agents.experiments.bench.vector``.

The studies' timings (the trainers against SB3, their seconds to a held-out cost, SB3's
PPO on both paths, full-size episodes and the kernel backends, episodes growing with the
data, the fast paths' effects, the Q1 grid) are research: run
``python -m scripts.studies.timings`` from a clone.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agents.experiments.bench.episodes import (
    EPISODE_TARGET_S,
    MEMORY_TARGET_MB,
    measure,
    measure_replay,
    measure_replay_store,
    profile,
    replay_report,
    replay_store_report,
    replay_store_summary,
    timings_table,
    verdict,
)
from agents.experiments.bench.timing import bench_names, in_fresh_process
from agents.experiments.bench.vector import (
    VECTOR_SIZES,
    measure_vector,
    vector_report,
)
from agents.experiments.cli import HelpFormatter, bounded
from agents.experiments.cli.parsing import JobParser
from agents.experiments.grid import DATASETS_HELP
from ballad_env.replay.store import StoreError
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = JobParser(
        description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter,
        epilog="The studies' timings (the trainers against SB3, full-size episodes, the "
               "kernel backends, scaling, the fast paths, the Q1 grid): python -m "
               "scripts.studies.timings, from a clone.")
    parser.add_argument("--datasets", nargs="+", default=["all"],
                        help=DATASETS_HELP)
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    add_settings_arguments(parser, only=["prior", "bayes_calls"])
    parser.add_argument("--repeats", type=bounded(1, 1000), default=3,
                        help="exact episodes per data set (seeds 0..N-1); the median is shown")
    parser.add_argument("--bayes-repeats", type=bounded(0, 1000), default=1,
                        help="bayes episodes per data set (0: skip the bayes search)")
    parser.add_argument("--threads", type=bounded(1, 1024), default=1,
                        help="BLAS/OpenMP threads per process (the harness's workers use 1)")
    parser.add_argument("--no-profile", action="store_true",
                        help="skip profiling the slowest data set")
    replay = parser.add_argument_group("replay environment")
    replay.add_argument("--replay", action="store_true",
                        help="compare the replay environment's steps/s with the live one's "
                             "on the data sets given instead (a store is built first)")
    replay.add_argument("--replay-store", default=None,
                        help="time the replay environment cold and warm on this existing "
                             "store instead (steps/s and peak memory, one fresh process)")
    replay.add_argument("--replay-runs", type=bounded(1, 100), default=1,
                        help="with --replay-store: fresh processes, one after the other; "
                             "prints each and the median and range")
    replay.add_argument("--replay-seeds", type=bounded(1, 10**6), default=3,
                        help="seeds in the store")
    replay.add_argument("--replay-steps", type=bounded(1, 10**9), default=200_000,
                        help="replay steps timed (after as many to warm up)")
    replay.add_argument("--live-episodes", type=bounded(1, 10**6), default=10,
                        help="live episodes timed (fresh seeds)")
    vector = parser.add_argument_group("vector environment (with --replay-store)")
    vector.add_argument("--vector", action="store_true",
                        help="time the vector replay environment beside the single one and "
                             "SyncVectorEnv (steps/s, median of --vector-repeats)")
    vector.add_argument("--vector-sizes", type=bounded(1, 10**5), nargs="+",
                        default=list(VECTOR_SIZES),
                        help="numbers of environments N")
    vector.add_argument("--vector-repeats", type=bounded(1, 1000), default=3,
                        help="timed runs per figure")
    vector.add_argument("--short-steps", type=bounded(1, 10**9), default=20_000,
                        help="steps per run of the slow ways (SyncVectorEnv, N < 16)")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """The slowest exact episode and KDDCup99's peak memory against their targets."""
    slowest = max(rows, key=lambda r: r["exact_s"])
    worst = max(r["max_exact_s"] for r in rows)
    lines = [f"\nslowest exact episode: {worst:.2f} s on {slowest['dataset']} (target "
             f"{EPISODE_TARGET_S:.0f} s: {verdict(worst <= EPISODE_TARGET_S)})"]
    for r in rows:
        if r["dataset"].lower() == "kddcup99":
            lines.append(f"peak memory on KDDCup99: {r['peak_mb']:.0f} MB (target "
                         f"{MEMORY_TARGET_MB:.0f} MB: {verdict(r['peak_mb'] <= MEMORY_TARGET_MB)})")
    return lines


def run_vector(args: argparse.Namespace, settings: Settings) -> int:
    """``--vector``: the vector environment's steps/s beside the single one's."""
    if args.replay_store is None:
        print("error: --vector needs --replay-store DIR (a store built with "
              "ballad-env lattices)", file=sys.stderr)
        return 2
    print(vector_report(measure_vector(args.replay_store, settings, args.vector_sizes,
                                       args.replay_steps, args.vector_repeats,
                                       args.short_steps)), flush=True)
    return 0


def run_replay_store(args: argparse.Namespace, settings: Settings) -> int:
    """``--replay-store``: the replay environment on that store, cold then warm, in
    ``--replay-runs`` fresh processes (with their median and range when more than one)."""
    rows = []
    for _ in range(args.replay_runs):
        rows.append(in_fresh_process(measure_replay_store, args.replay_store, settings,
                                     args.replay_steps))
        print(replay_store_report(rows[-1]), flush=True)
    if len(rows) > 1:
        print(replay_store_summary(rows))
    return 0


def run_episodes(args: argparse.Namespace, settings: Settings, names: list[str]) -> int:
    """The default: episodes per data set, the verdicts, and the slowest one's profile."""
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
    return 0


#: The options of the studies' timings, moved to ``python -m scripts.studies.timings``
#: (run from a clone); the old spelling gets a one-line pointer.
STUDY_OPTIONS = {option: f"scripts.studies.timings {moved}" for option, moved in {
    "--training": "--training", "--quality-runs": "--quality-runs", "--scaling": "--scaling",
    "--effects": "--effects", "--q1": "--q1", "--ppo-steps": "--ppo-paths",
    "--full-size": "--full-size", "--compare-backends": "--compare-backends"}.items()}
STUDY_OPTIONS["--heldout-store"] = "scripts.studies.timings.time_to_target --heldout-store"


def moved_option(argv: list[str]) -> str | None:
    """The pointer for an option of a study's timing, if ``argv`` has one."""
    for arg in argv:
        option = arg.split("=", 1)[0]
        if option in STUDY_OPTIONS:
            return (f"{option} is a study's timing now: run python -m "
                    f"{STUDY_OPTIONS[option]} ... from a clone of the project")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the mode the options ask for; a bad store or data set returns 2."""
    if (pointer := moved_option(list(sys.argv[1:] if argv is None else argv))) is not None:
        print(f"error: {pointer}", file=sys.stderr)
        return 2
    args = parse_args(argv)
    settings = Settings(prior=args.prior)
    try:
        if args.vector:
            return run_vector(args, settings)
        if args.replay_store is not None:
            return run_replay_store(args, settings)
        names = bench_names(args.datasets, args.data_dir)
        if not args.replay:
            return run_episodes(args, settings, names)
        print(f"Replay against live environment, {args.prior} prior, random valid actions, "
              "one process\n")
        print(replay_report(in_fresh_process(measure_replay, names, args.data_dir, settings,
                                             args.replay_seeds, args.replay_steps,
                                             args.live_episodes)))
        return 0
    except (StoreError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
