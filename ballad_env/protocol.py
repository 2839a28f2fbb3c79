"""The protocol: stratified 40/40/20 split, scaling, budget and random streams.

See ``docs/method.md``, Protocol.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ballad_env.data import DataWarning

SPLIT_FRACTIONS = (0.4, 0.4, 0.2)
#: ``"stratified"``: ours (40/40/20 per class, rounded half up, from the split stream);
#: ``"authors"``: the published BALLAD code's (``authors_split_indices``);
#: ``"sadal"``: SADAL's protocol (``sadal_split_indices``).
SPLITS = ("stratified", "authors", "sadal")
#: The published code's fractions: 60% of each class set aside, then 0.333 of that to T.
AUTHORS_ASIDE, AUTHORS_TEST = 0.6, 0.333
#: SADAL's fractions: 20% of the data to T, then half of the rest to V (both stratified).
SADAL_TEST, SADAL_VAL = 0.2, 0.5
#: How a budget is counted: ``"paper"`` (``Budget.from_fractions``: rounds of
#: round(round_fraction |D|) labels) or ``"sadal"`` (``Budget.sadal``: int(budget_fraction
#: |D u V|) labels in all, int(total / rounds) a round).
BUDGET_RULES = ("paper", "sadal")
#: How features are scaled: ``"standard-minmax"`` (a standard then a min-max scaler fitted
#: on D: the paper's) or ``"none"`` (the published SADAL code's: SSIF is invariant to
#: per-feature affine maps in exact arithmetic, not in floating point).
SCALINGS = ("standard-minmax", "none")
#: One stream per purpose. A new purpose is appended: ``SeedSequence.spawn`` gives child i
#: the same key whatever the number spawned, so the earlier streams draw as before.
STREAMS = ("split", "prior", "al", "lr", "threshold", "detector")


class BudgetWarning(UserWarning):
    """A budget its rounds cannot spend exactly: episodes spend more or less than asked."""


@dataclass(frozen=True)
class Split:
    """Training (D), validation (V) and test (T) sets, scaled on D."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def spawn_streams(seed: int | np.random.SeedSequence) -> dict[str, np.random.SeedSequence]:
    """One independent seed sequence per purpose (split, prior, AL, LR queries, threshold,
    the detector's own seed where it is not the prior's: SSIF)."""
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return dict(zip(STREAMS, root.spawn(len(STREAMS)), strict=True))


def class_split_sizes(n: int) -> tuple[int, int, int]:
    """Sizes of one class's share of D and V (40% each, rounded half up); T takes the rest."""
    n_train = int(np.floor(SPLIT_FRACTIONS[0] * n + 0.5))
    n_val = int(np.floor(SPLIT_FRACTIONS[1] * n + 0.5))
    return n_train, n_val, n - n_train - n_val


def authors_class_split_sizes(n: int) -> tuple[int, int, int]:
    """One class's share of D, V and T in the published code's split: scikit-learn's
    ``train_test_split`` rounds the part set aside (60%), then T's share of it (0.333), up."""
    aside = math.ceil(AUTHORS_ASIDE * n)
    n_test = math.ceil(AUTHORS_TEST * aside)
    return n - aside, aside - n_test, n_test


def sadal_split_sizes(n: int) -> tuple[int, int, int]:
    """Sizes of D, V and T in SADAL's split of n examples: scikit-learn's ``train_test_split``
    gives T ceil(0.2 n) (the expression it computes), then V ceil(0.5 of the rest); D takes
    what is left."""
    n_test = math.ceil(SADAL_TEST * n)
    n_val = math.ceil(SADAL_VAL * (n - n_test))
    return n - n_test - n_val, n_val, n_test


def split_sizes(y: np.ndarray, method: str = "stratified") -> tuple[int, int, int]:
    """Sizes of D, V and T for labels ``y`` (stratified, so they do not depend on the seed)."""
    if method == "sadal":
        return sadal_split_sizes(int(np.size(y)))
    sizes = authors_class_split_sizes if method == "authors" else class_split_sizes
    normal = sizes(int(np.sum(y == 0)))
    anomaly = sizes(int(np.sum(y == 1)))
    return (normal[0] + anomaly[0], normal[1] + anomaly[1], normal[2] + anomaly[2])


def warn_if_test_lacks_anomalies(y: np.ndarray, name: str = "data") -> None:
    """Warn (``DataWarning``) when the split leaves a set without an anomaly: T (2 or 4
    anomalies in all: its FNR is then 0 and its ROC AUC NaN for every agent), or D and V
    (1 anomaly: no label can show the detector an anomaly, and T's FNR is 1 throughout)."""
    n_anomalies = int(np.sum(y == 1))
    n_train, n_val, n_test = class_split_sizes(n_anomalies)
    if n_anomalies and n_train == 0 and n_val == 0:
        warnings.warn(
            f"{name}: D and V get no anomaly ({n_anomalies} anomaly split 40/40/20 per class: "
            f"0 to D, 0 to V, {n_test} to T), so no label bought can be an anomaly and the "
            "test FNR is 1 for every agent. Use data with 3, or 5 or more, anomalies.",
            DataWarning, stacklevel=3)
    elif n_test == 0:
        warnings.warn(
            f"{name}: the test set gets no anomaly ({n_anomalies} anomalies split 40/40/20 "
            f"per class: {n_train} to D, {n_val} to V, 0 to T), so every agent's test FNR is 0 "
            "and its ROC AUC NaN, and the test cost counts false positives and rejections "
            "only. Use data with 3, or 5 or more, anomalies.", DataWarning, stacklevel=3)


