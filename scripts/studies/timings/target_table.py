"""The time-to-target study's analysis, on its tidy table (one row per trainer, seed and
checkpoint; ``time_to_target`` writes it): the target, each run's wall time to it, and the
medians over seeds with their bootstrap intervals.

The target is a cost of one measure (``MEASURES``: the mean final test cost on the held-out
cells, or on the training cells): All-in-LR's cost there less ``fraction`` of the largest
improvement over it that any checkpoint of any run in the table reaches (``fraction`` 0:
All-in-LR's cost itself). Where no
checkpoint improves on All-in-LR, the reference is instead the worst held-out cost any
run's first checkpoint has (where training starts from, as near as the table shows), and
the target is that cost less ``fraction`` of the best reduction from it; the report says
which reference it used. A target can also be a cost given outright (``cost``: fixed from
a pilot before the study, so the study's own runs do not move it). A run's time to the
target is the wall time, from its process's start, of its first checkpoint at or below the
target (infinite where none is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from agents.reports.policy_stats import CONFIDENCE, RESAMPLES, stratified_bootstrap

#: The columns that name a run (``time_to_target.ROW_COLUMNS`` lists all of a row's).
KEY = ("phase", "trainer", "seed")
#: The measures a target can be set on: column ``<measure>_cost`` is a checkpoint's, and
#: ``<measure>_all_in_lr`` All-in-LR's on the same cells.
MEASURES = ("heldout", "train")
#: The reference names the target can be measured from.
REFERENCES = ("all-in-lr", "first checkpoint")


@dataclass(frozen=True)
class Target:
    """A held-out cost to reach, and what it was measured from: ``reference`` (a name in
    ``REFERENCES``) at ``reference_cost``, the best cost any checkpoint reached, and whether
    the cost was given outright rather than chosen from the table."""

    cost: float
    fraction: float
    reference: str
    reference_cost: float
    best_cost: float
    given: bool = False


def choose_target(table: pd.DataFrame, fraction: float, measure: str = "heldout",
                  cost: float | None = None) -> Target:
    """The target of the module's note on ``measure`` (one of ``MEASURES``); ``cost``, when
    given, is the target itself (measured from All-in-LR's cost, ``fraction`` then the
    share of the best improvement it asks)."""
    if measure not in MEASURES:
        raise ValueError(f"unknown measure {measure!r}: use one of {', '.join(MEASURES)}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}: e.g. 0.95 (0 asks for "
                         "the reference's own cost)")
    if table.empty:
        raise ValueError("the table has no checkpoints: run the study first")
    best = float(table[f"{measure}_cost"].min())
    baseline = float(table[f"{measure}_all_in_lr"].iloc[0])
    if cost is not None:
        share = (baseline - cost) / (baseline - best) if best < baseline else float("nan")
        return Target(cost, share, "all-in-lr", baseline, best, given=True)
    if best < baseline:
        return Target(baseline - fraction * (baseline - best), fraction, "all-in-lr",
                      baseline, best)
    ordered = table.sort_values(["steps", "wall_s"])
    first = ordered.groupby(list(KEY), sort=False)[f"{measure}_cost"].first()
    start = float(first.max())
    return Target(start - fraction * (start - best), fraction, "first checkpoint", start, best)


def times_to_target(table: pd.DataFrame, target: float, measure: str = "heldout"
                    ) -> pd.DataFrame:
    """Per run (phase, trainer, seed): its wall time to ``target`` on ``measure`` (inf where
    never reached),
    the steps there (0 where never), and the run's last checkpoint's steps and wall time."""
    rows = []
    for key, run in table.sort_values(["steps", "wall_s"]).groupby(list(KEY), sort=False):
        hit = run[run[f"{measure}_cost"] <= target]
        rows.append({**dict(zip(KEY, key, strict=True)),
                     "wall_s": float(hit["wall_s"].iloc[0]) if len(hit) else np.inf,
                     "steps": int(hit["steps"].iloc[0]) if len(hit) else 0,
                     "last_steps": int(run["steps"].iloc[-1]),
                     "last_wall_s": float(run["wall_s"].iloc[-1])})
    return pd.DataFrame(rows)


def median_draws(values: np.ndarray, rng: np.random.Generator,
                 resamples: int = RESAMPLES) -> np.ndarray:
    """The medians of ``resamples`` bootstrap copies of ``values`` (seeds drawn with
    replacement; an infinite value, a run that never reached the target, stays one)."""
    column = np.asarray(values, dtype=float).reshape(-1, 1)
    return np.asarray(stratified_bootstrap(column, rng, np.median, resamples))


def quantiles(draws: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of ``draws``, read off the sorted draws without interpolating
    (so infinite draws give an infinite bound, not NaN)."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)


def median_interval(values: np.ndarray, rng: np.random.Generator,
                    confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The median of ``values`` and its percentile bootstrap interval: (median, low, high)."""
    return (float(np.median(np.asarray(values, dtype=float))),
            *quantiles(median_draws(values, rng), confidence))


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, rng: np.random.Generator,
                   confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The ratio of two groups' medians (e.g. the compiled trainer's time over SB3's) and its
    percentile bootstrap interval, the two groups resampled independently; where both
    medians are infinite (neither reached the target) the ratio counts as infinite."""
    with np.errstate(invalid="ignore"):
        ratio = float(np.median(numerator) / np.median(denominator))
        draws = median_draws(numerator, rng) / median_draws(denominator, rng)
    return (np.inf if np.isnan(ratio) else ratio,
            *quantiles(np.where(np.isnan(draws), np.inf, draws), confidence))


def summary(times: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Per (phase, trainer): seeds, how many reached the target, the median wall time to it
    with its interval, and the median steps there."""
    rows = []
    for (phase, trainer), runs in times.groupby(["phase", "trainer"], sort=False):
        median, low, high = median_interval(runs["wall_s"].to_numpy(), rng)
        reached = runs[np.isfinite(runs["wall_s"])]
        rows.append({"phase": phase, "trainer": trainer, "seeds": len(runs),
                     "reached": len(reached), "median_s": median, "low_s": low,
                     "high_s": high,
                     "median_steps": float(reached["steps"].median()) if len(reached)
                     else np.nan})
    return pd.DataFrame(rows)


__all__ = ["KEY", "MEASURES", "REFERENCES", "Target", "choose_target", "median_draws",
           "median_interval", "quantiles", "ratio_interval", "summary", "times_to_target"]
