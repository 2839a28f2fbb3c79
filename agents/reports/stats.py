"""Statistics a reviewer accepts, on the tidy results table (``ballad-env compare --stats``).

Across data sets (Demsar 2006, the comparison of ADBench and the DTAI group's papers), per
setting (a cost level, a prior, ...): each agent's average rank over the data sets (1 = the
lowest cost), the Friedman test that all agents rank alike, a post hoc test of every pair
with a multiple-comparison correction (Wilcoxon signed-rank with Holm's correction, Benavoli
et al. 2016, or Nemenyi's test of the rank differences) and a critical-difference diagram in
which agents joined by a bar are not significantly different.

Within a data set, over seeds: each agent's mean with a percentile bootstrap interval, and a
paired test of each agent against a baseline. Agents play the same episodes on common random
numbers (the seed fixes the split, the prior and the query streams), so the pairs are the
seeds: the paired t-test and the Wilcoxon signed-rank test of the per-seed differences, the
t-test's p-values Holm-corrected over the data sets, the t interval of the mean difference
and a power check (the seeds a difference of that size needs). Over data sets: each agent's
mean cost and its ratio to the baseline's with bootstrap intervals resampling data sets.

The tests come from scipy (Friedman, Wilcoxon, t, bootstrap), scikit-posthocs (the post hoc
matrices and the diagram) and statsmodels (Holm, power): the ``stats`` extra,
``pip install -e ".[stats]"``. Every bootstrap draws from its own seeded generator, derived
from the seed and the names of what it measures, so an interval does not change when an
agent or a data set is added to the run.
"""

from __future__ import annotations

import os
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
from scipy import stats as st

from agents.extras import missing_extra
from agents.reports.tables import common_episodes, setting_label

#: The significance level of every test and the coverage of every interval (1 - ALPHA).
ALPHA = 0.05
#: The post hoc tests of every pair of agents over data sets.
POSTHOC_TESTS = ("wilcoxon-holm", "nemenyi")
#: Bootstrap resamples per interval.
RESAMPLES = 9999


def _library(name: str) -> ModuleType:
    """An optional statistics library, or an error naming the ``stats`` extra."""
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise missing_extra(err, "the statistics (compare --stats)") from None


def require_stats_extra() -> None:
    """Fail early (before a long run) when the ``stats`` extra is not installed."""
    _library("scikit_posthocs")
    _library("statsmodels.stats.multitest")
    _library("statsmodels.stats.power")


def stream(seed: int, *names: str) -> np.random.Generator:
    """A generator for one purpose, seeded by ``seed`` and ``names`` (stable across runs and
    independent of which other agents or data sets are measured)."""
    return np.random.default_rng([seed, *(zlib.crc32(name.encode()) for name in names)])


def seed_scores(results: pd.DataFrame, metric: str = "test_cost") -> pd.DataFrame:
    """One score per episode: the mean ``metric`` over rounds, indexed by (setting, data set,
    seed), one column per agent, on the episodes that every agent played (the pairs)."""
    if results.empty:
        raise ValueError("no results to compare: run the grid first")
    common, dropped = common_episodes(results)
    if dropped:
        warnings.warn(f"{dropped} (data set, seed) episode(s) not played by every agent and "
                      "setting are left out of the statistics", stacklevel=2)
    agents = list(dict.fromkeys(results["agent"]))
    return (common.groupby(["setting", "dataset", "seed", "agent"], sort=False)[metric].mean()
            .unstack("agent")[agents])


def dataset_block(scores: pd.DataFrame, setting: str) -> pd.DataFrame:
    """The block design of one setting: data sets (rows) x agents, each cell the mean score
    over seeds."""
    block = scores.xs(setting, level="setting")
    return block.groupby(level="dataset", sort=False).mean()


def average_ranks(block: pd.DataFrame) -> pd.Series:
    """Each agent's rank within each data set (1 = lowest cost; ties share the mean of their
    ranks), averaged over the data sets."""
    return block.rank(axis=1, method="average").mean()


def friedman_test(block: pd.DataFrame) -> tuple[float, float]:
    """The Friedman statistic (chi-square, corrected for ties) and its p-value that every agent
    has the same distribution of ranks; NaN for fewer than 3 agents or 2 data sets."""
    if block.shape[1] < 3 or block.shape[0] < 2:
        return float("nan"), float("nan")
    result = st.friedmanchisquare(*(block[column].to_numpy() for column in block.columns))
    return float(result.statistic), float(result.pvalue)


def nemenyi_critical_difference(agents: int, datasets: int, alpha: float = ALPHA) -> float:
    """Nemenyi's critical difference of average ranks, ``q_alpha sqrt(k(k+1) / (6N))`` with
    ``q_alpha`` the studentized range quantile over sqrt(2) (Demsar 2006, table 5)."""
    q_alpha = st.studentized_range.ppf(1 - alpha, agents, np.inf) / np.sqrt(2)
    return float(q_alpha * np.sqrt(agents * (agents + 1) / (6 * datasets)))


