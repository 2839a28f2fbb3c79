"""``python -m ballad_env.data``: every data set by name, with n, d, contamination, and
whether it is on this machine (``--cards``: the paper's 18 data cards as well). A file of
the data folder that cannot be loaded is listed with its reason, and the exit status is 1."""

from __future__ import annotations

import argparse
import sys

from ballad_env.data.bundled import bundled_names, data_card
from ballad_env.data.lookup import DatasetInfo, available_datasets


def markdown_table(rows: list[DatasetInfo]) -> str:
    """The rows as a markdown table (location left out: it is machine-specific); a file
    that cannot be loaded is a row ``invalid: <reason>``."""
    lines = ["| name | kind | n | d | contamination | cached |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        if r.problem:
            reason = r.problem.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{r.name}` | {r.kind} | - | - | - | invalid: {reason} |")
        else:
            lines.append(f"| `{r.name}` | {r.kind} | {r.n:,} | {r.d:,} | "
                         f"{r.contamination:.4f} | {'yes' if r.cached else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None, *,
         parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> int:
    """List the data sets; ``parser_class`` reads the command line (``ballad-env data``
    passes the parser of its jobs, whose errors are short)."""
    parser = parser_class(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    parser.add_argument("--cards", action="store_true", help="also print the data cards")
    args = parser.parse_args(argv)
    rows = [r for r in available_datasets(args.data_dir, details=True)
            if isinstance(r, DatasetInfo)]
    print(markdown_table(rows))
    if args.cards:
        for name in bundled_names():
            print(f"\n```\n{data_card(name)}\n```")
    invalid = [r.name for r in rows if r.problem]
    if invalid:
        print(f"\n{len(invalid)} file(s) of the data folder cannot be loaded: "
              f"{', '.join(invalid)} (the reason is in the table)", file=sys.stderr)
    return 1 if invalid else 0


if __name__ == "__main__":
    raise SystemExit(main())
