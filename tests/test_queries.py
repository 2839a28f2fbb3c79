"""The published code's query options (issue 12): the argsort AL ranking, the per-round LR
sample and the shared legacy stream (``query_rng="authors"``), and the lattice's refusal."""

from __future__ import annotations

import numpy as np
import pytest

from agents.experiments.lattice_build import build_store
from agents.experiments.stores.results import RunError
from ballad_env import AL, LR, Settings, load_dataset
from ballad_env.episode import Episode
from ballad_env.queries import (
    AL_QUERIES,
    LR_QUERIES,
    RandomSampling,
    UncertaintyArgsort,
    query_generators,
)
from ballad_env.replay.lattice import build_lattice

#: The published code's queries without its shared stream (path independent).
OWN_STREAMS = {"al_strategy": "uncertainty-argsort", "lr_strategy": "per-round", "prior": "knn"}
SHORT = {"budget_fraction": 0.1, "round_fraction": 0.02}  # 5 rounds


@pytest.fixture(scope="module")
def dataset(small_xy):
    return load_dataset(small_xy)


def _same_state(a: np.random.RandomState, b: np.random.RandomState) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a.get_state(), b.get_state(), strict=True))


def test_registered_names() -> None:
    assert AL_QUERIES["uncertainty-argsort"] is UncertaintyArgsort
    assert LR_QUERIES["per-round"] is RandomSampling  # the AL "random" strategy, reused


def test_argsort_ranking_by_hand() -> None:
    """Confidences 2|p - 0.5| = [0, .5, .125, .75, .25, .9375] rank 0, 2, 4, 1, 3, 5; 0 is
    labeled, so the next three are 2, 4, 1. The first round is random; later ones draw
    nothing."""
    p = np.array([0.5, 0.75, 0.5625, 0.125, 0.625, 0.96875])
    rng = np.random.RandomState(7)
    strategy = UncertaintyArgsort(rng, len(p))
    first = strategy.select(p, np.arange(6), 2)
    after_first = np.random.RandomState(7)
    np.testing.assert_array_equal(first, after_first.choice(np.arange(6), 2, replace=False))
    unlabeled = np.array([1, 2, 3, 4, 5])
    np.testing.assert_array_equal(strategy.select(p, unlabeled, 3), [2, 4, 1])
    np.testing.assert_array_equal(strategy.select(p, unlabeled, 5), [2, 4, 1, 3, 5])
    assert _same_state(rng, after_first)  # no random number after the first round


def test_argsort_ranking_keeps_argsorts_order_of_ties() -> None:
    """Ties fall as ``np.argsort`` of the whole pool orders them (its SIMD sorts need not
    keep the index order: here [0, .5, 0, .5, .25, 0] sorts as 0, 2, 5, 4, 3, 1 or 0, 2, 5,
    4, 1, 3 by numpy build and CPU), the labeled ones skipped; ours would draw the order."""
    p = np.array([0.5, 0.75, 0.5, 0.25, 0.625, 0.5])
    strategy = UncertaintyArgsort(np.random.default_rng(0), len(p))
    strategy.rounds = 1
    unlabeled = np.array([1, 2, 3, 4, 5])
    chosen = strategy.select(p, unlabeled, 5)
    order = np.argsort(2 * np.abs(p - 0.5))
    np.testing.assert_array_equal(chosen, [k for k in order if k != 0])
    assert sorted(chosen[:2]) == [2, 5] and chosen[2] == 4  # the ties within a confidence


def test_per_round_sample_is_a_fresh_choice_each_round() -> None:
    """Each round is one ``choice`` of the unlabeled, in round order, from the same stream."""
    strategy = LR_QUERIES["per-round"](np.random.RandomState(3), 20)
    expected = np.random.RandomState(3)
    unlabeled = np.arange(20)
    for _ in range(3):
        chosen = strategy.select(np.zeros(20), unlabeled, 4)
        np.testing.assert_array_equal(chosen, expected.choice(unlabeled, 4, replace=False))
        unlabeled = np.setdiff1d(unlabeled, chosen)
    assert len(unlabeled) == 8


def test_query_generators() -> None:
    streams = np.random.SeedSequence(1).spawn(2)
    al, lr = query_generators("streams", *streams, 5)
    assert isinstance(al, np.random.Generator) and al is not lr
    al, lr = query_generators("authors", *streams, 5)
    assert al is lr and isinstance(al, np.random.RandomState)
    assert _same_state(al, np.random.RandomState(5))
    with pytest.raises(ValueError, match="unknown query_rng 'global'"):
        query_generators("global", *streams, 5)
    with pytest.raises(ValueError, match="unknown query_rng"):
        Settings(query_rng="global")


