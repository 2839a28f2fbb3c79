"""Time BALLAD episodes per data set (exact and bayes threshold search) and find where time goes.

Each data set is measured in a fresh process, so its peak memory (resident set size) is its
own. Per data set: the median wall time of one episode (reset + 15 rounds) with the exact
and the bayes search, the reset alone, environment steps per second, and peak memory. Then
one exact episode of the slowest data set is profiled. ``--q1`` also times the whole Q1
grid through the harness. Targets (2 cores): Q1 under 5 minutes, every exact episode under
5 s, peak memory under 2 GB on KDDCup99. The measuring lives in
``agents.experiments.bench.episodes``.

``--scaling`` times one episode per agent on synthetic data of each size in ``--sizes`` and
dimension in ``--dims`` (5% anomalies): reset, median AL and LR step, episode, peak memory,
and the growth exponent of the episode time (targets: 10 s at 200,000 rows, 2 minutes and
4 GB at 500,000). ``--effects`` plays each data set with the exact and the fast paths
(sampled eta, float32 kernel sums) and prints how far the costs move. ``synthetic:<n>x<d>``
names a synthetic data set anywhere a data set is asked for.

    ballad-env bench
    ballad-env bench --scaling --sizes 50000 200000 500000
    ballad-env bench --effects --datasets KDDCup99 ALOI synthetic:100000x10
    ballad-env bench --replay --datasets Glass WBC WDBC

``--replay`` builds a lattice store of the data sets and times the replay environment
(``ballad_env/BudgetAllocationReplay-v0``) against the live one, steps a second and their
ratio in one run (target: 50,000 replay steps a second in one process). ``--replay-store DIR``
times the replay environment on an existing store instead, cold (a fresh process: every
cell loaded, every transition computed on first visit) then warm, with its peak memory;
``--replay-runs N`` repeats that in N fresh processes and prints the median and range.

``--vector --replay-store DIR`` times the natively vectorised replay environment
(``ReplayVectorEnv``) at ``--vector-sizes`` beside the single replay environment and
gymnasium's ``SyncVectorEnv``, in one run (target: 1,000,000 steps a second at N = 1,024);
``--ppo-steps N`` then trains PPO at the policy study's sizes for N steps on today's path
(``DummyVecEnv``) and on the vector environment, and prints where the time goes.

``--full-size FILE ...`` plays All-in-AL, All-in-LR and BALLAD on each data file at full
size, for each of ``--seeds``, ``--priors`` and ``--backends`` (one fresh process and one
reset each, ``agents.experiments.bench.full_size``), and prints one table: reset, AL and LR
step, episode (wall-clock and CPU seconds), peak memory and cost (goal: 60 s an episode on
two cores). ``--phases`` adds the reset's split by phase. ``--compare-backends`` plays the
data sets with the numpy and the torch kernel backend and counts the rounds whose decisions
(labels queried, tau) differ.

    ballad-env bench --full-size cover.npz smtp.npz --backends numpy torch
    ballad-env bench --compare-backends --data-dir ../shared/benchmarks

``--training --replay-store DIR`` times training on the store: the torch thread count
(1 or 2 threads for the 64-64 MLP at ``--train-sizes`` rows), then SB3 PPO against the
batched and compiled trainers' PPO and MaskablePPO at N = ``--train-sizes`` (goal: 10 times
SB3's steps a second), each run in a fresh process, with where each run's time went and the
share of the machine's matrix-product peak each reaches; ``--heldout-store DIR`` instead
times each trainer to 95% of SB3's held-out cost (``bench.target``)
(``agents.experiments.bench.training``; ``docs/training.md``).

The vector measuring lives in ``agents.experiments.bench.vector``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agents.experiments import dataset_names
from agents.experiments.bench.episodes import (
    EPISODE_TARGET_S,
    MEMORY_TARGET_MB,
    Q1_TARGET_S,
    SCALING_DIMS,
    SCALING_SIZES,
    effects_table,
    fast_path_effects,
    measure,
    measure_replay,
    measure_replay_store,
    measure_scaling,
    profile,
    replay_report,
    replay_store_report,
    replay_store_summary,
    scaling_table,
    time_q1,
    timings_table,
)
from agents.experiments.bench.full_size import FULL_AGENTS
from agents.experiments.bench.timing import (
    SYNTHETIC_PREFIX,
    bench_dataset,
    in_fresh_process,
    time_ppo,
)
from agents.experiments.bench.training import STUDY_PPO_SIZES, TRAINING_SIZES
from agents.experiments.bench.vector import (
    VECTOR_SIZES,
    measure_vector,
    ppo_report,
    vector_report,
)
from agents.experiments.cli import HelpFormatter, bounded, n_jobs_value
from agents.experiments.grid import DATASETS_HELP
from ballad_env.detectors.ssdo.kernel import EXACT_MAX_TRAIN
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.replay.store import StoreError
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, kernel_pairs_value


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
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
    parser.add_argument("--q1", action="store_true",
                        help="also time the whole Q1 grid (data sets x seeds x 3 agents, exact)")
    parser.add_argument("--q1-seeds", type=bounded(1, 10**6), default=10,
                        help="seeds of the --q1 grid")
    parser.add_argument("--n-jobs", type=n_jobs_value, default=-1,
                        help="worker processes for --q1")
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
    vector.add_argument("--ppo-steps", type=bounded(0, 10**10), default=0,
                        help="also train PPO this many steps on both paths (0: skip)")
    training = parser.add_argument_group("training (with --replay-store)")
    training.add_argument("--training", action="store_true",
                          help="time SB3 PPO against the batched and compiled trainers on "
                               "the store")
    training.add_argument("--train-sizes", type=bounded(1, 10**5), nargs="+",
                          default=list(TRAINING_SIZES),
                          help="environments N of the batched runs")
    training.add_argument("--train-steps", type=bounded(1, 10**10), default=307_200,
                          help="steps of each batched run")
    training.add_argument("--sb3-steps", type=bounded(1, 10**10), default=102_400,
                          help="steps of each SB3 run")
    training.add_argument("--train-repeats", type=bounded(1, 1000), default=1,
                          help="rounds of every run (the median is shown)")
    training.add_argument("--quality-runs", default=None, metavar="DIR",
                          help="instead: replay the greedy policies of the runs under DIR "
                               "(<group>-s<seed>) on --eval-store, beside All-in-LR and the "
                               "hindsight optimum, and draw their learning curves")
    training.add_argument("--eval-store", default=None, help="the store --quality-runs plays")
    training.add_argument("--heldout-store", default=None, metavar="DIR",
                          help="with --training, instead: each trainer's seconds to 95%% of "
                               "SB3's final cost on this store's cells (bench.target)")
    training.add_argument("--target-seeds", type=bounded(1, 100), default=3,
                          help="training seeds of each trainer (--heldout-store)")
    training.add_argument("--curves", default="training_curves.png",
                          help="where --quality-runs draws the learning curves (two files: "
                               "-timesteps and -seconds before the suffix)")
    scaling = parser.add_argument_group("scaling and fast paths")
    scaling.add_argument("--scaling", action="store_true",
                         help="time episodes on synthetic data of growing size instead")
    scaling.add_argument("--sizes", type=bounded(1, 10**7), nargs="+", default=list(SCALING_SIZES),
                         help="rows of the synthetic data sets (--scaling)")
    scaling.add_argument("--dims", type=bounded(1, 10_000), nargs="+", default=list(SCALING_DIMS),
                         help="features of the synthetic data sets (--scaling)")
    scaling.add_argument("--agents", nargs="+", default=None,
                         help="agents timed (--scaling: ballad all-in-al; --full-size: "
                              f"{' '.join(FULL_AGENTS)}) or compared (--effects, "
                              "--compare-backends: ballad all-in-al)")
    scaling.add_argument("--effects", action="store_true",
                         help="compare the fast paths' costs with the exact path's instead")
    scaling.add_argument("--effect-seeds", type=bounded(1, 10_000), default=3,
                         help="seeds 0..N-1 per data set and agent (--effects)")
    full = parser.add_argument_group("full size and kernel backends")
    full.add_argument("--full-size", nargs="+", default=None, metavar="FILE",
                      help="time full-size episodes of these data files instead")
    full.add_argument("--seeds", type=int, nargs="+", default=[0],
                      help="seeds (--full-size, --compare-backends)")
    full.add_argument("--priors", nargs="+", default=["iforest", "knn"],
                      help="priors (--full-size)")
    full.add_argument("--backends", nargs="+", default=["numpy", "torch"],
                      choices=["numpy", "torch"], help="kernel backends (--full-size)")
    full.add_argument("--kernel-pairs", nargs="+", default=["auto"],
                      help="kernel pairs (--full-size): auto (by |D|: near above "
                           f"{EXACT_MAX_TRAIN:,} on numpy), all, near; with all and near "
                           "the decisions of the two are compared")
    full.add_argument("--rows-out", default=None, metavar="JSONL",
                      help="with --full-size: append each group's rows to this file as it "
                           "ends, and take groups already there from it (resume)")
    full.add_argument("--kernel-device", default=None,
                      help="the torch backend's device (default: cuda when there is one)")
    full.add_argument("--phases", action="store_true",
                      help="with --full-size: also profile one reset per file, prior and "
                           "backend by phase")
    full.add_argument("--compare-backends", action="store_true",
                      help="count the decisions that differ between the numpy and the torch "
                           "backend on the data sets, with the default and the fast paths")
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


def bench_names(datasets: list[str], data_dir: str | None) -> list[str]:
    """The data sets to measure: files (or 'all') checked in the data folder, then any
    ``synthetic:<n>x<d>`` names as given."""
    synthetic = [name for name in datasets if name.startswith(SYNTHETIC_PREFIX)]
    files = [name for name in datasets if not name.startswith(SYNTHETIC_PREFIX)]
    return [*(dataset_names(files, data_dir) if files else ()), *synthetic]


def run_scaling(args: argparse.Namespace, settings: Settings) -> None:
    """One episode per agent, dimension and size, each in a fresh process."""
    print(f"Scaling: one episode per agent on synthetic data (5% anomalies), {args.prior} "
          f"prior, {args.threads} thread(s)\n")
    rows = []
    for agent in args.agents:
        for d in args.dims:
            for n in args.sizes:
                rows.append(in_fresh_process(measure_scaling, n, d, agent, settings,
                                             args.threads))
                print(f"  {agent}, n = {n}, d = {d}: {rows[-1]['episode_s']:.1f} s",
                      file=sys.stderr)
    print(scaling_table(rows))


def run_effects(args: argparse.Namespace, names: list[str], settings: Settings) -> None:
    """The fast paths against the exact one, data set by data set."""
    print(f"Fast paths against the exact path, {args.prior} prior, agents "
          f"{', '.join(args.agents)}, seeds 0..{args.effect_seeds - 1}: |dcost| is the mean "
          "absolute test-cost difference per round, dcost the mean difference, same the "
          "share of episodes with the exact actions\n")
    rows = []
    for name in names:
        rows += in_fresh_process(fast_path_effects, bench_dataset(name, args.data_dir),
                                 args.data_dir, settings, range(args.effect_seeds), args.agents)
        print(f"  compared {name}", file=sys.stderr)
    print(effects_table(rows))


def run_vector(args: argparse.Namespace, settings: Settings) -> int:
    """The vector environment's steps/s, then PPO on both paths if asked."""
    if args.replay_store is None:
        print("error: --vector needs --replay-store DIR (a store built with "
              "ballad-env lattices)", file=sys.stderr)
        return 2
    try:
        result = measure_vector(args.replay_store, settings, args.vector_sizes,
                                args.replay_steps, args.vector_repeats, args.short_steps)
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(vector_report(result), flush=True)
    if args.ppo_steps > 0:
        datasets = sorted({name for name, _ in
                           BudgetAllocationReplayEnv(args.replay_store, settings=settings).cells})
        sizes = STUDY_PPO_SIZES
        rows = [time_ppo(args.replay_store, datasets, path, args.ppo_steps,
                         settings=settings.replace(reward="cost"),
                         batch_size=sizes.batch_size, n_epochs=sizes.n_epochs,
                         learning_rate=sizes.learning_rate)
                for path in ("dummy", "vector")]
        print(f"\nPPO, {args.ppo_steps:,} steps at the policy study's sizes (reward cost), "
              "seconds of the whole run and of its parts (cProfile):")
        print(ppo_report(rows))
    return 0


