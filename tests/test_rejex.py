"""RejEx as a rejector (ballad_env.rejection.rejex; ``Settings(rejector="rejex")`` and
``"rejex-tuned"``): ExCeeD's confidence on hand-computed cases and against pyod, the rule,
the paper's expected rejection rate and bounds (hand-computed, and holding where the paper
proves them), and the episode, lattice, replay and vector env that carry it."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_xy
from gymnasium.utils.env_checker import check_env as gym_check_env

import ballad_env
from ballad_env import AL, LR, BudgetAllocationEnv, Settings, load_dataset
from ballad_env.cost import Costs
from ballad_env.episode import Episode
from ballad_env.rejection import NO_FIGURE, REJECTORS, RejExRejector, TunedRejExRejector
from ballad_env.rejection.confidence import labeled_cost, rejection_probability
from ballad_env.rejection.rejex import (
    TUNED_T,
    RejExBand,
    band_ends,
    cost_bound,
    exceed_confidence,
    exchangeable_rejection,
    expected_rejection,
    outlier_probability,
    rejected_counts,
    rejection_bound,
    rejection_threshold,
    stability,
    tuned_band,
)

#: n = 4 training scores, gamma = 0.25: one flagged, so P(Y_hat = 1 | k) = P(Bin(4, p) > 3)
#: = p^4 with p = (1 + k) / 6.
N, GAMMA = 4, 0.25
P_HAND = np.array([(1 / 6) ** 4, (2 / 6) ** 4, (3 / 6) ** 4, (4 / 6) ** 4, (5 / 6) ** 4])


# ------------------------------------------------------------------ ExCeeD and the rule
def test_exceed_outlier_probability_and_confidence_by_hand() -> None:
    """p^4 = 1/1296, 1/81, 1/16, 16/81, 625/1296; the confidence in a flag is that, in a
    non-flag 1 minus it; the stability of k = 4 is 2 |625/1296 - 1/2| = 46/1296."""
    k = np.arange(5)
    assert np.allclose(outlier_probability(k, N, GAMMA),
                       [1 / 1296, 1 / 81, 1 / 16, 16 / 81, 625 / 1296], rtol=1e-13, atol=0)
    flagged = np.array([False, False, True, True, True])
    assert np.allclose(exceed_confidence(k, N, GAMMA, flagged),
                       [1295 / 1296, 80 / 81, 1 / 16, 16 / 81, 625 / 1296], rtol=1e-13)
    assert stability(np.array([4]), N, GAMMA)[0] == pytest.approx(46 / 1296, abs=1e-15)
    assert rejection_threshold(32.0) == 1 - 2 * math.exp(-32)


def test_the_rejected_counts_by_hand() -> None:
    """Reject iff min(p^4, 1 - p^4) >= exp(-T): T = 2 (0.1353) keeps 16/81 and 625/1296,
    so k = 3, 4; T = 7 (0.000912) adds k = 1, 2 (1/81, 1/16) but not k = 0 (1/1296 =
    0.000772); T = 8 (0.000335) rejects every k; T = ln 2 or less rejects none."""
    assert rejected_counts(N, GAMMA, 2.0) == (3, 4)
    assert rejected_counts(N, GAMMA, 7.0) == (1, 4)
    assert rejected_counts(N, GAMMA, 8.0) == (0, 4)
    low, high = rejected_counts(N, GAMMA, 0.5)
    assert low > high and exchangeable_rejection(N, GAMMA, 0.5) == 0.0
    assert exchangeable_rejection(N, GAMMA, 2.0) == 2 / 5


def test_exceed_confidence_equals_pyods_predict_confidence() -> None:
    """pyod's ``predict_confidence`` on a kNN detector, and ours from the same training
    scores, test scores and flags, agree to rounding (pyod takes 1 - cdf, we the sf)."""
    from pyod.models.knn import KNN

    rng = np.random.default_rng(3)
    X_train, X_test = rng.normal(size=(150, 3)), rng.normal(size=(60, 3)) * 1.5
    detector = KNN(contamination=0.1).fit(X_train)
    expected = detector.predict_confidence(X_test)
    scores = detector.decision_function(X_test)
    counts = np.array([np.count_nonzero(detector.decision_scores_ <= s) for s in scores])
    ours = exceed_confidence(counts, 150, 0.1, scores > detector.threshold_)
    assert np.allclose(ours, expected, rtol=0, atol=1e-12)
    assert len(set(np.round(expected, 6))) > 10  # many distinct values were compared


def test_the_band_rule_on_hand_probabilities() -> None:
    """Training probabilities 0.1, 0.2, 0.3, 0.4 (n = 4, gamma = 0.25), T = 2: counts 3 and
    4 rejected, i.e. P >= 0.3; the band in P is [0.3, 1); the soft rejection is BALLAD's
    form on the stability with tau = 1 - 2 exp(-2)."""
    band = RejExBand.fit(np.array([0.4, 0.1, 0.3, 0.2]), GAMMA, 2.0, Costs(1, 1, 0.25))
    p = np.array([0.05, 0.25, 0.3, 0.35, 0.9])
    assert band.counts(p).tolist() == [0, 2, 3, 3, 4]
    assert band.reject(p).tolist() == [False, False, True, True, True]
    assert band.thresholds == (0.3, 1.0) and band.tau == pytest.approx(0.7)
    conf = 2 * np.abs(P_HAND[[0, 2, 3, 3, 4]] - 0.5)
    assert np.allclose(band.rejection_probability(p),
                       rejection_probability(conf, 1 - 2 * math.exp(-2)), rtol=1e-12)
    assert (band.rejection_probability(p) >= 0.5).tolist() == band.reject(p).tolist()
    assert band == RejExBand.fit(np.array([0.1, 0.2, 0.3, 0.4]), GAMMA, 2.0, Costs(1, 1, 0.1))


# ------------------------------------------------------------------ the paper's figures
def test_expected_rate_and_bounds_by_hand() -> None:
    """floor(n gamma) - 1 = 0, so F(0; 4, t) = (1 - t)^4: t1 = 1 - (1 - e^-2)^(1/4) =
    0.035701, t2 = 1 - e^-0.5 = 0.393469 (the rule rejects p in [0.6065, 0.9643]: k = 3, 4,
    p = 4/6, 5/6). Cost bound with c_r = 0.25: t1 + 0.25 + 0.25 (t2 - t1) = 0.375143.
    Rate bound (delta = 0.05): min(1, 3.5 / 4 + 12 / 16) - (17 / 16 - sqrt(5376) / 256)
    + 2 sqrt(ln 40 / 8) = 1 - 0.776090 + 1.358094."""
    t1, t2 = band_ends(N, GAMMA, 2.0)
    assert t1 == pytest.approx(1 - (1 - math.exp(-2)) ** 0.25, abs=1e-12)
    assert t2 == pytest.approx(1 - math.exp(-0.5), abs=1e-12)
    assert (t1, t2) == (pytest.approx(0.035701, abs=1e-6), pytest.approx(0.393469, abs=1e-6))
    assert expected_rejection(N, GAMMA, 2.0) == pytest.approx(t2 - t1, abs=1e-15)
    costs = Costs(1.0, 1.0, 0.25)
    assert cost_bound(N, GAMMA, 2.0, costs) == pytest.approx(t1 + 0.25 + 0.25 * (t2 - t1),
                                                             abs=1e-12)
    assert cost_bound(N, GAMMA, 2.0, costs) == pytest.approx(0.375143, abs=1e-6)
    left = 17 / 16 - math.sqrt(5376) / 256
    assert rejection_bound(N, GAMMA, 2.0) == pytest.approx(
        1 - left + 2 * math.sqrt(math.log(40) / 8), abs=1e-12)
    assert expected_rejection(N, GAMMA, 0.5) == 0.0  # T <= ln 2 rejects nothing
    assert cost_bound(N, GAMMA, 0.5, costs) == pytest.approx(0.5)


@pytest.mark.parametrize(("n", "gamma"), [(200, 0.1), (400, 0.05), (1000, 0.03)])
def test_the_estimate_is_the_exchangeable_rate_up_to_the_grid(n, gamma) -> None:
    """The rule rejects whole counts k; a test score exchangeable with the n training
    scores has k uniform on 0..n, so its rate is the share of rejected counts: t2 - t1
    differs from it by at most two counts' worth, 2 / (n + 1); the bound is above both."""
    for t in TUNED_T:
        exact = exchangeable_rejection(n, gamma, t)
        assert abs(expected_rejection(n, gamma, t) - exact) <= 2 / (n + 1)
        assert rejection_bound(n, gamma, t) >= exact


