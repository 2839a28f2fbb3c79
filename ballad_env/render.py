"""Pictures and text of an episode's state, for ``env.render()``."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ballad_env.episode import ACTION_NAMES, AL, Episode, Snapshot

_GRID = 120


def ansi(snapshot: Snapshot) -> str:
    """One line per fact: round, labels, tau, and the test metrics."""
    s = snapshot
    action = ACTION_NAMES[s.previous] if s.previous is not None else "-"
    return (
        f"round {s.round}/{s.n_rounds} (last: {action}) | "
        f"labels D {s.n_labeled_train}/{s.n_train}, V {s.n_labeled_val}/{s.n_val}, "
        f"anomalies found {s.n_anomalies_found} | tau {s.tau:.3f} | "
        f"test cost {s.test_cost:.4f}, FPR {s.fpr:.3f}, FNR {s.fnr:.3f}, "
        f"rejected {s.rejection_rate:.3f}, AUC {s.auc:.3f}\n"
    )


#: Points drawn per set at most (evenly spaced): enough to show the shape, fast at any size.
_MAX_POINTS = 3000
_FIGSIZE, _DPI = (10.0, 5.0), 80  # every frame 800 x 400 pixels


def rgb_array(episode: Episode, history: Sequence[Snapshot] = ()) -> np.ndarray:
    """One frame of the episode, the same size for every data set and round.

    Left: the data. With 2 features, the anomaly probability over the (scaled) plane, the
    rejection region hatched; otherwise a 2-D projection of D, V and T (their first two
    principal axes on D; with 1 feature, the feature against the anomaly probability), each
    point coloured by its anomaly probability, rejected points crossed. On both: bought labels
    (circles D, squares V; red anomaly, blue normal) and the last round's queries (ringed).
    Right: test cost and tau by round, and the labels bought on each side (``history``: the
    snapshots from the reset on).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=_FIGSIZE, dpi=_DPI)
    grid = fig.add_gridspec(2, 2, width_ratios=(1.15, 1.0), hspace=0.35, wspace=0.3)
    data_ax = fig.add_subplot(grid[:, 0])
    _draw_data(data_ax, episode)
    _draw_rounds(fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 1]),
                 episode.budget.n_rounds, episode.budget.total, history)
    return _frame(fig)


def lattice_rgb_array(cost: np.ndarray, history: Sequence[Snapshot], total_labels: int
                      ) -> np.ndarray:
    """One frame of a replayed episode (``ballad_env.replay.env``), the size of :func:`rgb_array`'s.

    Left: the test cost of every state (i AL, j LR rounds) of the lattice, the path so far
    drawn on it. Right: as :func:`rgb_array` (``history``: the snapshots from the reset on).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=_FIGSIZE, dpi=_DPI)
    grid = fig.add_gridspec(2, 2, width_ratios=(1.15, 1.0), hspace=0.35, wspace=0.3)
    ax = fig.add_subplot(grid[:, 0])
    image = ax.imshow(cost, origin="lower", cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=7)
    ax.plot([s.n_lr for s in history], [s.n_al for s in history], "o-", color="w", ms=3)
    ax.set_xlabel("LR rounds j", fontsize=8)
    ax.set_ylabel("AL rounds i", fontsize=8)
    ax.set_title("test cost of every state; the path so far (white)", fontsize=8)
    ax.tick_params(labelsize=7)
    k = cost.shape[0] - 1
    _draw_rounds(fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 1]), k, total_labels,
                 history)
    return _frame(fig)


def _frame(fig: Any) -> np.ndarray:
    """The figure's pixels (RGB), the figure closed."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig.subplots_adjust(left=0.06, right=0.94, top=0.92, bottom=0.1)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    frame = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return frame


def _draw_data(ax: Any, episode: Episode) -> None:
    """The left panel: the plane (2-D data) or a projection, labels and queries."""
    split = episode.split
    sets = ((split.X_train, episode.p_train), (split.X_val, episode.p_val),
            (split.X_test, episode.p_test))
    rejected_note = "hatched: rejected"
    if split.X_train.shape[1] == 2:
        project = _draw_plane(ax, episode)
        xlabel, ylabel = "feature 1 (scaled)", "feature 2 (scaled)"
    else:
        rejected_note = "x: rejected"
        project, xlabel, ylabel = _projection(episode)
        shown = [(X[_spread_out(len(X))], p[_spread_out(len(X))]) for X, p in sets]
        X_all = np.vstack([X for X, _ in shown])
        p_all = np.concatenate([p for _, p in shown])
        xy = project(X_all, p_all)
        ax.scatter(xy[:, 0], xy[:, 1], s=4, c=p_all, cmap="RdBu_r", vmin=0, vmax=1,
                   linewidths=0)
        rejected = episode.rejection.reject(p_all)
        ax.scatter(xy[rejected, 0], xy[rejected, 1], s=8, marker="x", c="0.55",
                   linewidths=0.5)
    for (X, p), labels, y, marker in (
            (sets[0], episode.train_labels, split.y_train, "o"),
            (sets[1], episode.val_labels, split.y_val, "s")):
        idx = labels.indices
        idx = idx[_spread_out(len(idx))]
        xy = project(X[idx], p[idx])
        ax.scatter(xy[:, 0], xy[:, 1], s=_marker_size(len(idx), 22), marker=marker,
                   c=np.where(y[idx] == 1, "red", "blue"), edgecolors="k", linewidths=0.5)
    if episode.previous is not None and episode.last_queried.size:
        X, p = sets[0] if episode.previous == AL else sets[1]
        queried = episode.last_queried[_spread_out(len(episode.last_queried))]
        xy = project(X[queried], p[queried])
        ax.scatter(xy[:, 0], xy[:, 1], s=_marker_size(len(queried), 70), facecolors="none",
                   edgecolors="orange", linewidths=1.2)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{episode.dataset.name}: round {episode.rounds_done}, tau = "
                 f"{episode.tau:.2f}\n(o D labels, squares V labels: red anomaly; ringed: "
                 f"last queries; {rejected_note})", fontsize=8)


