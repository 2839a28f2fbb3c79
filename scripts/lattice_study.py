"""How far are allocation rules from the best allocation? The lattice study (LATTICE.md).

For every data set, seed and prior, one lattice gives the test cost of every state; agents
are replayed on it and scored against the hindsight-optimal path, the fixed LR-then-AL
splits and the one-step oracle (``agents.experiments.lattice_study`` has the analysis).

Results are resumable: each finished cell (data set, seed, prior) leaves a folder under
``<out>/cells`` recording its agents and source; a rerun skips finished cells, recomputes
those missing a requested agent and refuses cells of other source code. ``--report-only``
rebuilds the tables (``docs/tables/lattice_*``) and figures (``docs/figures/lattice_*.png``)
from the files alone.

    .venv/bin/python scripts/lattice_study.py --n-jobs 2
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from agents.experiments.grid import check_agent
from agents.experiments.lattice_study import STUDY_AGENTS, StudyOptions, run_study, write_report
from agents.experiments.store import RunError
from ballad_env.settings import add_settings_arguments

REPO = Path(__file__).resolve().parents[1]


def parse_options(argv: list[str] | None = None) -> StudyOptions:
    """Command-line options; defaults reproduce LATTICE.md."""
    default_data = os.environ.get("BALLAD_DATA_DIR") or REPO.parent / "shared" / "benchmarks"
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=Path(default_data),
                   help="folder of <Name>.npz benchmark files")
    p.add_argument("--out", type=Path, default=REPO / "results" / "lattice_study",
                   help="results folder (tidy files)")
    p.add_argument("--docs", type=Path, default=REPO / "docs", help="where tables/figures go")
    p.add_argument("--datasets", nargs="*", default=[],
                   help="data set names (default: every .npz in --data-dir)")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0 .. seeds-1 per data set")
    p.add_argument("--agents", nargs="+", default=list(STUDY_AGENTS),
                   help="registered agent names to replay on every lattice")
    p.add_argument("--n-jobs", type=int, default=2, help="worker processes")
    p.add_argument("--crosscheck", type=int, default=1,
                   help="cells per prior re-run through the real environment (smallest data)")
    p.add_argument("--figure-dataset", default="Cardiotocography",
                   help="data set whose seed-0 lattice is drawn")
    p.add_argument("--report-only", action="store_true",
                   help="skip computing; rebuild tables and figures from the results")
    add_settings_arguments(p, several=True, only=["prior"],
                           several_defaults={"prior": ["iforest", "knn"]})
    args = vars(p.parse_args(argv))
    args["priors"] = args.pop("prior")
    options = StudyOptions(**args)
    if not options.datasets:
        options.datasets = sorted(path.stem for path in options.data_dir.glob("*.npz"))
    return options


def main(argv: list[str] | None = None) -> int:
    """Compute the missing cells (unless ``--report-only``), then write tables and figures."""
    options = parse_options(argv)
    try:
        for name in options.agents:
            check_agent(name)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        options.out.mkdir(parents=True, exist_ok=True)
        if not options.report_only:
            run_study(options)
        write_report(options)
    except RunError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
