"""SSIF's fit memo (``ssif_detector.FIT_MEMO``): settings that differ only in rejector or
costs share one start and its fits, with the same numbers as fresh fits; the memo's bound
holds; a lattice build's settings that share fits run next to each other."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from agents.experiments.lattice_build import sharing_order
from ballad_env import AL, LR, Settings, load_dataset
from ballad_env.compute import RESET_CACHE
from ballad_env.detectors.ssif.episode import FIT_MEMO, FIT_MEMO_MB, FittedForest
from ballad_env.detectors.ssif.forest import semi_supervised_labels
from ballad_env.episode import Episode
from ballad_env.replay.lattice import build_lattice

#: A small forest and five rounds: SSIF's fits are the slow part of these tests.
SSIF = Settings(detector="ssif", ssif_trees=8, budget_fraction=0.1)
#: Two settings that differ only in rejector and costs.
OTHER = SSIF.replace(rejector="two-sided", c_fn=10.0)


@pytest.fixture(scope="module")
def data(small_xy):
    return load_dataset(small_xy)


@pytest.fixture
def fits(monkeypatch) -> Iterator[list[int]]:
    """The number of forests grown (one entry per ``FittedForest.fit``), from empty caches;
    the memo's bound is restored afterwards."""
    grown: list[int] = []
    fit = FittedForest.fit

    def counted(*args, **kwargs):
        grown.append(1)
        return fit(*args, **kwargs)

    monkeypatch.setattr(FittedForest, "fit", counted)
    RESET_CACHE.clear()
    FIT_MEMO.clear()
    yield grown
    FIT_MEMO.resize(FIT_MEMO_MB * 2**20)
    FIT_MEMO.clear()


def arrays_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def test_lattices_that_differ_in_rejector_or_costs_share_every_fit(data, fits) -> None:
    """Without the memo each lattice grows its start's AL chain (k refits); with it the
    second grows nothing, and both lattices are the same, array for array."""
    FIT_MEMO.resize(0)
    fresh = [build_lattice(data, 0, s).to_arrays() for s in (SSIF, OTHER)]
    k = build_lattice(data, 0, SSIF).n_rounds
    assert len(fits) == 1 + 3 * k  # one unlabeled start (reset cache), k refits a lattice
    FIT_MEMO.resize(FIT_MEMO_MB * 2**20)
    RESET_CACHE.clear()
    fits.clear()
    first = build_lattice(data, 0, SSIF).to_arrays()
    assert len(fits) == 1 + k and len(FIT_MEMO) == k
    hits = FIT_MEMO.hits
    second = build_lattice(data, 0, OTHER).to_arrays()
    assert len(fits) == 1 + k and FIT_MEMO.hits == hits + k  # the second fits nothing
    assert arrays_equal(first, fresh[0]) and arrays_equal(second, fresh[1])
    assert not arrays_equal(first, second)  # other rejector and costs: other lattices


def test_a_memo_fit_is_the_fresh_fit_on_the_same_labels(data, fits) -> None:
    """Episodes with other costs take the first one's fits: the same object, with the
    probabilities of a forest grown afresh on those labels from the episode's seed."""
    episode, other = Episode(data, 3, SSIF), Episode(data, 3, SSIF.replace(c_fp=10.0))
    assert other.start is episode.start
    for action in (AL, LR, AL):
        episode.step(action)
        other.step(action)
        assert other.scores.fitted is episode.scores.fitted
    start, scores = episode.scores.start, episode.scores
    fresh = FittedForest.fit(start.X_train, start.X_other,
                             semi_supervised_labels(episode.split.y_train, scores.labeled),
                             start.contamination, start.n_trees, scores.seed)
    assert np.array_equal(episode.p_train, fresh.p_train)
    assert np.array_equal(episode.scores.fitted.p_other, fresh.p_other)


def test_authors_seeding_shares_fits_equal_to_a_fresh_random_state_9(data, fits) -> None:
    """ssif_seed="authors" (a fresh RandomState(9) per fit) is a function of the labels
    too: a shared fit equals a forest grown afresh, and the second episode grows none."""
    authors = SSIF.replace(ssif_seed="authors")
    episode = Episode(data, 1, authors)
    episode.step(AL)
    episode.step(AL)
    assert len(fits) == 3
    other = Episode(data, 1, authors.replace(rejector="two-sided"))
    other.step(AL)
    other.step(AL)
    assert len(fits) == 3 and other.scores.fitted is episode.scores.fitted
    start = episode.scores.start
    assert start.seed is None
    fresh = FittedForest.fit(start.X_train, start.X_other,
                             semi_supervised_labels(episode.split.y_train,
                                                    episode.scores.labeled),
                             start.contamination, start.n_trees, None)
    assert np.array_equal(other.p_train, fresh.p_train)


def test_the_memo_keeps_within_its_bound(data, fits) -> None:
    """Bounded at 2.5 fits' bytes, the memo holds the two latest fits of a chain; bounded
    at 0 it holds none and every refit grows a forest."""
    episode = Episode(data, 2, SSIF)
    size = episode.start.detector.nbytes  # the unlabeled fit: about one fit's bytes
    FIT_MEMO.resize(int(2.5 * size))
    for _ in range(4):
        episode.step(AL)
    assert len(FIT_MEMO) == 2 and FIT_MEMO.nbytes <= FIT_MEMO.max_bytes
    FIT_MEMO.resize(0)
    assert len(FIT_MEMO) == 0
    fits.clear()
    again = Episode(data, 2, SSIF)
    for _ in range(4):
        again.step(AL)
    assert len(fits) == 4 and len(FIT_MEMO) == 0
    assert np.array_equal(again.p_train, episode.p_train)


def test_sharing_order_puts_settings_that_share_fits_together() -> None:
    """Settings that differ only in rejector or costs next to each other, groups in the
    order of their first member (the crossed study's order interleaves the protocols)."""
    sadal = SSIF.replace(split="sadal")
    given = [SSIF, sadal, SSIF.replace(c_fn=10.0), sadal.replace(c_fn=10.0),
             SSIF.replace(rejector="two-sided"), Settings()]
    assert sharing_order(given) == [given[0], given[2], given[4], given[1], given[3],
                                    given[5]]