def run_quality(args: argparse.Namespace) -> int:
    """The runs' greedy policies on the evaluation store, and their learning curves."""
    from agents.experiments.bench.training import (
        quality_report,
        quality_table,
        run_groups,
    )
    from agents.experiments.lattice_build import store_settings
    from agents.experiments.training.curves import plot_training_curves, read_monitor

    if args.eval_store is None:
        print("error: --quality-runs needs --eval-store DIR", file=sys.stderr)
        return 2
    groups = run_groups(args.quality_runs)
    settings = store_settings(args.eval_store, None, "cost")
    cells = len(BudgetAllocationReplayEnv(args.eval_store, settings=settings).cells)
    print(quality_report(quality_table(groups, args.eval_store, settings), cells))
    # A batched run's monitor row is the mean of a rollout's ~1,000 episodes: smooth SB3's
    # one-episode rows over as many.
    windows = {g: 1 if "episodes" in read_monitor(runs[0]) else 1024
               for g, runs in groups.items()}
    for x in ("timesteps", "seconds"):
        path = Path(args.curves).with_stem(f"{Path(args.curves).stem}-{x}")
        print(f"curves: {plot_training_curves(groups, path, windows=windows, x=x)}")
    return 0


def run_training(args: argparse.Namespace) -> int:
    """SB3 PPO against the batched trainer on the store (``training_bench``)."""
    if args.quality_runs is not None:
        return run_quality(args)
    if args.replay_store is None:
        print("error: --training needs --replay-store DIR (a store built with "
              "ballad-env lattices)", file=sys.stderr)
        return 2
    from agents.experiments.bench.training import measure_training, training_report
    from agents.experiments.lattice_build import store_settings

    try:
        settings = store_settings(args.replay_store, None, "cost")
        if args.heldout_store is not None:  # the trainers' seconds to a held-out cost
            from agents.experiments.bench.target import measure_time_to_target as measure
            from agents.experiments.bench.target import time_to_target_report as report

            print(report(measure(args.replay_store, args.heldout_store, settings,
                                 range(args.target_seeds))))
            return 0
        sizes = STUDY_PPO_SIZES
        study = (sizes.n_envs, sizes.n_steps, sizes.batch_size, sizes.learning_rate)
        result = measure_training(args.replay_store, settings, study, args.train_sizes,
                                  args.train_steps, args.sb3_steps, args.train_repeats)
    except (StoreError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(training_report(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.training or args.quality_runs is not None:
        return run_training(args)
    settings = Settings(prior=args.prior)
    if args.full_size:
        from agents.experiments.bench.full_size import run_full_size

        print(run_full_size(args.full_size, args.seeds, args.priors, args.backends,
                            args.agents or list(FULL_AGENTS), args.threads, args.kernel_device,
                            args.phases, [kernel_pairs_value(p) for p in args.kernel_pairs],
                            args.rows_out))
        return 0
    args.agents = args.agents or ["ballad", "all-in-al"]
    if args.compare_backends:
        from agents.experiments.bench.full_size import run_compare_backends

        print(run_compare_backends(bench_names(args.datasets, args.data_dir), args.data_dir,
                                   settings, args.seeds, args.agents, args.kernel_device))
        return 0
    if args.scaling:
        run_scaling(args, settings)
        return 0
    if args.vector:
        return run_vector(args, settings)
    if args.replay_store is not None:
        rows = []
        for _ in range(args.replay_runs):
            try:
                rows.append(in_fresh_process(measure_replay_store, args.replay_store,
                                             settings, args.replay_steps))
            except StoreError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            print(replay_store_report(rows[-1]), flush=True)
        if len(rows) > 1:
            print(replay_store_summary(rows))
        return 0
    try:
        names = bench_names(args.datasets, args.data_dir)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.effects:
        run_effects(args, names, settings)
        return 0
    if args.replay:
        print(f"Replay against live environment, {args.prior} prior, random valid actions, "
              "one process\n")
        print(replay_report(in_fresh_process(measure_replay, names, args.data_dir, settings,
                                             args.replay_seeds, args.replay_steps,
                                             args.live_episodes)))
        return 0
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

