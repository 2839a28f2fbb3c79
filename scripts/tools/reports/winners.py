"""Which allocation wins where: the answer at a glance, drawn from the crossed study's tables.

The crossed study (``docs/studies/CROSSED.md``) writes, per combination of detector,
rejector, queries, costs and protocol and per group of data sets, the mean test cost over
rounds of each deployable allocation rule. :func:`winners` picks, in each row, the rule of
least cost and its gain over All-in-LR (every label to the validation set, the rule to
beat on the paper's benchmarks); :func:`winner_tests` asks whether each winner is
significantly cheaper than All-in-LR over the group's data sets (Wilcoxon signed-rank,
Holm-corrected over the cells); :func:`winner_grid` draws those winners as one grid, rows
the parts of the episode (detector / rejector / protocol), columns the data-set group and
the costs, hatching the cells whose winner is not significantly cheaper. The documentation's
landing page shows that figure, redrawn from the committed tables by
``python -m scripts.tools.reports --figures`` and checked by ``--check``.
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

from agents.reports.plots import AGENT_COLORS, save_figure  # noqa: E402
from agents.reports.stats import ALPHA, holm, paired_test  # noqa: E402
from ballad_env.data.adbench import dataset_group  # noqa: E402

#: The deployable rules compared: neither reads a test label nor looks ahead.
RULES = ("all-in-al", "all-in-lr", "ballad", "sadal")
#: What the rows and the columns of the grid are made of.
ROW_PARTS = ("detector", "rejector", "protocol")
COLUMN_PARTS = ("group", "costs")
#: The committed table the landing page's figure is drawn from, and what it writes.
SOURCE = "crossed_ssif_groups"
#: The same study's per-data-set table, which the tests pair by data set.
PER_DATASET = "crossed_ssif_per_dataset"
#: The parts of the per-data-set table's ``combination`` (``ssdo/confidence/ours/...``).
COMBINATION_PARTS = ("detector", "rejector", "queries", "costs", "protocol")
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


def winner_tests(table: pd.DataFrame, per_dataset: pd.DataFrame, baseline: str = "all-in-lr",
                 alpha: float = ALPHA) -> pd.DataFrame:
    """:func:`winners` of ``table`` with ``p``, the two-sided Wilcoxon signed-rank p-value of
    the winner's per-data-set cost against ``baseline``'s over the cell's data sets (from
    ``per_dataset``, one row per combination and data set), Holm-corrected over the cells
    whose winner is not the baseline (NaN where it is), and ``significant``: ``yes`` (p <
    alpha), ``no``, or ``baseline`` where the baseline wins."""
    won = winners(table, baseline=baseline)
    if "status" in per_dataset:
        per_dataset = per_dataset[per_dataset["status"] == "posed"]
    parts = per_dataset["combination"].str.split("/", expand=True)
    per_dataset = per_dataset.assign(**{part: parts[i] for i, part in
                                        enumerate(COMBINATION_PARTS)},
                                     group=per_dataset["dataset"].map(dataset_group))
    keys = [*ROW_PARTS, *COLUMN_PARTS]
    cells = per_dataset.groupby(keys, sort=False)
    raw = pd.Series(np.nan, index=won.index)
    for index, row in won.iterrows():
        if row["winner"] != baseline:
            block = cells.get_group(tuple(row[k] for k in keys))
            raw[index] = paired_test(block[row["winner"]].to_numpy(),
                                     block[baseline].to_numpy())["p_wilcoxon"]
    won["p"] = holm(raw)
    won["significant"] = np.where(won["winner"] == baseline, "baseline",
                                  np.where(won["p"] < alpha, "yes", "no"))
    return won


def _labels(frame: pd.DataFrame, parts: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(frame[list(parts)].astype(str).agg(" / ".join, axis=1)))


#: The cell labels' size in points and a cell's width in inches: the site shows the figure
#: about 700 pixels wide, so the labels' size on the page is their share of the figure's
#: width. 12-point labels on cells of 1.2 inches, with a title wrapped to the grid's width,
#: read at about 12 pixels (10 points on 1.1-inch cells under a one-line title read at 9).
LABEL_POINTS = 12
CELL_INCHES = 1.2
#: The axes' words (tick labels, legend, title) in points, a little under the cells'.
TEXT_POINTS = 11


def winner_grid(table: pd.DataFrame, path: str | os.PathLike, *,
                title: str | None = None, per_dataset: pd.DataFrame | None = None) -> Path:
    """Draw :func:`winners` of ``table`` as a grid: a cell per (row, column) coloured by its
    winning rule and labelled with the gain over All-in-LR; with ``per_dataset``, the cells
    whose winner is not significantly cheaper than All-in-LR (:func:`winner_tests`) are
    hatched and marked ``n.s.``. Returns the image's path."""
    won = winners(table) if per_dataset is None else winner_tests(table, per_dataset)
    unproven = (won["significant"] == "no" if "significant" in won
                else pd.Series(False, index=won.index))
    rows, columns = _labels(won, ROW_PARTS), _labels(won, COLUMN_PARTS)
    row_of = won[list(ROW_PARTS)].astype(str).agg(" / ".join, axis=1)
    column_of = won[list(COLUMN_PARTS)].astype(str).agg(" / ".join, axis=1)
    fig, ax = plt.subplots(figsize=(CELL_INCHES * len(columns) + 2.6,
                                    0.55 * len(rows) + 1.6))
    for name, i, j, gain, weak in zip(won["winner"], row_of.map(rows.index),
                                      column_of.map(columns.index), won["gain"], unproven,
                                      strict=True):
        ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=to_rgba(RULE_COLORS[name], 0.55),
                                   edgecolor="white", linewidth=2, hatch="//" if weak else None))
        text = name if name == "all-in-lr" else f"{name}\n-{100 * gain:.0f}%"
        text += " n.s." if weak else ""
        ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=LABEL_POINTS)
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks(np.arange(len(columns)) + 0.5, columns, rotation=30, ha="right",
                  fontsize=TEXT_POINTS)
    ax.set_yticks(np.arange(len(rows)) + 0.5, rows, fontsize=TEXT_POINTS)
    ax.set_xlabel(" / ".join(COLUMN_PARTS), fontsize=TEXT_POINTS - 1)
    ax.set_ylabel(" / ".join(ROW_PARTS), fontsize=TEXT_POINTS - 1)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=to_rgba(c, 0.55)) for c in
               RULE_COLORS.values()]
    ax.legend(handles, list(RULE_COLORS), loc="lower center", ncol=len(RULE_COLORS),
              bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=TEXT_POINTS)
    if title:
        ax.set_title(title, fontsize=TEXT_POINTS, pad=34)
    return save_figure(fig, path)