Projector = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _draw_plane(ax: Any, episode: Episode) -> Projector:
    """2-D data: the anomaly probability over the plane, the rejection region hatched."""
    split = episode.split
    everything = np.vstack([split.X_train, split.X_val, split.X_test])
    lo, hi = everything.min(axis=0) - 0.05, everything.max(axis=0) + 0.05
    xs, ys = np.linspace(lo[0], hi[0], _GRID), np.linspace(lo[1], hi[1], _GRID)
    grid = np.column_stack([a.ravel() for a in np.meshgrid(xs, ys)])
    p = episode.scores.anomaly_probability(grid).reshape(_GRID, _GRID)
    ax.imshow(p, origin="lower", extent=(lo[0], hi[0], lo[1], hi[1]), cmap="RdBu_r",
              vmin=0, vmax=1, aspect="auto")
    if episode.tau > 0:  # the rejector's band, hatched, and its ends
        ax.contourf(xs, ys, episode.rejection.reject(p).astype(float), levels=[0.5, 1.5],
                    colors="none", hatches=["//"])
        ax.contour(xs, ys, p, levels=sorted(set(episode.rejection.thresholds)), colors="k",
                   linewidths=0.8)
    shown = _spread_out(len(split.X_train))
    ax.scatter(split.X_train[shown, 0], split.X_train[shown, 1], s=3, c="0.6")
    return lambda X, p: X


def _projection(episode: Episode) -> tuple[Projector, str, str]:
    """A fixed 2-D view of the episode's data: its first two principal axes on D (computed
    once per reset); with one feature, the feature against the anomaly probability."""
    X_train = episode.split.X_train
    if X_train.shape[1] == 1:
        return (lambda X, p: np.column_stack([X[:, 0], p]), "feature (scaled)",
                "anomaly probability")
    key = episode.start
    if key not in _AXES:
        sample = X_train[_spread_out(len(X_train))]
        mean = sample.mean(axis=0)
        _, _, vt = np.linalg.svd(sample - mean, full_matrices=False)
        _AXES[key] = (mean, vt[:2].T)
    mean, axes = _AXES[key]
    return (lambda X, p: (X - mean) @ axes, "principal axis 1 of D", "principal axis 2 of D")


_AXES: weakref.WeakKeyDictionary[Any, tuple[np.ndarray, np.ndarray]] = \
    weakref.WeakKeyDictionary()


def _marker_size(count: int, size: float) -> float:
    """Smaller markers when many are drawn, so they do not cover the picture."""
    return size if count <= 100 else max(size / 4, size * (100 / count) ** 0.5)


def _spread_out(n: int) -> np.ndarray:
    """At most ``_MAX_POINTS`` evenly spaced indices of n points (all when fewer)."""
    return np.unique(np.linspace(0, n - 1, min(n, _MAX_POINTS)).astype(np.intp)) if n else \
        np.empty(0, dtype=np.intp)


def _draw_rounds(cost_ax: Any, labels_ax: Any, k: int, total_labels: int,
                 history: Sequence[Snapshot]) -> None:
    """The right panels: test cost and tau by round; labels bought on D and V by round
    (``k`` rounds, ``total_labels`` in the budget)."""
    rounds = [s.round for s in history]
    cost_ax.plot(rounds, [s.test_cost for s in history], "o-", ms=3, color="k",
                 label="test cost")
    cost_ax.set_xlim(-0.5, k + 0.5)
    cost_ax.set_ylabel("test cost", fontsize=8)
    tau_ax = cost_ax.twinx()
    tau_ax.plot(rounds, [s.tau for s in history], "s--", ms=3, color="tab:green", label="tau")
    tau_ax.set_ylim(-0.02, 1.02)
    tau_ax.set_ylabel("tau", fontsize=8, color="tab:green")
    cost_ax.set_title("by round: test cost (black), tau (green)", fontsize=8)
    labels_ax.bar(rounds, [s.n_labeled_train for s in history], color="tab:blue",
                  label="D (AL)")
    labels_ax.bar(rounds, [s.n_labeled_val for s in history],
                  bottom=[s.n_labeled_train for s in history], color="tab:orange",
                  label="V (LR)")
    labels_ax.set_xlim(-0.5, k + 0.5)
    labels_ax.set_ylim(0, max(1, total_labels) * 1.05)
    labels_ax.set_xlabel("round", fontsize=8)
    labels_ax.set_ylabel("labels bought", fontsize=8)
    labels_ax.legend(fontsize=7, loc="upper left")
    for ax in (cost_ax, tau_ax, labels_ax):
        ax.tick_params(labelsize=7)
