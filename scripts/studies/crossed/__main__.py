"""Is All-in-LR's win a property of SSDO? The crossed study (docs/studies/CROSSED.md).

Crosses the parts of BALLAD and SADAL (detector, rejector, query strategies, costs,
protocol: one option each, every level by default) on the lattice: per combination, data
set and seed, the mean test cost of All-in-AL, All-in-LR, BALLAD and SADAL and of the best
fixed split, the one-step oracle and the hindsight optimum. Lattices go to
``<out>/lattices`` and replayed paths to ``<out>/paths`` (both resume). Combinations the
lattice refuses only because their queries depend on the path (SADAL's) are played in live
episodes (``<out>/live``, resumes; the four agents and every fixed split; ``--no-live``
skips them), the others reported as not-posable with the reason. Tables
(``tables/<prefix>_*``, ``--prefix crossed``) and the figure
(``figures/<prefix>_regret.png``) go under ``--out``, ``--docs PATH``, or with
``--update-docs`` the repository's ``docs/``.

    python -m scripts.studies.crossed --datasets paper --seeds 3 --detectors ssdo --n-jobs 2
    python -m scripts.studies.crossed --datasets paper --seeds 3 --report-only --update-docs
    python -m scripts.studies.crossed --datasets Glass WBC --seeds 10 --queries sadal sadal-al
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
from agents.experiments.grid import DATASETS_HELP, check_agent, dataset_names
from agents.experiments.stores.results import RunError, writable_folder
from ballad_env.data.bundled import BUNDLED_DIR
from ballad_env.replay.store import StoreError
from ballad_env.settings.cli import add_settings_arguments, settings_from_args
from scripts.studies.common.options import REPO, add_report_options
from scripts.studies.crossed import (
    AGENTS,
    FACTORS,
    StudyOptions,
    check_levels,
    run_study,
    write_report,
)


def factor_option(factor: str) -> str:
    """The command-line option of a factor: its name in the plural (``--detectors``)."""
    return factor if factor.endswith("s") else f"{factor}s"


def build_parser() -> argparse.ArgumentParser:
    """The command-line options, each with a one-line help."""
    default_data = os.environ.get("BALLAD_DATA_DIR") or BUNDLED_DIR
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    add_report_options(p, "crossed_study",
                       out_help="results folder: lattices, paths and (unless --docs) the report")
    p.add_argument("--data-dir", type=Path, default=Path(default_data),
                   help="folder of data files ($BALLAD_DATA_DIR)")
    p.add_argument("--datasets", nargs="+", default=["paper"], help=DATASETS_HELP)
    p.add_argument("--seeds", type=int, default=10, help="episode seeds first .. first+N-1")
    p.add_argument("--first-seed", type=int, default=0, help="seeds start here")
    factors = p.add_argument_group("factors (every level by default)")
    for factor, levels in FACTORS.items():
        factors.add_argument(f"--{factor_option(factor)}", nargs="+", default=list(levels),
                             choices=list(levels), help=f"levels of the {factor}")
    p.add_argument("--agents", nargs="+", default=list(AGENTS),
                   help="registered agents replayed on every lattice (and played live)")
    p.add_argument("--live", action=argparse.BooleanOptionalAction, default=True,
                   help="play the combinations the lattice refuses only for their "
                        "path-dependent queries in live episodes (the agents and every fixed "
                        "split; <out>/live, resumes); --no-live marks them not-posable")
    add_execution_arguments(p, n_jobs=1, scheduler=True, progress=True)
    p.add_argument("--prefix", default="crossed",
                   help="the tables' and figure's file names start with it (a slice apart)")
    p.add_argument("--report-only", action="store_true",
                   help="skip computing; rebuild tables and figure from the stores")
    add_settings_arguments(p, only=["prior"])
    return p


def parse_options(argv: list[str] | None = None) -> tuple[StudyOptions, Path, str, bool]:
    """The study's options, the report's folder, the tables' prefix and whether to
    compute."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error(f"--seeds must be at least 1, got {args.seeds}")
    levels = {factor: getattr(args, factor_option(factor)) for factor in FACTORS}
    try:
        check_levels(levels)
        names = list(dataset_names(args.datasets, args.data_dir))
        for name in args.agents:
            check_agent(name)
    except (ValueError, FileNotFoundError) as err:
        p.error(str(err))
    options = StudyOptions(out=args.out, datasets=names,
                           seeds=list(range(args.first_seed, args.first_seed + args.seeds)),
                           levels=levels, data_dir=str(args.data_dir),
                           base=settings_from_args(args)[0], agents=tuple(args.agents),
                           live=args.live, n_jobs=args.n_jobs, scheduler=args.scheduler,
                           progress=not args.no_progress)
    docs = REPO / "docs" if args.update_docs else (args.docs or args.out)
    return options, docs, args.prefix, not args.report_only


def main(argv: list[str] | None = None) -> int:
    """Compute the missing cells (unless ``--report-only``), then write the tables and the
    figure; a bad option or store returns 2."""
    options, docs, prefix, compute = parse_options(argv)
    try:
        writable_folder(options.out, "--out")
        writable_folder(docs, "--docs")
        if compute:
            run_study(options)
        tables = write_report(options, docs, prefix)
    except (RunError, StoreError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for stem in ("strategies", "room"):
        print(tables[stem].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


__all__ = ["build_parser", "factor_option", "main", "parse_options"]


if __name__ == "__main__":
    sys.exit(run_job(main))
