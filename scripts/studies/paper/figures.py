"""The paper study's own figures and reward tables: cost per round by data set and by
setting (Q1, Q2, Q4), and the AL-minus-LR reward differences (Q3). They read the tidy
results only; the figures go through the harness's ``save_figure`` in its colours."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from agents.reports.plots import (
    Results,
    agent_color,
    finish_panels,
    results_table,
    save_figure,
    select,
)
from agents.reports.tables import setting_label

LINESTYLES = ("-", "--", ":", "-.")


# ---------------------------------------------------------------------------------- tables
def reward_differences(results: pd.DataFrame, agent: str = "ballad", reward: str = "entropy"
                       ) -> pd.DataFrame:
    """AL minus LR ``reward`` of ``agent``'s rounds once both sides are measured, per setting.

    These are the latest rewards after each round, the values BALLAD compares next.
    """
    rows = results[(results["agent"] == agent)].copy()
    rows["al"], rows["lr"] = rows[f"{reward}_al"], rows[f"{reward}_lr"]
    if {"al_measured", "lr_measured"} <= set(rows.columns):
        rows = rows[rows["al_measured"] & rows["lr_measured"]]
    else:  # older records: unmeasured rewards were NaN
        rows = rows[rows["al"].notna() & rows["lr"].notna()]
    rows["difference"] = rows["al"] - rows["lr"]
    return rows[["setting", "dataset", "seed", "round", "al", "lr", "difference"]]


def reward_difference_stats(differences: pd.DataFrame) -> pd.DataFrame:
    """Median and spread of the AL - LR reward differences, and each side's std, per setting."""
    def stats(block: pd.DataFrame) -> pd.Series:
        return pd.Series({"rounds": len(block), "median": block["difference"].median(),
                          "mean": block["difference"].mean(),
                          "std_difference": block["difference"].std(),
                          "share_lr_higher": float((block["difference"] < 0).mean()),
                          "std_al": block["al"].std(), "std_lr": block["lr"].std()})

    return pd.DataFrame({setting: stats(block) for setting, block
                         in differences.groupby("setting", sort=False)}).T


def fresh_rewards(results: pd.DataFrame, signal: str = "entropy") -> pd.Series:
    """The ``signal`` reward each round measured for the side it chose (AL or LR)."""
    chose_al = results["action"] == "AL"
    return results[f"{signal}_al"].where(chose_al, results[f"{signal}_lr"])


def operating_points(results: pd.DataFrame,
                     metrics: Sequence[str] = ("test_cost", "fpr", "fnr", "rejection_rate",
                                               "auc", "tau")) -> pd.DataFrame:
    """Mean of each metric per setting and agent (data sets weigh equally, seeds first)."""
    per_dataset = results.groupby(["setting", "agent", "dataset"], sort=False)[list(metrics)]
    return per_dataset.mean().groupby(level=["setting", "agent"], sort=False).mean()


def relative_gain(table: pd.DataFrame, agent: str, baseline: str) -> pd.Series:
    """1 - cost(agent) / cost(baseline) per row of a table with one column per agent."""
    return 1.0 - table[agent] / table[baseline]


# ---------------------------------------------------------------------------------- figures
def _draw(ax: plt.Axes, table: pd.DataFrame, agents: list[str], settings: list[str],
          metric: str, labels: bool) -> None:
    """Mean ``metric`` per round (seeds, then data sets), one line per (agent, setting):
    colour tells the agent, line style the setting."""
    per_dataset = table.groupby(["setting", "agent", "spent_fraction", "dataset"])[metric].mean()
    curves = per_dataset.groupby(level=["setting", "agent", "spent_fraction"]).mean()
    for i, agent in enumerate(agents):
        for j, setting in enumerate(settings):
            if (setting, agent) not in curves.index.droplevel("spent_fraction"):
                continue
            curve = curves.loc[(setting, agent)]
            label = agent if len(settings) == 1 else f"{agent} ({setting_label(setting)})"
            ax.plot(100 * curve.index, curve.to_numpy(), LINESTYLES[j % len(LINESTYLES)],
                    color=agent_color(agent, i), marker="o", markersize=2.5, linewidth=1.3,
                    label=label if labels else None)


