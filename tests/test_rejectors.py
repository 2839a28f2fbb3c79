"""Rejectors as an extension point (ballad_env.rejection): BALLAD's confidence threshold and
SADAL's two thresholds behind one interface, in the live environment, the lattice and the
replay env; SADAL's binary entropy reward and threshold-distance queries in the episode."""

from __future__ import annotations

import argparse
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_xy
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import ballad_env
from ballad_env import AL, LR, BudgetAllocationEnv, Settings, load_dataset
from ballad_env.cost import Costs
from ballad_env.episode import Episode
from ballad_env.queries import QueryContext
from ballad_env.rejection import (
    REJECTORS,
    ConfidenceBand,
    ConfidenceRejector,
    TwoSidedRejector,
)
from ballad_env.rejection.confidence import ThresholdSearch, confidence, rejection_probability
from ballad_env.rejection.two_sided import TwoSidedThresholds, binary_entropy, side_cost
from ballad_env.replay.lattice import build_lattice, check_lattice_settings
from ballad_env.rewards import SideOutput
from ballad_env.settings.cli import add_settings_arguments, settings_from_args

TWO_SIDED = Settings(rejector="two-sided")
#: Two rounds of six labels on the tiny set (|D| = |V| = 25, |T| = 12), c_r inside the
#: bound c_fn gamma (gamma = 5 / 62).
HAND = Settings(rejector="two-sided", c_fn=4.0, c_r=0.25, budget_fraction=0.48,
                round_fraction=0.24)


# ------------------------------------------------------------------ registry and settings
def test_registry_settings_names_and_clear_errors() -> None:
    assert REJECTORS.names()[:2] == ("confidence", "two-sided")
    assert Settings().rejector == "confidence" and Settings().entropy_terms == "one"
    assert "rejector" not in Settings().to_dict() and "entropy_terms" not in Settings().to_dict()
    assert TWO_SIDED.name == "iforest_rej-two-sided"
    assert Settings(entropy_terms="binary").name == "iforest_hterms-binary"
    assert Settings.from_dict(TWO_SIDED.to_dict()) == TWO_SIDED
    assert Settings(rejector="two-sided", threshold_search="authors-bayes",
                    bayes_calls=7).bayes_calls == 20  # unused: the published 50 / 30 calls
    with pytest.raises(ValueError, match="unknown rejector 'nope': use one of confidence, "
                                         "two-sided"):
        Settings(rejector="nope")
    with pytest.raises(ValueError, match="threshold_search='bayes' is a search of the "
                                         "confidence rejector.*exact, authors-bayes"):
        Settings(rejector="two-sided", threshold_search="bayes")
    with pytest.raises(ValueError, match="tau_position='middle'.*leave tau_position"):
        Settings(rejector="two-sided", tau_position="middle")
    with pytest.raises(ValueError, match="unknown entropy_terms 'three'"):
        Settings(entropy_terms="three")


def test_the_command_line_takes_the_rejector_and_the_entropy() -> None:
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    args = parser.parse_args(["--rejector", "two-sided", "--entropy-terms", "binary"])
    assert settings_from_args(args) == (TWO_SIDED.replace(entropy_terms="binary"),)
    with pytest.raises(SystemExit):
        parser.parse_args(["--rejector", "three-sided"])


