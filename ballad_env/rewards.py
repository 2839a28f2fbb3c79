"""Reward signals: the one table of what a step can be rewarded by (``docs/method.md``, Rewards).

Two kinds of signal:

* **Side signals** (BALLAD's): how much the last allocation to a side changed that side's
  output, comparing it with the output stored at that side's previous round, over all
  examples of D and V. AL's output is the anomaly side (probabilities, predictions), LR's
  the rejection side (rejection probabilities, rejection indicators). Every side signal
  is reported in ``info``, observed (``<name>_al``, ``<name>_lr``), recorded in the
  lattice and can be the reward. Add one to ``SIDE_SIGNALS`` below: a ``summarise`` of
  an output and a ``between`` of two summaries.
* **Cost signals**, for learning: a cost figure of the episode's snapshot, as its decrease
  over the step (the return is the decrease over the episode) or as minus its value after
  the step (the return is minus its sum over the rounds). Register one with
  ``REWARD_SIGNALS.register``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ballad_env.registry import Registry
from ballad_env.rejection.two_sided import binary_entropy

#: ``"log2"``: H = -p log2 p on both sides (the paper); ``"authors"``: the published code's
#: mix, natural log on the LR side and in the initial AL output, log2 in later AL outputs.
ENTROPY_LOGS = ("log2", "authors")
#: The entropy signal's entropy: ``"one"``, BALLAD's one term -p log p (the paper), or
#: ``"binary"``, SADAL's -p log p - (1 - p) log (1 - p) (``two_sided.binary_entropy``).
ENTROPY_TERMS = ("one", "binary")
#: The cosine signal: ``"ours"`` (0/1 vectors; a zero vector gives 0 or 1, ``cosine_reward``)
#: or ``"authors"``, the published code's: the AL side over -1/+1 predictions (anomatools'
#: labels), the LR side's initial output all zero, and NaN wherever a vector is all zero
#: (scipy's ``cosine`` divides 0 by 0 there). The episode builds the vectors
#: (``Episode._outputs``); the summary ``decisions`` gives a zero vector's NaN.
COSINE_RULES = ("ours", "authors")


def entropy(p: np.ndarray, base: float = 2.0) -> np.ndarray:
    """The paper's one-term entropy H(p) = -p log2 p (another ``base`` if given), H(0) = 0."""
    p = np.asarray(p, dtype=np.float64)
    out = np.zeros_like(p)
    positive = p > 0
    logs = np.log2(p[positive]) if base == 2.0 else np.log(p[positive]) / np.log(base)
    out[positive] = -p[positive] * logs
    return out


