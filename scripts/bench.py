"""Time BALLAD episodes per data set (exact and bayes threshold search) and find where time goes.

Each data set is measured in a fresh process, so its peak memory (resident set size) is its
own. Per data set: the median wall time of one episode (reset + 15 rounds) with the exact
and the bayes search, the reset alone, environment steps per second, and peak memory. Then
one exact episode of the slowest data set is profiled. ``--q1`` also times the whole Q1
grid through the runner. Targets (2 cores): Q1 under 5 minutes, every exact episode under
5 s, peak memory under 2 GB on KDDCup99.

    .venv/bin/python scripts/bench.py --data-dir ../shared/benchmarks
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing
import pstats
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

EPISODE_TARGET_S = 5.0
MEMORY_TARGET_MB = 2048.0
Q1_TARGET_S = 300.0
#: Phases of an episode, as (label, module path suffixes, function name) for the profile.
PHASES = (
    ("reset (whole)", ("ballad_env/env.py",), "reset"),
    ("reset: split and scale", ("ballad_env/protocol.py",), "split_and_scale"),
    ("reset: fit the prior", ("pyod/models/iforest.py", "pyod/models/knn.py"), "fit"),
    ("reset: kernel width eta", ("ballad_env/detector.py",), "kernel_width"),
    ("reset: prior scores of V and T", ("ballad_env/detector.py",), "prior_probability"),
    ("steps (whole)", ("ballad_env/env.py",), "step"),
    ("AL: kernel sums for new labels", ("ballad_env/detector.py",), "kernel_sums"),
    ("threshold search", ("ballad_env/rejection.py",), "__call__"),
    ("rewards", ("ballad_env/episode.py",), "rewards"),
    ("test evaluation (cost, ROC AUC)", ("ballad_env/cost.py",), "evaluate"),
    ("observation", ("ballad_env/env.py",), "_observation"),
)


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["all"],
                        help="data sets, or 'all' for every file in the data folder")
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    parser.add_argument("--prior", default="iforest", choices=["iforest", "knn"],
                        help="SSDO's prior")
    parser.add_argument("--repeats", type=int, default=3,
                        help="exact episodes per data set (seeds 0..N-1); the median is shown")
    parser.add_argument("--bayes-repeats", type=int, default=1,
                        help="bayes episodes per data set (0: skip the bayes search)")
    parser.add_argument("--bayes-calls", type=int, default=20,
                        help="gp_minimize evaluations per threshold search")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads per process (the runner's workers use 1)")
    parser.add_argument("--no-profile", action="store_true",
                        help="skip profiling the slowest data set")
    parser.add_argument("--q1", action="store_true",
                        help="also time the whole Q1 grid (data sets x seeds x 3 agents, exact)")
    parser.add_argument("--q1-seeds", type=int, default=10, help="seeds of the --q1 grid")
    parser.add_argument("--n-jobs", type=int, default=-1, help="worker processes for --q1")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


# ---------------------------------------------------------------------------------- children
def _episode(env: Any, seed: int) -> tuple[float, float]:
    """(reset seconds, steps seconds) of one BALLAD episode."""
    from agents import make_agent

    agent = make_agent("ballad", env)
    start = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    agent.reset(seed)
    reset_done = time.perf_counter()
    terminated = False
    while not terminated:
        action, _ = agent.predict(obs)
        obs, _, terminated, _, _ = env.step(int(action))
    return reset_done - start, time.perf_counter() - reset_done


def measure(name: str, data_dir: str | None, prior: str, repeats: int, bayes_repeats: int,
            bayes_calls: int, threads: int) -> dict[str, Any]:
    """Run in a fresh process: episode timings and peak memory for one data set."""
    from threadpoolctl import threadpool_limits

    from ballad_env.env import BudgetAllocationEnv

    with threadpool_limits(threads):
        env = BudgetAllocationEnv(name, data_dir=data_dir, prior=prior)
        _episode(env, repeats)  # warm-up: lazy imports are not an episode's cost
        exact = [_episode(env, seed) for seed in range(repeats)]
        peak_exact = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        bayes_env = BudgetAllocationEnv(name, data_dir=data_dir, prior=prior,
                                        threshold_search="bayes", bayes_calls=bayes_calls)
        bayes = [sum(_episode(bayes_env, seed)) for seed in range(bayes_repeats)]
    rounds = env.episode.budget.n_rounds
    return {"dataset": name, "n": env.dataset.n_samples, "d": env.dataset.n_features,
            "exact_s": statistics.median(r + s for r, s in exact),
            "max_exact_s": max(r + s for r, s in exact),
            "reset_s": statistics.median(r for r, _ in exact),
            "steps_per_s": rounds / statistics.median(s for _, s in exact),
            "bayes_s": statistics.median(bayes) if bayes else float("nan"),
            "peak_mb": peak_exact}


def profile(name: str, data_dir: str | None, prior: str, threads: int) -> str:
    """A profile of one exact episode (after a warm-up reset), by phase and by function."""
    from threadpoolctl import threadpool_limits

    from ballad_env.env import BudgetAllocationEnv

    with threadpool_limits(threads):
        env = BudgetAllocationEnv(name, data_dir=data_dir, prior=prior)
        env.reset(seed=1)  # warm-up: lazy imports are not an episode's cost
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        _episode(env, 0)
        profiler.disable()
        total = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    lines = [f"Profile of one exact episode on {name} ({total:.2f} s under the profiler)",
             f"  {'phase':<36} {'seconds':>8} {'share':>6}"]
    for label, suffixes, function in PHASES:
        seconds = sum(entry[3] for (path, _, func), entry in stats.stats.items()  # type: ignore
                      if func == function and path.replace("\\", "/").endswith(suffixes))
        if seconds:
            lines.append(f"  {label:<36} {seconds:8.2f} {seconds / total:6.0%}")
    lines.append("  functions with the most own time:")
    ranked = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:8]  # type: ignore
    for (path, line, func), entry in ranked:
        short = "/".join(path.replace("\\", "/").split("/")[-2:])
        lines.append(f"    {entry[2]:7.2f} s  {func} ({short}:{line}), {entry[1]} calls")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- main
def _fresh(function: Any, *args: Any) -> Any:
    """Call ``function(*args)`` in a new process (so its peak memory is its own)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args).result()


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (f"{'data set':<18} {'n':>6} {'d':>5} {'exact s':>8} {'reset s':>8} "
              f"{'steps/s':>8} {'bayes s':>8} {'peak MB':>8}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['dataset']:<18} {r['n']:>6} {r['d']:>5} {r['exact_s']:8.2f} {r['reset_s']:8.2f}"
              f" {r['steps_per_s']:8.1f} {r['bayes_s']:8.1f} {r['peak_mb']:8.0f}")


