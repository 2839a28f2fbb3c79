"""Figures of tidy harness results; they read stored tables and never rerun an experiment.

Every function takes the tidy table (``run_grid``'s result, or a results folder read with
``agents.experiments.load_results``), and writes one image with matplotlib's Agg backend
(no display needed). The x axis of the per-round figures is ``spent_fraction``: labels
bought as a share of |D|.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from agents.reports.tables import setting_label  # noqa: E402
from ballad_env.files import atomic_write  # noqa: E402

Results: TypeAlias = pd.DataFrame

#: Fixed colours so an agent looks the same in every figure.
AGENT_COLORS = {"ballad": "tab:blue", "ballad-cosine": "tab:purple", "all-in-al": "tab:orange",
                "all-in-lr": "tab:green", "random": "tab:gray", "oracle": "black",
                "sadal": "tab:red"}


def results_table(results: Results) -> pd.DataFrame:
    """The tidy table, checked: the reports sit below the harness and read no results folder
    themselves (the harness's store does)."""
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"a figure takes the tidy results table, not {type(results).__name__}: "
                        "read a results folder with agents.experiments.load_results(folder)")
    return results


def select(table: pd.DataFrame, column: str, values: Sequence[str] | None) -> list[str]:
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


def finish_panels(fig: Any, n_agents: int, title: str | None,
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
    table = results_table(results)
    agents = select(table, "agent", agents)
    settings = select(table, "setting", settings)
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
    return finish_panels(fig, len(agents), title, path)


__all__ = ["AGENT_COLORS", "agent_color", "averaged_over", "cost_by_round_with_errors",
           "finish_panels", "results_table", "save_figure", "select"]
