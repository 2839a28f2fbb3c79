"""The two-sided rejector's tie rule (``two_sided_tie``): where the exact search lands among
each side's thresholds of least cost, by hand on both sides for each rule; the at-most-half
cap; the option's errors, name and command line; and the rule carried into the live env,
the lattice and the replay env."""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pytest

from ballad_env import Settings, load_dataset
from ballad_env.cost import Costs
from ballad_env.rejection.two_sided import (
    TIE_RULES,
    TWO_SIDED_SEARCHES,
    SideProblem,
    fit_two_sided,
    side_problem,
)
from ballad_env.settings.cli import add_settings_arguments, settings_from_args

# The ten labeled validation probabilities of test_two_sided.py.
P = np.array([0.05, 0.1, 0.2, 0.3, 0.4, 0.55, 0.6, 0.7, 0.8, 0.9])
Y = np.array([0, 0, 0, 1, 0, 0, 1, 0, 1, 1])
ALL = np.ones(10, dtype=bool)
JUST_BELOW_08 = float(np.nextafter(0.8, -np.inf))
JUST_ABOVE_02 = float(np.nextafter(0.2, np.inf))


@pytest.mark.parametrize("tie, left, right", [("fewest", 0.3, 0.7),
                                              ("middle", 0.27, 0.75),
                                              ("most", 0.24, JUST_BELOW_08)])
def test_equal_costs_right_first_by_hand(tie, left, right) -> None:
    """c_fp = c_fn = 1, c_r = 0.1, right first in [0.525, 0.82]: costs 0.4, 0.22, 0.24, 0.06,
    0.08, 0.08 at 0.525, 0.55, 0.6, 0.7, 0.8, 0.82, so the least cost is that of 0.7, which
    every t in [0.7, 0.8) shares (accepted iff P > t: the same labeled rejections). Fewest:
    0.7; most: just below 0.8; middle: 0.75. Each rejects 3 of V, leaving 2 to the left:
    [0.24, 0.45], costs 0.04, 0.04, 0.22, 0.2 at 0.24, 0.3, 0.4, 0.45; the least is shared
    by [0.24, 0.3] (low, then (0.24, 0.3]): fewest 0.3, most 0.24 (the cap), middle 0.27."""
    thresholds = fit_two_sided(P, ALL, Y, Costs(1.0, 1.0, 0.1), tie=tie)
    assert thresholds.left == pytest.approx(left, abs=1e-12)
    assert thresholds.right == pytest.approx(right, abs=1e-12)
    assert thresholds.reject(P).sum() == 5
    if tie == "most":
        assert thresholds.right < 0.8 and thresholds.left == 0.24  # 0.8 itself costs more


@pytest.mark.parametrize("tie, left, right", [("fewest", 0.3, 0.7),
                                              ("middle", 0.25, 0.72),
                                              ("most", JUST_ABOVE_02, 0.74)])
def test_false_negatives_costlier_left_first_by_hand(tie, left, right) -> None:
    """c_fn = 10: left first in [0.09, 0.45], costs 0.08, 0.08, 0.06, 0.04, 2.02, 2.0 at 0.09,
    0.1, 0.2, 0.3, 0.4, 0.45: the least, 0.3's, is shared by (0.2, 0.3] (accepted iff P < t).
    Fewest 0.3, most just above 0.2 (0.2 itself accepted), middle 0.25; each rejects 2.
    Right in [0.525, 0.74]: 0.7 and 0.74 tie at 0.06, shared by [0.7, 0.74]: fewest 0.7,
    most 0.74, middle 0.72."""
    thresholds = fit_two_sided(P, ALL, Y, Costs(1.0, 10.0, 0.1), tie=tie)
    assert thresholds.left == pytest.approx(left, abs=1e-12)
    assert thresholds.right == pytest.approx(right, abs=1e-12)
    if tie == "most":
        assert thresholds.left > 0.2 and not thresholds.reject(np.array([0.2]))[0]


def test_middle_between_two_tied_intervals_takes_the_nearest_tied_threshold() -> None:
    """Right side, labeled 0.6 (anomaly), 0.7 (normal), 0.8 (anomaly) in [0.55, 0.9],
    c_fp = 1, c_r = 0.5 (over 3): 1, 1.5, 1, 1.5, 1.5 (/ 3) at 0.55, 0.6, 0.7, 0.8, 0.9.
    Tied: [0.55, 0.6) and [0.7, 0.8). Their ends 0.55 and 0.8 have the midpoint 0.675,
    which costs more; the nearest tied threshold is 0.7 (0.025 away; 0.6- is 0.075)."""
    problem = SideProblem("right", np.array([0.6, 0.7, 0.8]), np.array([1, 0, 1]), 3, 0.55,
                          0.9, 0.55, 30, Costs(1.0, 1.0, 0.5))
    exact = TWO_SIDED_SEARCHES["exact"]
    assert exact(problem, 0) == 0.55
    assert exact(problem.__class__(**{**problem.__dict__, "tie": "most"}), 0) == JUST_BELOW_08
    middle = exact(problem.__class__(**{**problem.__dict__, "tie": "middle"}), 0)
    assert middle == 0.7
    assert problem.cost(np.array([middle]))[0] == problem.cost(np.array([0.55]))[0]


