"""Fill the reports' ``<!-- table: docs/tables/<file>.md -->`` blocks from the generated
tables (``scripts.tools.reports.generated``) and the pages' ``<!-- include: FILE -->`` copies
of shared prose, the README's included (``scripts.tools.reports.included``); ``--check``
lists the stale blocks and copies instead.

``--figures`` also redraws the landing page's figure, which allocation wins where
(``docs/figures/crossed_winners.png``, ``scripts.tools.reports.winners``), and writes
its table ``docs/tables/crossed_winners.csv`` from the crossed study's committed table;
with ``--check`` it says instead whether that table is current.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from agents.experiments.cli import HelpFormatter
from scripts.tools.reports.generated import fill, repo_root, reports, stale
from scripts.tools.reports.included import fill_includes, stale_includes
from scripts.tools.reports.winners import stale_answer, write_answer


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: fill the reports' marked tables from ``docs/tables`` (``--check``:
    list the stale ones and exit 1 instead). Returns the exit status."""
    parser = argparse.ArgumentParser(description="Fill the reports' <!-- table: ... --> "
                                     "blocks from the generated tables in docs/tables.",
                                     formatter_class=HelpFormatter)
    parser.add_argument("reports", nargs="*", type=Path,
                        help="reports to fill (default: the README and every .md under "
                        "docs/ outside docs/tables)")
    parser.add_argument("--root", type=Path, default=None,
                        help="where the markers' paths start (default: the repository)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; list the blocks that differ, exit 1 if any")
    parser.add_argument("--figures", action="store_true",
                        help="also redraw the landing page's figure (which allocation wins "
                        "where) and its table from the crossed study's table")
    args = parser.parse_args(argv)
    root = args.root if args.root is not None else repo_root(Path.cwd())
    readme = [root / "README.md"] if (root / "README.md").is_file() else []
    paths = args.reports or [*readme, *reports(root)]
    if args.check:
        differences: list[object] = [d for path in paths
                                     for d in (*stale(path, root), *stale_includes(path, root))]
        if args.figures:
            differences += stale_answer(root)
        for difference in differences:
            print(difference)
        return 1 if differences else 0
    for path in paths:
        for table in fill(path, root):
            print(f"{path}: filled {table}")
        for source in fill_includes(path, root):
            print(f"{path}: copied {source}")
    if args.figures:
        for written in write_answer(root):
            print(f"wrote {written}")
    return 0


__all__ = ["main"]


if __name__ == "__main__":
    sys.exit(main())