def test_the_figures_bound_what_iid_scores_measure() -> None:
    """The paper's case: a fixed score function, training and test examples i.i.d. (here a
    mixture: 10% anomalies scoring higher, overlapping the normals). Over 300 draws of 250
    training and 250 test examples: the mean test rejection rate is the expected one within
    0.01, the rate exceeds its bound in at most delta = 5% of the draws, and the mean cost
    per example stays below the cost bound."""
    rng = np.random.default_rng(11)
    n, gamma, t = 250, 0.1, 32.0
    costs = Costs(1.0, 1.0, gamma)
    rates, test_costs = [], []
    for _ in range(300):
        y = rng.random(2 * n) < gamma
        scores = rng.normal(size=2 * n) + 2.0 * y
        train, test, y_test = scores[:n], scores[n:], y[n:]
        band = RejExBand.fit(train, gamma, t, costs)
        rejected = band.reject(test)
        flagged = test > np.quantile(train, 1 - gamma)
        errors = ~rejected & (flagged != y_test)
        rates.append(rejected.mean())
        test_costs.append((np.sum(errors & flagged) * costs.c_fp
                           + np.sum(errors & ~flagged) * costs.c_fn
                           + rejected.sum() * costs.c_r) / n)
    figures = band.figures
    assert abs(np.mean(rates) - figures["rejex_expected_rejection"]) < 0.01
    assert np.mean(np.array(rates) > figures["rejex_rejection_bound"]) <= 0.05
    assert np.mean(test_costs) <= figures["rejex_cost_bound"]