def test_shared_stream_interleaves_the_draws_in_round_order(dataset) -> None:
    """With ``query_rng="authors"`` one RandomState(seed) serves LR's draws and AL's first
    draw in the order of the rounds; AL's later rounds draw nothing."""
    settings = Settings(query_rng="authors", **OWN_STREAMS)
    episode = Episode(dataset, 4, settings)
    stream = np.random.RandomState(4)
    n_train, n_val = episode.train_labels.size, episode.val_labels.size
    b = episode.budget.per_round
    train, val = np.arange(n_train), np.arange(n_val)
    for action in (LR, AL, LR, AL, LR):
        if action == LR:
            expected = stream.choice(val, b, replace=False)
            val = np.setdiff1d(val, expected)
        elif episode.n_al == 0:
            expected = stream.choice(train, b, replace=False)
        else:  # the ranking of the detector before the round, over the whole of D
            order = np.argsort(2 * np.abs(episode.p_train - 0.5))
            expected = order[np.isin(order, train)][:b]
        if action == AL:
            train = np.setdiff1d(train, expected)
        np.testing.assert_array_equal(episode.step(action).queried, expected)
    assert episode.val_labels.count == 3 * b and episode.train_labels.count == 2 * b
    # the same rounds in another order buy other validation labels
    other = Episode(dataset, 4, settings)
    other.step(AL)
    assert not np.array_equal(other.step(LR).queried, episode.val_labels.order[0])


def test_preset_seeds_its_stream_with_331_whatever_the_split_seed(dataset) -> None:
    """The published ``load_dataset`` calls ``np.random.seed(331)`` whatever the split's
    ``random_state``: under the preset two split seeds (other splits) draw their first LR
    labels, then AL's first random labels, from one RandomState(331) sequence. With
    ``query_seed="split"`` each draws from RandomState(its split seed)."""
    b = Episode(dataset, 0, Settings.authors_code(threshold_search="exact")).budget.per_round
    for query_seed, seeds in ((331, (0, 1)), (None, (0, 1))):
        drawn = []
        for seed in seeds:
            episode = Episode(dataset, seed, Settings.authors_code(threshold_search="exact",
                                                                   query_seed=query_seed))
            assert episode.settings.query_seed == query_seed
            stream = np.random.RandomState(seed if query_seed is None else 331)
            n_train, n_val = episode.train_labels.size, episode.val_labels.size
            lr_first = stream.choice(np.arange(n_val), b, replace=False)
            al_first = stream.choice(np.arange(n_train), b, replace=False)
            np.testing.assert_array_equal(episode.step(LR).queried, lr_first)
            np.testing.assert_array_equal(episode.step(AL).queried, al_first)
            drawn.append((lr_first.tolist(), al_first.tolist(), episode.split.X_val.copy()))
        (lr_0, al_0, val_0), (lr_1, al_1, val_1) = drawn
        assert not np.array_equal(val_0, val_1)  # two splits
        if query_seed == 331:
            assert (lr_0, al_0) == (lr_1, al_1)  # the same positions of D and V
        else:
            assert lr_0 != lr_1


def test_default_streams_keep_the_lr_labels_whatever_the_order(dataset) -> None:
    """On its own stream the per-round sample buys the same labels after an AL round."""
    settings = Settings(**OWN_STREAMS)
    first = Episode(dataset, 4, settings).step(LR).queried
    other = Episode(dataset, 4, settings)
    other.step(AL)
    np.testing.assert_array_equal(other.step(LR).queried, first)


def test_lattice_refuses_a_shared_stream(dataset, tmp_path) -> None:
    with pytest.raises(ValueError, match="query_rng='authors'"):
        build_lattice(dataset, 0, Settings(query_rng="authors", prior="knn"))
    with pytest.raises(ValueError, match="query_rng='authors'"):
        build_lattice(dataset, 0, Settings.authors_code(threshold_search="exact"))
    with pytest.raises(RunError, match="query_rng='authors'"):
        build_store(tmp_path / "store", [dataset], [0], [Settings(query_rng="authors")],
                    progress=False)
    assert not (tmp_path / "store").exists()  # nothing written


def test_lattice_refuses_the_published_cosine_rule(dataset) -> None:
    """Its ballad-cosine starts from the published rewards, read from the environment's
    settings, which a lattice's replay does not give the agent."""
    with pytest.raises(ValueError, match="no lattice with cosine_rule='authors'"):
        build_lattice(dataset, 0, Settings(cosine_rule="authors", prior="knn"))


def test_published_queries_on_their_own_streams_keep_the_lattice_exact(dataset) -> None:
    """The argsort ranking and the per-round sample, each on its own stream: every order of
    the rounds reaches the lattice's state (i, j) with its figures and queries."""
    settings = Settings(**OWN_STREAMS, **SHORT)
    lattice = build_lattice(dataset, 2, settings)
    for actions in ([LR, LR, AL, AL, LR], [AL, LR, AL, LR, LR], [AL, AL, LR, LR, LR]):
        episode = Episode(dataset, 2, settings)
        for action in actions:
            result = episode.step(action)
            i, j = episode.n_al, episode.n_lr
            assert result.evaluation.cost == lattice.cost[i, j]
            assert episode.tau == lattice.grid["tau"][i, j]
            np.testing.assert_array_equal(result.queried, lattice.queried(i, j, action))


def test_lattice_refuses_a_query_strategy_whose_labels_depend_on_the_path(dataset) -> None:
    """SADAL's stratified LR draw reads the probabilities of V, which move with every AL
    round before it: the labels after j LR rounds depend on the path, so no lattice."""
    with pytest.raises(ValueError, match="lr_strategy='stratified-probability'"):
        build_lattice(dataset, 0, Settings(lr_strategy="stratified-probability", prior="knn"))