def posthoc_pvalues(block: pd.DataFrame, test: str = "wilcoxon-holm") -> pd.DataFrame:
    """Every pair's p-value (agents x agents, 1 on the diagonal): ``wilcoxon-holm``, the
    Wilcoxon signed-rank test of the data set means (zero differences split, Demsar's advice)
    Holm-corrected over the pairs; ``nemenyi``, Nemenyi's test of the average ranks."""
    if test not in POSTHOC_TESTS:
        raise ValueError(f"unknown post hoc test {test!r}: use one of {', '.join(POSTHOC_TESTS)}")
    posthocs = _library("scikit_posthocs")
    agents = list(block.columns)
    if test == "nemenyi":
        pvalues = posthocs.posthoc_nemenyi_friedman(block.to_numpy())
    else:
        columns = [block[agent].to_numpy() for agent in agents]
        pvalues = posthocs.posthoc_wilcoxon(columns, zero_method="zsplit", p_adjust="holm")
    return pd.DataFrame(pvalues.to_numpy(dtype=float), index=agents, columns=agents)


def wilcoxon_floor(pairs: int) -> float:
    """The smallest two-sided p-value the exact Wilcoxon signed-rank test can give on
    ``pairs`` pairs, ``2 / 2**pairs`` (all differences of one sign): below 6 pairs it is not
    below 0.05, so no difference can be significant there."""
    return 2.0 / 2.0 ** pairs


def not_different(pvalues: pd.DataFrame, alpha: float = ALPHA) -> list[tuple[str, str]]:
    """The pairs of agents whose post hoc p-value is not below ``alpha``."""
    agents = list(pvalues.index)
    return [(a, b) for i, a in enumerate(agents) for b in agents[i + 1:]
            if not pvalues.loc[a, b] < alpha]


@dataclass(frozen=True)
class RankComparison:
    """One setting's comparison of the agents over data sets."""

    setting: str
    datasets: int
    ranks: pd.Series
    friedman: float
    friedman_p: float
    posthoc: str
    pvalues: pd.DataFrame
    critical_difference: float
    alpha: float = ALPHA

    @property
    def ties(self) -> list[tuple[str, str]]:
        """The pairs of agents that are not significantly different."""
        return not_different(self.pvalues, self.alpha)


def rank_comparison(scores: pd.DataFrame, setting: str, posthoc: str = "wilcoxon-holm",
                    alpha: float = ALPHA) -> RankComparison:
    """Average ranks, Friedman test and post hoc p-values of one setting."""
    block = dataset_block(scores, setting)
    if len(block) < 2 or block.shape[1] < 2:
        raise ValueError(f"setting {setting!r} has {len(block)} data set(s) and "
                         f"{block.shape[1]} agent(s): ranks over data sets need at least two of "
                         "each (pass more --datasets or --agents)")
    statistic, pvalue = friedman_test(block)
    return RankComparison(setting, len(block), average_ranks(block), statistic, pvalue, posthoc,
                          posthoc_pvalues(block, posthoc),
                          nemenyi_critical_difference(block.shape[1], len(block), alpha), alpha)


