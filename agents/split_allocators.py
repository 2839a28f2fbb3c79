"""Split allocators that leave All-in-LR only on evidence (docs/studies/ALLOCATION.md).

Both decide once, at the episode's first observation (no probe: the label-free traits of
the data, the start detector and the unit costs, observation v2), a *split*: ``(first,
rounds)``, the action ``first`` (AL or LR) for ``rounds`` rounds, then the other to the end
of the budget. :data:`ALL_IN_LR` is All-in-LR, the split the user already has.

- ``fixed-split-by-cost``: one split per fitted cost level, the level of the nearest
  ``cost_ratio`` acting (:func:`nearest_level`): the baseline every allocator must
  beat, the best split per level on the training data sets.
- ``safe-split``: an ensemble of ridge models (fitted on bootstrap samples of the training
  *groups*) predicts each candidate split's gain over All-in-LR, per unit of the largest
  unit cost, from the traits and the costs (the cost ratio and its products with the
  traits: one model for every cost). It takes the split of the largest mean gain only if
  the gain's lower bound (mean - ``z`` standard deviations: over the ensemble, or with
  ``residual`` also the fit's out-of-bag residual per split, so the bound is one for a
  new task's gain and not only for the model's mean) exceeds ``margin`` and the task's
  traits lie within ``threshold`` of the training tasks' (Mahalanobis distance: an anomaly
  detector on the task's traits); else All-in-LR.

Either may carry a :class:`LateSwitch` (``switch``): once the split's AL phase has begun
after LR rounds, it goes back to LR for the rest of the episode when the in-episode
evidence says AL is not paying (docs/studies/ALLOCATION.md, "Seventh round"). The split
stays the main signal: the switch only cuts an AL phase short.

Parameters are plain JSON (``allocation_params.json``), read without pickle or torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from agents.base import AL, LR, ProbeThenDecide, feature

#: More rounds than any budget: ``(LR, ALL_ROUNDS)`` is LR to the end.
ALL_ROUNDS = 10**9
#: The split All-in-LR.
ALL_IN_LR = (LR, ALL_ROUNDS)


def as_split(value: Sequence[int]) -> tuple[int, int]:
    """A split ``(first, rounds)`` checked: first AL (0) or LR (1), rounds >= 0."""
    first, rounds = (int(v) for v in value)
    if first not in (AL, LR) or rounds < 0:
        raise ValueError(f"a split is (first action: {AL} AL or {LR} LR, rounds >= 0), got "
                         f"{tuple(value)}")
    return first, rounds


def nearest_level(ratios: Iterable[float], observation: np.ndarray) -> float:
    """Of the cost ratios a family was fitted at, the one nearest the observation's
    ``cost_ratio`` (the first on ties): which level's model, policy or split acts (every
    per-level family of ``agents.allocation`` and :class:`FixedSplitByCost`)."""
    ratio = feature(observation, "cost_ratio")
    return min(ratios, key=lambda r: abs(r - ratio))


def feature_vector(observation: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The named features of ``observation``; ``a*b`` is the product of features a and b."""
    values = []
    for name in names:
        parts = name.split("*")
        values.append(float(np.prod([feature(observation, p) for p in parts])))
    return np.array(values)


