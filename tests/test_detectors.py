"""Detectors as an extension point (ballad_env.detectors): SSDO and SSIF behind one
interface, in the live environment, the reset cache, the lattice and the replay env."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import ballad_env
from ballad_env import AL, LR, BudgetAllocationEnv, Settings, load_dataset
from ballad_env.compute import RESET_CACHE
from ballad_env.detectors import DETECTORS
from ballad_env.detectors.ssif.episode import SSIFScores, detector_seed
from ballad_env.detectors.ssif.forest import SemiSupervisedIsolationForest, semi_supervised_labels
from ballad_env.episode import Episode
from ballad_env.protocol import STREAMS, spawn_streams

#: A small forest and five rounds: SSIF's fits are the slow part of these tests.
SSIF = Settings(detector="ssif", ssif_trees=8, budget_fraction=0.1)


@pytest.fixture(scope="module")
def data(small_xy):
    return load_dataset(small_xy)


def test_registry_names_and_a_clear_error() -> None:
    assert DETECTORS.names()[:2] == ("ssdo", "ssif")
    assert Settings().detector == "ssdo" and Settings().name == "iforest"
    assert Settings(detector="ssif").name == "iforest_det-ssif"
    assert Settings(detector="ssif", ssif_trees=5).name == "iforest_det-ssif_trees5"
    assert Settings(ssif_trees=5) == Settings()  # unused without SSIF: one setting
    with pytest.raises(ValueError, match="unknown detector 'nope': use one of ssdo, ssif"):
        Settings(detector="nope")
    with pytest.raises(ValueError, match="ssif_trees must be a whole number >= 1"):
        Settings(detector="ssif", ssif_trees=0)
    assert Settings.from_dict(SSIF.to_dict()) == SSIF


def test_the_command_line_takes_the_detector_and_its_option() -> None:
    import argparse

    from ballad_env.settings.cli import add_settings_arguments, settings_from_args

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    args = parser.parse_args(["--detector", "ssif", "--ssif-trees", "7"])
    assert settings_from_args(args) == (Settings(detector="ssif", ssif_trees=7),)
    args = parser.parse_args(["--detector", "ssif", "--ssif-seed", "authors",
                              "--ssif-contamination", "0.1"])
    assert settings_from_args(args) == (Settings(detector="ssif", ssif_seed="authors",
                                                 ssif_contamination=0.1),)
    with pytest.raises(SystemExit):
        parser.parse_args(["--ssif-contamination", "most"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--detector", "lof"])


def test_ssif_seed_and_contamination_options() -> None:
    authors = Settings(detector="ssif", ssif_seed="authors", ssif_contamination=0.1)
    assert authors.name == "iforest_det-ssif_sseed-authors_scont0.1"
    assert Settings.from_dict(authors.to_dict()) == authors
    # quiet: the stored headers of runs with the defaults stay as they were
    assert not {"ssif_seed", "ssif_contamination"} & set(SSIF.to_dict())
    assert Settings(ssif_seed="authors", ssif_contamination=0.2) == Settings()  # unused
    assert Settings(detector="ssif", ssif_contamination="DATA").ssif_contamination == "data"
    with pytest.raises(ValueError, match="ssif_contamination must be 'data'"):
        Settings(detector="ssif", ssif_contamination=1.5)
    with pytest.raises(ValueError, match="unknown ssif_seed 'nine'"):
        Settings(detector="ssif", ssif_seed="nine")


def test_authors_seeding_fits_the_published_forest_every_time(data) -> None:
    """ssif_seed="authors", ssif_contamination=0.1: the start and every refit are the
    published SSIF(): a fresh RandomState(9) and contamination 0.1 (hand-built here), in
    every episode whatever its seed."""
    settings = SSIF.replace(ssif_seed="authors", ssif_contamination=0.1)
    episode = Episode(data, 3, settings)
    X, y = episode.split.X_train, episode.split.y_train

    def published(labels: np.ndarray) -> np.ndarray:
        forest = SemiSupervisedIsolationForest(8, 0.1, random_state=np.random.RandomState(9))
        return forest.fit(X, labels).predict_proba(X)[:, 1]

    assert np.array_equal(episode.p_train, published(np.zeros(len(X), dtype=np.int8)))
    # P >= 0.5 on 10% of D (the 90th percentile), whatever the data's contamination
    assert episode.scores.forest.threshold_ == np.percentile(
        episode.scores.forest.decision_scores_, 90)
    labeled = np.zeros(len(X), dtype=bool)
    for action in (AL, LR, AL):
        result = episode.step(action)
        if action == AL:
            labeled[result.queried] = True
        assert np.array_equal(episode.p_train, published(semi_supervised_labels(y, labeled)))
    other = Episode(data, 4, settings)
    assert other.scores.seed is None and other.scores.start.contamination == 0.1


def test_a_new_stream_leaves_the_others_as_they_were() -> None:
    """The detector's stream is appended: the five earlier streams are the first five
    children of the root, as when there were five."""
    assert STREAMS[-1] == "detector"
    streams = spawn_streams(42)
    old = np.random.SeedSequence(42).spawn(5)
    for name, child in zip(STREAMS[:5], old, strict=True):
        assert np.array_equal(streams[name].generate_state(4), child.generate_state(4))


def test_ssif_episode_is_a_forest_fitted_on_the_labels_from_one_seed(data) -> None:
    """Before any label: the unlabeled forest; after an AL round: a forest refitted on D
    with SSIF's -1/1 labels from the episode's one seed (hand-built here)."""
    episode = Episode(data, 3, SSIF)
    assert isinstance(episode.scores, SSIFScores)
    seed = detector_seed(spawn_streams(3))
    assert episode.scores.seed == seed
    X = episode.split.X_train

    def fitted(labels: np.ndarray) -> np.ndarray:
        forest = SemiSupervisedIsolationForest(8, data.contamination, random_state=seed)
        return forest.fit(X, labels).predict_proba(X)[:, 1]

    assert np.array_equal(episode.p_train, fitted(np.zeros(len(X), dtype=np.int8)))
    result = episode.step(AL)
    labels = semi_supervised_labels(episode.split.y_train, result.queried)
    assert set(np.unique(labels)) <= {-1, 0, 1} and np.count_nonzero(labels) == 2
    assert np.array_equal(episode.p_train, fitted(labels))
    p_train, p_val = episode.p_train.copy(), episode.p_val.copy()
    episode.step(LR)  # no training label: no refit
    assert np.array_equal(episode.p_train, p_train) and np.array_equal(episode.p_val, p_val)


def test_labeled_anomalies_rise_and_labeled_normals_fall(data) -> None:
    """SSIF's leaf rule: a labeled anomaly shortens its path (higher P), a labeled normal
    lengthens it (lower P). Labels given to the five least suspicious anomalies of D and
    the five most suspicious normals."""
    episode = Episode(data, 0, SSIF.replace(ssif_trees=30))
    p0, y = episode.p_train.copy(), episode.split.y_train
    anomalies = np.flatnonzero(y == 1)[np.argsort(p0[y == 1])[:5]]
    normals = np.flatnonzero(y == 0)[np.argsort(-p0[y == 0])[:5]]
    chosen = np.concatenate([anomalies, normals])
    episode.scores.add_training_labels(chosen, y[chosen])
    p1 = episode.scores.probabilities()[0]
    assert np.all(p1[anomalies] > p0[anomalies]), (p0[anomalies], p1[anomalies])
    assert np.all(p1[normals] < p0[normals]), (p0[normals], p1[normals])


@pytest.mark.filterwarnings("error")
def test_gymnasium_and_sb3_env_checkers_with_ssif(small_xy) -> None:
    env = gym.make(ballad_env.ENV_ID, dataset=small_xy, settings=SSIF.replace(ssif_trees=3))
    gym_check_env(env.unwrapped)  # both render modes too: render reaches SSIF's forest
    sb3_check_env(env, warn=True)
    env.close()


def test_render_reaches_the_forest_through_the_interface(small_xy) -> None:
    env = BudgetAllocationEnv(small_xy, settings=SSIF, render_mode="rgb_array")
    env.reset(seed=0)
    env.step(AL)
    grid = np.array([[0.5, 0.5], [0.0, 1.0]])
    assert np.array_equal(env.episode.scores.anomaly_probability(grid),
                          env.episode.scores.forest.predict_proba(grid)[:, 1])
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3
    env.close()


def play(env: BudgetAllocationEnv, seed: int, actions: list[int]) -> list:
    steps = [env.reset(seed=seed)]
    steps += [env.step(action) for action in actions]
    return steps


def test_same_seed_same_trajectory_and_the_cache_changes_nothing(data) -> None:
    from test_replay import equal

    actions = [AL, LR, AL, AL, LR]
    RESET_CACHE.clear()
    first = play(BudgetAllocationEnv(data, settings=SSIF), 1, actions)
    cached = play(BudgetAllocationEnv(data, settings=SSIF), 1, actions)
    RESET_CACHE.clear()
    fresh = play(BudgetAllocationEnv(data, settings=SSIF), 1, actions)
    assert equal(first, cached) and equal(first, fresh)
    other = play(BudgetAllocationEnv(data, settings=SSIF), 2, actions)
    assert not equal(first[1:], other[1:])


def test_the_reset_cache_tells_detectors_and_their_options_apart(data) -> None:
    RESET_CACHE.clear()
    ssdo = Episode(data, 0, Settings(prior="knn"))
    ssif = Episode(data, 0, SSIF)
    more_trees = Episode(data, 0, SSIF.replace(ssif_trees=9))
    assert len(RESET_CACHE) == 3
    assert ssdo.start.split is ssif.start.split or np.array_equal(ssdo.split.X_train,
                                                                   ssif.split.X_train)
    assert not np.array_equal(ssdo.p_train, ssif.p_train)
    assert not np.array_equal(ssif.p_train, more_trees.p_train)
    assert Episode(data, 0, SSIF.replace(c_fn=5.0)).start is ssif.start  # label-free: shared
    assert len(RESET_CACHE) == 3


def test_a_fork_shares_the_forest_and_labels_apart(data) -> None:
    episode = Episode(data, 0, SSIF)
    episode.step(AL)
    fork = episode.fork()
    assert fork.scores.fitted is episode.scores.fitted and fork.start is episode.start
    fork.step(AL)
    assert episode.scores.labeled.sum() == 2 and fork.scores.labeled.sum() == 4
    assert not np.array_equal(fork.p_train, episode.p_train)


def test_a_registered_detector_is_reached_through_the_interface(data) -> None:
    """A new detector is one registered object: here SSDO under another name."""
    DETECTORS.register("ssdo-copy", DETECTORS["ssdo"])
    try:
        copy = Episode(data, 0, Settings(prior="knn", detector="ssdo-copy"))
        ssdo = Episode(data, 0, Settings(prior="knn"))
        assert copy.start is not ssdo.start  # the detector's name is in the cache key
        for action in (AL, LR, AL):
            copy.step(action)
            ssdo.step(action)
        assert np.array_equal(copy.p_test, ssdo.p_test) and copy.tau == ssdo.tau
    finally:
        DETECTORS.unregister("ssdo-copy")


@pytest.mark.parametrize("published", [{}, {"ssif_seed": "authors", "ssif_contamination": 0.1}])
def test_ssif_lattice_and_replay_equal_live(tmp_path, data, published) -> None:
    """With SSIF the state after (i, j) does not depend on the path: the lattice built by
    walking it equals live episodes on random paths, and the replay env repeats them; also
    with the published code's seeding and contamination."""
    from test_replay import compare_random_sequences

    from agents.experiments.lattice_build import build_store

    options = {"detector": "ssif", "ssif_trees": 8, "budget_fraction": 0.1, **published}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_store(tmp_path, [data], [0], [Settings(prior="knn", **options)],
                    progress=False)
    compare_random_sequences(data, "knn", tmp_path, (0,), 6, np.random.default_rng(1),
                             **options)