def test_confidence_rules_are_balladS_threshold() -> None:
    """The confidence band rejects C < tau, the open band (0.5 - tau/2, 0.5 + tau/2), with
    BALLAD's soft rejection; its rejector is ThresholdSearch on the labeled members."""
    p = np.array([0.1, 0.35, 0.5, 0.64, 0.66, 0.9])
    band = ConfidenceBand(0.3)
    assert band.thresholds == (0.35, 0.65)
    assert band.reject(p).tolist() == [False, False, True, True, False, False]
    assert np.array_equal(band.rejection_probability(p), rejection_probability(confidence(p),
                                                                               0.3))
    rejector = ConfidenceRejector(Settings())
    y = np.array([0, 1, 0, 1, 1, 1])
    costs = Costs(1.0, 1.0, 0.2)
    assert rejector.fit(p, np.array([1, 3, 5]), y, costs, 0).tau == ThresholdSearch()(
        p[[1, 3, 5]], y[[1, 3, 5]], costs)
    assert rejector.start() == ConfidenceBand(0.0) and rejector.initial(0.07).tau == 0.1
    two = TwoSidedRejector(TWO_SIDED)
    assert two.start() == TwoSidedThresholds(0.5, 0.5) and two.initial(0.07) == ConfidenceBand(
        0.07)  # SADAL's LR start: BALLAD's form with tau = the contamination
    assert two.fit(p, np.array([], dtype=int), y, costs, 0) == two.start()


def test_binary_entropy_reward_on_a_tiny_case() -> None:
    """Rejection probabilities (0.25, 0.5) after (0.5, 0.5): binary H = (0.811278, 1) after
    (1, 1), so the reward is (1 - 0.811278) / 2 = 0.094361; the one-term H is 0.5 for both
    0.25 and 0.5, so BALLAD's reward is 0."""
    new, old = np.array([0.25, 0.5]), np.array([0.5, 0.5])
    decision = np.zeros(2)
    binary = SideOutput(new, decision, entropy_terms="binary").rewards(
        SideOutput(old, decision, entropy_terms="binary"))
    one = SideOutput(new, decision).rewards(SideOutput(old, decision))
    h = 0.25 * np.log2(4) + 0.75 * np.log2(4 / 3)
    assert h == pytest.approx(0.8112781244591328, abs=1e-15)
    assert binary["entropy"] == pytest.approx((1 - h) / 2, abs=1e-15)
    assert binary["entropy"] == pytest.approx(0.0943609377704336, abs=1e-15)
    assert one["entropy"] == 0.0
    natural = SideOutput(new, decision, np.e, "binary").rewards(
        SideOutput(old, decision, np.e, "binary"))
    assert natural["entropy"] == pytest.approx((1 - h) / 2 * np.log(2), abs=1e-15)


# ------------------------------------------------------------------ hand-computed episode
class FixedScores:
    """A detector stand-in with hand-set probabilities of D and of V and T stacked."""

    def __init__(self, p_train: np.ndarray, p_other: np.ndarray) -> None:
        self.p_train, self.p_other = p_train, p_other
        self.labeled: list[np.ndarray] = []

    def add_training_labels(self, indices: np.ndarray, y01: np.ndarray) -> None:
        self.labeled.append(indices)

    def probabilities(self) -> tuple[np.ndarray, np.ndarray]:
        return self.p_train, self.p_other

    def anomaly_probability(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), 0.1)


class FirstSix:
    """An LR strategy stand-in: V's examples 0-5."""

    def select(self, probability: np.ndarray, unlabeled: np.ndarray, size: int) -> np.ndarray:
        return np.arange(6)


#: V (25): labeled 0-5 are 0.3 and 0.7 (the two anomalies), 0.2, 0.4, 0.6, 0.05 (normals);
#: unlabeled 0.8, 0.9, 0.95 and sixteen at 0.05.
P_VAL = np.array([0.3, 0.7, 0.2, 0.4, 0.6, 0.05, 0.8, 0.9, 0.95] + [0.05] * 16)
#: T (12): the anomaly at 0.25 (accepted: a false negative), normals at 0.35 (rejected),
#: 0.62 (accepted: a false positive) and nine at 0.1.
P_TEST = np.array([0.25, 0.35, 0.62] + [0.1] * 9)
#: D (25): 0.32, 0.45 and 0.58 lie in the band (0.3, 0.6); the others rank by distance
#: 2 |P - 0.3| below 0.5 and 2 |P - 0.6| above: 0.27 (0.06), 0.65 (0.1), 0.18 (0.24),
#: 0.73 (0.26), 0.76 (0.32), 0.1 (0.4), then 0.05 (0.5).
P_TRAIN = np.array([0.32, 0.05, 0.1, 0.76, 0.58, 0.18, 0.65, 0.45, 0.73, 0.27] + [0.05] * 15)


