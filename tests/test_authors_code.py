"""The published code's options (issue 12): each against a small hand-computed case, the
preset's name and command line, and the study's tables."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd
import pytest

from ballad_env.cost import Costs, evaluate
from ballad_env.data import Dataset
from ballad_env.detectors.ssdo.model import SSDO, squash, squash_threshold
from ballad_env.episode import AL, LR, Episode
from ballad_env.protocol import authors_class_split_sizes, authors_split_indices, split_sizes
from ballad_env.rejection.confidence import ThresholdSearch, empirical_cost, place_tau
from ballad_env.rewards import SideOutput, entropy
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args
from scripts.studies.authors_code.ablation import (
    ablation_episodes,
    ablation_settings,
    ablation_table,
    agreement_per_dataset,
    agreement_table,
    change_label,
    published_grids,
)


# ----------------------------------------------------------------------------- cost metric
def test_class_conditional_cost_by_hand() -> None:
    """c_r R/n + c_fp FP/n_normal + c_fn FN/n_anomaly: 0.1*3/10 + 2/8 + 1/2 = 0.78."""
    costs = Costs(1.0, 1.0, 0.1, "class_conditional")
    assert costs.class_conditional(2, 1, 3, 8, 2) == pytest.approx(0.78)
    assert costs.of_counts(2, 1, 3, 8, 2) == pytest.approx(0.78)
    assert Costs(1.0, 1.0, 0.1).of_counts(2, 1, 3, 8, 2) == pytest.approx(0.33)  # 3.3 / 10
    assert costs.class_conditional(2, 0, 3, 10, 0) == pytest.approx(0.03 + 0.2)  # no anomaly
    with pytest.raises(ValueError, match="unknown cost metric"):
        Costs(1.0, 1.0, 0.1, "per_class")


def test_evaluate_reports_both_metrics_and_scores_by_the_one_in_force() -> None:
    # 4 normals, 2 anomalies; p > 0.5 predicts an anomaly; example 5 rejected.
    p = np.array([0.9, 0.1, 0.1, 0.1, 0.2, 0.6])
    y = np.array([0, 0, 0, 0, 1, 1])
    rejected = np.array([False, False, False, False, False, True])
    per_example = evaluate(p, y, rejected, Costs(1.0, 1.0, 0.3))
    conditional = evaluate(p, y, rejected, Costs(1.0, 1.0, 0.3, "class_conditional"))
    # FP = 1 (example 0), FN = 1 (example 4), R = 1.
    assert per_example.cost == pytest.approx((1 + 1 + 0.3) / 6)
    assert conditional.cost == pytest.approx(0.3 / 6 + 1 / 4 + 1 / 2)
    for ev in (per_example, conditional):
        assert ev.cost_per_example == pytest.approx((1 + 1 + 0.3) / 6)
        assert ev.cost_class_conditional == pytest.approx(0.3 / 6 + 1 / 4 + 1 / 2)


def _all_normal_predictions(conf: list[float]) -> np.ndarray:
    """Probabilities whose confidences are ``conf``, every one predicted normal."""
    return 0.5 - np.asarray(conf) / 2


def test_cost_metric_changes_the_threshold() -> None:
    """Four correct normals below a missed anomaly (C = 0.3), six correct normals above it.
    Per example, rejecting the five lowest costs 5 c_r = 1.5 > 1 + c_r, so tau stays at
    Q(0.01) = 0.105; class-conditionally the miss costs FNR = 1, so tau rises to 0.9."""
    conf = [0.1, 0.15, 0.2, 0.25, 0.3, 0.9, 0.92, 0.94, 0.96, 0.98, 0.99]
    y = np.zeros(len(conf), dtype=np.int8)
    y[4] = 1
    p = _all_normal_predictions(conf)
    tau_example = ThresholdSearch()(p, y, Costs(1.0, 1.0, 0.3))
    tau_class = ThresholdSearch()(p, y, Costs(1.0, 1.0, 0.3, "class_conditional"))
    assert tau_example == pytest.approx(0.105)
    assert tau_class == pytest.approx(0.9)
    pred = np.zeros(len(conf), dtype=np.int8)
    assert empirical_cost(0.9, np.array(conf), pred, y, Costs(1.0, 1.0, 0.3,
                                                              "class_conditional")) == \
        pytest.approx(0.3 * 5 / 11)


# ----------------------------------------------------------------------------- tau position
def test_place_tau_in_its_interval() -> None:
    """tau = 0.25 rejects {0.1}: any tau in (0.1, 0.3] does too."""
    conf = np.array([0.1, 0.3, 0.5])
    bottom = place_tau(0.25, conf, 0.05, 0.45, "bottom")
    assert 0.1 < bottom < 0.1 + 1e-15
    assert place_tau(0.25, conf, 0.05, 0.45, "top") == 0.3
    assert place_tau(0.25, conf, 0.05, 0.45, "middle") == pytest.approx(0.2)
    assert place_tau(0.25, conf, 0.05, 0.45, "as-found") == 0.25
    assert place_tau(0.25, conf, 0.2, 0.45, "bottom") == 0.2  # clipped to the search interval
    assert place_tau(0.45, conf, 0.05, 0.45, "top") == 0.45  # rejects {0.1, 0.3}: up to hi


def _one_anomaly_case() -> tuple[list[float], np.ndarray, np.ndarray, Costs]:
    """Confidences with one labeled anomaly (at 0.3) among normals, all predicted normal,
    and class-conditional costs: tau's optimal interval is (0.3, 0.9]."""
    conf = [0.1, 0.15, 0.2, 0.25, 0.3, 0.9, 0.92, 0.94, 0.96, 0.98, 0.99]
    y = np.zeros(len(conf), dtype=np.int8)
    y[4] = 1
    return conf, y, _all_normal_predictions(conf), Costs(1.0, 1.0, 0.3, "class_conditional")


