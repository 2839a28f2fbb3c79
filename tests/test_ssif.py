"""Tests for ballad_env.detectors.ssif.forest and ballad_env.detectors.ssif.split: SADAL's
semi-supervised isolation forest.

Hand-computed cases for every formula, a degenerate forest whose probabilities follow by hand,
behavioural checks, and the published code's probabilities on a tiny set (fixture).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ballad_env.detectors.ssif.forest import (
    IsolationTree,
    SemiSupervisedIsolationForest,
    c_factor,
    grow_tree,
    leaf_value,
    semi_supervised_labels,
)
from ballad_env.detectors.ssif.grow import ForestGrower
from ballad_env.detectors.ssif.split import (
    SplitDistributions,
    candidate_axis,
    labeled_component,
    normalise,
    refine_axis,
    split_distribution,
    split_distributions,
    unlabeled_component,
)

FIXTURE = Path(__file__).parent / "data" / "ssif_published.json"
#: Probabilities recorded by our per-node SSIF before the lockstep speed-up (provenance in it).
PER_NODE = Path(__file__).parent / "data" / "ssif_per_node.json"
GAMMA = 0.5772156649

# ------------------------------------------------------------------------ c(n), labels


def test_c_factor_by_hand() -> None:
    # c(2) = 2 (ln 1 + gamma) - 2 * 1 / 2 = 2 gamma - 1; n < 2 counts as 2.
    assert c_factor(2) == pytest.approx(2 * GAMMA - 1, abs=1e-12)
    assert c_factor(0) == c_factor(1) == c_factor(2)
    # c(4) = 2 (ln 3 + gamma) - 2 * 3 / 4 = 2 (1.0986123 + 0.5772157) - 1.5 = 1.8516559
    assert c_factor(4) == pytest.approx(1.8516559, abs=1e-7)


def test_semi_supervised_labels() -> None:
    y = np.array([0, 1, 0, 1, 0])
    np.testing.assert_array_equal(semi_supervised_labels(y, np.array([0, 1, 3])),
                                  [-1, 1, 0, 1, 0])
    np.testing.assert_array_equal(semi_supervised_labels(y, y == 1), [0, 1, 0, 1, 0])


# ------------------------------------------------------------------------ split criterion


def test_unlabeled_component_by_hand() -> None:
    values, axis = np.array([0.0, 0.5, 1.0]), np.array([0.25, 0.75])
    # t = 0.25: left {0} (share 1/3, var 0), right {0.5, 1} (share 2/3, var 0.0625);
    # within = 2/3 * 0.0625 = 1/24; U = 1/3 ln 1/3 + 2/3 ln 2/3 - ln sqrt(1/24)
    #   = -0.3662041 - 0.2703101 + 1.5890269 = 0.9525127; t = 0.75 is its mirror image.
    np.testing.assert_allclose(unlabeled_component(values, axis), [0.9525127] * 2, atol=1e-7)
    # Zero spread on both sides (the best cut): ln sqrt(0) = -inf counts 0 (published quirk),
    # U = 2/3 ln 2/3 + 1/3 ln 1/3 = -0.6365142.
    np.testing.assert_allclose(unlabeled_component(np.array([0.0, 0.0, 1.0]), np.array([0.5])),
                               [-0.6365142], atol=1e-7)


def test_labeled_component_information_gain_by_hand() -> None:
    values = np.array([0.0, 0.2, 0.4, 0.6, 0.9, 1.0])
    labels = np.array([-1, -1, -1, -1, 1, 1])
    # H(all) = H(1/3) = 0.9182958.
    # t = 0.5: left 3 normals (H 0, share 1/2), right 1 normal + 2 anomalies (H(2/3)):
    #   0.9182958 - 0.5 * 0.9182958 = 0.4591479.
    # t = 0.95: left 4 normals + 1 anomaly (H(1/5) = 0.7219281, share 5/6), right 1 anomaly:
    #   0.9182958 - 5/6 * 0.7219281 = 0.3166891.
    gain = labeled_component(values, labels, np.array([0.5, 0.95]), np.array([]))
    np.testing.assert_allclose(gain, [0.4591479, 0.3166891], atol=1e-7)


def test_labeled_component_quirks_by_hand() -> None:
    # Anomalies only: the unlabeled play the normals, but shares are over the 2 labeled values.
    anomalies, unlabeled = np.array([0.8, 1.0]), np.array([0.0, 0.1, 0.2])
    # share of "normals" 3/2 > 1, so H(all) counts 0; t = 0.9: left 3 + 1 (p = 1/4,
    # H = 0.8112781), share_left = 4/2 = 2; right 1 anomaly (H 0):
    #   0 - 2 * 0.8112781 - (1 - 2) * 0 = -1.6225562.
    gain = labeled_component(anomalies, np.array([1, 1]), np.array([0.9]), unlabeled)
    np.testing.assert_allclose(gain, [-1.6225562], atol=1e-7)
    # Normals only: 0 everywhere (the published mask is always true).
    np.testing.assert_array_equal(
        labeled_component(np.array([0.1, 0.7]), np.array([-1, -1]), np.array([0.5, 0.9]),
                          np.array([0.3])), [0.0, 0.0])


def test_split_distribution_histogram_by_hand() -> None:
    axis = np.array([[0.25, 0.5, 0.75]])
    # One node, two features: heights [1, 3, 0] and constant heights (the uniform).
    dist = SplitDistributions(axis, np.array([3]), np.array([[[1.0, 3.0, 0.0], [2.0] * 3]]))
    # Bins [0.25, 0.5), [0.5, 0.75), [0.75, 1] of width 1/4, densities [1, 3, 0] / 1:
    # masses [0.25, 0.75, 0], cdf at the edges [0, 0.25, 1, 1].
    assert dist.quantile(0, 0, 0.125) == pytest.approx(0.375)
    assert dist.quantile(0, 0, 0.625) == pytest.approx(0.625)  # 0.5 + 0.25 (0.375 / 0.75)
    np.testing.assert_allclose(dist.cdf(0, 0, np.array([0.25, 0.375, 0.5, 1.0])),
                               [0, 0.125, 0.25, 1])
    # KL of the masses between the axis points [0.25, 0.75] from the widths [0.25, 0.25]:
    # 0.25 ln 1 - 0.25 + 0.25 + 0.75 ln 3 - 0.75 + 0.25 = 0.8239592 - 0.5 = 0.3239592.
    divergences = dist.divergences()
    assert divergences[0, 0] == pytest.approx(0.3239592, abs=1e-7)
    assert dist.uniform[0, 1] and dist.quantile(0, 1, 0.3) == 0.3 and divergences[0, 1] == 0


def test_split_distribution_constant_heights_is_uniform() -> None:
    # Labels all unlabeled and two values: U is the same at every candidate point.
    dist = split_distribution(np.array([0.0, 0.0, 1.0, 1.0]), np.zeros(4), candidate_axis(4))
    assert dist.uniform[0, 0]


def test_candidate_axis_and_refinement_by_hand() -> None:
    axis = candidate_axis(20)  # max(5, 20 / 10) - 1 = 4 points in [1e-4, 1 - 1e-4]
    np.testing.assert_allclose(axis, np.linspace(1e-4, 1 - 1e-4, 4))
    feature = np.array([0.0, 0.2, 0.4, 1.0])
    labels = np.array([0, -1, 0, 1])
    # The anomaly (1.0) sticks out above the others' maximum 0.4 (normalised 0.4, inside
    # the axis): 0.4 - 1e-4 is added.
    refined = refine_axis(axis, feature, labels)
    assert refined is not None
    np.testing.assert_allclose(refined, np.sort(np.append(axis, 0.4 - 1e-4)))
    # An anomaly inside the others' range: the feature is no candidate.
    assert refine_axis(axis, feature, np.array([0, 1, 0, 0])) is None


# ------------------------------------------------------------------------ trees


def test_leaf_values_by_hand() -> None:
    # Above the limit (4): depth (1 + normal share - anomaly share) = 3 (1 + 1/2 - 1/4) = 3.75.
    assert leaf_value(np.array([-1, -1, 0, 1]), 3, 4) == pytest.approx(3.75)
    # At the limit: depth + c(size), no label adjustment: 4 + c(3) = 4 + 2 (ln 2 + gamma) - 4 / 3
    # = 4 + 2.5407257 - 1.3333333 = 5.2073924.
    assert leaf_value(np.array([-1, 1, 1]), 4, 4) == pytest.approx(5.2073924, abs=1e-7)
    assert leaf_value(np.array([], dtype=int), 2, 4) == 2.0  # empty leaf


def test_path_lengths_by_hand() -> None:
    # Root cuts feature 1 at 0.5; left leaf value 2.0, right leaf value 0.5.
    tree = IsolationTree([1, -1, -1], [0.5, 0.0, 0.0], [1, -1, -1], [2, -1, -1],
                         [0.0, 2.0, 0.5])
    X = np.array([[9.0, 0.1], [9.0, 0.5], [-9.0, 0.9]])
    np.testing.assert_array_equal(tree.path_lengths(X), [2.0, 0.5, 0.5])  # 0.5 goes right


# ------------------------------------------------------------------------ the forest


@pytest.mark.parametrize("random_state", [0, np.random.RandomState(9)])
def test_degenerate_forest_probabilities_by_hand(random_state: object) -> None:
    """Rows 0, 0, 1, 1 (one feature), labels normal, unlabeled, unlabeled, anomaly.

    Every tree sees all 4 rows (sample min(max(128, 4 / 3), 4) = 4, depth limit
    ceil(2 max(log2 4, 2)) = 4). The labeled anomaly lies inside the others' range, so the
    feature is drawn from the varying ones; any cut in [1e-4, 1] separates {0, 0} from
    {1, 1}. Leaves at depth 1: {0, 0} with labels (-1, 0): 1 (1 + 1/2 - 0) = 1.5;
    {1, 1} with (0, 1): 1 (1 + 0 - 1/2) = 0.5. c(4) = 1.8516559, so the raw scores are
    2^(-0.8100859) = 0.5703480 and 2^(-0.2700286) = 0.8293031, scaled to 0 and 1. With
    contamination 0.5, t = the 50th percentile of (0, 0, 1, 1) = 0.5, so
    P(anomaly) = 1 - 2^(-(s / 0.5)^2): 0 for rows at 0, 1 - 2^-4 = 0.9375 for rows at 1.
    """
    X = np.array([[0.0], [0.0], [1.0], [1.0]])
    forest = SemiSupervisedIsolationForest(n_trees=3, contamination=0.5,
                                           random_state=random_state)  # type: ignore[arg-type]
    forest.fit(X, np.array([-1, 0, 0, 1]))
    assert (forest.sample_, forest.depth_limit_) == (4, 4)
    np.testing.assert_allclose(forest.score_samples(X), [0.5703480] * 2 + [0.8293031] * 2,
                               atol=1e-7)
    assert forest.threshold_ == pytest.approx(0.5)
    queries = np.array([[-5.0], [0.0], [1.0], [7.0]])
    np.testing.assert_allclose(forest.predict_proba(queries)[:, 1], [0, 0, 0.9375, 0.9375],
                               atol=1e-12)
    np.testing.assert_allclose(forest.predict_proba(queries).sum(axis=1), 1.0)


def _blobs(seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(70, 2)), rng.normal(0.0, 1.0, size=(6, 2)) + [2.2, 2.2]])
    return X, np.r_[np.zeros(70, int), np.ones(6, int)]


def test_labeled_anomalies_raise_their_probability() -> None:
    X, y = _blobs()
    unlabeled = SemiSupervisedIsolationForest(n_trees=25, random_state=1).fit(X, np.zeros(76))
    labels = semi_supervised_labels(y, np.r_[np.arange(0, 70, 5), np.arange(70, 76)])
    labeled = SemiSupervisedIsolationForest(n_trees=25, random_state=1).fit(X, labels)
    before = unlabeled.predict_proba(X)[:, 1]
    after = labeled.predict_proba(X)[:, 1]
    assert after[y == 1].mean() > before[y == 1].mean()
    assert after[labels == -1].mean() <= before[labels == -1].mean()


def test_reproducible_from_its_seed() -> None:
    X, _ = _blobs()
    a = SemiSupervisedIsolationForest(n_trees=5, random_state=7).fit(X, np.zeros(76))
    b = SemiSupervisedIsolationForest(n_trees=5, random_state=np.random.default_rng(7))
    c = SemiSupervisedIsolationForest(n_trees=5, random_state=8).fit(X, np.zeros(76))
    np.testing.assert_array_equal(a.predict_proba(X), b.fit(X, np.zeros(76)).predict_proba(X))
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))


def test_bad_input_names_the_fix() -> None:
    forest = SemiSupervisedIsolationForest(n_trees=2)
    with pytest.raises(ValueError, match="semi_supervised_labels"):
        forest.fit(np.zeros((3, 1)) + np.arange(3)[:, None], np.array([0, 2, 0]))
    with pytest.raises(ValueError, match="NaN"):
        forest.fit(np.array([[0.0], [np.nan]]), np.zeros(2))
    with pytest.raises(ValueError, match="same anomaly score"):
        forest.fit(np.array([[0.0], [1.0]]), np.zeros(2))  # two rows: both at depth 1


def test_repeats_the_published_ssif() -> None:
    """A RandomState(9) grows the published ``SSIF(ntrees=20)``'s forest: its probabilities on
    the fixture (recorded by running the published ssif.py; provenance in the file)."""
    data = json.loads(FIXTURE.read_text())
    X, y, queries = np.array(data["X"]), np.array(data["y"]), np.array(data["X_query"])
    for tag, labels in (("labeled", y), ("unlabeled", np.zeros_like(y))):
        forest = SemiSupervisedIsolationForest(n_trees=20, random_state=np.random.RandomState(9))
        forest.fit(X, labels)
        assert forest.threshold_ == pytest.approx(data[tag]["threshold"], abs=1e-12)
        np.testing.assert_allclose(forest.predict_proba(X)[:, 1], data[tag]["proba_train"],
                                   atol=1e-12)
        np.testing.assert_allclose(forest.predict_proba(queries)[:, 1],
                                   data[tag]["proba_query"], atol=1e-12)


# ------------------------------------------------------------------------ batches, lockstep


def _random_node(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, ...]:
    values = np.round(rng.random((n, k)), 1)  # ties, as real data has
    labels = rng.choice([-1, 0, 0, 0, 1], n)
    return values, labels, np.sort(rng.random(rng.integers(4, 9)))


def test_a_batch_of_nodes_scores_each_node_as_alone() -> None:
    """Nodes of different sizes, labels and candidate points padded into one batch get the
    divergences and quantiles they get one at a time, bit for bit."""
    rng = np.random.default_rng(5)
    nodes = [_random_node(rng, n, 3) for n in (3, 17, 40, 9)] + [
        (rng.random((12, 3)), np.zeros(12, int), np.sort(rng.random(6)))]
    n, m = max(len(v) for v, _, _ in nodes), max(a.size for _, _, a in nodes)
    values, valid = np.zeros((n, len(nodes), 3)), np.zeros((n, len(nodes)), dtype=bool)
    labels, axis = np.zeros((n, len(nodes)), dtype=int), np.full((len(nodes), m), 2.0)
    for b, (v, lab, a) in enumerate(nodes):
        values[:len(v), b], valid[:len(v), b], labels[:len(v), b] = v, True, lab
        axis[b, :a.size] = a
    batch = split_distributions(values, valid, labels, axis, np.array([a.size for *_, a in nodes]))
    for b, (v, lab, a) in enumerate(nodes):
        alone = split_distributions(v[:, None], np.ones((len(v), 1), bool), lab[:, None],
                                    a[None], np.array([a.size]))
        np.testing.assert_array_equal(batch.divergences()[b], alone.divergences()[0])
        for k in range(3):
            for u in (0.1, 0.5, 0.93):
                assert batch.quantile(b, k, u) == alone.quantile(0, k, u)


def test_a_tree_grown_alone_is_the_tree_grown_in_a_forest() -> None:
    X, y = _blobs()
    labels = semi_supervised_labels(y, np.r_[np.arange(0, 70, 7), np.arange(70, 74)])
    samples = np.array([np.random.default_rng(s).permutation(76)[:50] for s in range(4)])
    forest = ForestGrower(X, labels, samples, [np.random.default_rng(s) for s in range(4)],
                          depth_limit=12, n_candidates=2).grow()
    for s, tree in enumerate(forest):
        alone = grow_tree(np.random.default_rng(s), X[samples[s]], labels[samples[s]], 12, 2)
        assert alone == tree


def test_normalise_gives_a_constant_column_one_half() -> None:
    scaled = normalise(np.array([[1.0, 5.0], [3.0, 5.0]]), np.array([1.0, 5.0]),
                       np.array([3.0, 5.0]))
    np.testing.assert_array_equal(scaled, [[0.0, 0.5], [1.0, 0.5]])


@pytest.mark.parametrize("case", [f"{labels}_{seed}" for labels in ("none", "mixed", "anomalies",
                                                                   "normals")
                                  for seed in ("rs9", "gen3")])
def test_repeats_the_per_node_implementation(case: str) -> None:
    """The lockstep forest repeats our earlier per-node SSIF (recorded from it on 160 rows
    with ties, 12 trees, each label set, a RandomState(9) and a Generator): bit for bit on
    the recording's processor, to the last bit of exp and power on others."""
    data = json.loads(PER_NODE.read_text())
    X, y, queries = np.array(data["X"]), np.array(data["y"]), np.array(data["X_query"])
    labels, seed = case.rsplit("_", 1)
    random_state = np.random.RandomState(9) if seed == "rs9" else np.random.default_rng(3)
    forest = SemiSupervisedIsolationForest(12, 0.1, random_state=random_state)
    forest.fit(X, semi_supervised_labels(y, np.array(data["labeled"][labels], dtype=int)))
    expected = data["cases"][case]
    # The probabilities' last bit depends on the processor: numpy's exp, log and power take
    # other SIMD code on AVX-512 machines than on the one that recorded the fixture (1 ulp on
    # 6 of 160 rows there; equal to the bit with X86_V4 switched off).
    ulps = {"rtol": 1e-13, "atol": 1e-16}
    np.testing.assert_allclose(forest.threshold_, expected["threshold"], **ulps)
    np.testing.assert_allclose(forest.predict_proba(X)[:, 1], expected["proba_train"], **ulps)
    np.testing.assert_allclose(forest.predict_proba(queries)[:, 1], expected["proba_query"],
                               **ulps)


def test_the_unlabeled_component_in_chunks_of_points_is_the_same(monkeypatch) -> None:
    """Large batches are computed a few candidate points at a time: the same floats."""
    import ballad_env.detectors.ssif.split as split

    rng = np.random.default_rng(8)
    values, valid = rng.random((30, 3, 2)), rng.random((30, 3)) < 0.8
    axis = np.sort(rng.random((3, 13)), axis=1)
    whole = split.unlabeled_components(values, valid, axis)
    monkeypatch.setattr(split, "_CHUNK", 1)  # four points at a time
    np.testing.assert_array_equal(split.unlabeled_components(values, valid, axis), whole)
