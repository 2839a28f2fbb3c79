"""Learned policies the RL way (Agarwal et al. 2021, "Deep RL at the edge of the statistical
precipice"): the interquartile mean of the final test cost over training seeds and data sets,
with a stratified bootstrap interval, and performance profiles.

A policy's scores form a matrix of runs (training seeds) x tasks (data sets). The IQM is the
mean of the middle half of all its scores (``scipy.stats.trim_mean`` cutting a quarter at each
end): robust to a seed that failed, yet using half the runs, unlike the median. Its interval
resamples the runs within each task (a stratified bootstrap: every data set keeps its count of
runs). A performance profile is, for each cost threshold tau, the share of runs whose cost is
at most tau, averaged over tasks (each data set weighs equally); a curve above another is a
policy that more often reaches a low cost.

rliable computes the same, but it needs ``arch<8``, which does not import under pandas 3; so
these few lines are ours, on numpy and scipy only (no extra needed), checked against the
definitions above in ``tests/test_policy_stats.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as st

from agents.reports.stats import stream

#: Interval coverage, and resamples per interval.
CONFIDENCE = 0.95
RESAMPLES = 2000


def iqm(scores: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """The interquartile mean: the mean of the scores left after cutting a quarter at each
    end (of the flattened array when ``axis`` is None)."""
    scores = np.asarray(scores, dtype=float)
    if scores.size == 0:
        raise ValueError("no scores to average: give at least one run of one task")
    return st.trim_mean(scores, 0.25, axis=axis)


def score_matrix(table: pd.DataFrame, policy: str, *, metric: str = "test_cost",
                 run: str = "seed", task: str = "dataset", column: str = "agent"
                 ) -> np.ndarray:
    """One policy's runs x tasks matrix from a tidy table (one row per run and task; several
    rows of a cell, such as rounds, are averaged). Every task needs the same runs."""
    rows = table[table[column] == policy]
    if rows.empty:
        raise ValueError(f"no rows of {column} {policy!r}: name one of "
                         f"{', '.join(map(str, table[column].unique()))}")
    matrix = rows.groupby([run, task], sort=False)[metric].mean().unstack(task)
    if matrix.isna().any().any():
        raise ValueError(f"{policy!r} lacks some ({run}, {task}) cells: every task needs the "
                         "same runs for a stratified bootstrap")
    return matrix.to_numpy(dtype=float)


def stratified_bootstrap(scores: np.ndarray, rng: np.random.Generator,
                         statistic: Callable[..., np.ndarray | float] = iqm,
                         resamples: int = RESAMPLES, *, whole_runs: bool = False
                         ) -> np.ndarray:
    """``statistic`` of ``resamples`` bootstrap copies of a runs x tasks matrix, each drawing
    its runs with replacement within every task (column) on its own. With ``whole_runs`` a
    copy draws its runs once for all tasks: right where a run is one policy played on every
    task (its scores move together), which drawing per task would average away."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.shape[0] < 1:
        raise ValueError(f"scores must be a runs x tasks matrix, got shape {scores.shape}")
    runs, tasks = scores.shape
    picks = rng.integers(0, runs, size=(resamples, runs, 1 if whole_runs else tasks))
    copies = scores[picks, np.arange(tasks)]  # (resamples, runs, tasks)
    return np.asarray(statistic(copies.reshape(resamples, -1), axis=1))


def interval(scores: np.ndarray, rng: np.random.Generator,
             statistic: Callable[..., np.ndarray | float] = iqm,
             confidence: float = CONFIDENCE, resamples: int = RESAMPLES, *,
             whole_runs: bool = False) -> tuple[float, float, float]:
    """``statistic`` of ``scores`` (runs x tasks) and its percentile stratified bootstrap
    interval: ``(value, low, high)`` (``whole_runs``: as in ``stratified_bootstrap``)."""
    draws = stratified_bootstrap(scores, rng, statistic, resamples, whole_runs=whole_runs)
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return float(statistic(np.asarray(scores, dtype=float))), float(low), float(high)


def performance_profile(scores: np.ndarray, thresholds: Sequence[float] | np.ndarray
                        ) -> np.ndarray:
    """For each threshold tau, the share of runs with a cost at most tau, averaged over the
    tasks (columns) of a runs x tasks matrix; non-decreasing in tau, from 0 to 1."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise ValueError(f"scores must be a runs x tasks matrix, got shape {scores.shape}")
    taus = np.asarray(thresholds, dtype=float)
    below = scores[None, :, :] <= taus[:, None, None]  # (thresholds, runs, tasks)
    return below.mean(axis=1).mean(axis=1)


def policy_summary(table: pd.DataFrame, policies: Sequence[str] | None = None, *,
                   seed: int = 0, metric: str = "test_cost", run: str = "seed",
                   task: str = "dataset", column: str = "agent",
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES
                   ) -> pd.DataFrame:
    """One row per policy: ``runs``, ``tasks``, ``mean``, ``iqm`` and the IQM's stratified
    bootstrap interval (``low``, ``high``); each policy's resampling has its own stream."""
    names = list(dict.fromkeys(table[column])) if policies is None else list(policies)
    rows = []
    for name in names:
        scores = score_matrix(table, name, metric=metric, run=run, task=task, column=column)
        value, low, high = interval(scores, stream(seed, "iqm", str(name)), iqm, confidence,
                                    resamples)
        rows.append({column: name, "runs": scores.shape[0], "tasks": scores.shape[1],
                     "mean": float(scores.mean()), "iqm": value, "low": low, "high": high})
    return pd.DataFrame(rows).set_index(column)


__all__ = ["CONFIDENCE", "RESAMPLES", "interval", "iqm", "performance_profile",
           "policy_summary", "score_matrix", "stratified_bootstrap"]
