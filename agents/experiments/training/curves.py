"""A training run's learning curves, read back from its monitor CSVs (:func:`read_monitor`)
and drawn (:func:`plot_training_curves`: ``curve.png`` beside every run, the trainers
compared in the timings study). Every trainer writes the monitor files: SB3's one row
per episode and worker, the torch trainers one row per rollout (``training.recorder``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from agents.reports.plots import save_figure


def read_monitor(run_dir: str | Path):
    """All workers' episodes of a run as one table, with the global step count at each end.

    Workers write their own CSV; sorting by wall time and summing lengths gives the
    number of environment steps taken when each episode ended.
    """
    import pandas as pd

    files = sorted(Path(run_dir, "monitor").glob("*.monitor.csv"))
    if not files:
        raise FileNotFoundError(f"no monitor CSV under {Path(run_dir, 'monitor')}")
    frame = pd.concat([pd.read_csv(f, skiprows=1) for f in files], ignore_index=True)
    frame = frame.sort_values("t", kind="stable").reset_index(drop=True)
    frame["timesteps"] = frame["l"].cumsum()
    return frame.rename(columns={"r": "return", "l": "length", "t": "seconds"})


def plot_training_curves(groups: Mapping[str, Sequence[str | Path]], path: str | Path,
                         window: int = 30, title: str | None = None, *,
                         windows: Mapping[str, int] | None = None,
                         x: str = "timesteps") -> Path:
    """Episode return and final test cost vs steps (``x="seconds"``: vs training seconds):
    one line per group (its runs averaged on a common grid after a rolling mean over
    ``window`` monitor rows, ``windows[group]`` where given), a band for min-max. A batched
    run's monitor row is a rollout's mean (``training.torch_trainer``), an SB3 run's one episode.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for label, run_dirs in groups.items():
        frames = [f for f in (read_monitor(d) for d in run_dirs) if len(f)]
        if not frames:  # a run shorter than one episode: nothing to draw
            for ax in axes:
                ax.text(0.5, 0.5, f"{label}: no episode finished", ha="center",
                        transform=ax.transAxes)
            continue
        end = min(float(f[x].iloc[-1]) for f in frames)
        grid = np.linspace(0, end, 100)
        rows = (windows or {}).get(label, window)
        for ax, column in zip(axes, ("return", "test_cost"), strict=True):
            curves = np.array([np.interp(grid, f[x],
                                         f[column].rolling(rows, min_periods=1).mean())
                               for f in frames])
            (line,) = ax.plot(grid, curves.mean(axis=0), label=f"{label} (n={len(frames)})")
            if len(frames) > 1:
                ax.fill_between(grid, curves.min(axis=0), curves.max(axis=0),
                                color=line.get_color(), alpha=0.2)
    xlabel = "environment steps" if x == "timesteps" else "training seconds"
    rolling = "rolling mean" if windows else f"rolling {window}"
    axes[0].set(xlabel=xlabel, ylabel=f"episode return ({rolling})")
    axes[1].set(xlabel=xlabel, ylabel=f"final test cost ({rolling})")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, dpi=120, bbox_inches=None)


__all__ = ["plot_training_curves", "read_monitor"]
