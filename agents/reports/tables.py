"""Summary tables of tidy results, and Markdown for reports.

Every function takes the tidy table of ``run_grid`` / ``load_results`` (one row per data
set, seed, agent, settings and round). Data sets weigh equally: seeds are averaged within a
data set first.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ballad_env.detectors.priors import PRIORS
from ballad_env.files import atomic_write


def _dataset_means(results: pd.DataFrame, by: Sequence[str], metric: str) -> pd.Series:
    """Mean of ``metric`` over seeds (and any other rows) per ``by`` + data set."""
    return results.groupby([*by, "dataset"], sort=False)[metric].mean()


def _agent_order(results: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(results["agent"]))


def common_episodes(results: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows of the (data set, seed) pairs that every (setting, agent) of ``results``
    played, and how many pairs were left out: settings and agents of a partial run are then
    compared on the same episodes, never on different seeds."""
    combos = len(results[["setting", "agent"]].drop_duplicates())
    played = results[["dataset", "seed", "setting", "agent"]].drop_duplicates()
    counts = played.groupby(["dataset", "seed"], sort=False).size()
    keep = pd.MultiIndex.from_frame(counts[counts == combos].index.to_frame(index=False))
    rows = pd.MultiIndex.from_frame(results[["dataset", "seed"]]).isin(keep)
    return results[rows], int((counts < combos).sum())


def summary_table(results: pd.DataFrame, metric: str = "test_cost") -> pd.DataFrame:
    """Mean ``metric`` (over seeds and rounds) per setting and data set, one column per agent,
    with the winner (lowest mean; ``tie`` if the best two are equal), its margin over the
    runner-up (relative) and in how many seeds it was best. A row ``mean`` per setting averages
    the data sets."""
    agents = _agent_order(results)
    seed_means = (results.groupby(["setting", "dataset", "seed", "agent"], sort=False)[metric]
                  .mean().unstack("agent")[agents])
    means = seed_means.groupby(level=["setting", "dataset"], sort=False).mean()
    pieces = []
    for setting, block in means.groupby(level="setting", sort=False):
        block = block.droplevel("setting")
        block.loc["mean"] = block.mean()
        pieces.append(pd.concat({setting: block}, names=["setting"]))
    table = pd.concat(pieces)
    table.index.names = ["setting", "dataset"]
    if len(agents) < 2:
        return table
    values = table[agents].to_numpy()
    ordered = np.sort(values, axis=1)
    best, runner_up = ordered[:, 0], ordered[:, 1]
    winner = np.array(agents, dtype=object)[np.argmin(values, axis=1)]
    tie = np.isclose(best, runner_up, rtol=1e-12, atol=0.0)
    table["winner"] = np.where(tie, "tie", winner)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["margin"] = np.where(runner_up > 0, (runner_up - best) / runner_up, 0.0)
    table["seeds_won"] = [_seeds_won(seed_means, key, w) for key, w in
                          zip(table.index, table["winner"], strict=True)]
    return table


def standard_errors(results: pd.DataFrame, metric: str = "test_cost") -> pd.DataFrame:
    """The standard error of each mean of :func:`summary_table` (same rows, one column per
    agent): over seeds within a data set, ``std(seed means, ddof=1) / sqrt(seeds)`` (NaN with
    one seed); for a setting's ``mean`` row, the error of the mean of independent data-set
    means, ``sqrt(sum of squared errors) / data sets``. It measures the spread of the seeds
    (splits, priors, queries), not how the data sets differ."""
    agents = _agent_order(results)
    seed_means = (results.groupby(["setting", "dataset", "seed", "agent"], sort=False)[metric]
                  .mean().unstack("agent")[agents])
    grouped = seed_means.groupby(level=["setting", "dataset"], sort=False)
    errors = grouped.std(ddof=1) / np.sqrt(grouped.count())
    pieces = []
    for setting, block in errors.groupby(level="setting", sort=False):
        block = block.droplevel("setting")
        block.loc["mean"] = np.sqrt((block ** 2).sum(min_count=1)) / len(block)
        pieces.append(pd.concat({setting: block}, names=["setting"]))
    table = pd.concat(pieces)
    table.index.names = ["setting", "dataset"]
    return table