def answer_title(table: pd.DataFrame) -> str:
    """The figure's title: what the grid shows, and on how much data."""
    groups = table.groupby("group", sort=False)["datasets"].max()
    sets = ", ".join(f"{group} {int(n)}" for group, n in groups.items())
    return (f"Least mean test cost among deployable rules\n(data sets: {sets}; "
            f"{int(table['seeds'].max())} seeds); % = change in mean cost against all-in-lr;\n"
            "hatched, n.s.: not significantly below all-in-lr\n(Wilcoxon over the data sets, "
            "Holm)")


def answer_table(root: str | os.PathLike) -> pd.DataFrame:
    """:func:`winner_tests` of the crossed study's committed tables under
    ``root``/docs/tables."""
    tables = Path(root) / "docs" / "tables"
    return winner_tests(pd.read_csv(tables / f"{SOURCE}.csv"),
                        pd.read_csv(tables / f"{PER_DATASET}.csv"))


def write_answer(root: str | os.PathLike) -> list[Path]:
    """Redraw the landing page's figure into ``root``/docs/figures and write its table into
    ``root``/docs/tables from the crossed study's committed table; the paths written."""
    from agents.reports.tables import write_table

    docs = Path(root) / "docs"
    source = pd.read_csv(docs / "tables" / f"{SOURCE}.csv")
    per_dataset = pd.read_csv(docs / "tables" / f"{PER_DATASET}.csv")
    figure = winner_grid(source, docs / "figures" / f"{STEM}.png", title=answer_title(source),
                         per_dataset=per_dataset)
    table = write_table(winner_tests(source, per_dataset), docs / "tables", STEM, index=False,
                        title="Which allocation wins where",
                        note=f"The least-cost deployable rule per row of `{SOURCE}.csv`, its "
                             "gain over All-in-LR, and whether it is significantly cheaper "
                             f"over the group's data sets (`{PER_DATASET}.csv`: Wilcoxon "
                             "signed-rank, Holm-corrected over the cells) "
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


__all__ = ["COLUMN_PARTS", "COMBINATION_PARTS", "PER_DATASET", "RULES", "ROW_PARTS", "SOURCE",
           "STEM", "answer_table", "answer_title", "stale_answer", "winner_grid",
           "winner_tests", "winners", "write_answer"]