def test_tau_position_keeps_the_labeled_cost() -> None:
    conf, y, p, costs = _one_anomaly_case()
    taus = {pos: ThresholdSearch(position=pos)(p, y, costs)
            for pos in ("as-found", "bottom", "middle", "top")}
    assert taus["bottom"] == pytest.approx(0.3, abs=1e-12) and taus["bottom"] > 0.3
    assert taus["top"] == pytest.approx(0.9) and taus["as-found"] == pytest.approx(0.9)
    assert taus["middle"] == pytest.approx(0.6)
    pred = np.zeros(len(conf), dtype=np.int8)
    costs_at = {empirical_cost(t, 2 * np.abs(p - 0.5), pred, y, costs) for t in taus.values()}
    assert len(costs_at) == 1
    with pytest.raises(ValueError, match="tau position"):
        ThresholdSearch(position="anywhere")


def test_authors_bayes_search_ignores_the_seed_and_finds_the_minimum() -> None:
    conf, y, p, costs = _one_anomaly_case()
    search = ThresholdSearch("authors-bayes", n_calls=12)
    tau = search(p, y, costs, seed=1)
    assert tau == search(p, y, costs, seed=2)
    pred = np.zeros(len(conf), dtype=np.int8)
    assert empirical_cost(tau, np.array(conf), pred, y, costs) == pytest.approx(0.3 * 5 / 11)


# ----------------------------------------------------------------------------- detector
def test_squash_threshold_whole_percent() -> None:
    """Scores 0..100: the 0.925 quantile is 92.5; the published int(92.5) percentile is 92."""
    scores = np.arange(101, dtype=float)
    assert squash_threshold(scores, 0.075) == pytest.approx(92.5)
    assert squash_threshold(scores, 0.075, "whole-percent") == pytest.approx(92.0)
    # int((1 - 0.07) * 100) is 93 in floating point
    assert squash_threshold(scores, 0.07, "whole-percent") == pytest.approx(93.0)
    with pytest.raises(ValueError, match="squash quantile"):
        squash_threshold(scores, 0.1, "percentile")