def with_standard_errors(summary: pd.DataFrame, errors: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with each agent's column followed by its standard error, ``<agent> se``."""
    table = summary.copy()
    for agent in errors.columns:
        table.insert(table.columns.get_loc(agent) + 1, f"{agent} se", errors[agent])
    return table


def _seeds_won(seed_means: pd.DataFrame, key: tuple[str, str], winner: str) -> str:
    """'k/n': seeds in which ``winner`` had the strictly lowest mean (blank for the mean row)."""
    setting, dataset = key
    if dataset == "mean" or winner == "tie":
        return ""
    block = seed_means.loc[(setting, dataset)]
    others = block.drop(columns=winner).min(axis=1)
    return f"{int((block[winner] < others).sum())}/{len(block)}"


def win_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """How many data sets each agent wins per setting (the ``mean`` rows left out)."""
    rows = summary[summary.index.get_level_values("dataset") != "mean"]
    return rows.groupby(level="setting", sort=False)["winner"].value_counts().unstack(fill_value=0)


def per_round_table(results: pd.DataFrame, metric: str = "test_cost",
                    spread: bool = False) -> pd.DataFrame:
    """Mean ``metric`` per round (rows) and agent (columns), per setting.

    Data sets weigh equally: seeds are averaged within a data set first. With ``spread``
    each agent also gets the standard deviation across data sets (the paper's Table 2).
    """
    per_dataset = _dataset_means(results, ["setting", "agent", "round"], metric)
    grouped = per_dataset.groupby(level=["setting", "agent", "round"], sort=False)
    table = grouped.agg(["mean", "std"]) if spread else grouped.mean().to_frame("mean")
    wide = table.unstack("agent")
    wide.columns = wide.columns.swaplevel(0, 1) if spread else wide.columns.droplevel(0)
    agents = _agent_order(results)
    if spread:
        wide = wide[[(a, stat) for a in agents for stat in ("mean", "std")]]
    else:
        wide = wide[agents]
    return wide.sort_index(level=["setting", "round"], sort_remaining=False)


def action_shares(results: pd.DataFrame, first_round: int = 1) -> pd.DataFrame:
    """Share of AL choices per setting and agent, over rounds from ``first_round`` on."""
    rows = results[results["round"] >= first_round]
    share = (rows["action"] == "AL").groupby([rows["setting"], rows["agent"]], sort=False).mean()
    return share.unstack("agent")[_agent_order(rows)]


def markdown_table(frame: pd.DataFrame, digits: int = 4, index: bool = True,
                   missing: str = "") -> str:
    """A GitHub Markdown table of ``frame`` (floats with ``digits`` decimals, NaN as
    ``missing``), with no extra dependency."""
    frame = frame.reset_index() if index else frame
    header = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell_text(v, digits, missing) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _cell_text(value: Any, digits: int, missing: str) -> str:
    if isinstance(value, float | np.floating):
        return missing if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def write_table(frame: pd.DataFrame, folder: str | os.PathLike, stem: str, *,
                title: str | None = None, note: str = "", digits: int = 4, index: bool = True,
                missing: str = "", csv_float_format: str | None = None,
                markdown: bool = True) -> Path:
    """Write ``<folder>/<stem>.csv`` and ``<folder>/<stem>.md`` (with an optional title and
    note above the table); returns the Markdown file's path. With ``markdown=False`` only
    the CSV is written (a table kept for reading back, not for a report), and its path is
    returned."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    csv = folder / f"{stem}.csv"
    atomic_write(csv, lambda tmp: frame.to_csv(tmp, index=index, float_format=csv_float_format))
    if not markdown:
        return csv
    text = (f"# {title}\n\n" if title else "") + (f"{note}\n\n" if note else "")
    path = folder / f"{stem}.md"
    table = text + markdown_table(frame, digits, index, missing)
    atomic_write(path, lambda tmp: tmp.write_text(table))
    return path


#: How a prior's stored name reads in a label.
PRIOR_LABELS = {"iforest": "IForest", "knn": "kNN"}


def setting_label(name: str) -> str:
    """How the setting stored as ``name`` (``Settings.name``) reads in a figure's title or
    legend. Alone, ``iforest`` reads as the detector, though the detector is SSDO with an
    IForest prior: the label says so (``SSDO, IForest prior``; ``knn_cfn10``: ``SSDO, kNN
    prior, cfn10``). Other detectors, the presets and names that are not a registered
    prior's (a study's ``cfn10``) stay as they are. Only the label changes: tidy results and
    tables keep the stored name as their key."""
    prior, _, rest = name.partition("_")
    if prior not in PRIORS or "det-" in rest:  # a preset, another detector, a study's name
        return name
    label = f"SSDO, {PRIOR_LABELS.get(prior, prior)} prior"
    return f"{label}, {rest.replace('_', ', ')}" if rest else label


__all__ = ["PRIOR_LABELS", "action_shares", "common_episodes", "markdown_table",
           "per_round_table", "setting_label", "standard_errors", "summary_table",
           "win_counts", "with_standard_errors", "write_table"]