def test_in_label_free_episodes_the_figures_bound_the_test_measures() -> None:
    """In the environment, before any label and with the kNN prior (training scores left
    out of their own neighbours, so nearly exchangeable with the test examples'): over 20
    seeds the test rejection rate averages the expected one within three standard errors,
    stays below its bound, and the cost per test example averages below the cost bound."""
    data = load_dataset(make_xy(400, 40, seed=2))
    settings = Settings(prior="knn", rejector="rejex")
    snapshots = [Episode(data, seed, settings).snapshot() for seed in range(20)]
    rates = np.array([s.rejection_rate for s in snapshots])
    error = 3 * rates.std(ddof=1) / np.sqrt(rates.size)
    assert abs(rates.mean() - snapshots[0].rejex_expected_rejection) < error
    assert all(s.rejection_rate <= s.rejex_rejection_bound for s in snapshots)
    assert np.mean([s.test_cost_per_example for s in snapshots]) <= \
        snapshots[0].rejex_cost_bound


# ------------------------------------------------------------------ rejectors and settings
def test_settings_and_clear_errors() -> None:
    assert REJECTORS.names()[2:4] == ("rejex", "rejex-tuned")
    assert Settings(rejector="rejex").name == "iforest_rej-rejex"
    assert Settings(rejector="rejex-tuned", rejex_T=8).name == "iforest_rej-rejex-tuned_rejT8"
    assert "rejex_T" not in Settings(rejector="rejex").to_dict()
    with pytest.raises(ValueError, match="rejex_T=8 is RejEx's tolerance; "
                                         "rejector='confidence' has none"):
        Settings(rejex_T=8)
    with pytest.raises(ValueError, match="rejex_T must be a positive number"):
        Settings(rejector="rejex", rejex_T=0)
    with pytest.raises(ValueError, match="threshold_search='bayes' tunes another "
                                         "rejector's threshold search"):
        Settings(rejector="rejex", threshold_search="bayes")
    with pytest.raises(ValueError, match="tau_without_val='validation'.*needs no label"):
        Settings(rejector="rejex-tuned", tau_without_val="validation")