@pytest.fixture(scope="module")
def tiny(tiny_xy):
    return load_dataset(tiny_xy)


def hand_episode(tiny, settings: Settings = HAND) -> Episode:
    """An episode of the tiny set on the hand-set probabilities (initial outputs included)."""
    episode = Episode(tiny, 0, settings)
    assert episode.budget.per_round == 6 and episode.budget.n_rounds == 2
    assert episode.split.y_val[:2].tolist() == [1, 1] and episode.split.y_val[2:].sum() == 0
    assert episode.split.y_test.tolist() == [1] + [0] * 11
    episode.scores = FixedScores(P_TRAIN, np.concatenate([P_VAL, P_TEST]))
    episode._refresh_probabilities()
    initial = episode.rejector.initial(episode.contamination)
    episode.stored = episode._outputs(initial, initial=True)
    episode.lr_query = FirstSix()
    return episode


def test_both_thresholds_and_their_costs_in_an_episode_step(tiny) -> None:
    """c_fp = 1, c_fn = 4, c_r = 0.25; at most int(25 / 2) = 12 of V rejected; c_fn > c_fp,
    so the left side first.

    Left: the 20 probabilities below 0.5 (seventeen at 0.05), k = min(19, 12) = 12, interval
    [Q_0.4 = 0.05, (0.5 + 0.4) / 2 = 0.45]; labeled 0.05, 0.2, 0.4 (normals), 0.3 (anomaly);
    accepted iff P < t; cost (4 FN + 0.25 R) / 20: t = 0.05: 4 R, 0.05; t = 0.2: 3 R,
    0.0375; t = 0.3: 2 R, 0.025; t = 0.4: 1 FN + 1 R, 0.2125; t = 0.45: 1 FN, 0.2. Left 0.3;
    it rejects 0.3 and 0.4, so 10 remain for the right side.
    Right: 0.6, 0.7, 0.8, 0.9, 0.95, k = min(4, 10) = 4, interval [(0.5 + 0.6) / 2 = 0.55,
    Q_0.8 = 0.91]; labeled 0.6 (normal), 0.7 (anomaly); accepted iff P > t; cost
    (FP + 0.25 R) / 5: t = 0.55: 1 FP, 0.2; t = 0.6: 1 R, 0.05; t = 0.7: 2 R, 0.1;
    t = 0.91: 0.1. Right 0.6.
    Rejected iff 0.3 <= P <= 0.6: on V 0.3, 0.4, 0.6 (3 / 25); on the 6 labels 3 R, no error:
    0.75 / 6; on T 0.35 rejected, 0.25 a false negative, 0.62 a false positive:
    (1 + 4 + 0.25) / 12 = 0.4375.
    """
    episode = hand_episode(tiny)
    result = episode.step(LR)
    assert result.queried.tolist() == list(range(6))
    assert episode.rejection == TwoSidedThresholds(0.3, 0.6)
    costs = episode.costs
    assert (costs.c_fp, costs.c_fn, costs.c_r) == (1.0, 4.0, 0.25)
    y = episode.split.y_val[:6]
    low, high = P_VAL[:6] < 0.5, P_VAL[:6] >= 0.5
    assert side_cost(0.3, P_VAL[:6][low], y[low], costs, "left", 20) == pytest.approx(0.025)
    assert side_cost(0.6, P_VAL[:6][high], y[high], costs, "right", 5) == pytest.approx(0.05)
    snapshot = episode.snapshot()
    assert (snapshot.threshold_left, snapshot.threshold_right) == (0.3, 0.6)
    assert snapshot.tau == pytest.approx(0.3, abs=1e-15)
    assert snapshot.val_cost == pytest.approx(0.125, abs=1e-15)
    assert snapshot.val_rejection == pytest.approx(0.12, abs=1e-15)
    assert snapshot.test_cost == pytest.approx(0.4375, abs=1e-15)
    assert snapshot.rejection_rate == pytest.approx(1 / 12, abs=1e-15)
    assert (snapshot.fpr, snapshot.fnr) == (pytest.approx(1 / 11), 1.0)
    info = snapshot.info()
    assert (info["threshold_left"], info["threshold_right"]) == (0.3, 0.6)


