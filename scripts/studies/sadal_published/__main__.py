"""SADAL's published code on SADAL's splits: episodes into a results folder, or a fixture.

Run it from a throw-away Python that has the published files' packages (never this
project's environment: scikit-optimize, seaborn and matplotlib are no dependency of it)::

    python -m venv /tmp/sadal-venv && /tmp/sadal-venv/bin/pip install -e . \\
        scikit-optimize seaborn matplotlib
    # episodes (resumable), SADAL's choice and both branches forced
    /tmp/sadal-venv/bin/python -m scripts.studies.sadal_published episodes \\
        --sadal-py path/to/SADAL.py --ssif-py path/to/ssif.py \\
        --datasets WBC Glass --seeds 3 --output results/sadal_published
    # Settings.sadal() on the same episodes, compared (this project's Python)
    python -m scripts.studies.sadal_published agreement --output results/sadal_published
    # and a variant of it (our exact threshold search), into its own table, compared too
    python -m scripts.studies.sadal_published agreement --output results/sadal_published \\
        --set threshold_search=exact
    # the test fixture (the published SSIF; minutes)
    /tmp/sadal-venv/bin/python -m scripts.studies.sadal_published fixture \\
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
from typing import Any

from agents.experiments.cli import (
    HelpFormatter,
    n_jobs_value,
    run_job,
)
from ballad_env.settings.cli import setting_from_text
from scripts.studies.common.episodes import PublishedCodeError
from scripts.studies.sadal_published.agreement import (
    agreement_episodes,
    agreement_summary,
    run_preset,
)
from scripts.studies.sadal_published.published import (
    AL_FIRST_ROUND,
    STRATEGIES,
    load_sadal_published,
    merge_trajectories,
    record_trajectory,
    run_sadal_published,
)
from scripts.studies.sadal_published.variant import (
    run_variant,
    variant_episodes,
    variant_settings,
    variant_summary,
    variant_table,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("command", choices=["episodes", "fixture", "agreement"],
                        help="episodes: the published code's, into --output; fixture: a "
                             "recorded trajectory; agreement: Settings.sadal() on the "
                             "episodes in --output, compared (this project's Python)")
    parser.add_argument("--sadal-py",
                        help="your copy of the published SADAL.py (not part of this project)")
    parser.add_argument("--ssif-py",
                        help="your copy of the published ssif.py (stralu9/"
                             "Semi_Supervised_Isolation_Forest)")
    parser.add_argument("--datasets", nargs="+", default=["WBC"], help="episodes: data sets")
    parser.add_argument("--seeds", type=int, default=3, help="episodes: seeds 0..N-1")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES,
                        help="SADAL's choice, or AL or LR forced in every round")
    parser.add_argument("--data-dir", default=None, help="episodes: the data sets' folder")
    parser.add_argument("--fast-ssif", action="store_true",
                        help="our SSIF on RandomState(9) (the published forests exactly, "
                             "much faster) in place of the published ssif.SSIF")
    parser.add_argument("--n-jobs", type=n_jobs_value, default=1,
                        help="episodes: worker processes")
    parser.add_argument("--al-first-round", choices=AL_FIRST_ROUND, default="none",
                        help="episodes: the fix of a forced AL round 1, where the published "
                             "code crashes: none (its empty rejected list: no label, the "
                             "preset's) or rank (b labels by 2|P - 0.5|, threshold-distance-"
                             "authors-ranked)")
    parser.add_argument("--output", default="results/sadal_published",
                        help="episodes: results folder")
    parser.add_argument("--set", action="append", type=setting_from_text, default=[],
                        metavar="OPTION=VALUE",
                        help="agreement: a variant of Settings.sadal() with this option "
                             "changed (repeat for several; e.g. threshold_search=exact), "
                             "played on the same episodes into its own table and compared "
                             "with the published episodes (by default none: the preset only)")
    parser.add_argument("--no-preset", action="store_true",
                        help="agreement: play no preset episode (its comparison covers those "
                             "stored); with --set, only the variant plays")
    parser.add_argument("--fixture", default="tests/data/sadal_published_trajectory.json",
                        help="fixture: the JSON file written; the strategies recorded are "
                             "added to it if it holds the same data and files (so "
                             "strategies can be recorded by separate runs)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "agreement":
        changes = dict(args.set)
        if changes:
            try:
                variant_settings(changes)
            except ValueError as err:
                parser.error(f"--set: {err}")
        return agreement(args.output, args.data_dir, changes, play_preset=not args.no_preset)
    if args.set or args.no_preset:
        parser.error("--set and --no-preset belong to agreement")
    if not (args.sadal_py and args.ssif_py):
        parser.error(f"{args.command} needs --sadal-py and --ssif-py (the published files)")
    try:
        if args.command == "fixture":
            command = "python -m scripts.studies.sadal_published " + shlex.join(
                sys.argv[1:] if argv is None else argv)
            record = record_trajectory(args.sadal_py, args.ssif_py, args.strategies,
                                       command=command, fast_ssif=args.fast_ssif)
            path = Path(args.fixture)
            old = json.loads(path.read_text()) if path.is_file() else None
            merged = merge_trajectories(old, record)
            partial = path.with_name(path.name + ".partial")
            partial.write_text(json.dumps(merged, indent=1) + "\n")
            partial.replace(path)
            print(f"wrote {args.fixture} ({', '.join(s for s in STRATEGIES if s in merged)})")
            return 0
        played = run_sadal_published(args.sadal_py, args.ssif_py, args.output, args.datasets,
                                     range(args.seeds), args.strategies,
                                     data_dir=args.data_dir, fast_ssif=args.fast_ssif,
                                     n_jobs=args.n_jobs, al_first_round=args.al_first_round)
    except PublishedCodeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = load_sadal_published(args.output)
    print(f"played {played} episode(s); mean test cost per strategy:")
    print(table.groupby("agent")[["test_cost", "final_cost"]].mean().to_string())
    return 0


def agreement(output: str, data_dir: str | None, changes: dict[str, Any] | None = None,
              play_preset: bool = True) -> int:
    """Play the preset (unless not ``play_preset``) and the variant with ``changes`` (if
    any) on the published episodes in ``output``; print the comparisons."""
    played = run_preset(output, data_dir=data_dir) if play_preset else 0
    episodes = agreement_episodes(output)
    print(f"played {played} episode(s) of Settings.sadal(); per episode:")
    print(episodes.to_string(index=False))
    print(agreement_summary(episodes).to_string())
    if changes:
        table = variant_table(changes)
        played = run_variant(output, changes, data_dir)
        compared = variant_episodes(output, table)
        print(f"\nplayed {played} episode(s) of the variant (table {table}); against the "
              "published episodes, per episode:")
        print(compared.to_string(index=False))
        print(variant_summary(compared).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(run_job(main))
