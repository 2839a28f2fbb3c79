"""Extension points, used as a new engineer would: add a prior, a threshold search, a query
strategy, a reward and an agent without touching the library; snapshots, forks and names."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

import ballad_env
from agents import make_agent
from agents.bandits import LRFirst
from ballad_env import AL, LR, BudgetAllocationEnv, Episode, Settings, load_dataset
from ballad_env.detectors.ssdo.model import PRIORS
from ballad_env.episode import RECORD_FIELDS, STATE_FIGURES
from ballad_env.observation import OBSERVATION_FEATURES, encode
from ballad_env.queries import AL_QUERIES, LR_QUERIES
from ballad_env.registry import Registry
from ballad_env.rejection.confidence import THRESHOLD_SEARCHES, confidence, search_interval
from ballad_env.replay.lattice import build_lattice
from ballad_env.rewards import REWARD_SIGNALS, SIDE_SIGNAL_NAMES, CostDecrease

SHORT = {"prior": "knn", "budget_fraction": 0.1}  # 5 rounds


@pytest.fixture
def registered() -> Iterator[list[tuple[Registry, str]]]:
    """Registrations a test makes, undone afterwards."""
    made: list[tuple[Registry, str]] = []
    yield made
    for registry, name in made:
        registry.unregister(name)


def register(made: list, registry: Registry, name: str, item) -> None:
    registry.register(name, item)
    made.append((registry, name))


# ------------------------------------------------------------------ registries
def test_registry_lists_names_in_errors_and_refuses_duplicates() -> None:
    registry: Registry[int] = Registry("colour")
    registry.register("red", 1)

    @registry.register("blue")
    def _blue() -> int:
        return 2

    assert registry.names() == ("red", "blue") and "red" in registry and len(registry) == 2
    with pytest.raises(ValueError, match="unknown colour 'green': use one of red, blue"):
        registry["green"]
    with pytest.raises(ValueError, match="already registered"):
        registry.register("red", 3)
    assert registry.unregister("red") == 1 and "red" not in registry


def test_a_new_prior_by_name(registered, small_xy) -> None:
    from pyod.models.knn import KNN

    register(registered, PRIORS, "knn-max5", lambda seed, n: KNN(n_neighbors=5,
                                                                  method="largest"))
    env = BudgetAllocationEnv(small_xy, prior="knn-max5", budget_fraction=0.1)
    env.reset(seed=0)
    prior = env.episode.scores.detector.prior_
    assert isinstance(prior, KNN) and prior.method == "largest" and prior.n_neighbors == 5
    assert env.settings.name == "knn-max5_budget0.1"


def test_a_new_threshold_search(registered, small_xy) -> None:
    def midpoint(conf, pred, y, costs, lo, hi, n_calls=0, seed=0) -> float:
        return (lo + hi) / 2

    register(registered, THRESHOLD_SEARCHES, "midpoint", midpoint)
    env = BudgetAllocationEnv(small_xy, threshold_search="midpoint", **SHORT)
    env.reset(seed=0)
    _, _, _, _, info = env.step(LR)
    ep = env.episode
    labeled = ep.val_labels.indices
    lo, hi = search_interval(confidence(ep.p_val[labeled]))
    assert info["tau"] == (lo + hi) / 2


class MostAnomalous:
    """Label the examples the detector finds most anomalous."""

    def __init__(self, rng: np.random.Generator, pool_size: int) -> None:
        pass

    def select(self, probability, unlabeled, size):
        return unlabeled[np.argsort(-probability[unlabeled], kind="stable")[:size]]


def test_new_query_strategies_for_both_sides(registered, small_xy) -> None:
    register(registered, AL_QUERIES, "most-anomalous", MostAnomalous)
    register(registered, LR_QUERIES, "most-anomalous", MostAnomalous)
    env = BudgetAllocationEnv(small_xy, al_strategy="most-anomalous",
                              lr_strategy="most-anomalous", **SHORT)
    env.reset(seed=0)
    p_train = env.episode.p_train.copy()
    _, _, _, _, info = env.step(AL)
    assert sorted(env.snapshot().queried) == sorted(np.argsort(-p_train, kind="stable")[:2])
    p_val = env.episode.p_val.copy()  # after the AL round retrained the detector
    _, _, _, _, info = env.step(LR)
    assert sorted(env.snapshot().queried) == sorted(np.argsort(-p_val, kind="stable")[:2])


def test_a_new_cost_type_reward(registered, small_xy) -> None:
    register(registered, REWARD_SIGNALS, "fnr", CostDecrease("fnr", "fnr"))
    env = BudgetAllocationEnv(small_xy, reward="fnr", **SHORT)
    _, before = env.reset(seed=0)
    for action in (AL, LR, AL):
        _, reward, _, _, after = env.step(action)
        assert reward == before["fnr"] - after["fnr"]
        before = after


def test_side_signals_reach_observation_info_records_and_lattice(small_xy) -> None:
    """Everything about side signals is derived from the one table of ``rewards``."""
    per_side = [f"{s}_{side}" for s in SIDE_SIGNAL_NAMES for side in ("al", "lr")]
    assert list(OBSERVATION_FEATURES[:len(per_side)]) == per_side
    assert set(per_side) <= set(RECORD_FIELDS)
    lattice = build_lattice(load_dataset(small_xy), 0, Settings(**SHORT))
    assert set(lattice.al_reward) == set(lattice.lr_reward_from) == set(SIDE_SIGNAL_NAMES)


def test_any_lr_first_percent_is_an_agent() -> None:
    agent = make_agent("lr-first-25")
    assert isinstance(agent, LRFirst) and agent.percent == 25.0
    assert make_agent("lr-first-12.5").percent == 12.5
    with pytest.raises(ValueError, match="lr-first-25"):
        make_agent("lr-first-many")


# ------------------------------------------------------------------ one state record
def test_observation_and_info_derive_from_the_snapshot(make_env) -> None:
    env = make_env(**SHORT)
    obs, info = env.reset(seed=2)
    for action in (LR, AL, AL, LR):
        snapshot = env.unwrapped.snapshot()
        assert np.array_equal(encode(snapshot), obs)
        expected = snapshot.info(queried_width=env.unwrapped.queried_width)
        assert set(expected) == set(info)
        assert all(np.array_equal(expected[k], info[k]) for k in info)
        assert list(snapshot.record()) == list(RECORD_FIELDS)
        obs, _, _, _, info = env.step(action)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.tau = 0.5  # type: ignore[misc]


def test_lattice_snapshots_equal_the_environments(small_xy) -> None:
    settings = Settings(**SHORT)
    lattice = build_lattice(load_dataset(small_xy), 4, settings)
    env = BudgetAllocationEnv(small_xy, settings=settings)
    env.reset(seed=4)
    for action in (AL, LR, LR, AL):
        env.step(action)
    live = env.snapshot()
    rebuilt = lattice.snapshot(live.n_al, live.n_lr, live.latest, live.previous)
    for name in STATE_FIGURES:
        assert getattr(rebuilt, name) == getattr(live, name), name
    assert np.array_equal(encode(rebuilt), encode(live))


def test_fork_is_independent_and_shares_only_read_only_parts(small_xy) -> None:
    episode = Episode(load_dataset(small_xy), 5, Settings(**SHORT))
    episode.step(LR)
    before = episode.snapshot()
    fork = episode.fork()
    assert fork.scores.detector.prior_ is episode.scores.detector.prior_
    assert fork.split is episode.split
    ahead = fork.step(AL)
    assert episode.n_al == 0 and fork.n_al == 1
    after = episode.snapshot()
    assert after.tau == before.tau and after.n_labeled_train == 0
    assert np.array_equal(episode.p_train, fork.scores.probabilities()[0]) is False
    same = episode.step(AL)
    assert np.array_equal(same.queried, ahead.queried)
    assert same.evaluation == ahead.evaluation and same.rewards == ahead.rewards


def test_one_meaning_per_name(small_xy) -> None:
    """gamma is the contamination nowhere in the library (it is SB3's discount)."""
    episode = Episode(load_dataset(small_xy), 0, Settings(**SHORT))
    assert not hasattr(episode, "gamma") and episode.contamination == 0.1
    assert "budget_used" in OBSERVATION_FEATURES  # rounds / rounds in the budget
    from agents.experiments.stores.results import COLUMNS

    assert "budget_used" not in COLUMNS and "spent_fraction" in COLUMNS


def test_version_comes_from_the_package_metadata() -> None:
    from importlib import metadata

    assert ballad_env.__version__ == metadata.version("ballad-env")
