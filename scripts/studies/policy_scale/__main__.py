"""The policy study at scale: PPO, DQN and MaskablePPO trained on 10^5 replayed episodes.

Three subcommands, each reading what the previous one wrote (the logic is
``scripts.studies.policy_scale.study``; the stores come from ``ballad-env lattices``):

* ``train``    every (algorithm, reward, observation) x ``--train-seeds`` seeds on the
               training store (``training.train`` on the replay store in worker processes,
               ``--jobs`` at a time; runs with a saved model are skipped)
* ``evaluate`` the policies, BALLAD, All-in-AL, All-in-LR, the one-step oracle and the
               hindsight optimum replayed on every cell of the evaluation store (seeds the
               training store lacks; ``--seen-seeds N`` adds N seeds the policies trained
               on) -> <study-dir>/rounds/, one row per (data set, seed, agent, round);
               agents already there are skipped
* ``report``   tables <docs>/tables/policy_scale_*, figures <docs>/figures/policy_scale_*

``train`` and ``evaluate`` take the settings options (``--c-fn 10``, ``--prior knn``, ...):
give both the same ones, and the stores built under them.

Example::

    ballad-env lattices --out stores/train --datasets-from docs/policy_split.json \\
        --seeds 50 --first-seed 1000
    ballad-env lattices --out stores/eval --seeds 10 --datasets <all 18>
    python -m scripts.studies.policy_scale train --train-store stores/train
    python -m scripts.studies.policy_scale evaluate --train-store stores/train \
        --eval-store stores/eval
    python -m scripts.studies.policy_scale report --update-docs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    run_job,
)
from agents.experiments.stores.results import RunError
from agents.policy_files import add_trust_pickle_argument
from ballad_env.replay.store import StoreError
from ballad_env.settings.cli import add_settings_arguments, settings_from_args
from scripts.studies.common.policy_runs import STUDY_OPTIONS, StudyError
from scripts.studies.policy_scale import study as scale

ROOT = Path(__file__).resolve().parents[3]


def run_spec(text: str) -> tuple[str, str, str]:
    """``algo:reward:observation`` as a tuple (a clear error for another shape)."""
    parts = tuple(text.split(":"))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: give a run as algo:reward:observation, "
                                         "e.g. maskable_ppo:cost:v1")
    return parts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("step", choices=("train", "evaluate", "report"))
    p.add_argument("--study-dir", type=Path, default=ROOT / "results" / "policy_scale",
                   help="where policies, logs and the evaluated rounds go")
    p.add_argument("--split-file", type=Path, default=ROOT / "docs" / "policy_split.json",
                   help="the training / held-out split")
    p.add_argument("--train-store", type=Path, help="lattice store of the training cells")
    p.add_argument("--eval-store", type=Path, help="evaluate: lattice store of unseen cells")
    p.add_argument("--runs", nargs="+", type=run_spec, default=list(scale.DEFAULT_RUNS),
                   help="train: runs as algo:reward:observation (default: maskable_ppo, ppo "
                        "and dqn on cost, v0)")
    p.add_argument("--train-seeds", type=int, default=3, help="train: seeds per run")
    p.add_argument("--episodes", type=int, default=100_000, help="train: episodes per run")
    p.add_argument("--n-envs", type=int, default=16, help="train: in-process workers per run")
    p.add_argument("--jobs", type=int, default=1, help="train: runs at a time")
    p.add_argument("--seen-seeds", type=int, default=0,
                   help="evaluate: also the first N stored seeds of each training set, the "
                        "cells policies trained on (split 'training-cells')")
    p.add_argument("--docs", type=Path, default=None,
                   help="report: folder receiving tables/ and figures/ (default: the study dir)")
    p.add_argument("--prefix", default="policy_scale",
                   help="report: name prefix of the tables and figures")
    p.add_argument("--update-docs", action="store_true",
                   help="report: write into the repository's docs/ (the committed report)")
    add_execution_arguments(p, progress=True)
    add_trust_pickle_argument(p)
    add_settings_arguments(p, only=STUDY_OPTIONS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one step; a missing store or an unsafe step returns 2 with the reason."""
    args = parse_args(argv)
    settings = settings_from_args(args)[0]
    try:
        if args.step in ("train", "evaluate") and args.train_store is None:
            raise StudyError(f"{args.step} needs --train-store")
        if args.step == "train":
            plan = scale.ScalePlan(args.train_store, args.split_file, runs=tuple(args.runs),
                                   train_seeds=args.train_seeds, episodes=args.episodes,
                                   n_envs=args.n_envs, settings=settings)
            failed = scale.train_policies(plan, args.study_dir, jobs=args.jobs)
            if failed:
                raise StudyError(f"runs failed (logs in {args.study_dir / 'logs'}): {failed}")
        elif args.step == "evaluate":
            if args.eval_store is None:
                raise StudyError("evaluate needs --eval-store")
            added = scale.evaluate(args.study_dir, args.eval_store, args.split_file,
                                   args.train_store, settings=settings,
                                   seen_seeds=args.seen_seeds,
                                   progress=not args.no_progress,
                                   trust_pickle=args.trust_pickle)
            print(f"{added} paths added to {args.study_dir / 'rounds'}")
        else:
            docs = ROOT / "docs" if args.update_docs else (args.docs or args.study_dir)
            frames = scale.write_report(args.study_dir, docs / "tables", docs / "figures",
                                        prefix=args.prefix)
            print(frames["summary"].round(4).to_string(index=False))
    except (StudyError, StoreError, RunError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0



if __name__ == "__main__":
    sys.exit(run_job(main))