def split_indices(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Stratified 40/40/20 indices (train, val, test), each in sorted order."""
    parts: list[list[np.ndarray]] = [[], [], []]
    for label in (0, 1):
        members = rng.permutation(np.flatnonzero(y == label))
        n_train, n_val, _ = class_split_sizes(members.size)
        for part, chunk in zip(parts, np.split(members, [n_train, n_train + n_val]), strict=True):
            part.append(chunk)
    return tuple(np.sort(np.concatenate(part)) for part in parts)


def authors_split_indices(y: np.ndarray, random_state: int) -> tuple[np.ndarray, ...]:
    """The published code's split (train, val, test): per class, scikit-learn's
    ``train_test_split`` sets 60% aside from D, then 0.333 of that aside for T, both with
    ``random_state``; each part holds the normal examples, then the anomalies, in the order
    the splits leave them (the published code's order, which its label queries index)."""
    from sklearn.model_selection import train_test_split

    parts: list[list[np.ndarray]] = [[], [], []]
    for label in (0, 1):
        members = np.flatnonzero(y == label)
        try:
            train, aside = train_test_split(members, test_size=AUTHORS_ASIDE,
                                            random_state=random_state)
            val, test = train_test_split(aside, test_size=AUTHORS_TEST,
                                         random_state=random_state)
        except ValueError as err:
            raise ValueError(f"the authors' split cannot divide the {members.size} examples of "
                             f"class {label} into D, V and T ({err})") from None
        for part, chunk in zip(parts, (train, val, test), strict=True):
            part.append(chunk)
    return tuple(np.concatenate(part) for part in parts)


def sadal_split_indices(y: np.ndarray, random_state: int) -> tuple[np.ndarray, ...]:
    """SADAL's split (train, val, test): scikit-learn's ``train_test_split(test_size=0.2,
    stratify=y, random_state=random_state)`` sets T aside (SADAL's README says 80/20 and
    not how; stratified with the seed, as the published code splits D from V), then
    ``train_test_split(test_size=0.5, stratify=..., shuffle=True, random_state=random_state)``
    splits the rest into D and V (``SADAL.py`` lines 39-43). Each part is in the order the
    splits leave it: SADAL's label queries index it (ties go to the first).

    scikit-learn draws from a legacy ``RandomState(random_state)`` local to each call (never
    the global stream); its stratified shuffle cannot be had from a ``Generator``."""
    from sklearn.model_selection import train_test_split

    rest, test = sadal_holdout(y, random_state)
    try:
        train, val = train_test_split(rest, test_size=SADAL_VAL, stratify=y[rest], shuffle=True,
                                      random_state=random_state)
    except ValueError as err:
        raise ValueError(f"SADAL's split cannot divide the {rest.size} examples left of "
                         f"{np.size(y)} into D and V stratified by class ({err})") from None
    return train, val, test


def sadal_holdout(y: np.ndarray, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """SADAL's 80/20 split (the training part, then T), in ``train_test_split``'s order: the
    training part is what ``SADAL(Xtrain, ...)`` receives and divides into D and V."""
    from sklearn.model_selection import train_test_split

    try:
        rest, test = train_test_split(np.arange(np.size(y)), test_size=SADAL_TEST, stratify=y,
                                      random_state=random_state)
    except ValueError as err:
        raise ValueError(f"SADAL's split cannot divide {np.size(y)} examples into a training "
                         f"part and T stratified by class ({err})") from None
    return rest, test


def split_and_scale(X: np.ndarray, y: np.ndarray, rng: np.random.Generator,
                    method: str = "stratified", random_state: int = 0,
                    scaling: str = "standard-minmax") -> Split:
    """Split (``method``: stratified 40/40/20 from ``rng``, or the published BALLAD code's or
    SADAL's split with ``random_state``); fit a standard then a min-max scaler on D; apply to
    all (``scaling="none"``: leave the features as they are)."""
    if method not in SPLITS:
        raise ValueError(f"unknown split {method!r}: use one of {', '.join(SPLITS)}")
    if method == "authors":
        train, val, test = authors_split_indices(y, random_state)
    elif method == "sadal":
        train, val, test = sadal_split_indices(y, random_state)
    else:
        train, val, test = split_indices(y, rng)
    if scaling not in SCALINGS:
        raise ValueError(f"unknown scaling {scaling!r}: use one of {', '.join(SCALINGS)}")
    if scaling == "none":
        def raw(idx: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(X[idx], dtype=np.float64)

        return Split(raw(train), y[train], raw(val), y[val], raw(test), y[test])
    from sklearn.preprocessing import MinMaxScaler, StandardScaler  # slow to import

    standard = StandardScaler().fit(X[train])
    minmax = MinMaxScaler().fit(standard.transform(X[train]))

    def scale(idx: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(minmax.transform(standard.transform(X[idx])))

    return Split(scale(train), y[train], scale(val), y[val], scale(test), y[test])


@dataclass(frozen=True)
class Budget:
    """k rounds of b labels: b = max(1, round(round_fraction |D|)), k = budget / round fraction."""

    n_rounds: int
    per_round: int

    @classmethod
    def from_fractions(cls, n_train: int, budget_fraction: float = 0.3,
                       round_fraction: float = 0.02) -> Budget:
        """The paper's budget: 30% of |D| in rounds of 2%, so 15 rounds."""
        if not 0 < round_fraction <= budget_fraction <= 1:
            raise ValueError(
                "budget fractions must satisfy 0 < round_fraction <= budget_fraction <= 1; "
                f"got round_fraction={round_fraction}, budget_fraction={budget_fraction}"
            )
        per_round = max(1, int(np.floor(round_fraction * n_train + 0.5)))
        return cls(n_rounds=int(round(budget_fraction / round_fraction)), per_round=per_round)

    @classmethod
    def sadal(cls, n_train: int, n_val: int, budget_fraction: float = 0.2,
              round_fraction: float = 0.02) -> Budget:
        """SADAL's budget: int(budget_fraction |D u V|) labels in all (its README's
        ``int(len(Xtrain) * 0.2)``, Xtrain being D and V), k = budget / round fraction rounds
        (10) of int(total / k) labels each (``SADAL.py`` line 73): 40 examples in D and V
        give int(8 / 10) = 0 labels a round, which ``check`` refuses."""
        n_rounds = cls.from_fractions(1, budget_fraction, round_fraction).n_rounds
        total = int(budget_fraction * (n_train + n_val))
        return cls(n_rounds=n_rounds, per_round=int(total / n_rounds))

    @classmethod
    def for_rule(cls, rule: str, n_train: int, n_val: int, budget_fraction: float,
                 round_fraction: float) -> Budget:
        """The budget counted by ``rule`` (``BUDGET_RULES``)."""
        if rule == "sadal":
            return cls.sadal(n_train, n_val, budget_fraction, round_fraction)
        if rule != "paper":
            raise ValueError(f"unknown budget rule {rule!r}: use one of {', '.join(BUDGET_RULES)}")
        return cls.from_fractions(n_train, budget_fraction, round_fraction)

    @staticmethod
    def warn_if_inexact(budget_fraction: float, round_fraction: float) -> None:
        """Warn (``BudgetWarning``) when whole rounds of ``round_fraction`` do not add up to
        ``budget_fraction``: the episodes then spend the rounds, not the budget."""
        n_rounds = int(round(budget_fraction / round_fraction))
        spent = n_rounds * round_fraction
        if not math.isclose(spent, budget_fraction, rel_tol=1e-9, abs_tol=1e-12):
            warnings.warn(
                f"round_fraction {round_fraction:g} does not divide budget_fraction "
                f"{budget_fraction:g}: {n_rounds} rounds of {100 * round_fraction:.3g}% spend "
                f"{100 * spent:.3g}% of |D|, not {100 * budget_fraction:.3g}%. Choose a "
                "round_fraction that "
                f"divides the budget, such as {budget_fraction / max(1, n_rounds):.4g}.",
                BudgetWarning, stacklevel=5)  # past Settings.__init__'s check

    def warn_if_rounded_up(self, n_train: int, round_fraction: float, name: str = "data"
                           ) -> None:
        """Warn (``BudgetWarning``) when a round of ``round_fraction`` |D| is less than half a
        label and is rounded up to one: the episodes then buy more than the budget says."""
        if np.floor(round_fraction * n_train + 0.5) >= 1:
            return
        warnings.warn(
            f"{name}: a round of {100 * round_fraction:.3g}% of |D| = {n_train} is "
            f"{round_fraction * n_train:.3g} labels, rounded up to 1: {self.n_rounds} rounds buy "
            f"{self.total} labels ({100 * self.total / max(n_train, 1):.1f}% of D), not the "
            f"{100 * self.n_rounds * round_fraction:.1f}% asked for. Use a round_fraction of at "
            f"least {0.5 / max(n_train, 1):.2g} on this data set (half a label a round).",
            BudgetWarning, stacklevel=4)

    @property
    def total(self) -> int:
        """B = k b labels in all."""
        return self.n_rounds * self.per_round

    def check(self, n_train: int, n_val: int, name: str = "data") -> None:
        """Raise unless the budget can be spent in whole rounds on D and V together."""
        if self.per_round < 1:
            raise ValueError(
                f"too few examples in {name}: {self.n_rounds} rounds of the budget leave no "
                f"label a round (D has {n_train} examples and V {n_val}); use a larger budget "
                "fraction or fewer rounds")
        rounds_possible = n_train // self.per_round + n_val // self.per_round
        if rounds_possible < self.n_rounds:
            raise ValueError(
                f"too few examples in {name}: {self.n_rounds} rounds of {self.per_round} label(s) "
                f"need {self.total} examples, but D has {n_train} and V has {n_val}"
            )
