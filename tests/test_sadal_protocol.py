"""SADAL's protocol (issue 23): its split, its budget rule and its rejection cost rule.

Hand-computed sizes and costs; the split checked against scikit-learn's own calls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from ballad_env.cost import Costs, rejection_cost
from ballad_env.data import Dataset
from ballad_env.episode import Episode
from ballad_env.protocol import Budget, sadal_split_indices, sadal_split_sizes, split_sizes
from ballad_env.settings import Settings
from ballad_env.settings.cli import c_r_value


def _labels(n_normal: int, n_anomaly: int, seed: int = 0) -> np.ndarray:
    y = np.array([0] * n_normal + [1] * n_anomaly, dtype=np.int8)
    return np.random.default_rng(seed).permutation(y)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (223, (89, 89, 45)),  # WBC: T = ceil(44.6) = 45; 178 left, V = 89, D = 89
        (214, (85, 86, 43)),  # Glass: T = ceil(42.8) = 43; 171 left, V = ceil(85.5) = 86
        (100, (40, 40, 20)),
        (36, (14, 14, 8)),  # T = ceil(7.2) = 8 (sklearn rounds T up); 28 left, 14 and 14
        (37, (14, 15, 8)),  # T = ceil(7.4) = 8; 29 left, V = ceil(14.5) = 15, D = 14
    ],
)
def test_sadal_split_sizes_by_hand(n: int, expected: tuple[int, int, int]) -> None:
    assert sadal_split_sizes(n) == expected
    assert split_sizes(np.zeros(n), "sadal") == expected


@pytest.mark.parametrize(("n_normal", "n_anomaly", "seed"), [(90, 10, 0), (200, 23, 3), (31, 4, 7)])
def test_sadal_split_is_sklearns_two_stratified_splits(n_normal: int, n_anomaly: int,
                                                      seed: int) -> None:
    """T from ``train_test_split(test_size=0.2, stratify=y, random_state=seed)``, then D and V
    from ``train_test_split(test_size=0.5, stratify, shuffle, random_state=seed)``, in the
    order the calls leave them (SADAL's queries index D and V in that order)."""
    y = _labels(n_normal, n_anomaly, seed)
    X = np.arange(y.size)[:, None]
    X_rest, X_test, y_rest, _ = train_test_split(X, y, test_size=0.2, stratify=y,
                                                 random_state=seed)
    X_train, X_val, _, _ = train_test_split(X_rest, y_rest, test_size=0.5, stratify=y_rest,
                                            shuffle=True, random_state=seed)
    train, val, test = sadal_split_indices(y, seed)
    np.testing.assert_array_equal(train, X_train[:, 0])
    np.testing.assert_array_equal(val, X_val[:, 0])
    np.testing.assert_array_equal(test, X_test[:, 0])
    assert (train.size, val.size, test.size) == sadal_split_sizes(y.size)
    # Stratified: each part's anomaly count is its share of the class, give or take one.
    for part, share in ((train, 0.4), (val, 0.4), (test, 0.2)):
        assert abs(int(y[part].sum()) - share * n_anomaly) <= 1


def test_sadal_split_refuses_a_class_too_small_to_stratify() -> None:
    with pytest.raises(ValueError, match="SADAL's split cannot divide"):
        sadal_split_indices(_labels(30, 1), 0)


def test_an_episode_splits_as_sadal_in_that_order() -> None:
    """``split="sadal"``: D, V and T hold the rows sklearn's calls give, in their order
    (scaled on D, which SSIF does not notice)."""
    y = _labels(60, 6, 1)
    X = np.random.default_rng(1).normal(size=(y.size, 3))
    episode = Episode(Dataset("blobs", X, y), 5,
                      Settings(split="sadal", budget_rule="sadal", budget_fraction=0.2,
                               round_fraction=0.02))
    train, val, test = sadal_split_indices(y, 5)
    for part, (labels, scaled) in zip(
            (train, val, test), ((episode.split.y_train, episode.split.X_train),
                                 (episode.split.y_val, episode.split.X_val),
                                 (episode.split.y_test, episode.split.X_test)), strict=True):
        np.testing.assert_array_equal(labels, y[part])
        # the scaling is affine per feature: the order of the rows is kept
        np.testing.assert_array_equal(np.argsort(scaled[:, 0], kind="stable"),
                                      np.argsort(X[part, 0], kind="stable"))
    # 66 examples: T = ceil(13.2) = 14, D = V = 26; int(0.2 * 52) = 10 labels, 1 a round
    assert (episode.budget.n_rounds, episode.budget.per_round) == (10, 1)


@pytest.mark.parametrize(
    ("n_train", "n_val", "expected"),
    [
        (89, 89, 3),  # WBC: int(0.2 * 178) = int(35.6) = 35 in all, int(3.5) = 3 a round
        (85, 86, 3),  # Glass: int(34.2) = 34, int(3.4) = 3
        (26, 26, 1),  # int(10.4) = 10, 1 a round
        (400, 400, 16),  # int(160.0) = 160, 16 a round
    ],
)
def test_sadal_budget_by_hand(n_train: int, n_val: int, expected: int) -> None:
    budget = Budget.sadal(n_train, n_val)
    assert (budget.n_rounds, budget.per_round) == (10, expected)
    assert Settings(budget_rule="sadal", budget_fraction=0.2).budget(n_train, n_val) == budget


def test_sadal_budget_of_zero_labels_a_round_is_refused() -> None:
    budget = Budget.sadal(24, 24)  # int(0.2 * 48) = 9 in all: int(0.9) = 0 a round
    assert budget.per_round == 0
    with pytest.raises(ValueError, match="no label a round"):
        budget.check(24, 24, "tiny")


def test_paper_budget_rule_is_unchanged() -> None:
    assert Settings().budget(89, 89) == Budget.from_fractions(89) == Budget(15, 2)
    with pytest.raises(ValueError, match="unknown budget rule"):
        Budget.for_rule("ours", 10, 10, 0.3, 0.02)
    with pytest.raises(ValueError, match="budget_rule"):
        Settings(budget_rule="ours")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("gamma", "c_fp", "c_fn", "bound"),
    [
        (0.05, 1.0, 1.0, 0.05),  # min(0.95, 0.05): gamma itself at unit costs
        (0.05, 1.0, 10.0, 0.5),  # min(0.95, 0.5): ten times gamma
        (0.05, 10.0, 1.0, 0.05),  # min(9.5, 0.05)
        (0.3, 0.2, 1.0, 0.14),  # min(0.2 * 0.7, 0.3) = 0.14, below gamma
    ],
)
def test_rejection_cost_rules_by_hand(gamma: float, c_fp: float, c_fn: float,
                                      bound: float) -> None:
    assert rejection_cost(gamma, c_fp, c_fn, "bound") == pytest.approx(bound, abs=1e-15)
    assert rejection_cost(gamma, c_fp, c_fn, None) == rejection_cost(gamma, c_fp, c_fn,
                                                                      "gamma") == gamma
    assert rejection_cost(gamma, c_fp, c_fn, 0.01) == 0.01
    costs = Costs.for_contamination(gamma, c_fp, c_fn, "bound")
    assert math.isclose(costs.c_r, bound)  # the bound passes the cost inequality's check


def test_rejection_cost_unknown_rule() -> None:
    with pytest.raises(ValueError, match="unknown rejection cost 'half'"):
        rejection_cost(0.1, 1.0, 1.0, "half")


def test_settings_take_the_rejection_cost_rule() -> None:
    assert Settings(c_r="gamma") == Settings()  # one setting for the default rule
    bound = Settings(c_r="bound", c_fn=10)
    assert bound.c_r == "bound" and "cr-bound" in bound.name
    assert Settings.from_dict(bound.to_dict()) == bound
    assert c_r_value("bound") == "bound" and c_r_value("gamma") is None
    with pytest.raises(ValueError, match="c_r"):
        Settings(c_r="half")  # type: ignore[arg-type]


def test_episode_costs_follow_the_rule() -> None:
    y = _labels(60, 6, 1)
    X = np.random.default_rng(1).normal(size=(y.size, 3))
    episode = Episode(Dataset("blobs", X, y), 0, Settings(c_r="bound", c_fn=10))
    assert episode.costs.c_r == pytest.approx(min(1 - 6 / 66, 10 * 6 / 66))
