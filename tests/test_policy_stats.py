"""Learned policies the RL way (agents.reports.policy_stats): the IQM, its
stratified bootstrap and performance profiles, on arrays small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.reports import policy_stats as ps
from agents.reports.stats import stream


def test_iqm_of_a_known_array() -> None:
    # 8 scores: a quarter (2) cut at each end leaves 3, 4, 5, 6.
    assert ps.iqm(np.arange(1.0, 9.0)) == pytest.approx(4.5)
    assert ps.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(4.5)  # the outlier is cut
    assert ps.iqm(np.array([[1.0, 2.0], [3.0, 4.0]])) == pytest.approx(2.5)  # flattened
    with pytest.raises(ValueError, match="no scores"):
        ps.iqm(np.array([]))


def test_the_bootstrap_resamples_runs_within_each_task() -> None:
    # Task 0 scores 0 or 1, task 1 scores 10 or 11: every stratified copy keeps two of each,
    # so two of its four values are below 5 (an unstratified one would not always).
    scores = np.array([[0.0, 10.0], [1.0, 11.0]])
    below = ps.stratified_bootstrap(scores, stream(0, "t"),
                                    lambda x, axis: (x < 5).sum(axis=axis), resamples=200)
    assert (below == 2).all()
    with pytest.raises(ValueError, match="runs x tasks"):
        ps.stratified_bootstrap(np.ones(3), stream(0))


def test_whole_runs_draws_each_run_once_for_every_task() -> None:
    # Run 0 scores 0 on all six tasks, run 1 scores 1: a copy of whole runs holds 0, 1 or 2
    # copies of run 1, so its mean is 0, 0.5 or 1; drawn per task it is k / 12 for any k.
    scores = np.array([[0.0] * 6, [1.0] * 6])
    whole = ps.stratified_bootstrap(scores, stream(0, "w"), np.mean, resamples=300,
                                    whole_runs=True)
    assert set(np.round(whole, 9)) <= {0.0, 0.5, 1.0}
    per_task = ps.stratified_bootstrap(scores, stream(0, "w"), np.mean, resamples=300)
    assert not set(np.round(per_task, 9)) <= {0.0, 0.5, 1.0}
    value, low, high = ps.interval(scores, stream(0, "w"), np.mean, whole_runs=True)
    assert (value, low, high) == (0.5, 0.0, 1.0)


def test_interval_is_seeded_and_covers_the_iqm() -> None:
    scores = np.random.default_rng(3).normal(0.2, 0.05, size=(10, 4))
    first = ps.interval(scores, stream(1, "a"), resamples=500)
    assert first == ps.interval(scores, stream(1, "a"), resamples=500)
    assert first != ps.interval(scores, stream(2, "a"), resamples=500)
    value, low, high = first
    assert value == pytest.approx(ps.iqm(scores)) and low < value < high


def test_performance_profile_by_hand() -> None:
    # Task 0 runs 0.1, 0.2; task 1 runs 0.3, 0.4: shares at most tau, averaged over tasks.
    scores = np.array([[0.1, 0.3], [0.2, 0.4]])
    profile = ps.performance_profile(scores, [0.05, 0.15, 0.25, 0.35, 0.45])
    assert profile.tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


def test_policy_summary_from_a_tidy_table() -> None:
    rows = [{"agent": agent, "seed": seed, "dataset": dataset, "round": r,
             "test_cost": base + 0.01 * seed + 0.1 * d}
            for agent, base in (("ppo", 0.1), ("rule", 0.2)) for seed in range(4)
            for d, dataset in enumerate(("A", "B")) for r in (1, 2)]
    table = pd.DataFrame(rows)
    summary = ps.policy_summary(table, resamples=300)
    assert summary.loc["ppo", "runs"] == 4 and summary.loc["ppo", "tasks"] == 2
    # ppo's 8 scores: 0.10..0.13 and 0.20..0.23; the middle four 0.12, 0.13, 0.20, 0.21.
    assert summary.loc["ppo", "iqm"] == pytest.approx((0.12 + 0.13 + 0.20 + 0.21) / 4)
    assert (summary["low"] <= summary["iqm"]).all() and (summary["iqm"] <= summary["high"]).all()
    with pytest.raises(ValueError, match="no rows of agent 'sac'"):
        ps.policy_summary(table, ["sac"])
    with pytest.raises(ValueError, match="lacks some"):
        ps.policy_summary(table[~((table["agent"] == "ppo") & (table["seed"] == 0)
                                  & (table["dataset"] == "A"))])