def test_the_command_line_takes_the_rejector_and_its_t() -> None:
    import argparse

    from ballad_env.settings.cli import add_settings_arguments, settings_from_args

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    args = parser.parse_args(["--rejector", "rejex-tuned", "--rejex-T", "8"])
    assert settings_from_args(args) == (Settings(rejector="rejex-tuned", rejex_T=8.0),)


def test_rejex_ignores_labels_and_tuned_picks_the_cheapest_t() -> None:
    """``rejex``'s fit reads D's probabilities only: any labels give the same band.
    ``rejex-tuned`` prices each T on the labeled members and keeps the cheapest (ties: the
    smallest T); without labels it keeps rejex_T."""
    rng = np.random.default_rng(0)
    train = rng.random(200)
    costs = Costs(1.0, 1.0, 0.1)
    p = rng.random(50)
    plain = RejExRejector(Settings(rejector="rejex"))
    for y in (np.zeros(50, int), np.ones(50, int)):
        assert plain.fit(p, np.arange(10), y, costs, 0, train=train, contamination=0.1) == \
            RejExBand.fit(train, 0.1, 32.0, costs)
    tuned = TunedRejExRejector(Settings(rejector="rejex-tuned", rejex_T=8))
    none = tuned.fit(p, np.arange(0), np.zeros(50, int), costs, 0, train=train,
                     contamination=0.1)
    assert none.t == 8.0
    y = (p > 0.9).astype(int)  # the detector's flags (P > 0.5) are wrong between 0.5 and 0.9
    chosen = tuned.fit(p, np.arange(50), y, costs, 0, train=train, contamination=0.1)
    price = {t: labeled_cost(RejExBand.fit(train, 0.1, t, costs).reject(p), p > 0.5, y, costs)
             for t in TUNED_T}
    assert price[chosen.t] == min(price.values())
    assert chosen.t == min(t for t in TUNED_T if price[t] == min(price.values()))
    assert chosen == tuned_band(train, 0.1, costs, p, y, 8.0)
    with pytest.raises(ValueError, match="pass train="):
        plain.fit(p, np.arange(3), y, costs, 0)


@pytest.fixture(scope="module")
def small(small_xy):
    return load_dataset(small_xy)


def test_the_rule_is_in_force_from_the_start_and_lr_rounds_change_nothing(small) -> None:
    """No label needed: the band holds before any round, is RejEx's on D's probabilities,
    and LR rounds leave it, the test figures and the rejection side's output as they were
    (the LR reward is 0); its labels only estimate the cost (val_sample_cost)."""
    episode = Episode(small, 0, Settings(prior="knn", rejector="rejex"))
    band = RejExBand.fit(episode.p_train, episode.contamination, 32.0, episode.costs)
    assert episode.rejection == band and episode.tau > 0
    before = episode.snapshot()
    result = episode.step(LR)
    after = episode.snapshot()
    assert result.rewards["entropy"] == 0.0 and result.rewards["cosine"] == 0.0
    assert (after.test_cost, after.rejection_rate, after.tau) == \
        (before.test_cost, before.rejection_rate, before.tau)
    assert after.n_labeled_val > 0 and after.val_sample_cost >= 0
    episode.step(AL)
    assert episode.rejection == RejExBand.fit(episode.p_train, episode.contamination, 32.0,
                                              episode.costs)
    info = episode.snapshot().info()
    for key in ("rejex_expected_rejection", "rejex_rejection_bound", "rejex_cost_bound"):
        assert info[key] == band.figures[key]
    confidence_info = Episode(small, 0, Settings(prior="knn")).snapshot().info()
    assert confidence_info["rejex_cost_bound"] == NO_FIGURE == -1.0


