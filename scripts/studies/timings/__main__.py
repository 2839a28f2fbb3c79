"""The studies' timings, each a mode of one command (speed targets live in the docs that
report them, never in a timed test).

``--training --replay-store DIR`` times training on the store: the torch thread count (1 or
2 threads for the 64-64 MLP at ``--train-sizes`` rows), then SB3 PPO against the batched
and compiled trainers' PPO and MaskablePPO at N = ``--train-sizes`` (goal: 10 times SB3's
steps a second), each run in a fresh process, with where each run's time went and the
share of the machine's matrix-product peak each reaches (``timings.training``; the wall
time to a held-out target, setup included, is its own script:
``python -m scripts.studies.timings.time_to_target``); ``--quality-runs DIR --eval-store
DIR`` replays trained runs' greedy
policies and draws their curves. ``--ppo-paths N --replay-store DIR`` trains SB3's PPO N
steps at the policy study's sizes on today's path (``DummyVecEnv``) and on the vector
environment, and prints where the time goes (``timings.sb3_ppo``).

``--scaling`` times one episode per agent on synthetic data of each size in ``--sizes`` and
dimension in ``--dims`` (5% anomalies): reset, median AL and LR step, episode, peak memory,
and the growth exponent of the episode time (targets: 10 s at 200,000 rows, 2 minutes and
4 GB at 500,000); ``--effects`` plays each data set with the exact and the fast paths
(sampled eta, float32 kernel sums) and prints how far the costs move; ``--q1`` times the
whole Q1 grid through the harness (target: 5 minutes on two cores)
(``timings.scaling``).

``--full-size FILE ...`` plays All-in-AL, All-in-LR and BALLAD on each data file at full
size, for each of ``--seeds``, ``--priors`` and ``--backends`` (``timings.full_size``);
``--phases`` adds the reset's split by phase. ``--compare-backends`` plays the data sets
with the numpy and the torch kernel backend and counts the rounds whose decisions differ.

    python -m scripts.studies.timings --training --replay-store results/lattices
    python -m scripts.studies.timings --full-size cover.npz smtp.npz --backends numpy torch
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.experiments.bench.timing import bench_dataset, bench_names, in_fresh_process
from agents.experiments.cli import HelpFormatter, bounded, n_jobs_value, run_job
from agents.experiments.grid import DATASETS_HELP
from agents.experiments.lattice_build import store_datasets, store_settings
from ballad_env.detectors.ssdo.kernel import EXACT_MAX_TRAIN
from ballad_env.replay.store import StoreError
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, kernel_pairs_value
from scripts.studies.common.ppo_sizes import STUDY_PPO_SIZES
from scripts.studies.timings.full_size import FULL_AGENTS
from scripts.studies.timings.scaling import (
    Q1_TARGET_S,
    SCALING_DIMS,
    SCALING_SIZES,
    effects_table,
    fast_path_effects,
    measure_scaling,
    scaling_table,
    time_q1,
)
from scripts.studies.timings.training import TRAINING_SIZES


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--replay-store", default=None, help="the store trained on")
    parser.add_argument("--datasets", nargs="+", default=["all"], help=DATASETS_HELP)
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    add_settings_arguments(parser, only=["prior"])
    parser.add_argument("--threads", type=bounded(1, 1024), default=1,
                        help="BLAS/OpenMP threads per process")
    parser.add_argument("--agents", nargs="+", default=None,
                        help=f"agents timed (--full-size: {' '.join(FULL_AGENTS)}; "
                             "--scaling: ballad all-in-al) or compared (--compare-backends, "
                             "--effects: ballad all-in-al)")
    _add_training(parser.add_argument_group("training (with --replay-store)"))
    _add_full_size(parser.add_argument_group("full size and kernel backends"))
    _add_scaling(parser.add_argument_group("scaling, fast paths and the Q1 grid"))
    return parser


def _add_scaling(scaling: argparse._ArgumentGroup) -> None:
    scaling.add_argument("--scaling", action="store_true",
                         help="time episodes on synthetic data of growing size")
    scaling.add_argument("--sizes", type=bounded(1, 10**7), nargs="+", default=list(SCALING_SIZES),
                         help="rows of the synthetic data sets (--scaling)")
    scaling.add_argument("--dims", type=bounded(1, 10_000), nargs="+", default=list(SCALING_DIMS),
                         help="features of the synthetic data sets (--scaling)")
    scaling.add_argument("--effects", action="store_true",
                         help="compare the fast paths' costs with the exact path's")
    scaling.add_argument("--effect-seeds", type=bounded(1, 10_000), default=3,
                         help="seeds 0..N-1 per data set and agent (--effects)")
    scaling.add_argument("--q1", action="store_true",
                         help="time the whole Q1 grid (data sets x seeds x 3 agents, exact)")
    scaling.add_argument("--q1-seeds", type=bounded(1, 10**6), default=10,
                         help="seeds of the --q1 grid")
    scaling.add_argument("--n-jobs", type=n_jobs_value, default=-1,
                         help="worker processes for --q1")


def _add_training(training: argparse._ArgumentGroup) -> None:
    training.add_argument("--training", action="store_true",
                          help="time SB3 PPO against the batched and compiled trainers")
    training.add_argument("--train-sizes", type=bounded(1, 10**5), nargs="+",
                          default=list(TRAINING_SIZES), help="environments N of the torch runs")
    training.add_argument("--train-steps", type=bounded(1, 10**10), default=307_200,
                          help="steps of each torch run")
    training.add_argument("--sb3-steps", type=bounded(1, 10**10), default=102_400,
                          help="steps of each SB3 run")
    training.add_argument("--train-repeats", type=bounded(1, 1000), default=1,
                          help="rounds of every run (the median is shown)")
    training.add_argument("--quality-runs", default=None, metavar="DIR",
                          help="instead: replay the greedy policies of the runs under DIR "
                               "(<group>-s<seed>) on --eval-store, beside All-in-LR and the "
                               "hindsight optimum, and draw their learning curves")
    training.add_argument("--eval-store", default=None, help="the store --quality-runs plays")
    training.add_argument("--curves", default="training_curves.png",
                          help="where --quality-runs draws the learning curves (two files: "
                               "-timesteps and -seconds before the suffix)")
    training.add_argument("--ppo-paths", type=bounded(0, 10**10), default=0, metavar="N",
                          help="train SB3's PPO N steps on today's path and on the vector "
                               "environment, with where the time goes")


def _add_full_size(full: argparse._ArgumentGroup) -> None:
    full.add_argument("--full-size", nargs="+", default=None, metavar="FILE",
                      help="time full-size episodes of these data files")
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


def run_quality(args: argparse.Namespace) -> int:
    """The runs' greedy policies on the evaluation store, and their learning curves."""
    from agents.experiments.training.curves import plot_training_curves, read_monitor
    from ballad_env.replay.env import BudgetAllocationReplayEnv
    from scripts.studies.timings.training import quality_report, quality_table, run_groups

    if args.eval_store is None:
        print("error: --quality-runs needs --eval-store DIR", file=sys.stderr)
        return 2
    groups = run_groups(args.quality_runs)
    settings = store_settings(args.eval_store, None, "cost")
    cells = len(BudgetAllocationReplayEnv(args.eval_store, settings=settings).cells)
    print(quality_report(quality_table(groups, args.eval_store, settings), cells))
    # A torch run's monitor row is the mean of a rollout's ~1,000 episodes: smooth SB3's
    # one-episode rows over as many.
    windows = {g: 1 if "episodes" in read_monitor(runs[0]) else 1024
               for g, runs in groups.items()}
    for x in ("timesteps", "seconds"):
        path = Path(args.curves).with_stem(f"{Path(args.curves).stem}-{x}")
        print(f"curves: {plot_training_curves(groups, path, windows=windows, x=x)}")
    return 0