def test_the_lr_reward_is_the_entropy_change_of_two_sided_rejection(tiny) -> None:
    """SADAL's LR reward: binary entropies of the two-sided rejection probabilities after
    the round against those of BALLAD's form with tau = the contamination at the start."""
    episode = hand_episode(tiny, HAND.replace(entropy_terms="binary"))
    p = np.concatenate([P_TRAIN, P_VAL])
    old = rejection_probability(confidence(p), episode.contamination)
    new = TwoSidedThresholds(0.3, 0.6).rejection_probability(p)
    expected = np.mean(np.abs(binary_entropy(new) - binary_entropy(old)))
    assert episode.step(LR).rewards["entropy"] == pytest.approx(expected, abs=1e-15)
    assert episode.stored[LR].decision.tolist() == ((p >= 0.3) & (p <= 0.6)).tolist()


def test_threshold_distance_skips_the_rejected_example_through_the_episode(tiny) -> None:
    """After the LR round the band is (0.3, 0.6); D's member 0 (0.32) is nearest a threshold
    but rejected, as are 0.45 and 0.58: AL takes the six nearest others, in order."""
    episode = hand_episode(tiny, HAND.replace(al_strategy="threshold-distance"))
    assert episode.query_context() == QueryContext(None)  # no LR round yet
    episode.step(LR)
    assert episode.query_context() == QueryContext((0.3, 0.6))
    result = episode.step(AL)
    assert P_TRAIN[result.queried].tolist() == [0.27, 0.65, 0.18, 0.73, 0.76, 0.1]
    assert result.queried.tolist() == [9, 6, 5, 8, 3, 2]


def test_a_round_that_buys_nothing_keeps_the_budget_consistent(tiny) -> None:
    """The published flag: D's member 0 (0.32) was rejected, so threshold-distance-authors
    buys no label; the round is spent and recorded, the detector left as it was."""
    episode = hand_episode(tiny, HAND.replace(al_strategy="threshold-distance-authors"))
    episode.step(LR)
    result = episode.step(AL)
    assert result.queried.size == 0 and episode.scores.labeled == []
    snapshot = episode.snapshot()
    assert (snapshot.round, snapshot.n_al, snapshot.n_lr) == (2, 1, 1)
    assert (snapshot.n_labeled_train, snapshot.n_labeled_val) == (0, 6)
    assert episode.done and not episode.action_mask().any()
    assert episode.train_labels.unlabeled().size == 25
    assert snapshot.info()["queried"].size == 0


def test_an_al_round_before_any_lr_round_ranks_by_the_distance_to_half(tiny) -> None:
    episode = hand_episode(tiny, HAND.replace(al_strategy="threshold-distance"))
    result = episode.step(AL)
    distance = np.abs(P_TRAIN - 0.5)
    assert result.queried.tolist() == np.argsort(distance, kind="stable")[:6].tolist()


# ------------------------------------------------------------------ environment, lattice
def test_gymnasium_and_sb3_env_checkers_with_two_sided(small_xy) -> None:
    env = gym.make(ballad_env.ENV_ID, dataset=small_xy, prior="knn", rejector="two-sided",
                   entropy_terms="binary")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(BudgetAllocationEnv(small_xy, prior="knn", rejector="two-sided"))
    env.close()


