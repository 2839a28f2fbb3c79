"""Wall time to a held-out target, setup included: SB3 PPO against the torch trainers.

Each run is ``ballad-env train`` in a fresh process on the training store with a checkpoint
every ``--every`` steps. After it ends, every checkpoint's greedy policy (and the final
model's) is replayed on every cell of the held-out store and of the training store
(``Lattice.replay``): its held-out and training cost are the mean final test cost on each,
beside All-in-LR's on the same cells. A
checkpoint's wall time is its file's modification time less the moment this study started
the process, so the interpreter's start, the imports, the environments, any compile and the
rollout worker's start all count.

The runs, in order: ``cold`` (the first compiled run, on an empty cache folder: the
update compiled from nothing), ``seeds`` (seeds F..F+N-1 of every trainer, the trainers
interleaved within a seed; a compiled run there loads the cached step), then ``long`` (one
long run per ``--long-trainers``: how low a cost is reachable at all). Rows are appended
to ``<out>/checkpoints.csv`` one run at a time, and a rerun skips the runs it holds, so an
interrupted study resumes. ``--report-only`` prints the analysis (``target_table``).
With a target fixed beforehand, ``--stop-at-target`` ends a trainer's runs at the first
checkpoint at or below it (``stop_at_target``) and ``--score-until-target`` scores no
checkpoint after that one but the last: the steps and the scoring after the target add
nothing to the time to it.

    python -m scripts.studies.timings.time_to_target --train-store S --heldout-store H \\
        --out results/time_to_target
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scripts.studies.common.ppo_sizes import PROTOCOL_COMPILED, PROTOCOL_SB3
from scripts.studies.timings import target_table
from scripts.studies.timings.stop_at_target import Watch, checkpoint_steps, stopped_facts, watch

ROOT = Path(__file__).resolve().parents[3]
#: Each trainer's options: the speed protocol's (``common.ppo_sizes``); a later
#: ``--total-timesteps`` overrides the protocol's. ``split`` is the compiled trainer on its
#: two-process schedule (the sequential PPO, each process half of every minibatch).
TRAINERS = {"sb3": PROTOCOL_SB3, "compiled": PROTOCOL_COMPILED,
            "batched": ["--trainer", "batched", *PROTOCOL_COMPILED[2:]],
            "split": [*PROTOCOL_COMPILED, "--schedule", "split"]}
#: Steps of a ``seeds`` run and between its checkpoints, per trainer.
STEPS = {"sb3": 1_500_000, "compiled": 3_000_000, "batched": 3_000_000, "split": 3_000_000}
EVERY = {"sb3": 16_384, "compiled": 30_720, "batched": 30_720, "split": 30_720}
#: The table's columns: the run's, then the checkpoint's.
ROW_COLUMNS = ("phase", "trainer", "seed", "commit", "options", "compile", "load_start",
               "load_end", "setup_s", "train_s", "steps_per_s", "steps", "wall_s",
               "heldout_cost", "heldout_all_in_lr", "train_cost", "train_all_in_lr", "stopped")
TABLE = "checkpoints.csv"
#: Where the compiled step's package and inductor's cache go (``BALLAD_DATA_HOME``).
DATA_HOME_ENV, INDUCTOR_ENV = "BALLAD_DATA_HOME", "TORCHINDUCTOR_CACHE_DIR"


def commit() -> str:
    """The checkout's commit, with ``+dirty`` when tracked files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode
    return head + ("+dirty" if dirty else "")


class Cells:
    """Every cell of a store under the training store's setting, and All-in-LR's mean final
    test cost on them."""

    def __init__(self, store: str, train_store: str) -> None:
        from agents.experiments.lattice_build import store_settings
        from agents.registry import make_agent
        from ballad_env.replay.store import LatticeStore

        settings = store_settings(train_store, None, None)
        held = LatticeStore(store)
        self.lattices = [held.load(d, s, settings) for d, s in held.cells(settings)]
        if not self.lattices:
            raise ValueError(f"the store {store} has no cells of the training store's "
                             f"setting {settings.name}: build it with the same costs")
        self.all_in_lr = self.cost(make_agent("all-in-lr"))

    def cost(self, agent: Any) -> float:
        """``agent``'s mean final test cost over the cells."""
        return float(np.mean([lat.costs_along(lat.replay(agent))[-1] for lat in self.lattices]))