def run_training(args: argparse.Namespace) -> int:
    """SB3 PPO against the torch trainers on the store."""
    from scripts.studies.timings.training import measure_training, training_report

    settings = store_settings(args.replay_store, None, "cost")
    sizes = STUDY_PPO_SIZES
    study = (sizes.n_envs, sizes.n_steps, sizes.batch_size, sizes.learning_rate)
    print(training_report(measure_training(args.replay_store, settings, study,
                                           args.train_sizes, args.train_steps,
                                           args.sb3_steps, args.train_repeats)))
    return 0


def run_ppo_paths(args: argparse.Namespace) -> int:
    """SB3's PPO on today's path and on the vector environment, at the study's sizes."""
    from scripts.studies.timings.sb3_ppo import ppo_report, time_ppo

    settings = Settings(prior=args.prior, reward="cost")
    datasets = store_datasets(args.replay_store, settings)
    sizes = STUDY_PPO_SIZES
    rows = [time_ppo(args.replay_store, datasets, path, args.ppo_paths, settings=settings,
                     batch_size=sizes.batch_size, n_epochs=sizes.n_epochs,
                     learning_rate=sizes.learning_rate) for path in ("dummy", "vector")]
    print(f"PPO, {args.ppo_paths:,} steps at the policy study's sizes (reward cost), "
          "seconds of the whole run and of its parts (cProfile):")
    print(ppo_report(rows))
    return 0