def cost_per_round(results: Results, path: str | os.PathLike, *,
                   agents: Sequence[str] | None = None, settings: Sequence[str] | None = None,
                   datasets: Sequence[str] | None = None, metric: str = "test_cost",
                   ncols: int = 6, title: str | None = None) -> Path:
    """One panel per data set: mean ``metric`` over seeds per round (the paper's Figure 1).

    Colour tells the agent, line style the setting, so one figure can also compare settings
    (e.g. the exact and the bayes threshold search).
    """
    table = results_table(results)
    agents = select(table, "agent", agents)
    settings = select(table, "setting", settings)
    datasets = select(table, "dataset", datasets)
    table = table[table["agent"].isin(agents) & table["setting"].isin(settings)]
    ncols = min(ncols, len(datasets))
    nrows = math.ceil(len(datasets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.7 * ncols, 2.2 * nrows + 0.6),
                             squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(datasets):
            ax.axis("off")
            continue
        name = datasets[k]
        _draw(ax, table[table["dataset"] == name], agents, settings, metric, labels=k == 0)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        if k % ncols == 0:
            ax.set_ylabel(metric.replace("_", " "), fontsize=8)
        if k // ncols == nrows - 1:
            ax.set_xlabel("labels (% of D)", fontsize=8)
    fig.legend(loc="upper center", ncol=min(6, len(agents) * len(settings)), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, 1.0))
    if title:
        fig.suptitle(title, y=1.04, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save_figure(fig, path)


def mean_cost_per_round(results: Results, path: str | os.PathLike, *,
                        agents: Sequence[str] | None = None,
                        settings: Sequence[str] | None = None, metric: str = "test_cost",
                        title: str | None = None) -> Path:
    """One panel per setting: ``metric`` per round averaged over data sets (seeds first)."""
    table = results_table(results)
    agents = select(table, "agent", agents)
    settings = select(table, "setting", settings)
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.2),
                             squeeze=False, sharey=False)
    for j, (ax, setting) in enumerate(zip(axes.flat, settings, strict=True)):
        block = table[(table["setting"] == setting) & table["agent"].isin(agents)]
        _draw(ax, block, agents, [setting], metric, labels=j == 0)
        ax.set_title(setting_label(setting), fontsize=10)
        ax.set_xlabel("labels (% of D)")
        ax.set_ylabel(f"mean {metric.replace('_', ' ')} over data sets")
    return finish_panels(fig, len(agents), title, path)


def reward_difference_histogram(results: Results, path: str | os.PathLike, *,
                                setting: str, agent: str = "ballad", reward: str = "entropy",
                                bins: int = 80) -> Path:
    """Histogram of AL minus LR ``reward`` over all of ``agent``'s measured rounds (Q3)."""
    table = results_table(results)
    differences = reward_differences(table[table["setting"] == setting], agent, reward)
    if differences.empty:
        raise ValueError(f"no {agent} rounds with both rewards measured in setting {setting}")
    stats = reward_difference_stats(differences).loc[setting]
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    values = differences["difference"].to_numpy()
    ax.hist(values, bins=bins, color="tab:blue", alpha=0.75)
    ax.axvline(stats["median"], color="black", linestyle="--", linewidth=1,
               label=f"median {stats['median']:.4f}")
    ax.axvline(0.0, color="gray", linewidth=0.6)
    ax.set_yscale("log" if np.ptp(np.histogram(values, bins=bins)[0]) > 200 else "linear")
    ax.set_xlabel(f"{reward} reward: AL - LR")
    ax.set_ylabel("rounds")
    ax.set_title(f"{agent}, {setting_label(setting)}: std AL {stats['std_al']:.3f}, std LR "
                 f"{stats['std_lr']:.3f} ({int(stats['rounds'])} rounds)", fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


__all__ = ["cost_per_round", "fresh_rewards", "mean_cost_per_round", "operating_points",
           "relative_gain", "reward_difference_histogram", "reward_difference_stats",
           "reward_differences"]
