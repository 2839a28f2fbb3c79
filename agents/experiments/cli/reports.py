"""Fill the reports' ``<!-- table: docs/tables/<file>.md -->`` blocks from the generated
tables; ``--check`` lists the stale blocks instead (``agents.experiments.reports.generated``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from agents.experiments.cli import HelpFormatter
from agents.experiments.reports.generated import fill, repo_root, reports, stale


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: fill the reports' marked tables from ``docs/tables`` (``--check``:
    list the stale ones and exit 1 instead). Returns the exit status."""
    parser = argparse.ArgumentParser(description="Fill the reports' <!-- table: ... --> "
                                     "blocks from the generated tables in docs/tables.",
                                     formatter_class=HelpFormatter)
    parser.add_argument("reports", nargs="*", type=Path,
                        help="reports to fill (default: every .md under docs/ outside "
                        "docs/tables)")
    parser.add_argument("--root", type=Path, default=None,
                        help="where the markers' paths start (default: the repository)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; list the blocks that differ, exit 1 if any")
    args = parser.parse_args(argv)
    root = args.root if args.root is not None else repo_root(Path.cwd())
    paths = args.reports or list(reports(root))
    if args.check:
        differences = [d for path in paths for d in stale(path, root)]
        for difference in differences:
            print(difference)
        return 1 if differences else 0
    for path in paths:
        for table in fill(path, root):
            print(f"{path}: filled {table}")
    return 0


__all__ = ["main"]
