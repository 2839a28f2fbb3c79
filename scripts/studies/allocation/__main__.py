"""The allocator that takes the room: the allocation study (docs/studies/ALLOCATION.md).

Builds the lattices of the pool of ``docs/allocation_split.json`` at three cost levels
(resumable, ``<out>/lattices``), chooses each family's settings by cross validation on the
training data sets, refits them, replays every agent on the held-out data sets and writes
the tables (``allocation_*``) and the figure. The reserved data sets are refused by name.
``--agents all`` adds the share of the room of every registered deployable agent (all but
the oracle) on the held-out cells (``allocation_agents``).

    python -m scripts.studies.allocation --n-jobs 2
    python -m scripts.studies.allocation --agents all --update-docs --write-params
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
from ballad_env.replay.store import StoreError
from scripts.studies.common.options import REPO

PARAMS = REPO / "agents" / "allocation_params.json"


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "results" / "allocation",
                   help="results folder: lattices and (unless --update-docs) the tables")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder of data files (default: built-in and ADBench by name)")
    p.add_argument("--agents", nargs="+", default=[],
                   help="registered agents scored on the held-out cells; 'all': every "
                        "deployable one")
    p.add_argument("--update-docs", action="store_true",
                   help="write tables/ and figures/ into the repository's docs/")
    p.add_argument("--write-params", action="store_true",
                   help=f"write the fitted parameters into {PARAMS.relative_to(REPO)}")
    p.add_argument("--rl-steps", type=int, default=0,
                   help="train (or reuse from --out) a MaskablePPO policy per cost level with "
                        "this many steps and score it beside the fitted families (0: no RL)")
    p.add_argument("--reuse-cv", action="store_true",
                   help="read the cross validations back from --out where a run wrote them")
    p.add_argument("--second-round", action="store_true",
                   help="the second round instead (docs/studies/ALLOCATION.md, 'Second "
                        "round'): wider choices by training cross validation on the lattices "
                        "of --out, then one held-out replay")
    p.add_argument("--rl-cv-steps", type=int, default=0,
                   help="with --second-round: cross-validate the RL family too, training "
                        "MaskablePPO per fold and cost level with this many steps (0: leave it "
                        "out)")
    add_execution_arguments(p, n_jobs=1, scheduler=True)
    return p


def second_round(args: argparse.Namespace) -> int:
    """The second round: its tables, and with --write-params its packaged entries."""
    from scripts.studies.allocation.second_round_report import (
        run_second_round,
        update_params,
        write_second_round_tables,
    )

    try:
        r2 = run_second_round(args.out, rl_steps=args.rl_cv_steps,
                              log=lambda m: print(m, flush=True))
    except (FileNotFoundError, ValueError, RunError, StoreError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.write_params:
        print(f"{PARAMS}: allocator = {update_params(PARAMS, r2)}")
    docs = REPO / "docs" if args.update_docs else args.out
    for path in write_second_round_tables(r2, docs / "tables"):
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.second_round:
        return second_round(args)
    from scripts.studies.allocation.report import (
        deployable_agents,
        run_study,
        write_tables,
    )

    agents = deployable_agents() if args.agents == ["all"] else list(args.agents)
    try:
        study = run_study(args.out, data_dir=None if args.data_dir is None else
                          str(args.data_dir), n_jobs=args.n_jobs, scheduler=args.scheduler,
                          write_params=PARAMS if args.write_params else None, agents=agents,
                          reuse_cv=args.reuse_cv, rl_steps=args.rl_steps,
                          log=lambda m: print(m, flush=True))
    except (FileNotFoundError, ValueError, RunError, StoreError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    docs = REPO / "docs" if args.update_docs else args.out
    for path in write_tables(study, docs / "tables", docs / "figures"):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(run_job(main))
