"""Which allocation wins where: the answer at a glance, drawn from the crossed study's tables.

The crossed study (``docs/studies/CROSSED.md``) writes, per combination of detector,
rejector, queries, costs and protocol and per group of data sets, the mean test cost over
rounds of each deployable allocation rule. :func:`winners` picks, in each row, the rule of
least cost and its gain over All-in-LR (every label to the validation set, the rule to
beat on the paper's benchmarks); :func:`winner_grid` draws those winners as one grid, rows
the parts of the episode (detector / rejector / protocol), columns the data-set group and
the costs. The documentation's landing page shows that figure, redrawn from the committed
table by ``python -m scripts.tools.reports --figures`` and checked by ``--check``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from agents.experiments.reports.plots import AGENT_COLORS, save_figure  # noqa: E402

#: The deployable rules compared: neither reads a test label nor looks ahead.
RULES = ("all-in-al", "all-in-lr", "ballad", "sadal")
#: What the rows and the columns of the grid are made of.
ROW_PARTS = ("detector", "rejector", "protocol")
COLUMN_PARTS = ("group", "costs")
#: The committed table the landing page's figure is drawn from, and what it writes.
SOURCE = "crossed_ssif_groups"
STEM = "crossed_winners"
RULE_COLORS = {rule: AGENT_COLORS[rule] for rule in RULES}


def winners(table: pd.DataFrame, rules: Sequence[str] = RULES,
            baseline: str = "all-in-lr") -> pd.DataFrame:
    """Per row of ``table``: the rule of ``rules`` with the least mean cost (``winner``), that
    cost, ``baseline``'s, and the winner's gain over the baseline, ``1 - winner / baseline``
    (0 where the baseline wins). Keys: the ``ROW_PARTS`` and ``COLUMN_PARTS`` columns."""
    missing = [c for c in (*ROW_PARTS, *COLUMN_PARTS, *rules, baseline) if c not in table]
    if missing:
        raise ValueError(f"the table lacks column(s) {missing}: give a crossed study table "
                         f"with a group column (docs/tables/{SOURCE}.csv)")
    costs = table[list(rules)].to_numpy(dtype=float)
    best = np.argmin(costs, axis=1)
    out = table[[*ROW_PARTS, *COLUMN_PARTS]].reset_index(drop=True).copy()
    out["winner"] = np.asarray(rules, dtype=object)[best]
    out["cost"] = costs[np.arange(len(costs)), best]
    out[baseline] = table[baseline].to_numpy(dtype=float)
    out["gain"] = 1.0 - out["cost"] / out[baseline]
    return out


def _labels(frame: pd.DataFrame, parts: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(frame[list(parts)].astype(str).agg(" / ".join, axis=1)))


def winner_grid(table: pd.DataFrame, path: str | os.PathLike, *,
                title: str | None = None) -> Path:
    """Draw :func:`winners` of ``table`` as a grid: a cell per (row, column) coloured by its
    winning rule and labelled with the gain over All-in-LR; returns the image's path."""
    won = winners(table)
    rows, columns = _labels(won, ROW_PARTS), _labels(won, COLUMN_PARTS)
    row_of = won[list(ROW_PARTS)].astype(str).agg(" / ".join, axis=1)
    column_of = won[list(COLUMN_PARTS)].astype(str).agg(" / ".join, axis=1)
    fig, ax = plt.subplots(figsize=(1.35 * len(columns) + 2.6, 0.42 * len(rows) + 1.6))
    for name, i, j, gain in zip(won["winner"], row_of.map(rows.index),
                                column_of.map(columns.index), won["gain"], strict=True):
        ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=to_rgba(RULE_COLORS[name], 0.55),
                                   edgecolor="white", linewidth=2))
        text = name if name == "all-in-lr" else f"{name}\n-{100 * gain:.0f}%"
        ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7)
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks(np.arange(len(columns)) + 0.5, columns, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(np.arange(len(rows)) + 0.5, rows, fontsize=8)
    ax.set_xlabel(" / ".join(COLUMN_PARTS), fontsize=8)
    ax.set_ylabel(" / ".join(ROW_PARTS), fontsize=8)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=to_rgba(c, 0.55)) for c in
               RULE_COLORS.values()]
    ax.legend(handles, list(RULE_COLORS), loc="upper center", ncol=len(RULE_COLORS),
              bbox_to_anchor=(0.5, 1.12), frameon=False, fontsize=8)
    if title:
        ax.set_title(title, fontsize=9, pad=28)
    return save_figure(fig, path)


def answer_title(table: pd.DataFrame) -> str:
    """The figure's title: what the grid shows, and on how much data."""
    groups = table.groupby("group", sort=False)["datasets"].max()
    sets = ", ".join(f"{group} {int(n)}" for group, n in groups.items())
    return (f"Least mean test cost among deployable rules (data sets: {sets}; "
            f"{int(table['seeds'].max())} seeds); % = change in mean cost against all-in-lr")


def answer_table(root: str | os.PathLike) -> pd.DataFrame:
    """:func:`winners` of the crossed study's committed table under ``root``/docs/tables."""
    return winners(pd.read_csv(Path(root) / "docs" / "tables" / f"{SOURCE}.csv"))


def write_answer(root: str | os.PathLike) -> list[Path]:
    """Redraw the landing page's figure into ``root``/docs/figures and write its table into
    ``root``/docs/tables from the crossed study's committed table; the paths written."""
    from agents.experiments.reports.tables import write_table

    docs = Path(root) / "docs"
    source = pd.read_csv(docs / "tables" / f"{SOURCE}.csv")
    figure = winner_grid(source, docs / "figures" / f"{STEM}.png", title=answer_title(source))
    table = write_table(winners(source), docs / "tables", STEM, index=False,
                        title="Which allocation wins where",
                        note=f"The least-cost deployable rule per row of `{SOURCE}.csv`, and "
                             "its gain over All-in-LR "
                             "(`python -m scripts.tools.reports --figures`).")
    return [figure, table]


def stale_answer(root: str | os.PathLike) -> list[str]:
    """``["docs/tables/crossed_winners.csv ..."]`` when that committed table is missing or
    differs from what the crossed study's table gives now, else ``[]``."""
    committed = Path(root) / "docs" / "tables" / f"{STEM}.csv"
    if committed.is_file():
        old, fresh = pd.read_csv(committed), answer_table(root)
        try:
            pd.testing.assert_frame_equal(old, fresh, check_exact=False, rtol=1e-9)
        except AssertionError:
            pass
        else:
            return []
    return [f"docs/tables/{STEM}.csv differs from docs/tables/{SOURCE}.csv's winners "
            "(run python -m scripts.tools.reports --figures)"]


__all__ = ["COLUMN_PARTS", "RULES", "ROW_PARTS", "SOURCE", "STEM", "answer_table",
           "answer_title", "stale_answer", "winner_grid", "winners", "write_answer"]