def time_q1(names: tuple[str, ...], args: argparse.Namespace) -> float:
    """Wall time of the Q1 grid (BALLAD, All-in-AL, All-in-LR; exact search) via the runner."""
    from agents.runner import Grid, Setting, run_grid, seed_range

    grid = Grid(names, seed_range(args.q1_seeds), ("ballad", "all-in-al", "all-in-lr"),
                (Setting(prior=args.prior),))
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run_grid(grid, folder, data_dir=args.data_dir, n_jobs=args.n_jobs, progress=True)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agents.runner import dataset_names

    try:
        names = dataset_names(args.datasets, args.data_dir)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"BALLAD episodes, {args.prior} prior, {args.threads} thread(s); exact: median of "
          f"{args.repeats}, bayes ({args.bayes_calls} calls): median of {args.bayes_repeats}\n")
    rows = []
    for name in names:
        rows.append(_fresh(measure, name, args.data_dir, args.prior, args.repeats,
                           args.bayes_repeats, args.bayes_calls, args.threads))
        print(f"  measured {name}", file=sys.stderr)
    print_table(rows)
    slowest = max(rows, key=lambda r: r["exact_s"])
    worst = max(r["max_exact_s"] for r in rows)
    print(f"\nslowest exact episode: {worst:.2f} s on {slowest['dataset']} (target "
          f"{EPISODE_TARGET_S:.0f} s: {'met' if worst <= EPISODE_TARGET_S else 'missed'})")
    for r in rows:
        if r["dataset"].lower() == "kddcup99":
            verdict = "met" if r["peak_mb"] <= MEMORY_TARGET_MB else "missed"
            print(f"peak memory on KDDCup99: {r['peak_mb']:.0f} MB (target "
                  f"{MEMORY_TARGET_MB:.0f} MB: {verdict})")
    if not args.no_profile:
        print()
        print(profile(slowest["dataset"], args.data_dir, args.prior, args.threads))
    if args.q1:
        seconds = time_q1(names, args)
        print(f"\nQ1 grid ({len(names)} data sets x {args.q1_seeds} seeds x 3 agents, exact, "
              f"n_jobs={args.n_jobs}): {seconds:.0f} s (target {Q1_TARGET_S:.0f} s: "
              f"{'met' if seconds <= Q1_TARGET_S else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