def test_rescored_knn_counts_each_point_as_its_own_neighbour() -> None:
    """X = 0, 1, 3 with 2 neighbours. Fitted (leave-one-out) mean distances: 2, 1.5, 2.5;
    rescored (self included): 0.5, 0.5, 1. gamma = 1/3 puts the threshold at the 2/3
    quantile: 2 + 0.5/3 fitted, 0.5 + 0.5/3 rescored."""
    X = np.array([[0.0], [1.0], [3.0]])
    fitted = SSDO(1 / 3, "knn", k=1).fit_unlabeled(X)
    rescored = SSDO(1 / 3, "knn", k=1, train_scores="rescored").fit_unlabeled(X)
    assert fitted.prior_threshold == pytest.approx(2 + 0.5 / 3)
    assert rescored.prior_threshold == pytest.approx(0.5 + 0.5 / 3)
    np.testing.assert_allclose(fitted.q_train, squash(np.array([2, 1.5, 2.5]), 2 + 0.5 / 3))
    np.testing.assert_allclose(rescored.q_train,
                               squash(np.array([0.5, 0.5, 1.0]), 0.5 + 0.5 / 3))
    with pytest.raises(ValueError, match="train_scores"):
        SSDO(0.1, "knn", train_scores="refit")


# ----------------------------------------------------------------------------- split
def test_authors_split_sizes_round_up_the_parts_set_aside() -> None:
    """10: 6 aside (4 in D), ceil(1.998) = 2 in T, 4 in V; 9: ceil(5.4) = 6 aside, 3 in D."""
    assert authors_class_split_sizes(10) == (4, 4, 2)
    assert authors_class_split_sizes(9) == (3, 4, 2)
    assert authors_class_split_sizes(100) == (40, 40, 20)


def test_authors_split_is_scikit_learns_per_class_split(small_xy) -> None:
    from sklearn.model_selection import train_test_split

    X, y = small_xy
    train, val, test = authors_split_indices(y, 7)
    assert (len(train), len(val), len(test)) == split_sizes(y, "authors")
    assert sorted(np.concatenate([train, val, test]).tolist()) == list(range(len(y)))
    # The published code splits each class's rows the same way: normals first.
    normals = X[y == 0]
    kept, aside = train_test_split(normals, test_size=0.6, random_state=7)
    v, t = train_test_split(aside, test_size=0.333, random_state=7)
    n_normal_train = len(kept)
    np.testing.assert_array_equal(X[train[:n_normal_train]], kept)
    np.testing.assert_array_equal(X[val[:len(v)]], v)
    np.testing.assert_array_equal(X[test[:len(t)]], t)
    assert set(y[train[n_normal_train:]]) == {1}


def test_authors_split_refuses_a_class_too_small_for_d() -> None:
    """Two anomalies: ceil(0.6 * 2) = 2 set aside leaves D none of them."""
    y = np.zeros(40, dtype=np.int8)
    y[:2] = 1
    with pytest.raises(ValueError, match="cannot divide the 2 examples of class 1"):
        authors_split_indices(y, 0)


def test_episode_uses_the_authors_split_with_the_seed(small_xy) -> None:
    X, y = small_xy
    data = Dataset("small", X, y)
    episode = Episode(data, 3, Settings(prior="knn", split="authors"))
    train, _, _ = authors_split_indices(y, 3)
    np.testing.assert_array_equal(episode.split.y_train, y[train])
    assert episode.budget.per_round == max(1, round(0.02 * len(train)))


# ----------------------------------------------------------------------------- episode
def test_tau_without_val_labels_zero_rejects_nothing_in_al_rounds(small_xy) -> None:
    X, y = small_xy
    data = Dataset("small", X, y)
    zero = Episode(data, 0, Settings(prior="knn", tau_without_val="zero"))
    biased = Episode(data, 0, Settings(prior="knn"))
    taus_biased = []
    for _ in range(3):
        result = zero.step(AL)
        assert zero.tau == 0.0 and result.evaluation.rejection_rate == 0.0
        biased.step(AL)
        taus_biased.append(biased.tau)
    assert max(taus_biased) > 0  # the default sets tau on D's labels
    zero.step(LR)
    biased.step(LR)
    assert zero.tau == biased.tau  # with V labels both use them