def test_the_initial_lr_output_is_the_label_free_rule_of_the_initial_detector(small) -> None:
    """With initial_fit="train-val" the initial outputs come from another detector (fitted
    on D and V): the LR side's initial rule is RejEx on that detector's D probabilities."""
    episode = Episode(small, 0, Settings(prior="knn", rejector="rejex", initial_fit="train-val"))
    n_train = len(episode.split.y_train)
    p = episode.start.p_initial
    band = RejExBand.fit(p[:n_train], episode.contamination, 32.0, episode.costs)
    assert np.array_equal(episode.stored[LR].decision, band.reject(p).astype(float))
    assert not np.array_equal(p[:n_train], episode.p_train)


# ------------------------------------------------------------------ environment, lattice
def test_cardiotocography_plays_and_passes_gymnasiums_checker() -> None:
    env = gym.make(ballad_env.ENV_ID, dataset="Cardiotocography", rejector="rejex")
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info["tau"] > 0
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(
            info["action_mask"])[0]))
        done = terminated or truncated
    assert info["round"] == 15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize(("rejector", "detector"), [("rejex", "ssdo"), ("rejex-tuned", "ssdo"),
                                                    ("rejex-tuned", "ssif")])
def test_lattice_and_replay_equal_live(tmp_path, small_xy, rejector, detector) -> None:
    """RejEx's band after (i, j) is a function of the detector after i AL rounds (and, tuned,
    of V's labels after j LR rounds): the replay env built from the lattice repeats live
    episodes on random paths exactly, every reward and RejEx figure included."""
    from test_replay import compare_random_sequences

    from agents.experiments.lattice_build import build_store

    data = load_dataset(small_xy)
    options: dict[str, object] = {"rejector": rejector}
    seeds = (0, 1)
    if detector == "ssif":  # a small forest, five rounds, one seed: SSIF's fits are slow
        options.update(detector="ssif", ssif_trees=8, budget_fraction=0.1)
        seeds = (0,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_store(tmp_path, [data], list(seeds), [Settings(prior="knn", **options)],
                    progress=False)
    compare_random_sequences(data, "knn", tmp_path, seeds, 6 if detector == "ssdo" else 4,
                             np.random.default_rng(5), **options)


def test_the_vector_replay_env_equals_single_replay_envs(tmp_path, small_xy) -> None:
    """The natively vectorised replay env on a rejex-tuned store: every step's output equals
    gymnasium's SyncVectorEnv of single replay envs (which equal the live env, above)."""
    from gymnasium.vector import SyncVectorEnv
    from test_replay_vector import play_both, same

    from agents.experiments.lattice_build import build_store
    from ballad_env.replay.env import BudgetAllocationReplayEnv

    data = load_dataset(small_xy)
    settings = Settings(prior="knn", rejector="rejex-tuned")
    build_store(tmp_path, [data], [0, 1], [settings], progress=False)
    kwargs = {"store": tmp_path, "datasets": [data.name], "prior": "knn",
              "rejector": "rejex-tuned", "reward": "entropy"}
    sync = SyncVectorEnv([lambda: BudgetAllocationReplayEnv(**kwargs)] * 3)
    native = gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=3,
                          vectorization_mode="vector_entry_point", **kwargs)
    same(sync.reset(seed=4), native.reset(seed=4), "reset")
    play_both(sync, native, 40, np.random.default_rng(1))


def test_render_draws_the_rejex_band(small_xy) -> None:
    import matplotlib

    matplotlib.use("Agg")
    env = BudgetAllocationEnv(small_xy, prior="knn", rejector="rejex", render_mode="rgb_array")
    env.reset(seed=0)
    env.step(AL)
    assert env.episode.tau > 0 and env.render().shape[2] == 3
    env.close()