def run_full_size(args: argparse.Namespace) -> int:
    """Full-size episodes, or the two kernel backends' decisions compared."""
    from scripts.studies.timings import full_size

    settings = Settings(prior=args.prior)
    if args.full_size:
        print(full_size.run_full_size(
            args.full_size, args.seeds, args.priors, args.backends,
            args.agents or list(FULL_AGENTS), args.threads, args.kernel_device, args.phases,
            [kernel_pairs_value(p) for p in args.kernel_pairs], args.rows_out))
        return 0
    print(full_size.run_compare_backends(
        bench_names(args.datasets, args.data_dir), args.data_dir, settings, args.seeds,
        args.agents or ["ballad", "all-in-al"], args.kernel_device))
    return 0


def run_scaling(args: argparse.Namespace) -> int:
    """One episode per agent, dimension and size, each in a fresh process."""
    settings = Settings(prior=args.prior)
    print(f"Scaling: one episode per agent on synthetic data (5% anomalies), {args.prior} "
          f"prior, {args.threads} thread(s)\n")
    rows = []
    for agent in args.agents or ["ballad", "all-in-al"]:
        for d in args.dims:
            for n in args.sizes:
                rows.append(in_fresh_process(measure_scaling, n, d, agent, settings,
                                             args.threads))
                print(f"  {agent}, n = {n}, d = {d}: {rows[-1]['episode_s']:.1f} s",
                      file=sys.stderr)
    print(scaling_table(rows))
    return 0


def run_effects(args: argparse.Namespace) -> int:
    """The fast paths against the exact one, data set by data set."""
    settings, agents = Settings(prior=args.prior), args.agents or ["ballad", "all-in-al"]
    print(f"Fast paths against the exact path, {args.prior} prior, agents "
          f"{', '.join(agents)}, seeds 0..{args.effect_seeds - 1}: |dcost| is the mean "
          "absolute test-cost difference per round, dcost the mean difference, same the "
          "share of episodes with the exact actions\n")
    rows = []
    for name in bench_names(args.datasets, args.data_dir):
        rows += in_fresh_process(fast_path_effects, bench_dataset(name, args.data_dir),
                                 args.data_dir, settings, range(args.effect_seeds), agents)
        print(f"  compared {name}", file=sys.stderr)
    print(effects_table(rows))
    return 0


def run_q1(args: argparse.Namespace) -> int:
    """The wall time of the paper's Q1 grid through the harness, against its target."""
    names = bench_names(args.datasets, args.data_dir)
    seconds = time_q1(names, args.q1_seeds, Settings(prior=args.prior), args.data_dir,
                      args.n_jobs)
    print(f"Q1 grid ({len(names)} data sets x {args.q1_seeds} seeds x 3 agents, exact, "
          f"n_jobs={args.n_jobs}): {seconds:.0f} s (target {Q1_TARGET_S:.0f} s: "
          f"{'met' if seconds <= Q1_TARGET_S else 'missed'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the mode asked for; a missing store or a bad one is a one-line error (2)."""
    args = build_parser().parse_args(argv)
    for asked, run in ((args.scaling, run_scaling), (args.effects, run_effects),
                       (args.q1, run_q1)):
        if asked:
            return run(args)
    if args.quality_runs is not None:
        return run_quality(args)
    if args.full_size or args.compare_backends:
        return run_full_size(args)
    if not (args.training or args.ppo_paths):
        print("error: name a mode: --training, --quality-runs, --ppo-paths N, --full-size "
              "FILE ..., --compare-backends, --scaling, --effects or --q1", file=sys.stderr)
        return 2
    if args.replay_store is None:
        print("error: --training and --ppo-paths need --replay-store DIR (a store built "
              "with ballad-env lattices)", file=sys.stderr)
        return 2
    try:
        return run_training(args) if args.training else run_ppo_paths(args)
    except (StoreError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run_job(main))