def test_authors_entropy_takes_natural_logs_on_the_lr_side() -> None:
    """H_e(0.5) = 0.5 ln 2; H_2(0.5) = 0.5; the reward is their difference."""
    assert entropy(np.array([0.5]), math.e)[0] == pytest.approx(0.5 * math.log(2))
    new = SideOutput(np.array([0.5]), np.array([0.0]))
    old = SideOutput(np.array([0.5]), np.array([0.0]), math.e)
    assert new.rewards(old)["entropy"] == pytest.approx(0.5 - 0.5 * math.log(2))


def test_episode_entropy_logs(small_xy) -> None:
    X, y = small_xy
    episode = Episode(Dataset("small", X, y), 0, Settings(prior="knn", entropy_log="authors"))
    assert episode.stored[AL].log_base == math.e and episode.stored[LR].log_base == math.e
    episode.step(LR)
    episode.step(AL)
    assert episode.stored[AL].log_base == 2.0 and episode.stored[LR].log_base == math.e
    default = Episode(Dataset("small", X, y), 0, Settings(prior="knn"))
    assert default.stored[AL].log_base == 2.0 and default.stored[LR].log_base == 2.0


def test_info_reports_both_costs(make_env) -> None:
    for metric in ("per_example", "class_conditional"):
        env = make_env(cost_metric=metric)
        env.reset(seed=0)
        _, _, _, _, info = env.step(1)
        assert info["test_cost"] == info[f"test_cost_{metric}"]
        # c_fp = c_fn = 1, c_r = gamma = 0.1
        assert info["test_cost_class_conditional"] == pytest.approx(
            0.1 * info["rejection_rate"] + info["fpr"] + info["fnr"])


# ----------------------------------------------------------------------------- settings
def test_preset_switches_every_option_and_names_itself() -> None:
    preset = Settings.authors_code()
    assert (preset.split, preset.prior_train_scores, preset.squash_quantile,
            preset.tau_without_val, preset.entropy_log, preset.initial_fit) == (
        "authors", "rescored", "whole-percent", "zero", "authors", "train-val")
    assert (preset.al_strategy, preset.lr_strategy, preset.query_rng) == (
        "uncertainty-argsort", "per-round", "authors")
    # each query option alone is named by its tag; the defaults keep theirs
    assert Settings(query_rng="authors").name == "iforest_qrng-authors"
    assert Settings(lr_strategy="per-round").name == "iforest_lr-per-round"
    assert (Settings().al_strategy, Settings().lr_strategy, Settings().query_rng) == (
        "uncertainty", "random", "streams")
    assert (preset.prior, preset.threshold_search, preset.bayes_calls) == (
        "knn", "authors-bayes", 50)
    # its query stream seeded as the published loader seeds it, and its arithmetic (the
    # squashing as anomatools writes it, the published cosine), each named by its tag
    assert preset.query_seed == 331
    assert (preset.squash_formula, preset.label_terms, preset.cosine_rule) == (
        "authors", "authors", "authors")
    tags = "_squashf-authors_lterms-authors_cos-authors"
    assert preset.name == "knn_authors_authors-bayes50_qseed331" + tags
    assert Settings.authors_code(threshold_search="exact").name == "knn_authors_qseed331" + tags
    assert Settings.authors_code(prior="iforest", threshold_search="exact", tau_position="bottom"
                                 ).name == ("iforest_authors_qseed331_squashf-authors"
                                            "_lterms-authors_taupos-bottom_cos-authors")
    # without them, the names the preset had before them; with the split seed's stream
    # too, the names it had before query_seed
    before = {"squash_formula": "expm1", "label_terms": "incremental", "cosine_rule": "ours"}
    assert Settings.authors_code(**before).name == "knn_authors_authors-bayes50_qseed331"
    assert Settings.authors_code(query_seed="split", **before).name == \
        "knn_authors_authors-bayes50"
    assert Settings.authors_code(threshold_search="exact", query_seed=None, **before
                                 ).name == "knn_authors"
    # without the shared stream there is no seed to set
    assert Settings.authors_code(query_rng="streams").query_seed is None
    assert Settings(split="authors").name == "iforest_split-authors"
    assert Settings().name == "iforest"  # the defaults keep their name
    assert not Settings(split="authors").is_authors_code