def cd_diagram(comparison: RankComparison, path: str | os.PathLike) -> Path:
    """The critical-difference diagram (PNG): agents on the axis of average ranks (best on the
    left), a bar joining each group that is not significantly different (with Nemenyi's test
    the critical difference is in the title)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MultipleLocator

    from agents.reports.plots import agent_color, save_figure  # the Agg backend

    posthocs = _library("scikit_posthocs")
    ranks = comparison.ranks
    fig, ax = plt.subplots(figsize=(6.0, 0.9 + 0.3 * len(ranks)))
    palette = {agent: agent_color(agent, i) for i, agent in enumerate(ranks.index)}
    posthocs.critical_difference_diagram(ranks, comparison.pvalues, ax=ax,
                                         alpha=comparison.alpha, color_palette=palette,
                                         label_fmt_left="{label} ({rank:.2f})",
                                         label_fmt_right="({rank:.2f}) {label}")
    ax.set_xlim(1, len(ranks))  # the whole scale of ranks, as in Demsar's diagrams
    ax.xaxis.set_major_locator(MultipleLocator(0.5))
    test = comparison.posthoc
    if test == "nemenyi":
        test += f", CD = {comparison.critical_difference:.2f}"
    if not np.isnan(comparison.friedman_p):
        test += f"; Friedman p = {comparison.friedman_p:.3g}"
    ax.set_title(f"{setting_label(comparison.setting)}: average rank over "
                 f"{comparison.datasets} data sets ({test}, alpha {comparison.alpha:g})",
                 fontsize=9, pad=18)
    return save_figure(fig, path)


def bootstrap_interval(values: np.ndarray, rng: np.random.Generator,
                       confidence: float = 1 - ALPHA, resamples: int = RESAMPLES
                       ) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (NaN for fewer than 2)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float("nan"), float("nan")
    result = st.bootstrap((values,), np.mean, n_resamples=resamples, method="percentile",
                          confidence_level=confidence, rng=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def seed_intervals(scores: pd.DataFrame, seed: int = 0, alpha: float = ALPHA,
                   resamples: int = RESAMPLES) -> pd.DataFrame:
    """Each agent's mean score per (setting, data set) with its bootstrap interval over seeds:
    columns ``seeds``, ``mean``, ``low``, ``high``."""
    rows = []
    for (setting, dataset), block in scores.groupby(level=["setting", "dataset"], sort=False):
        for agent in block.columns:
            values = block[agent].to_numpy(dtype=float)
            low, high = bootstrap_interval(values, stream(seed, "mean", setting, dataset, agent),
                                           1 - alpha, resamples)
            rows.append({"setting": setting, "dataset": dataset, "agent": agent,
                         "seeds": len(values), "mean": values.mean(), "low": low, "high": high})
    return pd.DataFrame(rows).set_index(["setting", "dataset", "agent"])


def _ratio_of_sums(numerator: np.ndarray, denominator: np.ndarray, axis: int = -1
                   ) -> np.ndarray:
    return np.sum(numerator, axis=axis) / np.sum(denominator, axis=axis)


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, rng: np.random.Generator,
                   confidence: float = 1 - ALPHA, resamples: int = RESAMPLES
                   ) -> tuple[float, float, float]:
    """``sum(numerator) / sum(denominator)`` over paired items (data sets) and its percentile
    bootstrap interval, the items resampled in pairs: ``(ratio, low, high)``; the interval
    is NaN for fewer than 2 items. A mean cost over a baseline's, or a share of the room
    (the savings over the room, both summed over data sets), is such a ratio."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    ratio = float(_ratio_of_sums(numerator, denominator))
    if len(numerator) < 2:
        return ratio, float("nan"), float("nan")
    result = st.bootstrap((numerator, denominator), _ratio_of_sums, paired=True,
                          vectorized=True, n_resamples=resamples, method="percentile",
                          confidence_level=confidence, rng=rng)
    return ratio, float(result.confidence_interval.low), float(result.confidence_interval.high)


def dataset_intervals(scores: pd.DataFrame, baseline: str | None = None, seed: int = 0,
                      alpha: float = ALPHA, resamples: int = RESAMPLES) -> pd.DataFrame:
    """Over data sets (each weighing equally, its mean over seeds): each agent's mean cost
    with a percentile bootstrap interval resampling the data sets (``mean``, ``low``,
    ``high``); with a ``baseline``, also the ratio of the agent's mean cost to the baseline's
    and its interval, the data sets resampled in pairs (``ratio``, ``ratio_low``,
    ``ratio_high``: below 1, the agent costs less). Index (setting, agent)."""
    rows = []
    for setting in dict.fromkeys(scores.index.get_level_values("setting")):
        block = dataset_block(scores, setting)
        for agent in block.columns:
            values = block[agent].to_numpy(dtype=float)
            low, high = bootstrap_interval(values, stream(seed, "datasets", setting, agent),
                                           1 - alpha, resamples)
            row = {"setting": setting, "agent": agent, "datasets": len(values),
                   "mean": values.mean(), "low": low, "high": high}
            if baseline is not None and agent == baseline:
                row.update(ratio=1.0, ratio_low=1.0, ratio_high=1.0)
            elif baseline is not None:
                rng = stream(seed, "ratio", setting, agent, baseline)
                row["ratio"], row["ratio_low"], row["ratio_high"] = ratio_interval(
                    values, block[baseline].to_numpy(dtype=float), rng, 1 - alpha, resamples)
            rows.append(row)
    return pd.DataFrame(rows).set_index(["setting", "agent"])


#: The power of :func:`seeds_needed`'s planning figure.
POWER = 0.8


