"""How far are allocation rules from the best allocation? The lattice study
(docs/studies/LATTICE.md).

For every data set, seed and prior, one lattice gives the test cost of every state; agents
are replayed on it and scored against the hindsight-optimal path, the fixed LR-then-AL
splits and the one-step oracle (``scripts.studies.lattice`` has the analysis).

Results are resumable: each finished cell (data set, seed, prior) leaves its tables in the
study's result store (``<out>/run.json`` and ``<out>/cells/``); a rerun skips finished
cells, recomputes those missing a requested agent and refuses a store of other source
code. The tables (``tables/lattice_*``) and figures (``figures/lattice_*.png``) go under
``--out``, or ``--docs PATH``; ``--update-docs`` writes them into the repository's
``docs/`` (the committed report). ``--report-only`` rebuilds them from the files alone.

    python -m scripts.studies.lattice --n-jobs 2
    python -m scripts.studies.lattice --report-only --update-docs
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    run_job,
)
from agents.experiments.grid import check_agent
from agents.experiments.stores.results import RunError, writable_folder
from ballad_env.data import dataset_name
from ballad_env.data.bundled import BUNDLED_DIR
from ballad_env.settings.cli import add_settings_arguments
from scripts.studies.common.options import REPO, add_report_options
from scripts.studies.lattice import (
    STUDY_AGENTS,
    StudyOptions,
    figure_dataset,
    run_study,
    write_report,
)


def positive(text: str) -> int:
    """An integer of at least 1 (argparse type)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_options(argv: list[str] | None = None) -> StudyOptions:
    """Command-line options; defaults reproduce docs/studies/LATTICE.md."""
    default_data = os.environ.get("BALLAD_DATA_DIR") or BUNDLED_DIR
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--data-dir", type=Path, default=Path(default_data),
                   help="folder of <Name>.npz benchmark files")
    add_report_options(p, "lattice_study",
                       out_help="results folder (tidy files, and the report unless --docs)")
    p.add_argument("--datasets", nargs="*", default=[],
                   help="data set names, built-in or files in --data-dir (default: every "
                        ".npz in --data-dir)")
    p.add_argument("--seeds", type=positive, default=10, help="seeds 0 .. seeds-1 per data set")
    p.add_argument("--agents", nargs="+", default=list(STUDY_AGENTS),
                   help="registered agent names to replay on every lattice")
    add_execution_arguments(p, n_jobs=2)
    p.add_argument("--crosscheck", type=int, default=1,
                   help="cells per prior re-run through the real environment (smallest data)")
    p.add_argument("--figure-dataset", default=None,
                   help="data set whose seed-0 lattice is drawn (default: Cardiotocography "
                        "if studied, else the first data set)")
    p.add_argument("--report-only", action="store_true",
                   help="skip computing; rebuild tables and figures from the results")
    add_settings_arguments(p, several=True, only=["prior"],
                           several_defaults={"prior": ["iforest", "knn"]})
    args = vars(p.parse_args(argv))
    args["priors"] = args.pop("prior")
    if args.pop("update_docs"):
        args["docs"] = REPO / "docs"
    elif args["docs"] is None:
        args["docs"] = args["out"]
    args["datasets"] = study_datasets(p, args["datasets"], args["data_dir"])
    args["figure_dataset"] = args["figure_dataset"] or figure_dataset(args["datasets"])
    return StudyOptions(**args)


def study_datasets(parser: argparse.ArgumentParser, names: list[str], data_dir: Path
                   ) -> list[str]:
    """The data sets by the names they load under (``glass`` is ``Glass``); every ``.npz`` of
    the data folder when none is given. Paths and one data set named twice are refused."""
    if not names:
        names = sorted(path.stem for path in data_dir.glob("*.npz"))
        if not names:
            parser.error(f"no .npz files in {data_dir}: pass --data-dir or --datasets")
    paths = [name for name in names if Path(name).name != name or Path(name).suffix]
    if paths:
        parser.error(f"--datasets takes data set names, not paths ({', '.join(paths)}): "
                     "put the files in --data-dir and name them by their stems")
    try:
        keys = [dataset_name(name, data_dir) for name in names]
    except FileNotFoundError as err:
        parser.error(str(err))
    if len(set(keys)) < len(keys):
        parser.error(f"--datasets names a data set twice ({', '.join(names)})")
    return keys


def main(argv: list[str] | None = None) -> int:
    """Compute the missing cells (unless ``--report-only``), then write tables and figures."""
    options = parse_options(argv)
    try:
        for name in options.agents:
            check_agent(name)
        writable_folder(options.out, "--out")
        writable_folder(options.docs, "--docs")
        if not options.report_only:
            run_study(options)
        write_report(options)
    except (RunError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0



if __name__ == "__main__":
    sys.exit(run_job(main))
