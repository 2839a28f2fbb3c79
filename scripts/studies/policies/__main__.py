"""The learned-policy study: do RL allocation policies beat BALLAD on data sets they never saw?

Four steps, each a subcommand, each reading only what the previous one wrote (the analysis
is ``scripts.studies.policies.study``):

* ``split``    12 training / 6 held-out benchmarks by a stated rule -> docs/policy_split.json
* ``train``    PPO and MaskablePPO x rewards cost, val_cost x 3 seeds on the 12 training sets
               (``training.train`` in worker processes, ``--jobs`` at a time)
* ``evaluate`` the trained policies and the baselines on the 6 held-out sets x 10 seeds,
               one tidy row per (data set, seed, agent, round) -> results/policy_study/rounds/;
               agents added since the last run are run on the cells already finished
* ``report``   tables under <study-dir>/tables/policy_*, figures under <study-dir>/figures/
               policy_* (``--docs PATH`` elsewhere; ``--update-docs`` into the repository's
               docs/, the committed report)

``train`` and ``evaluate`` take the settings options (``--c-fn 10``, ``--prior knn``, ...);
evaluation refuses policies trained under other settings, so give both steps the same
options (and such a study its own ``--study-dir``).

Example::

    python -m scripts.studies.policies split
    python -m scripts.studies.policies train --timesteps 3000 --jobs 2
    python -m scripts.studies.policies evaluate --seeds 10 --jobs 2
    python -m scripts.studies.policies report --update-docs
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    run_job,
)
from agents.experiments.stores.results import RunError, writable_folder
from agents.policy_files import add_trust_pickle_argument
from agents.reports.tables import markdown_table
from ballad_env.data.bundled import BUNDLED_DIR
from ballad_env.settings.cli import add_settings_arguments, settings_from_args
from scripts.studies.common.policy_runs import STUDY_OPTIONS, StudyError, trained_policies
from scripts.studies.policies import study

ROOT = Path(__file__).resolve().parents[3]


def data_dir(arg: str | None) -> Path:
    """The benchmark folder: the option, else $BALLAD_DATA_DIR, else the paper's 18 (bundled
    with the package)."""
    if arg:
        return Path(arg)
    if os.environ.get("BALLAD_DATA_DIR"):
        return Path(os.environ["BALLAD_DATA_DIR"])
    return BUNDLED_DIR


def cmd_split(args: argparse.Namespace) -> None:
    manifest = json.loads((data_dir(args.data_dir) / "manifest.json").read_text())
    split = study.make_split(manifest, n_blocks=args.n_blocks)
    study.write_split(split, args.split_file, force=args.force)
    print(f"train    {split['train']}\nheld out {split['held_out']}\n-> {args.split_file}")


def cmd_train(args: argparse.Namespace) -> None:
    plan = study.TrainPlan(
        settings=settings_from_args(args)[0], algos=tuple(args.algos), rewards=tuple(args.rewards),
        train_seeds=args.train_seeds, timesteps=args.timesteps, n_envs=args.n_envs,
        vec_env=args.vec_env, n_steps=args.n_steps, learning_rate=args.learning_rate)
    failed = study.train_policies(plan, args.split_file, data_dir(args.data_dir),
                                  args.study_dir, jobs=args.jobs)
    if failed:
        raise StudyError(f"{len(failed)} runs failed (see {args.study_dir / 'logs'}): "
                               f"{', '.join(failed)}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    split = json.loads(args.split_file.read_text())
    specs = [*args.baselines, *(str(p) for p in trained_policies(args.study_dir))]
    study.evaluate(args.study_dir, split["held_out"], args.seeds, specs,
                   data_dir(args.data_dir), settings_from_args(args)[0], jobs=args.jobs,
                   progress=not args.no_progress, trust_pickle=args.trust_pickle)


def report_folder(args: argparse.Namespace) -> Path:
    """Where the report's tables/ and figures/ go: ``--docs``, the repository's docs/ with
    ``--update-docs``, else the study folder."""
    if args.update_docs:
        return ROOT / "docs"
    return args.docs if args.docs is not None else args.study_dir


def cmd_report(args: argparse.Namespace) -> None:
    docs = writable_folder(report_folder(args), "--docs")
    frames = study.write_report(args.study_dir, docs / "tables", docs / "figures",
                                prefix=args.prefix, window=args.window)
    head = frames["heldout_summary"]
    print(markdown_table(head[["agent", "runs", "final_cost", "final_cost_sd_seeds", "mean_cost",
                               "vs_ballad_pct", "diff_ci_low", "diff_ci_high", "win",
                               "al_share", "switches"]], index=False))
    print(markdown_table(frames["heldout_by_dataset"], index=False))
    print(markdown_table(frames["by_training_seed"], index=False))
    print(frames["training_time"].to_string(index=False))


def build_parser() -> argparse.ArgumentParser:
    """Subcommands and their options, each with a one-line help."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--data-dir", default=None, help="benchmark folder ($BALLAD_DATA_DIR)")
    p.add_argument("--study-dir", type=Path, default=ROOT / "results" / "policy_study",
                   help="folder of the study's models, logs and round table")
    p.add_argument("--split-file", type=Path, default=ROOT / "docs" / "policy_split.json",
                   help="the split's JSON (written by split, read by train and evaluate)")
    sub = p.add_subparsers(dest="command", required=True, help="the step to run")
    s = sub.add_parser("split", help="write the split of training and held-out data sets",
                       formatter_class=HelpFormatter)
    s.add_argument("--force", action="store_true", help="overwrite a different split")
    s.add_argument("--n-blocks", type=int, default=study.N_BLOCKS,
                   help="size blocks, one held-out data set each")
    t = sub.add_parser("train", help="train the study's policies",
                       formatter_class=HelpFormatter)
    t.add_argument("--timesteps", type=int, default=1200, help="environment steps per run")
    t.add_argument("--train-seeds", type=int, default=3, help="training seeds per setting")
    t.add_argument("--algos", nargs="+", default=list(study.ALGOS), help="algorithms to train")
    t.add_argument("--rewards", nargs="+", default=list(study.REWARDS), help="rewards to train on")
    t.add_argument("--jobs", type=int, default=2, help="training runs at a time")
    t.add_argument("--n-envs", type=int, default=2, help="environments per run")
    t.add_argument("--vec-env", default="dummy",
                   help="dummy or subproc (see docs/studies/POLICIES.md)")
    t.add_argument("--n-steps", type=int, default=30, help="PPO rollout per env (= minibatch)")
    t.add_argument("--learning-rate", type=float, default=1e-3, help="PPO step size")
    add_settings_arguments(t, only=STUDY_OPTIONS)
    e = sub.add_parser("evaluate", help="evaluate policies and baselines on held-out data",
                       formatter_class=HelpFormatter)
    e.add_argument("--seeds", type=int, default=10, help="evaluation seeds per data set")
    e.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    e.add_argument("--baselines", nargs="+", default=list(study.BASELINES),
                   help="registered agents evaluated next to the policies")
    add_execution_arguments(e, progress=True)
    add_trust_pickle_argument(e)
    add_settings_arguments(e, only=STUDY_OPTIONS)
    r = sub.add_parser("report", help="tables and figures",
                       formatter_class=HelpFormatter)
    r.add_argument("--window", type=int, default=10, help="episodes in the curves' rolling mean")
    r.add_argument("--prefix", default="policy", help="name prefix of tables and figures")
    where = r.add_mutually_exclusive_group()
    where.add_argument("--docs", type=Path, default=None,
                       help="folder whose tables/ and figures/ receive the report (default: "
                            "--study-dir)")
    where.add_argument("--update-docs", action="store_true",
                       help="write the report into the repository's docs/ (the committed one)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one step; a step that cannot go on safely says why and returns 2."""
    args = build_parser().parse_args(argv)
    commands = {"split": cmd_split, "train": cmd_train, "evaluate": cmd_evaluate,
                "report": cmd_report}
    try:
        commands[args.command](args)
    except (StudyError, RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0



if __name__ == "__main__":
    sys.exit(run_job(main))
