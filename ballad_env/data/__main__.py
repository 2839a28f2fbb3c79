"""``python -m ballad_env.data``: every data set by name, with n, d, contamination, and
whether it is on this machine (``--cards``: the paper's 18 data cards as well)."""

from __future__ import annotations

import argparse

from ballad_env.data.bundled import bundled_names, data_card
from ballad_env.data.lookup import DatasetInfo, available_datasets


def markdown_table(rows: list[DatasetInfo]) -> str:
    """The rows as a markdown table (location left out: it is machine-specific)."""
    lines = ["| name | kind | n | d | contamination | cached |", "|---|---|---:|---:|---:|---|"]
    lines += [f"| `{r.name}` | {r.kind} | {r.n:,} | {r.d:,} | {r.contamination:.4f} | "
              f"{'yes' if r.cached else 'no'} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    parser.add_argument("--cards", action="store_true", help="also print the data cards")
    args = parser.parse_args(argv)
    rows = available_datasets(args.data_dir, details=True)
    print(markdown_table([r for r in rows if isinstance(r, DatasetInfo)]))
    if args.cards:
        for name in bundled_names():
            print(f"\n```\n{data_card(name)}\n```")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
