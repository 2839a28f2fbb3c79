"""The crossed study's driver: the lattice cells (built and replayed, ``cells``), then the
live cells of the combinations the lattice refuses only for their path-dependent queries
(``live``); every cell written as it finishes, so a rerun resumes."""

from __future__ import annotations

from scripts.studies.crossed.cells import StudyOptions, replay_study
from scripts.studies.crossed.factors import Combination, split_live, split_posable
from scripts.studies.crossed.live import run_live


def run_study(options: StudyOptions) -> dict[Combination, str]:
    """Build and replay the posed combinations' lattices, then (``options.live``) play the
    combinations refused only for their path-dependent queries live; returns every
    combination the lattice cannot pose, with the reason."""
    posed, refused = split_posable(options.combinations(), options.base)
    live = split_live(refused, options.base) if options.live else {}
    for combo, reason in refused.items():
        action = "played live" if combo in live else "not posable"
        print(f"not posable on the lattice ({action}): {combo.label}: {reason}", flush=True)
    replay_study(options, posed)
    run_live(options, live)
    return refused


__all__ = ["run_study"]