def test_options_are_checked_and_on_the_command_line() -> None:
    with pytest.raises(ValueError, match="unknown split"):
        Settings(split="random")
    with pytest.raises(ValueError, match="unknown cost_metric"):
        Settings(cost_metric="per_class")
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    (setting,) = settings_from_args(parser.parse_args(
        ["--cost-metric", "class_conditional", "--split", "authors", "--tau-position",
         "middle"]))
    assert (setting.cost_metric, setting.split, setting.tau_position) == (
        "class_conditional", "authors", "middle")
    with pytest.raises(SystemExit):
        parser.parse_args(["--squash-quantile", "median"])
    assert Settings.from_dict(Settings.authors_code().to_dict()) == Settings.authors_code()


# ----------------------------------------------------------------------------- study tables
def _results(costs: dict[tuple[str, str], float]) -> pd.DataFrame:
    rows = []
    for (setting, agent), cost in costs.items():
        for dataset in ("a", "b"):
            for seed in (0, 1):
                rows.append({"setting": setting, "dataset": dataset, "seed": seed,
                             "agent": agent, "round": 1,
                             "test_cost_per_example": cost + (0.01 if dataset == "b" else 0)})
    return pd.DataFrame(rows)


def test_ablation_table_changes_and_wins() -> None:
    base, split = Settings(prior="knn"), Settings(prior="knn", split="authors")
    results = _results({(base.name, "ballad"): 0.04, (base.name, "all-in-al"): 0.05,
                        (base.name, "all-in-lr"): 0.03, (split.name, "ballad"): 0.04,
                        (split.name, "all-in-al"): 0.05, (split.name, "all-in-lr"): 0.06})
    table = ablation_table(results, [base, split], "test_cost_per_example")
    assert table.loc[base.name, "change"] == "defaults"
    assert table.loc[split.name, "change"] == "split=authors"
    assert table.loc[split.name, "all-in-lr"] == pytest.approx(0.065)
    assert table.loc[split.name, "d_all-in-lr"] == pytest.approx(0.03)
    assert table.loc[base.name, "wins_all-in-lr"] == 2
    assert table.loc[split.name, "wins_ballad"] == 2
    assert table.loc[split.name, "ballad_vs_lr"] == pytest.approx(1 - 0.045 / 0.065)


def test_ablation_table_of_a_partial_run_compares_the_same_episodes() -> None:
    base, split, other = (Settings(prior="knn"), Settings(prior="knn", split="authors"),
                          Settings(prior="knn", k=5))
    full = _results({(base.name, agent): 0.04 for agent in ("ballad", "all-in-al", "all-in-lr")}
                    | {(split.name, agent): 0.05 for agent in ("ballad", "all-in-al",
                                                               "all-in-lr")})
    extra = full[full["setting"] == base.name].assign(seed=2, test_cost_per_example=0.9)
    unfinished = ((full["setting"] == split.name) & (full["agent"] == "all-in-lr")
                  & (full["dataset"] == "b") & (full["seed"] == 1))
    late = full[full["setting"] == base.name].assign(setting=other.name).query("seed == 0")
    # the defaults ran a seed more, the split has not finished b's seed 1 with All-in-LR, and
    # a setting left out of the table has run seed 0 only
    results = pd.concat([full[~unfinished], extra, late], ignore_index=True)
    kept, dropped = ablation_episodes(results, [base, split])
    assert dropped == 3  # (a, 2), (b, 2) and (b, 1)
    table = ablation_table(results, [base, split], "test_cost_per_example")
    assert table.loc[base.name, "all-in-lr"] == pytest.approx(0.045)  # not the 0.9 of seed 2
    assert table.loc[split.name, "d_all-in-lr"] == pytest.approx(0.01)
    assert table["datasets"].tolist() == [2, 2]
    assert table["seeds"].tolist() == ["1-2", "1-2"]  # b has seed 0 only, a seeds 0 and 1
    assert len(kept) == 3 * 2 * 3