class LateSwitch:
    """Back to LR when the AL phase does not pay: the AL phase's start (its first AL round
    with labels in V, ``val_sample_se`` > 0) fixes a reference, the cost on the labeled
    validation sample and its standard error; at each AL round after the first ``after``,
    the rule stops AL if that cost has fallen by less than ``threshold`` reference standard
    errors since (a negative threshold: stops only if it rose by more). AL rounds add no V
    labels, so the change is measured on the same examples: a paired measurement, the
    signal ``docs/studies/ALLOCATORS.md`` found the least noisy an agent can read. An AL
    phase that starts with no V labels (an AL-first split) has no reference and is never
    cut."""

    def __init__(self, after: int, threshold: float) -> None:
        if int(after) != after or after < 1 or not np.isfinite(threshold):
            raise ValueError(f"a late switch needs after >= 1 whole AL rounds and a finite "
                             f"threshold (in standard errors), got after={after!r}, "
                             f"threshold={threshold!r}")
        self.after, self.threshold = int(after), float(threshold)

    @staticmethod
    def reference(observation: np.ndarray) -> tuple[float, float] | None:
        """(validation-sample cost, its standard error) at the AL phase's start, or None
        where V holds too few labels to measure anything."""
        se = feature(observation, "val_sample_se")
        return (feature(observation, "val_sample_cost"), se) if se > 0 else None

    def stops(self, reference: tuple[float, float], observation: np.ndarray) -> bool:
        """Whether the cost fell by less than ``threshold`` standard errors since
        ``reference``."""
        drop = reference[0] - feature(observation, "val_sample_cost")
        return drop < self.threshold * reference[1]

    def to_entry(self) -> dict[str, Any]:
        """The JSON form ``from_entry`` reads."""
        return {"after": self.after, "threshold": self.threshold}

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any] | None) -> LateSwitch | None:
        """The switch of an entry's ``switch`` (None: no switch)."""
        return None if entry is None else cls(entry["after"], entry["threshold"])

    def __repr__(self) -> str:
        return f"LateSwitch(after={self.after}, threshold={self.threshold:g})"


class _SplitFirst(ProbeThenDecide):
    """No probe; the split ``(first, rounds)`` from :meth:`decide`, then played, its AL phase
    cut short by ``switch`` where one is set."""

    observation_version = "v2"
    probe: tuple[int, ...] = ()
    switch: LateSwitch | None = None

    def __init__(self) -> None:
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the episode: the split and the switch's reference."""
        super().reset(seed)
        self.al_rounds = 0
        self.reference: tuple[float, float] | None = None
        self.switched = False

    def after_probe(self, k: int, decision: Any) -> int:
        first, rounds = decision
        return int(first) if k <= rounds else 1 - int(first)

    def act(self, observation: np.ndarray) -> int:
        action = super().act(observation)
        if self.switch is None:
            return action
        if self.switched:
            return LR
        if action != AL:
            return action
        if self.al_rounds == 0:
            self.reference = self.switch.reference(observation)
        elif self.reference is not None and self.al_rounds >= self.switch.after and \
                self.switch.stops(self.reference, observation):
            self.switched = True
            return LR
        self.al_rounds += 1
        return AL

    @property
    def split(self) -> tuple[int, int] | None:
        """The split chosen this episode (None before the first move)."""
        return None if self.decision is None else tuple(self.decision)


class FixedSplitByCost(_SplitFirst):
    """``levels``: cost ratio (the ``cost_ratio`` feature) -> split; the level nearest the
    episode's ratio decides; ``switch`` as :class:`SafeSplit`'s."""

    name = "fixed-split-by-cost"

    def __init__(self, levels: Mapping[float, Sequence[int]],
                 switch: LateSwitch | None = None) -> None:
        if not levels:
            raise ValueError("give at least one cost level's split")
        self.levels = {float(r): as_split(split) for r, split in levels.items()}
        self.switch = switch
        super().__init__()

    def decide(self, observation: np.ndarray) -> tuple[int, int]:
        return self.levels[nearest_level(self.levels, observation)]

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> FixedSplitByCost:
        """The rule of a fitted entry: ``levels``, a list of {cost_ratio, split}."""
        return cls({level["cost_ratio"]: level["split"] for level in entry["levels"]},
                   LateSwitch.from_entry(entry.get("switch")))

    def __repr__(self) -> str:
        return f"FixedSplitByCost(levels={self.levels}, switch={self.switch})"