def finished(run: Path) -> dict[str, Any] | None:
    """The run record of a run that trained to its end (its final model saved), or None for
    one stopped at the target (its record then holds only the settings written first)."""
    record_path, model = run / f"{run.name}.json", run / f"{run.name}.zip"
    if not (record_path.exists() and model.exists()):
        return None
    record = json.loads(record_path.read_text())
    return record if "num_timesteps" in record else None


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    """A run's checkpoints and final model, by steps, then by when each was saved (a last
    checkpoint comes before the final model of the same steps). A run stopped at the target
    has no final model: its checkpoints alone."""
    saved = [(checkpoint_steps(p), p) for p in (run / "checkpoints").glob("*_steps.zip")]
    if (record := finished(run)) is not None:
        saved.append((int(record["num_timesteps"]), run / f"{run.name}.zip"))
    return sorted(saved, key=lambda point: (point[0], point[1].stat().st_mtime))


def train(argv: list[str], run: Path, env: dict[str, str],
          stop: tuple[Cells, float] | None = None) -> tuple[float, Watch | None]:
    """``ballad-env train argv`` in a fresh process (its output in ``<run>.log``): the
    moment it started, also kept in ``<run>.start`` (a resumed study evaluates from it),
    and, with ``stop`` (cells and a target cost on them), what ``watch`` saw while it
    ended the process at the first checkpoint at or below the target (its pauses also
    kept, in ``<run>.pauses``)."""
    from agents.registry import make_agent

    started = time.time()
    run.parent.mkdir(parents=True, exist_ok=True)
    with open(run.with_suffix(".log"), "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "ballad_env", "train", *argv],
                                   env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        seen = None
        if stop is not None:
            cells, target = stop
            seen = watch(process, run / "checkpoints",
                         lambda path: cells.cost(make_agent(str(path))), target)
        process.wait()
    if process.returncode and (seen is None or seen.reached is None):
        raise RuntimeError(f"ballad-env train failed ({process.returncode}): see "
                           f"{run.with_suffix('.log')}")
    if seen is not None:
        run.with_suffix(".pauses").write_text(json.dumps(seen.pauses))
    run.with_suffix(".start").write_text(repr(started))
    return started, seen


def evaluate(run: Path, started: float, cells: dict[str, Cells],
             watched: tuple[str, Watch] | None = None,
             until: tuple[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per checkpoint of a run (``ROW_COLUMNS`` less the run's own), its cost on
    each of ``cells`` (by measure). A ``watched`` run's (a measure and what ``watch`` saw)
    wall times are less its pauses before them, and the costs the watch scored on that
    measure are taken as they are. With ``until`` (a measure and a target cost), the
    checkpoints after the first at or below the target are skipped, all but the last (the
    final model, whose cost the report shows)."""
    from agents.registry import make_agent

    measure, seen = watched or ("", Watch())
    points = checkpoints(run)
    rows: list[dict[str, Any]] = []
    for index, (steps, path) in enumerate(points):
        reached = until is not None and any(r[f"{until[0]}_cost"] <= until[1] for r in rows)
        if reached and index < len(points) - 1:
            continue
        agent = make_agent(str(path))
        saved = path.stat().st_mtime
        rows.append({"steps": steps, "wall_s": saved - started - seen.paused_before(saved),
                     **{f"{m}_cost": seen.costs[path] if m == measure and path in seen.costs
                        else c.cost(agent) for m, c in cells.items()},
                     **{f"{m}_all_in_lr": c.all_in_lr for m, c in cells.items()}})
    return rows


def run_facts(run: Path, started: float, rows: list[dict[str, Any]], watched: bool = False
              ) -> dict[str, Any]:
    """What the run's JSON says: training seconds, steps a second, how the step was had,
    and the setup (wall time to the final model less the training clock); for a watched
    run (its clock counts its pauses) or one stopped at the target (no final record), what
    its checkpoints' wall times say (``stopped_facts``)."""
    record = finished(run)
    if watched or record is None:
        return {"compile": "", "stopped": record is None,
                **stopped_facts([(r["steps"], r["wall_s"]) for r in rows])}
    update = record.get("update") or {}
    how = ("built" if update.get("compile_built") else "loaded" if update.get("compiled")
           else "")
    return {"compile": how, "train_s": record["train_seconds"],
            "steps_per_s": record["num_timesteps"] / record["train_seconds"],
            "setup_s": rows[-1]["wall_s"] - record["train_seconds"], "stopped": False}


def plan(args: argparse.Namespace) -> list[tuple[str, str, int, int, int]]:
    """Every run of the study in order: (phase, trainer, seed, steps, checkpoint every)."""
    runs = []
    if args.cold and "compiled" in args.trainers:
        runs.append(("cold", "compiled", 0, args.steps["compiled"], args.every["compiled"]))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    runs += [("seeds", t, s, args.steps[t], args.every[t]) for s in seeds for t in args.trainers]
    return runs + [("long", t, 0, args.long_steps, args.long_every) for t in args.long_trainers]


def run_study(args: argparse.Namespace) -> Path:
    """Every planned run not yet in the table: trained, evaluated, appended."""
    out, table = Path(args.out), Path(args.out) / TABLE
    done = set()
    if table.exists():
        held_rows = pd.read_csv(table)
        if tuple(held_rows.columns) != ROW_COLUMNS:
            raise SystemExit(f"{table} has an older study's columns: give a new --out")
        done = set(zip(held_rows["phase"], held_rows["trainer"], held_rows["seed"], strict=True))
    cache = Path(args.cache_dir or out / "cache")
    env = {**os.environ, DATA_HOME_ENV: str(cache)}
    env.pop(INDUCTOR_ENV, None)
    cells = {"heldout": Cells(args.heldout_store, args.train_store),
             "train": Cells(args.train_store, args.train_store)}
    for phase, trainer, seed, steps, every in plan(args):
        if (phase, trainer, seed) in done:
            continue
        if phase == "cold" and cache.exists() and any(cache.iterdir()):
            raise SystemExit(f"the cold run needs an empty cache: remove {cache} (or pass "
                             "--no-cold)")
        name = f"{phase}-{trainer}-s{seed}"
        run = out / "runs" / name
        options = [*TRAINERS[trainer], *args.options.get(trainer, "").split(),
                   *args.train_options.split()]
        argv = [*options, "--replay-store", args.train_store, "--total-timesteps", str(steps),
                "--seed", str(seed), "--checkpoint-freq", str(every), "--output-dir",
                str(out / "runs"), "--run-name", name, "--overwrite", "--no-progress"]
        load_start, seen = os.getloadavg()[0], None
        if (run / f"{name}.zip").exists() and run.with_suffix(".start").exists():
            started = float(run.with_suffix(".start").read_text())  # trained, not evaluated
            if (pauses := run.with_suffix(".pauses")).exists():
                seen = Watch(pauses=[(a, b) for a, b in json.loads(pauses.read_text())])
        else:
            print(f"{name}: {steps:,} steps (load {load_start:.1f})", flush=True)
            stop = ((cells[args.measure], args.target_cost) if trainer in args.stop_at_target
                    else None)
            started, seen = train(argv, run, env, stop)
        load_end = os.getloadavg()[0]
        rows = evaluate(run, started, cells, (args.measure, seen) if seen else None,
                        (args.measure, args.target_cost) if args.score_until_target else None)
        facts = {"phase": phase, "trainer": trainer, "seed": seed, "commit": args.commit,
                 "options": " ".join(options), "load_start": load_start,
                 "load_end": load_end, **run_facts(run, started, rows, seen is not None)}
        frame = pd.DataFrame([{**facts, **r} for r in rows], columns=list(ROW_COLUMNS))
        frame.to_csv(table, mode="a", header=not table.exists(), index=False)
        print(f"{name}: {facts['steps_per_s']:,.0f} steps/s, setup {facts['setup_s']:.1f} s, "
              + ", ".join(f"best {m} {frame[f'{m}_cost'].min():.4f} (All-in-LR "
                          f"{c.all_in_lr:.4f})" for m, c in cells.items()), flush=True)
    return table


def report(table: pd.DataFrame, fraction: float, measure: str = "heldout", seed: int = 0,
           target_cost: float | None = None) -> str:
    """The target (``target_cost``, or ``fraction`` of the best improvement), each phase
    and trainer's wall time to it (median over seeds with a 95% bootstrap interval; training
    seconds are wall less the run's setup), and the ratio of the compiled trainer's times
    to SB3's."""
    rng = np.random.default_rng(seed)
    target = target_table.choose_target(table, fraction, measure, target_cost)
    times = target_table.times_to_target(table, target.cost, measure)
    runs = table.groupby(list(target_table.KEY), sort=False).agg(
        setup_s=("setup_s", "first"), steps_per_s=("steps_per_s", "first"),
        final=(f"{measure}_cost", "last"), best=(f"{measure}_cost", "min"),
        load=("load_end", "first")).reset_index()
    times = times.merge(runs, on=list(target_table.KEY))
    times["train_to_target_s"] = times["wall_s"] - times["setup_s"]
    lines = [f"commit(s) {', '.join(table['commit'].unique())}; measure: {measure} cost; "
             f"All-in-LR's {table[f'{measure}_all_in_lr'].iloc[0]:.4f}",
             f"target {target.cost:.4f}{' (given)' if target.given else ''}: "
             f"{target.reference} ({target.reference_cost:.4f}) less "
             f"{target.fraction:.3g} x the best reduction from it (best checkpoint "
             f"{target.best_cost:.4f})",
             "| phase | trainer | seeds | reached | wall s to target, median [95%] | "
             "training s to it (median) | setup s (median) | steps to it (median) | "
             "steps/s (median) | final cost (median) | load |", "|---|" * 1 + "---|" * 10]
    summary = target_table.summary(times, rng)
    for row in summary.itertuples():
        mine = times[(times["phase"] == row.phase) & (times["trainer"] == row.trainer)]
        lines.append(f"| {row.phase} | {row.trainer} | {row.seeds} | {row.reached} | "
                     f"{row.median_s:.1f} [{row.low_s:.1f}, {row.high_s:.1f}] | "
                     f"{mine['train_to_target_s'].median():.1f} | {mine['setup_s'].median():.1f} | "
                     f"{row.median_steps:,.0f} | {mine['steps_per_s'].median():,.0f} | "
                     f"{mine['final'].median():.4f} | "
                     f"{mine['load'].min():.1f}-{mine['load'].max():.1f} |")
    lines += _ratios(times, rng)
    return "\n".join(lines)


def _ratios(times: pd.DataFrame, rng: np.random.Generator) -> list[str]:
    """Each torch trainer's (and the cold run's) median wall time to the target over SB3's
    seeds', with its interval, against the goal of 1/5."""
    def wall(phase: str, trainer: str) -> np.ndarray:
        pick = (times["phase"] == phase) & (times["trainer"] == trainer)
        return times.loc[pick, "wall_s"].to_numpy()

    sb3 = wall("seeds", "sb3")
    if not len(sb3) or not np.isfinite(np.median(sb3)):
        return ["SB3's median run never reached the target: no ratio"] if len(sb3) else []
    lines = []
    for phase, trainer in [("seeds", "compiled"), ("seeds", "split"), ("seeds", "batched"),
                           ("cold", "compiled")]:
        if len(mine := wall(phase, trainer)):
            ratio, low, high = target_table.ratio_interval(mine, sb3, rng)
            lines.append(f"{phase} {trainer} / SB3 seeds: {ratio:.3f} [{low:.3f}, {high:.3f}] "
                         "(goal <= 0.2)")
    return lines


def pairs(values: Sequence[str]) -> dict[str, str]:
    """``trainer=value`` words as a dict; a word without ``=`` or an unknown trainer is a
    usage error."""
    found = {}
    for word in values:
        trainer, sep, value = word.partition("=")
        if not sep or trainer not in TRAINERS:
            raise argparse.ArgumentTypeError(f"{word!r}: write TRAINER=VALUE with TRAINER one "
                                             f"of {', '.join(TRAINERS)}")
        found[trainer] = value
    return found


def build_parser() -> argparse.ArgumentParser:
    """The study's options, each with its help."""
    from agents.experiments.cli import HelpFormatter

    parser = argparse.ArgumentParser(prog="python -m scripts.studies.timings.time_to_target",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--train-store", help="the lattice store trained on")
    parser.add_argument("--heldout-store", help="the lattice store of the held-out cells")
    parser.add_argument("--out", required=True, help="the study's folder (table, runs, cache)")
    parser.add_argument("--trainers", nargs="+", choices=TRAINERS, default=["sb3", "compiled"],
                        help="trainers of the seeds phase")
    parser.add_argument("--seeds", type=int, default=5, help="how many seeds of each trainer")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first of the seeds (a pilot runs on seeds the study does not)")
    parser.add_argument("--steps", nargs="+", default=[], metavar="TRAINER=N",
                        help=f"steps of a seeds run (default {STEPS})")
    parser.add_argument("--every", nargs="+", default=[], metavar="TRAINER=N",
                        help=f"steps between checkpoints (default {EVERY})")
    parser.add_argument("--options", nargs="+", default=[], metavar="TRAINER=OPTIONS",
                        help="more ballad-env train options of a trainer, e.g. "
                             "'compiled=--batch-size 2048' (after the protocol's)")
    parser.add_argument("--train-options", default="",
                        help="ballad-env train options of every run, e.g. the store's costs "
                             "'--c-fn 10'")
    parser.add_argument("--long-trainers", nargs="*", choices=TRAINERS, default=["compiled"],
                        help="trainers of the long run")
    parser.add_argument("--long-steps", type=int, default=10_000_000,
                        help="steps of the long run")
    parser.add_argument("--long-every", type=int, default=307_200,
                        help="steps between the long run's checkpoints")
    parser.add_argument("--no-cold", dest="cold", action="store_false",
                        help="skip the cold-cache compiled run")
    parser.add_argument("--cache-dir", default=None,
                        help="the compiled step's cache folder (default <out>/cache)")
    parser.add_argument("--fraction", type=float, default=0.95,
                        help="share of the best improvement the target asks (0: "
                             "All-in-LR's cost)")
    parser.add_argument("--target-cost", type=float, default=None,
                        help="the target cost itself (fixed from a pilot), instead of "
                             "--fraction of the best improvement")
    parser.add_argument("--measure", choices=target_table.MEASURES, default="heldout",
                        help="the cost the target is set on: the held-out or the training cells'")
    parser.add_argument("--stop-at-target", nargs="*", choices=["sb3"], default=[],
                        metavar="TRAINER",
                        help="end these trainers' runs once a checkpoint reaches "
                             "--target-cost on --measure (each scored while the run is "
                             "paused; its wall times are less the pauses). SB3 only: it "
                             "trains in one process, where the torch trainers' second "
                             "process would run on while the first is paused")
    parser.add_argument("--score-until-target", action="store_true",
                        help="score a run's checkpoints only up to the first at or below "
                             "--target-cost on --measure, and its last (the time to the "
                             "target needs no more; shortens the study)")
    parser.add_argument("--report-only", action="store_true",
                        help="print the analysis of the table, run nothing")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Run what the table lacks (unless ``--report-only``), then print the report."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.steps = {**STEPS, **{k: int(v) for k, v in pairs(args.steps).items()}}
        args.every = {**EVERY, **{k: int(v) for k, v in pairs(args.every).items()}}
        args.options = pairs(args.options)
    except (argparse.ArgumentTypeError, ValueError) as error:
        parser.error(str(error))
    table = Path(args.out) / TABLE
    if not args.report_only:
        if not (args.train_store and args.heldout_store):
            parser.error("--train-store and --heldout-store are needed to run the study")
        if (args.stop_at_target or args.score_until_target) and args.target_cost is None:
            parser.error("--stop-at-target and --score-until-target need --target-cost "
                         "(the target fixed beforehand)")
        if args.stop_at_target and not hasattr(signal, "SIGSTOP"):
            parser.error("--stop-at-target pauses runs with SIGSTOP, which this system "
                         "lacks: leave it out (the runs then train their whole budget)")
        args.commit = commit()
        run_study(args)
    if not table.exists():
        parser.error(f"{table} does not exist: run the study first")
    print(report(pd.read_csv(table), args.fraction, args.measure,
                 target_cost=args.target_cost))


if __name__ == "__main__":
    main()
