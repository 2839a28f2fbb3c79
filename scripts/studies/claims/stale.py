"""Whether stored statistics tables are current: ``write_stats`` stores the scores
(``<prefix>scores.csv``) and options (``<prefix>stats.json``) beside its tables, so they can
be recomputed and compared. The claims study's ``--check`` and the documentation's
``compare --stats`` example are checked this way, as the other generated tables are."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from agents.reports.stats_report import (
    OPTIONS,
    SCORES,
    TABLES,
    StatsOptions,
    write_stats,
)


def read_scores(path: str | os.PathLike) -> pd.DataFrame:
    """The scores a :func:`write_stats` stored (``<prefix>scores.csv``), exactly."""
    scores = pd.read_csv(path, dtype={"setting": str, "dataset": str})
    return scores.set_index(["setting", "dataset", "seed"])


def read_options(path: str | os.PathLike) -> StatsOptions:
    """The options a :func:`write_stats` stored (``<prefix>stats.json``)."""
    return StatsOptions(**json.loads(Path(path).read_text()))


def stale_stats(folder: str | os.PathLike, prefix: str = "") -> list[str]:
    """The Markdown tables under ``folder``/``prefix`` that differ from a recomputation from
    the stored scores and options (empty: all current). The figures are not compared (their
    bytes depend on matplotlib's version)."""
    folder = Path(folder)
    scores = read_scores(folder / f"{prefix}{SCORES}")
    options = read_options(folder / f"{prefix}{OPTIONS}")
    with tempfile.TemporaryDirectory() as scratch:
        write_stats(scores, scratch, options=options, prefix=prefix, draw=False)
        fresh = {p.name: p.read_text() for p in Path(scratch).glob(f"{prefix}*.md")}
    stored = {name: (folder / name).read_text() for name in
              (f"{prefix}{t}.md" for t in TABLES) if (folder / name).is_file()}
    return sorted(name for name in fresh.keys() | stored.keys()
                  if fresh.get(name) != stored.get(name))


__all__ = ["read_options", "read_scores", "stale_stats"]
