"""Tests for ballad_env.detectors.ssdo.model: squashing, kernel, SSDO posterior and priors (SPEC
§2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ballad_env.detectors.ssdo.authors import authors_posterior
from ballad_env.detectors.ssdo.model import (
    SSDO,
    PointScores,
    kernel_sums,
    kernel_width,
    make_prior,
    posterior_score,
    squash,
)

# --------------------------------------------------------------------------- squash


@pytest.mark.parametrize("level", [0.01, 0.3, 1.0, 7.5])
def test_squash_half_at_threshold(level: float) -> None:
    assert squash(level, level) == pytest.approx(0.5, abs=1e-15)  # 1 - 2^(-1) = 0.5


def test_squash_by_hand() -> None:
    # S_2(1) = 1 - 2^(-(1/2)^2) = 1 - 2^(-1/4) = 0.159103585
    assert squash(1.0, 2.0) == pytest.approx(1 - 2 ** (-0.25), abs=1e-15)
    assert squash(1.0, 2.0) == pytest.approx(0.159103585, abs=1e-9)
    # S_1(2) = 1 - 2^(-4) = 0.9375; S_0.5(1) = S_1(2); S_3(0) = 0
    np.testing.assert_allclose(squash(np.array([2.0, 0.0]), 1.0), [0.9375, 0.0], atol=1e-15)
    assert squash(1.0, 0.5) == pytest.approx(0.9375, abs=1e-15)
    assert squash(0.0, 3.0) == 0.0


def test_squash_monotone_and_bounded() -> None:
    s = np.sort(np.random.default_rng(0).random(500) * 5)
    out = squash(s, 1.3)
    assert np.all(np.diff(out) >= 0)
    assert np.all((out >= 0) & (out <= 1))
    assert squash(1e-9, 1.0) > 0  # tiny scores stay positive (expm1, no cancellation)
    assert squash(1e-9, 1.0) == pytest.approx(math.log(2) * 1e-18, rel=1e-9)


def test_squash_as_anomatools_writes_it() -> None:
    """``formula="authors"``: 1 - exp(ln(0.5) (s/l)^2), anomatools' SquashScaler. The same
    function: S_2(1) = 1 - 2^(-1/4) = 0.159103585, S_1(2) = 0.9375; but 1 - exp(x) loses
    what expm1 keeps for small scores (1 - exp(-6.9e-19) rounds to 0), and the two differ in
    the last bit on some scores (which can move the published threshold search's tau)."""
    assert squash(1.0, 2.0, "authors") == pytest.approx(0.159103585, abs=1e-9)
    assert squash(2.0, 1.0, "authors") == pytest.approx(0.9375, abs=1e-15)
    assert squash(1.0, 1.0, "authors") == pytest.approx(0.5, abs=1e-15)
    assert squash(1e-9, 1.0, "authors") == 0.0 < squash(1e-9, 1.0)
    s = np.linspace(0.05, 3.0, 400)
    ours, theirs = squash(s, 1.3), squash(s, 1.3, "authors")
    np.testing.assert_array_equal(theirs, 1.0 - np.exp(np.log(0.5) * np.power(s / 1.3, 2)))
    assert np.abs(ours - theirs).max() <= 4.5e-16
    assert (ours != theirs).any()
    np.testing.assert_array_equal(squash(s, 0.0, "authors"), np.ones_like(s))
    with pytest.raises(ValueError, match="unknown squash formula 'exp'"):
        squash(s, 1.0, "exp")
    with pytest.raises(ValueError, match="unknown squash_formula 'exp'"):
        SSDO(0.1, squash_formula="exp")


def test_label_terms_as_anomatools_sums_them_by_hand() -> None:
    """``authors_posterior``: z (q + alpha da), z = 1 / (1 + alpha (da + dn)), the kernel
    exp(ln(0.5) (d / eta)^2). One point at 0 (q = 0.2, alpha = 2, eta = 1), an anomaly at
    distance 1 (kernel 1/2) and a normal at 2 (1/16): z = 1 / (1 + 2 (1/2 + 1/16)) = 1 / 2.125,
    s = (0.2 + 1) / 2.125 = 0.56470588; the anomaly alone: (0.2 + 1) / 2 = 0.6."""
    X, q = np.zeros((1, 1)), np.array([0.2])
    labeled, y = np.array([[1.0], [2.0]]), np.array([1, 0])
    assert authors_posterior(X, q, labeled, y, 1.0, 2.0)[0] == pytest.approx(1.2 / 2.125,
                                                                             abs=1e-15)
    assert authors_posterior(X, q, labeled[:1], y[:1], 1.0, 2.0)[0] == pytest.approx(0.6)
    np.testing.assert_array_equal(authors_posterior(X, q, labeled[:0], y[:0], 1.0, 2.0), q)


def test_label_terms_authors_is_ssdo_in_anomatools_order() -> None:
    """The same detector to the last bits (the order of the sums only), whichever order the
    labels came in; it needs the labels' rows of D."""
    rng = np.random.default_rng(3)
    X = rng.random((60, 3))
    fitted = {}
    for terms in ("incremental", "authors"):
        det = SSDO(0.1, prior="knn", label_terms=terms).fit(X)
        det.add_labels(X[[7, 2]], np.array([1, 0]), np.array([7, 2]))
        det.add_labels(X[[40]], np.array([0]), np.array([40]))
        fitted[terms] = det
    np.testing.assert_allclose(fitted["authors"].anomaly_probability(X),
                               fitted["incremental"].anomaly_probability(X), atol=1e-14)
    scores = PointScores(fitted["authors"], X[:5])
    np.testing.assert_allclose(scores.probabilities()[1],
                               fitted["authors"].anomaly_probability(X[:5]), atol=0)
    with pytest.raises(ValueError, match="pass their indices"):
        SSDO(0.1, prior="knn", label_terms="authors").fit(X).add_labels(X[:1], np.array([1]))
    with pytest.raises(ValueError, match="unknown label_terms 'sum'"):
        SSDO(0.1, label_terms="sum")


def test_squash_zero_threshold_is_indicator() -> None:
    s = np.array([0.0, 1e-12, 0.3, 5.0])
    np.testing.assert_array_equal(squash(s, 0.0), [0.0, 1.0, 1.0, 1.0])


# ---------------------------------------------------------------------- kernel width


def test_kernel_width_by_hand_k1() -> None:
    X = np.array([[0.0], [1.0], [3.0], [6.0], [10.0]])
    # nearest-neighbour distances: 1, 1, 2, 3, 4; harmonic mean = 5 / (1 + 1 + 1/2 + 1/3 +
    # 1/4) = 5 / (37/12) = 60/37 = 1.621621...
    assert kernel_width(X, k=1) == pytest.approx(60 / 37, rel=1e-12)


def test_kernel_width_by_hand_k2() -> None:
    X = np.array([[0.0], [1.0], [3.0], [6.0], [10.0]])
    # 2nd-neighbour distances: 0 -> {1, 3}: 3; 1 -> {1, 2}: 2; 3 -> {2, 3}: 3;
    # 6 -> {3, 4}: 4; 10 -> {4, 7}: 7. 1/3 + 1/2 + 1/3 + 1/4 + 1/7 = 131/84;
    # harmonic mean = 5 * 84 / 131 = 420/131 = 3.206...
    assert kernel_width(X, k=2) == pytest.approx(420 / 131, rel=1e-12)


def test_kernel_width_two_dimensions() -> None:
    # Unit square corners: every nearest neighbour at distance 1, 2nd at 1, 3rd at sqrt 2.
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert kernel_width(X, k=1) == pytest.approx(1.0)
    assert kernel_width(X, k=3) == pytest.approx(math.sqrt(2))
    assert kernel_width(X, k=30) == pytest.approx(math.sqrt(2))  # k capped at n - 1 = 3


def test_kernel_width_duplicates_and_zero_distances() -> None:
    X = np.array([[0.0], [0.0], [0.0], [1.0], [3.0]])
    # k = 2, itself excluded: each 0 has others {0, 0, 1, 3}: 2nd = 0 (three zeros);
    # 1 -> {1, 1, 1, 2}: 1; 3 -> {2, 3, 3, 3}: 3. Zeros become the smallest positive, 1:
    # [1, 1, 1, 1, 3] -> 5 / (4 + 1/3) = 15/13.
    assert kernel_width(X, k=2) == pytest.approx(15 / 13, rel=1e-12)
    # k = 1: 1st neighbour distances [0, 0, 0, 1, 2] -> [1, 1, 1, 1, 2]: 5 / 4.5 = 10/9.
    assert kernel_width(X, k=1) == pytest.approx(10 / 9, rel=1e-12)
    # Every point twice: with k = 1 each k-th distance is 0 (the twin) and none is positive,
    # so eta falls back to 1.
    Y = np.repeat(np.array([[0.0], [2.0], [5.0]]), 2, axis=0)
    assert kernel_width(Y, k=1) == 1.0
    # k = 2: 0s -> {0, 2, 2, 5, 5}: 2; 2s -> {0, 2, 2, 3, 3}: 2; 5s -> {0, 3, 3, 5, 5}: 3;
    # [2, 2, 2, 2, 3, 3] -> 6 / (4/2 + 2/3) = 6 / (8/3) = 9/4.
    assert kernel_width(Y, k=2) == pytest.approx(9 / 4, rel=1e-12)


def test_kernel_width_degenerate() -> None:
    assert kernel_width(np.zeros((6, 2)), k=3) == 1.0  # constant data
    assert kernel_width(np.array([[1.0, 2.0]]), k=30) == 1.0  # one point: no neighbour


def test_kernel_width_random_against_brute_force() -> None:
    rng = np.random.default_rng(4)
    X = rng.random((80, 3))
    k = 30
    kth = []
    for i in range(80):
        d = sorted(math.dist(X[i], X[j]) for j in range(80) if j != i)
        kth.append(d[k - 1])
    assert kernel_width(X, k) == pytest.approx(80 / sum(1 / v for v in kth), rel=1e-12)


# ---------------------------------------------------------------------- kernel sums


def _loop_sums(X, X_lab, y_lab, eta):
    da, dn = np.zeros(len(X)), np.zeros(len(X))
    for i, x in enumerate(X):
        for z, label in zip(X_lab, y_lab, strict=True):
            w = 2.0 ** (-((math.dist(x, z) / eta) ** 2))
            if label == 1:
                da[i] += w
            else:
                dn[i] += w
    return da, dn


@pytest.mark.parametrize("d", [1, 2, 5, 17])
def test_kernel_sums_against_loop(d: int) -> None:
    rng = np.random.default_rng(d)
    X = rng.random((40, d))
    X_lab = rng.random((9, d))
    y_lab = rng.integers(0, 2, 9)
    eta = 0.3 * math.sqrt(d)
    da, dn = kernel_sums(X, X_lab, y_lab, eta)
    ref_da, ref_dn = _loop_sums(X, X_lab, y_lab, eta)
    np.testing.assert_allclose(da, ref_da, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(dn, ref_dn, rtol=1e-10, atol=1e-300)


def test_kernel_sums_duplicates_and_labeled_points_themselves() -> None:
    rng = np.random.default_rng(8)
    base = rng.random((6, 3))
    X = np.vstack([base, base])  # every point twice
    X_lab = np.vstack([base[:3], base[:1]])  # a labeled point repeated too
    y_lab = np.array([1, 0, 1, 0])
    da, dn = kernel_sums(X, X_lab, y_lab, 0.4)
    ref_da, ref_dn = _loop_sums(X, X_lab, y_lab, 0.4)
    np.testing.assert_allclose(da, ref_da, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(dn, ref_dn, rtol=1e-10, atol=1e-300)
    # A point at distance 0 from itself gets w = 1 exactly-ish (no exponent > 0).
    assert np.all(da <= 2 + 1e-12) and np.all(dn <= 2 + 1e-12)
    assert da[0] >= 1.0 - 1e-12  # base[0] is labeled anomaly once (row 0) ...
    assert dn[0] >= 1.0 - 1e-12  # ... and normal once (row 3)


def test_kernel_sums_far_points_underflow() -> None:
    rng = np.random.default_rng(9)
    X = rng.random((10, 2))
    X_lab = np.vstack([rng.random((3, 2)) + 1000.0, rng.random((2, 2))])
    y_lab = np.array([1, 1, 0, 0, 1])
    eta = 0.5
    da, dn = kernel_sums(X, X_lab, y_lab, eta)
    ref_da, ref_dn = _loop_sums(X, X_lab, y_lab, eta)
    # Far labels contribute 2^(-(1000/0.5)^2) = 0 in the loop and ~1e-304 (exp clipped at
    # -700) in the implementation: both are nothing next to the near labels.
    np.testing.assert_allclose(da, ref_da, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(dn, ref_dn, rtol=1e-10, atol=1e-300)
    only_far_da, only_far_dn = kernel_sums(X, X_lab[:3], y_lab[:3], eta)
    # y_lab[:3] = [1, 1, 0]: two far anomalies, one far normal; at most 1e-304 each.
    assert np.all(only_far_da <= 3e-304) and np.all(only_far_dn <= 2e-304)
    assert np.all(np.isfinite(only_far_da)) and np.all(only_far_dn >= 0)


def test_kernel_sums_many_labels_crosses_chunks() -> None:
    # 300 x 1000 = 300,000 elements > one 262,144-element block: two row blocks.
    rng = np.random.default_rng(10)
    X = rng.random((1000, 2))
    X_lab = rng.random((300, 2))
    y_lab = rng.integers(0, 2, 300)
    da, dn = kernel_sums(X, X_lab, y_lab, 0.2)
    diff = X[:, None, :] - X_lab[None, :, :]
    w = 2.0 ** (-np.sum(diff**2, axis=2) / 0.2**2)
    np.testing.assert_allclose(da, w[:, y_lab == 1].sum(axis=1), rtol=1e-10)
    np.testing.assert_allclose(dn, w[:, y_lab == 0].sum(axis=1), rtol=1e-10)


def test_kernel_sums_no_labels() -> None:
    da, dn = kernel_sums(np.ones((4, 3)), np.empty((0, 3)), np.empty(0), 1.0)
    np.testing.assert_array_equal(da, np.zeros(4))
    np.testing.assert_array_equal(dn, np.zeros(4))


# ------------------------------------------------------------------ posterior score


def test_posterior_score_by_hand() -> None:
    q = np.array([0.2, 0.2, 0.9, 0.5])
    da = np.array([0.0, 1.0, 0.0, 0.5])
    dn = np.array([0.0, 0.0, 2.0, 0.5])
    # alpha = 2.3:
    # [0.2 / 1 = 0.2,
    #  (0.2 + 2.3) / (1 + 2.3) = 2.5 / 3.3 = 0.757575...,
    #  0.9 / (1 + 4.6) = 0.9 / 5.6 = 0.160714...,
    #  (0.5 + 1.15) / (1 + 2.3) = 1.65 / 3.3 = 0.5]
    expected = [0.2, 2.5 / 3.3, 0.9 / 5.6, 0.5]
    np.testing.assert_allclose(posterior_score(q, da, dn), expected, rtol=1e-14)
    # alpha = 1: (0.2 + 1) / 2 = 0.6
    assert posterior_score(np.array([0.2]), np.array([1.0]), np.array([0.0]), 1.0)[0] == (
        pytest.approx(0.6))


# ------------------------------------------------------------------- full SSDO by hand


def _knn_mean(X_ref: np.ndarray, x: np.ndarray, k: int = 10, skip: int | None = None) -> float:
    d = sorted(math.dist(x, X_ref[j]) for j in range(len(X_ref)) if j != skip)
    return sum(d[:k]) / k


def _quantile(values: list[float], level: float) -> float:
    """Linear-interpolation quantile, as numpy's default, by hand."""
    v = sorted(values)
    pos = level * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def _s(t: float, v: float) -> float:
    return 1.0 - 2.0 ** (-((v / t) ** 2))


@pytest.fixture(scope="module")
def knn_case():
    rng = np.random.default_rng(21)
    X = np.vstack([rng.normal(0, 1, (54, 3)), rng.normal(4, 0.5, (6, 3))])
    y = np.array([0] * 54 + [1] * 6)
    X_new = np.vstack([rng.normal(0, 1.5, (12, 3)), rng.normal(4, 0.5, (3, 3))])
    return X, y, X_new


def test_ssdo_posterior_matches_spec_literally(knn_case) -> None:
    X, y, X_new = knn_case
    gamma, alpha, k = 0.1, 2.3, 30
    det = SSDO(gamma, prior="knn").fit(X)
    batch1, batch2 = [0, 5, 55, 20], [57, 33, 12, 59, 40]
    det.add_labels(X[batch1], y[batch1])
    det.add_labels(X[batch2], y[batch2])
    labeled = batch1 + batch2

    n = len(X)
    # Prior: kNN mean distance to 10 neighbours; training scores leave the point out.
    raw_train = [_knn_mean(X, X[i], skip=i) for i in range(n)]
    shift = min(0.0, min(raw_train))
    t = _quantile([r - shift for r in raw_train], 1 - gamma)
    q_train = [_s(t, r - shift) for r in raw_train]
    np.testing.assert_allclose(det.q_train_, q_train, rtol=1e-10)
    # eta: harmonic mean of k-th neighbour distances (itself excluded).
    kth = [sorted(math.dist(X[i], X[j]) for j in range(n) if j != i)[k - 1] for i in range(n)]
    eta = n / sum(1 / v for v in kth)
    assert det.eta_ == pytest.approx(eta, rel=1e-12)

    def score(x: np.ndarray, q: float) -> float:
        da = sum(2.0 ** (-((math.dist(x, X[j]) / eta) ** 2)) for j in labeled if y[j] == 1)
        dn = sum(2.0 ** (-((math.dist(x, X[j]) / eta) ** 2)) for j in labeled if y[j] == 0)
        return (q + alpha * da) / (1 + alpha * (da + dn))

    s_train = [score(X[i], q_train[i]) for i in range(n)]
    t_post = _quantile(s_train, 1 - gamma)
    assert det.score_threshold_ == pytest.approx(t_post, rel=1e-10)

    s_new, p_new = [], []
    for x in X_new:
        q = _s(t, max(_knn_mean(X, x) - shift, 0.0))  # new points: all 10 neighbours in D
        s_new.append(score(x, q))
        p_new.append(_s(t_post, s_new[-1]))
    np.testing.assert_allclose(det.decision_function(X_new), s_new, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(det.anomaly_probability(X_new), p_new, rtol=1e-9, atol=1e-15)
    # The labels did something: some probabilities differ from the prior-only ones.
    prior_only = SSDO(gamma, prior="knn").fit(X).anomaly_probability(X_new)
    assert np.max(np.abs(prior_only - np.array(p_new))) > 1e-3


def test_ssdo_no_labels_is_the_prior(knn_case) -> None:
    X, _, X_new = knn_case
    det = SSDO(0.1, prior="knn").fit(X)
    np.testing.assert_allclose(det.decision_function(X_new), det.prior_probability(X_new))
    # t' is the quantile of q on D: P = S_t'(q)
    t_post = np.quantile(det.q_train_, 0.9)
    np.testing.assert_allclose(det.anomaly_probability(X_new),
                               squash(det.prior_probability(X_new), t_post))


def test_incremental_labels_equal_one_shot(knn_case) -> None:
    X, y, X_new = knn_case
    order = [3, 56, 10, 58, 25, 7, 54, 44, 30, 1]
    inc = SSDO(0.1, prior="knn").fit(X)
    for chunk in (order[:2], order[2:3], order[3:7], order[7:]):
        inc.add_labels(X[chunk], y[chunk])
    once = SSDO(0.1, prior="knn").fit(X).add_labels(X[order], y[order])
    np.testing.assert_allclose(inc.da_train_, once.da_train_, rtol=1e-12)
    np.testing.assert_allclose(inc.dn_train_, once.dn_train_, rtol=1e-12)
    assert inc.score_threshold_ == pytest.approx(once.score_threshold_, rel=1e-12)
    np.testing.assert_allclose(inc.anomaly_probability(X_new), once.anomaly_probability(X_new),
                               rtol=1e-12)
    # and both equal kernel sums recomputed over all labels from scratch
    da, dn = kernel_sums(X, X[order], y[order], once.eta_)
    np.testing.assert_allclose(inc.da_train_, da, rtol=1e-12)
    np.testing.assert_allclose(inc.dn_train_, dn, rtol=1e-12)


def test_point_scores_equal_detector_from_scratch(knn_case) -> None:
    X, y, X_new = knn_case
    det = SSDO(0.1, prior="knn").fit(X)
    ps = PointScores(det, X_new)
    p_train0, p_other0 = ps.probabilities()
    np.testing.assert_allclose(p_other0, det.anomaly_probability(X_new), rtol=1e-12)
    np.testing.assert_allclose(p_train0, squash(det.q_train_, det.score_threshold_))
    ps.add_labels(X[[2, 55]], y[[2, 55]])
    ps.add_labels(X[[9, 11, 57, 30]], y[[9, 11, 57, 30]])
    p_train, p_other = ps.probabilities()
    labeled = [2, 55, 9, 11, 57, 30]
    # From scratch: a new detector with all labels at once.
    fresh = SSDO(0.1, prior="knn").fit(X).add_labels(X[labeled], y[labeled])
    np.testing.assert_allclose(p_other, fresh.anomaly_probability(X_new), rtol=1e-12)
    da, dn = kernel_sums(X, X[labeled], y[labeled], fresh.eta_)
    s_train = posterior_score(fresh.q_train_, da, dn)
    expected_train = squash(s_train, np.quantile(s_train, 0.9))
    np.testing.assert_allclose(p_train, expected_train, rtol=1e-12)
    assert not np.allclose(p_train, p_train0)  # labels moved the training probabilities


def test_point_scores_empty_other_points(knn_case) -> None:
    X, y, _ = knn_case
    det = SSDO(0.1, prior="knn").fit(X)
    ps = PointScores(det, np.empty((0, X.shape[1])))
    ps.add_labels(X[[0, 55]], y[[0, 55]])
    p_train, p_other = ps.probabilities()
    assert p_other.shape == (0,) and p_train.shape == (len(X),)


# ---------------------------------------------------------------------- IForest prior


def test_iforest_prior_most_normal_point_gets_zero() -> None:
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(0, 1, (95, 4)), rng.normal(5, 1, (5, 4))])
    det = SSDO(0.05, prior="iforest", random_state=0).fit(X)
    raw = det.prior_.decision_scores_
    assert raw.min() < 0  # pyod's IForest scores go negative: the shift matters
    assert det.score_shift_ == raw.min()
    most_normal = int(np.argmin(raw))
    assert det.q_train_[most_normal] == 0.0
    assert np.all(det.q_train_[np.arange(len(X)) != most_normal] > 0)
    p_train, _ = PointScores(det, X[:3]).probabilities()
    assert p_train[most_normal] == 0.0
    # Scores of new points below the training minimum clip to probability 0, not a
    # spurious high one (squash of a negative shifted score would be positive).
    X_new = X[[most_normal]]
    assert det.prior_probability(X_new)[0] == 0.0
    centre = np.zeros((1, 4))
    assert det.prior_probability(centre)[0] <= np.quantile(det.q_train_, 0.5)
    # The anomalies score higher than the normals on average.
    assert det.q_train_[95:].mean() > det.q_train_[:95].mean()


def test_iforest_prior_seeded() -> None:
    X = np.random.default_rng(6).random((60, 3))
    a = SSDO(0.1, random_state=3).fit(X)
    b = SSDO(0.1, random_state=3).fit(X)
    c = SSDO(0.1, random_state=4).fit(X)
    np.testing.assert_array_equal(a.q_train_, b.q_train_)
    assert not np.array_equal(a.q_train_, c.q_train_)


# ------------------------------------------------------------------------ make_prior


def test_make_prior_strings() -> None:
    from pyod.models.iforest import IForest
    from pyod.models.knn import KNN

    forest = make_prior("iforest", seed=7)
    assert isinstance(forest, IForest) and forest.random_state == 7
    knn = make_prior("KNN")
    assert isinstance(knn, KNN)
    assert knn.n_neighbors == 10 and knn.method == "mean"


def test_make_prior_accepts_pyod_instances() -> None:
    from pyod.models.iforest import IForest
    from pyod.models.knn import KNN
    from pyod.models.lof import LOF

    given = KNN(n_neighbors=5)
    prior = make_prior(given, seed=1)
    assert isinstance(prior, KNN) and prior is not given and prior.n_neighbors == 5
    lof = make_prior(LOF())
    assert isinstance(lof, LOF)
    forest = make_prior(IForest(n_estimators=20), seed=11)
    assert forest.random_state == 11 and forest.n_estimators == 20
    # Plugs into SSDO and gives probabilities in [0, 1].
    X = np.random.default_rng(12).random((50, 2))
    det = SSDO(0.1, prior=LOF(n_neighbors=8)).fit(X)
    p = det.anomaly_probability(np.random.default_rng(13).random((5, 2)))
    assert p.shape == (5,) and np.all((p >= 0) & (p <= 1))
    assert isinstance(det.prior, LOF) and not hasattr(det.prior, "decision_scores_")  # copied


def test_make_prior_rejects_unknown_string() -> None:
    with pytest.raises(ValueError, match="unknown prior 'isolation': use one of iforest, knn.*"
                                         "or the name of a pyod detector .*ecod.*lof"):
        make_prior("isolation")


def test_make_prior_rejects_object_without_decision_function() -> None:
    class NoScores:
        def fit(self, X):
            return self

    with pytest.raises(TypeError, match="decision_function"):
        make_prior(NoScores())
    with pytest.raises(TypeError, match="pyod detector"):
        make_prior(42)
