"""Figures of tidy harness results; they read stored tables and never rerun an experiment.

Every function takes the tidy table (``agents.experiments.load_results``) or the output
folder it lives in, and writes one image with matplotlib's Agg backend (no display needed).
The x axis of the per-round figures is ``spent_fraction``: labels bought as a share of |D|.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from agents.experiments.reports.tables import (  # noqa: E402
    reward_difference_stats,
    reward_differences,
    setting_label,
)
from agents.experiments.stores.results import load_results  # noqa: E402
from ballad_env.files import atomic_write  # noqa: E402

Results: TypeAlias = pd.DataFrame | str | os.PathLike

#: Fixed colours so an agent looks the same in every figure.
AGENT_COLORS = {"ballad": "tab:blue", "ballad-cosine": "tab:purple", "all-in-al": "tab:orange",
                "all-in-lr": "tab:green", "random": "tab:gray", "oracle": "black",
                "sadal": "tab:red"}
LINESTYLES = ("-", "--", ":", "-.")


def _table(results: Results) -> pd.DataFrame:
    """The tidy table itself, or the one stored in an output folder."""
    return results if isinstance(results, pd.DataFrame) else load_results(results)


def _select(table: pd.DataFrame, column: str, values: Sequence[str] | None) -> list[str]:
    """``values`` in the given order (all present values, in table order, when ``None``)."""
    present = list(dict.fromkeys(table[column]))
    if values is None:
        return present
    missing = [v for v in values if v not in present]
    if missing:
        raise ValueError(f"no results for {column} {missing}; present: {present}")
    return list(values)


def agent_color(agent: str, index: int) -> str:
    """``agent``'s fixed colour (:data:`AGENT_COLORS`), else the ``index``-th of the cycle."""
    return AGENT_COLORS.get(agent, f"C{(index + 5) % 10}")


def save_figure(fig: plt.Figure, path: str | os.PathLike, *, dpi: int = 130,
                bbox_inches: str | None = "tight") -> Path:
    """Write ``fig`` to ``path`` (its folder made if missing), close it, return the path:
    the one way every report's figure reaches the disk. Written to a temporary file and
    renamed (``ballad_env.files.atomic_write``), so a FIFO or a half-written figure at
    ``path`` is replaced, never written into."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = path.suffix.lstrip(".").lower() or "png"
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format=kind, dpi=dpi,
                                                   bbox_inches=bbox_inches))
    finally:
        plt.close(fig)
    return path


def _curves(table: pd.DataFrame, metric: str) -> pd.Series:
    """Mean ``metric`` per (setting, agent, labels spent) over seeds, then over data sets."""
    per_dataset = table.groupby(["setting", "agent", "spent_fraction", "dataset"])[metric].mean()
    return per_dataset.groupby(level=["setting", "agent", "spent_fraction"]).mean()


def _draw(ax: plt.Axes, table: pd.DataFrame, agents: list[str], settings: list[str],
          metric: str, labels: bool) -> None:
    curves = _curves(table, metric)
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
    table = _table(results)
    agents = _select(table, "agent", agents)
    settings = _select(table, "setting", settings)
    datasets = _select(table, "dataset", datasets)
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
    table = _table(results)
    agents = _select(table, "agent", agents)
    settings = _select(table, "setting", settings)
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.2),
                             squeeze=False, sharey=False)
    for j, (ax, setting) in enumerate(zip(axes.flat, settings, strict=True)):
        block = table[(table["setting"] == setting) & table["agent"].isin(agents)]
        _draw(ax, block, agents, [setting], metric, labels=j == 0)
        ax.set_title(setting_label(setting), fontsize=10)
        ax.set_xlabel("labels (% of D)")
        ax.set_ylabel(f"mean {metric.replace('_', ' ')} over data sets")
    return _finish_panels(fig, len(agents), title, path)


def _finish_panels(fig: Any, n_agents: int, title: str | None,
                   path: str | os.PathLike) -> Path:
    """A row of panels finished alike: one legend of the agents above them, the title above
    that, then saved."""
    fig.legend(loc="upper center", ncol=n_agents, frameon=False, bbox_to_anchor=(0.5, 1.02))
    if title:
        fig.suptitle(title, y=1.09)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return save_figure(fig, path)


def averaged_over(table: pd.DataFrame) -> str:
    """What a figure's means are taken over, for its title: the data sets (named when there
    are few) and the number of seeds."""
    sets = sorted(table["dataset"].unique())
    named = ", ".join(sets) if len(sets) <= 4 else f"{len(sets)} data sets"
    seeds = table["seed"].nunique()
    return f"{named}; {seeds} seed{'s' if seeds != 1 else ''}"


def cost_by_round_with_errors(results: Results, path: str | os.PathLike, *,
                              agents: Sequence[str] | None = None,
                              settings: Sequence[str] | None = None,
                              metric: str = "test_cost", title: str | None = None) -> Path:
    """One panel per setting: ``metric`` per round, averaged over data sets within each seed,
    then over seeds, with a band of one standard error over seeds (``ballad-env compare
    --plot``). The band is the seeds' spread (splits, priors, queries); with one seed there
    is none. The title (by default) names the data sets and the number of seeds."""
    table = _table(results)
    agents = _select(table, "agent", agents)
    settings = _select(table, "setting", settings)
    per_seed = (table.groupby(["setting", "agent", "spent_fraction", "seed"])[metric].mean()
                .groupby(level=["setting", "agent", "spent_fraction"]))
    mean, error = per_seed.mean(), per_seed.std(ddof=1) / np.sqrt(per_seed.count())
    fig, axes = plt.subplots(1, len(settings), figsize=(4.4 * len(settings), 3.3),
                             squeeze=False)
    for j, (ax, setting) in enumerate(zip(axes.flat, settings, strict=True)):
        for i, agent in enumerate(agents):
            if (setting, agent) not in mean.index.droplevel("spent_fraction"):
                continue
            m, e = mean.loc[(setting, agent)], error.loc[(setting, agent)].fillna(0.0)
            x = 100 * m.index.to_numpy()
            ax.plot(x, m.to_numpy(), color=agent_color(agent, i), marker="o", markersize=2.5,
                    linewidth=1.3, label=agent if j == 0 else None)
            ax.fill_between(x, (m - e).to_numpy(), (m + e).to_numpy(),
                            color=agent_color(agent, i), alpha=0.2, linewidth=0)
        ax.set_title(setting_label(setting), fontsize=9)
        ax.set_xlabel("labels (% of D)")
        ax.set_ylabel(f"{metric.replace('_', ' ')} (mean ± s.e. over seeds)")
    if title is None:
        title = f"{metric.replace('_', ' ')} by round ({averaged_over(table)})"
    return _finish_panels(fig, len(agents), title, path)


def reward_difference_histogram(results: Results, path: str | os.PathLike, *,
                                setting: str, agent: str = "ballad", reward: str = "entropy",
                                bins: int = 80) -> Path:
    """Histogram of AL minus LR ``reward`` over all of ``agent``'s measured rounds (Q3)."""
    table = _table(results)
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


__all__ = ["AGENT_COLORS", "agent_color", "averaged_over", "cost_by_round_with_errors",
           "cost_per_round",
           "mean_cost_per_round", "reward_difference_histogram", "save_figure"]