def mean_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over examples of |a - b| (0 for no examples)."""
    if np.size(a) == 0:
        return 0.0
    return float(np.mean(np.abs(a - b)))


def entropy_reward(p_new: np.ndarray, p_old: np.ndarray) -> float:
    """Mean over examples of |H(p_new) - H(p_old)|."""
    return mean_abs_difference(entropy(p_new), entropy(p_old))


def cosine_reward(v_new: np.ndarray, v_old: np.ndarray) -> float:
    """1 - cos(v_new, v_old) of two 0/1 (or -1/+1) vectors; 0 if both are zero, 1 if exactly
    one is; NaN if either holds a NaN (the published rule's zero vector, ``decisions``)."""
    v_new = np.asarray(v_new, dtype=np.float64)
    v_old = np.asarray(v_old, dtype=np.float64)
    sq_new, sq_old = v_new @ v_new, v_old @ v_old
    if sq_new == 0 and sq_old == 0:
        return 0.0
    if sq_new == 0 or sq_old == 0:
        return 1.0
    # One square root of the product: exactly 0 for identical 0/1 vectors.
    return float(1.0 - (v_new @ v_old) / np.sqrt(sq_new * sq_old))


@dataclass
class SideOutput:
    """A side's detector output on D and V: probabilities, decisions (0/1; -1/+1 on the AL
    side under the published cosine rule), the base of the logarithm its entropy is taken in
    (2; e in the published code's LR side), which entropy (``ENTROPY_TERMS``: BALLAD's one
    term, or SADAL's binary entropy) and which cosine (``COSINE_RULES``)."""

    probability: np.ndarray
    decision: np.ndarray
    log_base: float = 2.0
    entropy_terms: str = "one"
    cosine_rule: str = "ours"

    def rewards(self, previous: SideOutput) -> dict[str, float]:
        """Every side signal of the change from ``previous`` to this output."""
        return {signal.name: signal(self, previous) for signal in SIDE_SIGNALS}


@dataclass(frozen=True)
class SideSignal:
    """A change signal between two outputs of one side, computed from their summaries
    (the lattice caches summaries, so comparing against many earlier outputs is cheap)."""

    name: str
    summarise: Callable[[SideOutput], np.ndarray]
    between: Callable[[np.ndarray, np.ndarray], float]

    def __call__(self, new: SideOutput, old: SideOutput) -> float:
        return self.between(self.summarise(new), self.summarise(old))


@dataclass(frozen=True)
class CostSignal:
    """A reward read from a cost figure of the episode's snapshots before and after a step."""

    name: str
    figure: str

    def __call__(self, before: Any, after: Any) -> float:
        raise NotImplementedError


class CostDecrease(CostSignal):
    """Reward = the figure before the step minus after it: the return is the figure's
    decrease over the episode, so maximising it minimises the final figure."""

    def __call__(self, before: Any, after: Any) -> float:
        return float(getattr(before, self.figure) - getattr(after, self.figure))


class CostPenalty(CostSignal):
    """Reward = minus the figure after the step: the return is minus its sum over the
    rounds, so maximising it minimises the figure's mean over rounds."""

    def __call__(self, before: Any, after: Any) -> float:
        return -float(getattr(after, self.figure))


def probability_entropy(output: SideOutput) -> np.ndarray:
    """The entropy signal's summary: H of each example's probability (one term, or binary)."""
    if output.entropy_terms == "binary":
        h = binary_entropy(output.probability)
        return h if output.log_base == 2.0 else h / np.log2(output.log_base)
    return entropy(output.probability, output.log_base)


def decisions(output: SideOutput) -> np.ndarray:
    """The cosine signal's summary: the decisions. Under the published cosine rule an all-zero
    vector has no direction and becomes all NaN, so every cosine with it is NaN, as the
    published code's (scipy's 1 - u.v / sqrt(u.u v.v) is 0 / 0 there); ``cosine_reward``
    passes the NaN on."""
    if output.cosine_rule == "authors" and not np.any(output.decision):
        return np.full(np.shape(output.decision), np.nan)
    return output.decision


#: BALLAD's signals, in observation order.
SIDE_SIGNALS: tuple[SideSignal, ...] = (
    SideSignal("entropy", probability_entropy, mean_abs_difference),
    SideSignal("cosine", decisions, cosine_reward),
)
SIDE_SIGNAL_NAMES = tuple(signal.name for signal in SIDE_SIGNALS)

#: Every reward a step can give, by name.
REWARD_SIGNALS: Registry[SideSignal | CostSignal] = Registry("reward")
for _signal in SIDE_SIGNALS:
    REWARD_SIGNALS.register(_signal.name, _signal)
#: Decrease of the test cost (reads test labels: for learning in simulation only).
REWARD_SIGNALS.register("cost", CostDecrease("cost", "test_cost"))
#: Minus the test cost after each step (reads test labels): the return is minus the sum of
#: the per-round costs, the mean cost over rounds by which allocators are scored.
REWARD_SIGNALS.register("round_cost", CostPenalty("round_cost", "test_cost"))
#: Decrease of the cost estimated on the labels that set tau (only labels paid for).
REWARD_SIGNALS.register("val_cost", CostDecrease("val_cost", "val_cost"))
#: Decrease of the cost on the labeled validation examples only (a uniform sample of V,
#: so unbiased by the AL queries; 0 before any V label).
REWARD_SIGNALS.register("val_sample_cost", CostDecrease("val_sample_cost", "val_sample_cost"))

__all__ = ["COSINE_RULES", "ENTROPY_LOGS", "ENTROPY_TERMS", "REWARD_SIGNALS", "SIDE_SIGNALS",
           "SIDE_SIGNAL_NAMES",
           "CostDecrease", "CostPenalty", "CostSignal", "SideOutput", "SideSignal",
           "cosine_reward", "entropy", "entropy_reward", "mean_abs_difference"]
