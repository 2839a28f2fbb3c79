"""SADAL's published code on SADAL's splits: episodes into a results folder, or a fixture.

Run it from a throw-away Python that has the published files' packages (never this
project's environment: scikit-optimize, seaborn and matplotlib are no dependency of it)::

    python -m venv /tmp/sadal-venv && /tmp/sadal-venv/bin/pip install -e . \\
        scikit-optimize seaborn matplotlib
    # episodes (resumable), SADAL's choice and both branches forced
    /tmp/sadal-venv/bin/python scripts/sadal_published.py episodes \\
        --sadal-py path/to/SADAL.py --ssif-py path/to/ssif.py \\
        --datasets WBC Glass --seeds 3 --output results/sadal_published
    # the test fixture (the published SSIF; minutes)
    /tmp/sadal-venv/bin/python scripts/sadal_published.py fixture \\
        --sadal-py path/to/SADAL.py --ssif-py path/to/ssif.py \\
        --fixture tests/data/sadal_published_trajectory.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from agents.experiments.studies.published_code import PublishedCodeError
from agents.experiments.studies.sadal_published import (
    STRATEGIES,
    load_sadal_published,
    record_trajectory,
    run_sadal_published,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("command", choices=["episodes", "fixture"])
    parser.add_argument("--sadal-py", required=True,
                        help="your copy of the published SADAL.py (not part of this project)")
    parser.add_argument("--ssif-py", required=True,
                        help="your copy of the published ssif.py (stralu9/"
                             "Semi_Supervised_Isolation_Forest)")
    parser.add_argument("--datasets", nargs="+", default=["WBC"], help="episodes: data sets")
    parser.add_argument("--seeds", type=int, default=3, help="episodes: seeds 0..N-1")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES,
                        help="SADAL's choice, or AL or LR forced in every round")
    parser.add_argument("--data-dir", default=None, help="episodes: the data sets' folder")
    parser.add_argument("--fast-ssif", action="store_true",
                        help="episodes: our SSIF on RandomState(9) (the published forests "
                             "exactly, much faster) in place of the published ssif.SSIF")
    parser.add_argument("--n-jobs", type=int, default=1, help="episodes: worker processes")
    parser.add_argument("--output", default="results/sadal_published",
                        help="episodes: results folder")
    parser.add_argument("--fixture", default="tests/data/sadal_published_trajectory.json",
                        help="fixture: the JSON file written")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "fixture":
            command = "python scripts/sadal_published.py " + shlex.join(
                sys.argv[1:] if argv is None else argv)
            record = record_trajectory(args.sadal_py, args.ssif_py, args.strategies,
                                       command=command)
            Path(args.fixture).write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote {args.fixture}")
            return 0
        played = run_sadal_published(args.sadal_py, args.ssif_py, args.output, args.datasets,
                                     range(args.seeds), args.strategies,
                                     data_dir=args.data_dir, fast_ssif=args.fast_ssif,
                                     n_jobs=args.n_jobs)
    except PublishedCodeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = load_sadal_published(args.output)
    print(f"played {played} episode(s); mean test cost per strategy:")
    print(table.groupby("agent")[["test_cost", "final_cost"]].mean().to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
