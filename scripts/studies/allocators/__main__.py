"""Can a deployable allocator beat All-in-LR? The allocator study (docs/studies/ALLOCATORS.md).

Builds (or reuses) one lattice per data set, seed, prior and cost setting, in a lattice
store under ``<out>/lattices``; replays every allocator and parameter candidate on them
through the harness's executor (a results store under ``<out>/replays``); tunes the new
allocators on the training data sets of ``docs/policy_split.json`` and reports on the
held-out ones and by leave-three-out folds.
Both steps resume: finished lattices and replays are kept (delete ``<out>/replays`` after
changing an allocator or a grid). Tables go to ``<out>/tables``, or with ``--update-docs``
to ``docs/tables/allocators_*``.

    python -m scripts.studies.allocators                  # compute + report
    python -m scripts.studies.allocators --update-docs    # the committed tables
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
from agents.experiments.stores.results import RunError
from agents.reports.tables import write_table
from ballad_env.data.bundled import BUNDLED_DIR
from scripts.studies.allocators import (
    COST_SETTINGS,
    PRIORS,
    build_lattices,
    candidates,
    compute_replays,
    detection_rounds,
    leave_three_out_folds,
    paired_change_frame,
    paired_change_stats,
    report_tables,
    trait_table,
)
from scripts.studies.common.options import REPO

TITLES = {
    "allocators_heldout": "Allocators tuned on the 12 training data sets, on the 6 held-out ones",
    "allocators_cv": "Allocators by leave-three-out folds, on all 18 data sets",
    "allocators_goal": "The goal: cost and regret relative to All-in-LR (mean over both priors)",
    "allocators_params": "Parameters chosen (training sets; each leave-three-out fold)",
    "allocators_per_dataset": "Mean cost per data set (leave-three-out)",
    "allocators_signals": "Share of states where a signal points to the better action",
    "allocators_paired": "Paired validation-sample change of an AL round against its test change",
    "allocators_detection": "AL rounds needed to tell the sign of AL's mean paired effect at 2 SE",
}


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    default_data = os.environ.get("BALLAD_DATA_DIR") or BUNDLED_DIR
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--data-dir", type=Path, default=Path(default_data),
                   help="folder of <Name>.npz benchmark files")
    p.add_argument("--out", type=Path, default=REPO / "results" / "allocator_study",
                   help="results folder: lattices, replays and (unless --update-docs) tables")
    p.add_argument("--update-docs", action="store_true",
                   help="write the tables into the repository's docs/tables")
    p.add_argument("--costs", nargs="+", default=list(COST_SETTINGS), choices=list(COST_SETTINGS),
                   help="setting tags: cost settings, and al-random (default costs, random AL "
                        "queries); default: all")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    p.add_argument("--priors", nargs="+", default=list(PRIORS), help="priors (default: both)")
    p.add_argument("--split", type=Path, default=REPO / "docs" / "policy_split.json",
                   help="the training / held-out split of the data sets")
    add_execution_arguments(p, n_jobs=1, scheduler=True)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    split = json.loads(args.split.read_text())
    names = sorted(split["rows"], key=split["rows"].get)
    seeds = range(args.seeds)
    try:
        build_lattices(args.out, names, seeds, args.priors, args.costs, str(args.data_dir),
                       progress=True)
        paths, signals = compute_replays(args.out, args.costs, args.priors, names, seeds,
                                         candidates(), log=lambda m: print(m, flush=True),
                                         n_jobs=args.n_jobs, scheduler=args.scheduler)
    except (FileNotFoundError, ValueError, RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    traits = trait_table(args.out, args.costs, args.priors, names, seeds)
    tables = report_tables(paths, signals, split["train"], split["held_out"],
                           leave_three_out_folds(names), traits)
    paired = paired_change_frame(args.out, args.costs, args.priors, names, seeds)
    tables["allocators_paired"] = paired_change_stats(paired)
    tables["allocators_detection"] = detection_rounds(paired)
    folder = REPO / "docs" / "tables" if args.update_docs else args.out / "tables"
    for stem, frame in tables.items():
        print(write_table(frame, folder, stem, title=TITLES[stem], index=False))
    return 0



if __name__ == "__main__":
    sys.exit(run_job(main))
