"""Pictures and text of an episode's state, for ``env.render()``."""

from __future__ import annotations

import numpy as np

from ballad_env.episode import ACTION_NAMES, Episode, Snapshot
from ballad_env.rejection import confidence

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


def rgb_array(episode: Episode) -> np.ndarray:
    """Heat map of the anomaly probability over the (scaled) plane, the rejection region
    hatched, labeled training and validation points marked; needs 2-D data."""
    split = episode.split
    if split.X_train.shape[1] != 2:
        raise ValueError(f"rgb_array rendering needs 2-D data; {episode.dataset.name} has "
                         f"{split.X_train.shape[1]} features: use render_mode='ansi'")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    everything = np.vstack([split.X_train, split.X_val, split.X_test])
    lo, hi = everything.min(axis=0) - 0.05, everything.max(axis=0) + 0.05
    xs, ys = np.linspace(lo[0], hi[0], _GRID), np.linspace(lo[1], hi[1], _GRID)
    grid = np.column_stack([a.ravel() for a in np.meshgrid(xs, ys)])
    p = episode.scores.detector.anomaly_probability(grid).reshape(_GRID, _GRID)

    fig, ax = plt.subplots(figsize=(5, 5), dpi=80)
    image = ax.imshow(p, origin="lower", extent=(lo[0], hi[0], lo[1], hi[1]), cmap="RdBu_r",
                      vmin=0, vmax=1, aspect="auto")
    if episode.tau > 0:
        ax.contourf(xs, ys, (confidence(p) < episode.tau).astype(float), levels=[0.5, 1.5],
                    colors="none", hatches=["//"])
        ax.contour(xs, ys, confidence(p), levels=[episode.tau], colors="k", linewidths=0.8)
    ax.scatter(split.X_train[:, 0], split.X_train[:, 1], s=3, c="0.6")
    for X, y, idx, marker in ((split.X_train, split.y_train, episode.train_labels.indices, "o"),
                              (split.X_val, split.y_val, episode.val_labels.indices, "s")):
        colors = np.where(y[idx] == 1, "red", "blue")
        ax.scatter(X[idx, 0], X[idx, 1], s=25, marker=marker, c=colors, edgecolors="k",
                   linewidths=0.5)
    ax.set_title(f"{episode.dataset.name}: round {episode.rounds_done}, tau = {episode.tau:.2f}"
                 " (o: D labels, squares: V labels; red anomaly)", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.046, label="P(anomaly)")
    fig.tight_layout()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    frame = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return frame