def seeds_needed(differences: np.ndarray, alpha: float = ALPHA, power: float = POWER
                 ) -> float:
    """How many seeds a two-sided paired t-test at ``alpha`` needs to detect, with
    ``power``, a mean difference as large as the observed one given the observed spread
    (effect size mean / sd of the per-seed differences; Cohen: 34 seeds for 0.5, 10 for 1).
    A planning figure for the next run, not a test: inf when the mean difference is 0, NaN
    for fewer than 2 differences or none that differ."""
    differences = np.asarray(differences, dtype=float)
    if len(differences) < 2:
        return float("nan")
    mean, sd = abs(float(differences.mean())), float(differences.std(ddof=1))
    if mean == 0:
        return float("inf")
    if sd == 0:
        return float("nan")
    power_of = _library("statsmodels.stats.power").TTestPower()

    def enough(n: int) -> bool:
        return bool(power_of.power(effect_size=mean / sd, nobs=n, alpha=alpha,
                                   alternative="two-sided") >= power)

    high = 2  # the smallest n with enough power: doubling, then bisection (monotone in n)
    while not enough(high):
        high *= 2
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return float(high)


def paired_test(agent: np.ndarray, baseline: np.ndarray, alpha: float = ALPHA
                ) -> dict[str, float]:
    """The paired comparison of ``agent - baseline``: the mean ``difference``, its Student t
    interval (``low``, ``high``: it excludes 0 exactly when ``p_t`` < ``alpha``), and the
    two-sided p-values of the paired t-test (``p_t``) and of the Wilcoxon signed-rank test
    with zero differences split (``p_wilcoxon``), and :func:`seeds_needed`. Every difference
    zero: the interval is 0 and both p-values 1; fewer than 2 pairs: NaN."""
    difference = np.asarray(agent, dtype=float) - np.asarray(baseline, dtype=float)
    result = {"difference": float(np.mean(difference)) if len(difference) else float("nan"),
              "low": float("nan"), "high": float("nan"), "p_t": float("nan"),
              "p_wilcoxon": float("nan"), "seeds_needed": seeds_needed(difference, alpha)}
    if len(difference) < 2:
        return result
    if not difference.any():
        return {**result, "low": 0.0, "high": 0.0, "p_t": 1.0, "p_wilcoxon": 1.0}
    t_test = st.ttest_1samp(difference, 0.0)
    interval = t_test.confidence_interval(confidence_level=1 - alpha)
    return {**result, "low": float(interval.low), "high": float(interval.high),
            "p_t": float(t_test.pvalue),
            "p_wilcoxon": float(st.wilcoxon(difference, zero_method="zsplit").pvalue)}


def holm(pvalues: pd.Series) -> pd.Series:
    """Holm's step-down adjustment of ``pvalues`` (NaN kept as NaN)."""
    multitest = _library("statsmodels.stats.multitest")
    adjusted = pd.Series(np.nan, index=pvalues.index)
    known = pvalues.notna()
    if known.any():
        adjusted[known] = multitest.multipletests(pvalues[known].to_numpy(), method="holm")[1]
    return adjusted


def paired_tests(scores: pd.DataFrame, baseline: str, alpha: float = ALPHA) -> pd.DataFrame:
    """Each agent against ``baseline`` per (setting, data set), paired by seed: the columns
    of :func:`paired_test` (``difference`` negative: the agent costs less), ``p_holm`` (the
    t-test's p Holm-corrected over the setting's data sets, per agent) and the ``verdict``
    at ``alpha`` (``lower``, ``higher`` or ``n.s.``)."""
    if baseline not in scores.columns:
        raise ValueError(f"baseline {baseline!r} is not among the agents "
                         f"({', '.join(scores.columns)}): pass one of them to --baseline")
    rows = []
    for (setting, dataset), block in scores.groupby(level=["setting", "dataset"], sort=False):
        base = block[baseline].to_numpy(dtype=float)
        for agent in (a for a in block.columns if a != baseline):
            values = block[agent].to_numpy(dtype=float)
            rows.append({"setting": setting, "dataset": dataset, "agent": agent,
                         "seeds": len(values), **paired_test(values, base, alpha)})
    table = pd.DataFrame(rows)
    if table.empty:
        raise ValueError(f"no agent besides the baseline {baseline!r} to test against it")
    table["p_holm"] = table.groupby(["setting", "agent"], sort=False)["p_t"].transform(holm)
    table["verdict"] = np.where(~(table["p_holm"] < alpha), "n.s.",
                                np.where(table["difference"] < 0, "lower", "higher"))
    table["seeds_needed"] = table.pop("seeds_needed")  # last: a plan, not a result
    return table.set_index(["setting", "dataset", "agent"])


__all__ = ["ALPHA", "POSTHOC_TESTS", "POWER", "RESAMPLES", "RankComparison", "average_ranks",
           "bootstrap_interval", "cd_diagram", "dataset_block", "dataset_intervals",
           "friedman_test", "holm", "nemenyi_critical_difference", "not_different",
           "paired_test", "paired_tests", "posthoc_pvalues", "rank_comparison",
           "ratio_interval", "require_stats_extra", "seed_intervals", "seed_scores",
           "seeds_needed", "stream", "wilcoxon_floor"]
