"""List data sets: the built-in ones and the files of a data folder, with their size and
contamination, each loaded and checked as an episode would load it.

    ballad-env data --data-dir ../shared/benchmarks
"""

from __future__ import annotations

import argparse
import sys

from ballad_env.data import available_datasets, load_dataset


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="*",
                        help="data set names or paths (default: every one available)")
    parser.add_argument("--data-dir", default=None,
                        help="folder of data files (default: $BALLAD_DATA_DIR)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Print one line per data set (rows, features, contamination); 2 if one cannot load."""
    args = build_parser().parse_args(argv)
    names = args.datasets or list(available_datasets(args.data_dir))
    width = max(map(len, names), default=4)
    print(f"{'name':<{width}}  {'rows':>7}  {'features':>8}  contamination")
    failed = 0
    for name in names:
        try:
            data = load_dataset(name, data_dir=args.data_dir)
        except (ValueError, FileNotFoundError) as err:
            print(f"error: {name}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"{data.name:<{width}}  {data.n_samples:>7}  {data.X.shape[1]:>8}  "
              f"{data.contamination:.4f}")
    return 2 if failed else 0