class SafeSplit(_SplitFirst):
    """The split of the largest predicted gain over All-in-LR where the evidence holds, else
    All-in-LR (the module docstring). ``coef`` is [member, split, feature], ``intercept``
    [member, split], on features standardised by ``center`` and ``scale``; ``ood`` holds
    the traits' ``features``, ``center``, ``precision`` (inverse covariance) and the
    ``threshold`` of the Mahalanobis distance (None: no check); ``residual`` [split], the
    standard deviation of a new task's gain about the model's (None: the ensemble's spread
    alone bounds the gain); ``switch`` (None: none), the :class:`LateSwitch` that may cut
    the chosen split's AL phase short."""

    name = "safe-split"

    def __init__(self, features: Sequence[str], center: Sequence[float],
                 scale: Sequence[float], coef: Any, intercept: Any,
                 splits: Sequence[Sequence[int]],
                 z: float, margin: float, ood: Mapping[str, Any],
                 residual: Sequence[float] | None = None,
                 switch: LateSwitch | None = None) -> None:
        self.features = tuple(features)
        self.center, self.scale = np.asarray(center, float), np.asarray(scale, float)
        self.coef, self.intercept = np.asarray(coef, float), np.asarray(intercept, float)
        self.splits = tuple(as_split(split) for split in splits)
        n = len(self.features)
        if self.coef.ndim != 3 or self.coef.shape[1:] != (len(self.splits), n) or \
                self.intercept.shape != self.coef.shape[:2] or self.center.shape != (n,) or \
                self.scale.shape != (n,) or np.any(self.scale <= 0):
            raise ValueError(f"coef must be [members, {len(self.splits)} splits, {n} features], "
                             f"intercept [members, splits], center and scale {n} values "
                             f"(scale > 0); got coef {self.coef.shape}, intercept "
                             f"{self.intercept.shape}")
        self.z, self.margin = float(z), float(margin)
        self.ood = dict(ood)
        self.residual = np.zeros(len(self.splits)) if residual is None else \
            np.asarray(residual, float)
        if self.residual.shape != (len(self.splits),) or np.any(self.residual < 0):
            raise ValueError(f"residual must be {len(self.splits)} values >= 0 (one per split), "
                             f"got shape {self.residual.shape}")
        self.switch = switch
        super().__init__()

    def gains(self, observation: np.ndarray) -> np.ndarray:
        """[member, split]: each member's predicted gain of each split over All-in-LR."""
        x = (feature_vector(observation, self.features) - self.center) / self.scale
        return np.asarray(self.intercept + self.coef @ x)

    def distance(self, observation: np.ndarray) -> float:
        """Mahalanobis distance of the task's traits from the training tasks'."""
        x = feature_vector(observation, self.ood["features"]) - np.asarray(self.ood["center"])
        return float(np.sqrt(max(x @ np.asarray(self.ood["precision"]) @ x, 0.0)))

    def choose(self, observation: np.ndarray) -> tuple[tuple[int, int], float, float]:
        """(split, lower bound of its gain, distance): the split is ``ALL_IN_LR`` unless the
        best split's lower bound exceeds the margin within the distance threshold."""
        gains = self.gains(observation)
        mean, spread = gains.mean(axis=0), np.hypot(gains.std(axis=0), self.residual)
        best = int(np.argmax(mean))
        lower = float(mean[best] - self.z * spread[best])
        distance = self.distance(observation)
        threshold = self.ood.get("threshold")
        trusted = threshold is None or distance <= float(threshold)
        split = self.splits[best] if lower > self.margin and trusted else ALL_IN_LR
        return split, lower, distance

    def decide(self, observation: np.ndarray) -> tuple[int, int]:
        return self.choose(observation)[0]

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> SafeSplit:
        """The allocator of a fitted entry (``allocation_params.json``'s layout)."""
        keys = ("features", "center", "scale", "coef", "intercept", "splits", "z", "margin",
                "ood")
        return cls(**{k: entry[k] for k in keys}, residual=entry.get("residual"),
                   switch=LateSwitch.from_entry(entry.get("switch")))

    def __repr__(self) -> str:
        return (f"SafeSplit(members={self.coef.shape[0]}, splits={self.splits}, z={self.z:g}, "
                f"margin={self.margin:g}, threshold={self.ood.get('threshold')}, "
                f"switch={self.switch})")


__all__ = ["ALL_IN_LR", "ALL_ROUNDS", "FixedSplitByCost", "LateSwitch", "SafeSplit", "as_split",
           "feature_vector", "nearest_level"]