def test_the_default_stays_the_confidence_rejector(small_xy) -> None:
    """The confidence band's ends are 0.5 -/+ tau / 2 in every info; the two-sided env's
    observation keeps its features, with tau the band's width."""
    for settings in (Settings(prior="knn"), TWO_SIDED.replace(prior="knn")):
        env = BudgetAllocationEnv(small_xy, settings=settings)
        obs, info = env.reset(seed=3)
        for action in (LR, AL, LR):
            obs, _, _, _, info = env.step(action)
            left, right = info["threshold_left"], info["threshold_right"]
            if settings.rejector == "confidence":
                assert (left, right) == (0.5 - info["tau"] / 2, 0.5 + info["tau"] / 2)
            else:
                assert info["tau"] == right - left and left < 0.5 <= right
            assert obs.shape == (18,)


@pytest.mark.parametrize("option, name", [("al_strategy", "threshold-distance"),
                                          ("al_strategy", "threshold-distance-authors"),
                                          ("lr_strategy", "stratified-probability")])
def test_the_lattice_refuses_path_dependent_queries_by_name(option, name) -> None:
    settings = TWO_SIDED.replace(**{option: name})
    with pytest.raises(ValueError, match=f"no lattice with {option}={name!r}: its"):
        check_lattice_settings(settings)
    with pytest.raises(ValueError, match=f"{option}={name!r}"):
        build_lattice(load_dataset(make_xy()), 0, settings)
    check_lattice_settings(TWO_SIDED)  # the two-sided rejector itself is path-independent


@pytest.mark.parametrize("detector", ["ssdo", "ssif"])
def test_two_sided_lattice_and_replay_equal_live(tmp_path, small_xy, detector) -> None:
    """With the two-sided rejector (and SADAL's binary entropy) the state after (i, j) does
    not depend on the path: the replay env built from the lattice repeats live episodes on
    random paths exactly, every reward included."""
    from test_replay import compare_random_sequences

    from agents.experiments.lattice_build import build_store

    data = load_dataset(small_xy)
    options: dict[str, object] = {"rejector": "two-sided", "entropy_terms": "binary"}
    seeds = (0, 1)
    if detector == "ssif":  # a small forest, five rounds, one seed: SSIF's fits are slow
        options.update(detector="ssif", ssif_trees=8, budget_fraction=0.1)
        seeds = (0,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_store(tmp_path, [data], list(seeds), [Settings(prior="knn", **options)],
                    progress=False)
    compare_random_sequences(data, "knn", tmp_path, seeds, 8 if detector == "ssdo" else 6,
                             np.random.default_rng(5), **options)


def test_with_the_shared_stream_the_search_seed_follows_the_round_s_draws(tiny, monkeypatch
                                                                           ) -> None:
    """query_rng="authors": as the published SADAL code, an LR round draws its b uniforms,
    then the search seed randint(0, 100); an AL round (threshold-distance: no draw) only the
    seed. The confidence rejector draws no seed from the stream."""
    settings = HAND.replace(al_strategy="threshold-distance",
                            lr_strategy="stratified-probability", query_rng="authors",
                            query_seed=7)
    seeds: list[int] = []
    fit = TwoSidedRejector.fit

    def recording(self, p, labeled, y, costs, seed):
        seeds.append(seed)
        return fit(self, p, labeled, y, costs, seed)

    monkeypatch.setattr(TwoSidedRejector, "fit", recording)
    episode = Episode(tiny, 0, settings)
    episode.step(LR)
    episode.step(AL)
    stream = np.random.RandomState(7)
    stream.uniform(0, 1, size=6)
    first = stream.randint(0, 100)
    assert seeds == [first, stream.randint(0, 100)]
    confidence_episode = Episode(tiny, 0, settings.replace(rejector="confidence"))
    assert confidence_episode._shared_stream is None


def test_render_draws_the_two_sided_band(small_xy) -> None:
    import matplotlib

    matplotlib.use("Agg")
    env = BudgetAllocationEnv(small_xy, prior="knn", rejector="two-sided",
                              render_mode="rgb_array")
    env.reset(seed=0)
    for action in (LR, AL, LR):
        env.step(action)
    assert env.episode.tau > 0 and env.render().shape[2] == 3
    env.close()
