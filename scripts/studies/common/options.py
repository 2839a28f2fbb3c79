"""The options every study words the same way: where its results and its report go.

``REPO`` is the clone the studies run from (they are never installed).
:func:`add_report_options` adds ``--out`` (the results folder), and ``--docs PATH`` or
``--update-docs`` (the repository's ``docs/``, the committed report);
:func:`report_folder` reads them back.
"""

from __future__ import annotations

import argparse
from pathlib import Path

#: The repository's root: the studies run from a clone.
REPO = Path(__file__).resolve().parents[3]


def add_report_options(parser: argparse.ArgumentParser, study: str, *,
                       out_help: str = "results folder (and the report unless --docs)"
                       ) -> None:
    """``--out`` (default ``results/<study>``), and either ``--docs PATH`` or
    ``--update-docs`` for where the tables and figures go."""
    parser.add_argument("--out", type=Path, default=REPO / "results" / study, help=out_help)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--docs", type=Path, default=None,
                       help="folder receiving tables/ and figures/ (default: --out)")
    where.add_argument("--update-docs", action="store_true",
                       help="write tables/ and figures/ into the repository's docs/ (the "
                            "committed report)")


def report_folder(args: argparse.Namespace) -> Path:
    """Where a study's tables/ and figures/ go: the repository's ``docs/`` with
    ``--update-docs``, else ``--docs``, else ``--out``."""
    if args.update_docs:
        return REPO / "docs"
    return Path(args.docs if args.docs is not None else args.out)