@pytest.mark.parametrize("tie, left, right, rejected", [("fewest", 0.45, 0.525, 0),
                                                        ("middle", 0.305, 0.6725, 3),
                                                        ("most", 0.32, 0.82, 5)])
def test_without_labels_everything_ties_and_the_cap_holds(tie, left, right, rejected) -> None:
    """No label: every threshold costs 0. Right first in [0.525, 0.82] (k = 4): most takes
    0.82 and rejects 0.55-0.8 (4), leaving 1: left in [Q_0.8(low) = 0.32, 0.45], most 0.32
    rejects 0.4: 5 = half of V, the cap. Middle: 0.6725 rejects 2, left k = 3 in
    [Q_0.4 = 0.16, 0.45], 0.305 rejects 1. Fewest rejects nothing."""
    thresholds = fit_two_sided(P, np.zeros(10, dtype=bool), Y, Costs(1.0, 1.0, 0.1), tie=tie)
    assert (thresholds.left, thresholds.right) == pytest.approx((left, right))
    assert thresholds.reject(P).sum() == rejected <= 5


def test_each_rule_lands_on_a_cheapest_threshold_in_order_on_random_cases() -> None:
    """On random sides the three rules share the least cost, and on V fewest rejects no more
    than middle, middle no more than most, most at most the side's cap."""
    rng = np.random.default_rng(3)
    costs = Costs(1.0, 5.0, 0.3)
    for _ in range(60):
        p_all = rng.uniform(0, 1, rng.integers(4, 30))
        labeled = rng.uniform(size=p_all.size) < 0.4
        y = (rng.uniform(size=p_all.size) < 0.3).astype(int)
        for side in ("left", "right"):
            found = []
            for tie in TIE_RULES:
                problem = side_problem(side, p_all, p_all[labeled], y[labeled], costs,
                                       p_all.size // 4, 30, tie)
                if problem is None:
                    break
                found.append(TWO_SIDED_SEARCHES["exact"](problem, 0))
            if not found:
                continue
            assert problem is not None
            cost = problem.cost(np.array(found))
            assert np.allclose(cost, cost[0]) and problem.low <= min(found) <= max(found) <= \
                problem.high
            on_side = p_all[p_all < 0.5] if side == "left" else p_all[p_all >= 0.5]
            rejects = [int(np.sum(on_side >= t if side == "left" else on_side <= t))
                       for t in found]
            assert rejects == sorted(rejects)


def test_bad_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown two_sided_tie 'nearest': use one of fewest, "
                                         "middle, most"):
        Settings(rejector="two-sided", two_sided_tie="nearest")
    with pytest.raises(ValueError, match="unknown two_sided_tie 'x'"):
        fit_two_sided(P, ALL, Y, Costs(), tie="x")
    with pytest.raises(ValueError, match="two_sided_tie='most'.*tau_position"):
        Settings(two_sided_tie="most")  # the confidence rejector
    with pytest.raises(ValueError, match="two_sided_tie='middle'.*'authors-bayes' search has "
                                         "no tie rule"):
        Settings(rejector="two-sided", threshold_search="authors-bayes", two_sided_tie="middle")


def test_quiet_default_name_and_command_line() -> None:
    two_sided = Settings(rejector="two-sided")
    assert two_sided.two_sided_tie == "fewest" and "two_sided_tie" not in two_sided.to_dict()
    middle = two_sided.replace(two_sided_tie="middle")
    assert middle.name == "iforest_rej-two-sided_tie-middle"
    assert Settings.from_dict(middle.to_dict()) == middle
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    args = parser.parse_args(["--rejector", "two-sided", "--two-sided-tie", "most"])
    assert settings_from_args(args) == (two_sided.replace(two_sided_tie="most"),)
    with pytest.raises(SystemExit):
        parser.parse_args(["--two-sided-tie", "nearest"])


def test_the_rule_moves_live_thresholds_and_replay_equals_live(tmp_path, small_xy) -> None:
    """The rule is the rejector's fit, so the live env, the lattice and the replay env carry
    it: replayed episodes under "middle" repeat live ones exactly; and live, "most" rejects
    at least as much as "fewest" on the first round's fit (same labels, same pool)."""
    from test_replay import compare_random_sequences

    from agents.experiments.lattice_build import build_store
    from ballad_env.episode import Episode

    data = load_dataset(small_xy)
    base = Settings(prior="knn", rejector="two-sided", entropy_terms="binary")
    widths = {}
    for tie in TIE_RULES:
        episode = Episode(data, 0, base.replace(two_sided_tie=tie))
        episode.step(1)
        widths[tie] = episode.rejection.tau
    assert widths["fewest"] <= widths["middle"] <= widths["most"]
    assert widths["fewest"] < widths["most"]
    options = {"rejector": "two-sided", "entropy_terms": "binary", "two_sided_tie": "middle"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_store(tmp_path, [data], [0], [Settings(prior="knn", **options)], progress=False)
    compare_random_sequences(data, "knn", tmp_path, (0,), 8, np.random.default_rng(5),
                             **options)