def test_ablation_settings_hold_each_option_and_the_preset() -> None:
    names = [s.name for s in ablation_settings(["knn"])]
    assert names[0] == "knn"
    assert "knn_authors_qseed331_squashf-authors_lterms-authors_cos-authors" in names
    assert "knn_split-authors" in names
    assert len(names) == len(set(names))
    assert change_label(Settings.authors_code(threshold_search="exact")) == "preset"
    assert change_label(Settings.authors_code(threshold_search="exact", query_seed="split")
                        ) == "preset without query_seed"
    assert change_label(Settings.authors_code(threshold_search="exact", cosine_rule="ours")
                        ) == "preset without cosine_rule"
    assert change_label(Settings.authors_code(threshold_search="exact", initial_fit="train",
                                              tau_position="bottom")) == \
        "preset without initial_fit (tau_position=bottom)"
    assert change_label(Settings(prior="knn", split="authors")) == "split=authors"
    assert names[-1] == Settings.authors_code(threshold_search="exact", initial_fit="train").name


def test_agreement_table_within_tolerance() -> None:
    setting = Settings.authors_code(threshold_search="exact").name
    ours = pd.DataFrame({"setting": setting, "dataset": ["a", "a", "b", "b"], "seed": 0,
                         "agent": "all-in-lr", "test_cost": [0.05, 0.07, 0.10, 0.10]})
    published = pd.DataFrame({"dataset": ["a", "b"], "seed": 0, "agent": "all-in-lr",
                              "test_cost": [0.05, 0.12]})
    table = agreement_table(ours, published, setting)
    assert table.loc["all-in-lr", "ours"] == pytest.approx((0.06 + 0.10) / 2)
    assert table.loc["all-in-lr", "published"] == pytest.approx(0.085)
    assert bool(table.loc["all-in-lr", "within"]) is True


def test_agreement_per_dataset_and_its_spread() -> None:
    """a: ours 0.06 (seeds 0, 1) against 0.05 (+20%); b: 0.10 against 0.125 (-20%)."""
    setting = Settings.authors_code(threshold_search="exact").name
    ours = pd.DataFrame({"setting": setting, "dataset": ["a", "a", "b"], "seed": [0, 1, 0],
                         "agent": "ballad", "test_cost": [0.05, 0.07, 0.10]})
    published = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "seed": [0, 1, 0, 1],
                              "agent": "ballad", "test_cost": [0.04, 0.06, 0.125, 0.5]})
    per_dataset = agreement_per_dataset(ours, published, setting)
    assert per_dataset.loc[("ballad", "a"), "seeds"] == "0,1"
    assert per_dataset.loc[("ballad", "b"), "episodes"] == 1  # b's seed 1: ours did not run
    assert per_dataset.loc[("ballad", "a"), "relative_difference"] == pytest.approx(0.2)
    table = agreement_table(ours, published, setting)
    assert table.loc["ballad", "episodes"] == 3
    assert table.loc["ballad", "dataset_difference_min"] == pytest.approx(-0.2)
    assert table.loc["ballad", "dataset_difference_max"] == pytest.approx(0.2)
    assert table.loc["ballad", "relative_difference"] == pytest.approx(0.08 / 0.0875 - 1)


def test_published_grids_hold_the_finished_episodes_only() -> None:
    published = pd.DataFrame({"dataset": ["a", "b", "a", "a"], "seed": [0, 0, 1, 0],
                              "agent": ["all-in-lr", "all-in-lr", "all-in-lr", "ballad"],
                              "test_cost": 0.1})
    setting = Settings.authors_code(threshold_search="exact")
    grids = published_grids(published, setting)
    assert sorted(grids) == ["all-in-lr_seed0", "all-in-lr_seed1", "ballad_seed0"]
    assert grids["all-in-lr_seed0"].datasets == ("a", "b")
    assert grids["all-in-lr_seed1"].datasets == ("a",)
    assert (grids["ballad_seed0"].agents, grids["ballad_seed0"].seeds) == (("ballad",), (0,))
    assert grids["ballad_seed0"].settings == (setting,)
