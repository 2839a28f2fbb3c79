"""Allocators beyond BALLAD's greedy rule: bandit rules over the two sides and fixed splits.

The observation carries only each side's latest reward, so the history rules keep their
own record: a side's reward is new when the previous action was that side. They start
with BALLAD's initialisation (LR, then AL), which also gives each bandit arm its first
pull. They follow one environment at a time (``predict`` refuses batches) and forget
their history at ``reset`` and whenever an observation shows an unspent budget.

References
----------
UCB1: Auer, Cesa-Bianchi and Fischer, "Finite-time analysis of the multiarmed bandit
problem", Machine Learning 2002. Discounted reward sums: SADAL, the follow-up work of
BALLAD's authors. Sliding windows for decaying rewards: the active-learning bandits
line (e.g. ALBA).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.base import AL, LR, Agent, AgentFactory, EpisodeStateAgent, RuleAgent, feature
from ballad_env.rewards import SIDE_SIGNAL_NAMES

_LR_FIRST = re.compile(r"lr-first-(\d+(?:\.\d+)?)")


class HistoryAgent(EpisodeStateAgent):
    """Base for rules that need each side's reward history; subclasses implement ``choose``.

    Parameters
    ----------
    reward : str
        The signal read from the observation, ``"entropy"`` or ``"cosine"``.
    """

    def __init__(self, reward: str = "entropy") -> None:
        if reward not in SIDE_SIGNAL_NAMES:
            raise ValueError(f"unknown reward {reward!r}: use one of {SIDE_SIGNAL_NAMES}")
        self.reward = reward
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the reward histories."""
        self.history: dict[int, list[float]] = {AL: [], LR: []}

    def act(self, observation: np.ndarray) -> int:
        self.observe(observation)
        if not self.history[LR]:
            return LR
        if not self.history[AL]:
            return AL
        return self.choose(observation)

    def observe(self, observation: np.ndarray) -> None:
        """Append the reward of the previous round to its side's history."""
        if feature(observation, "budget_used") == 0.0:
            self.history = {AL: [], LR: []}
        for side, name in ((AL, "al"), (LR, "lr")):
            if feature(observation, f"prev_{name}") > 0.5:
                self.history[side].append(self.reward_of(observation, name))

    def reward_of(self, observation: np.ndarray, name: str) -> float:
        """The previous round's reward of side ``name`` (``"al"``, ``"lr"``): the
        observation's (a subclass may read it elsewhere)."""
        return feature(observation, f"{self.reward}_{name}")

    def choose(self, observation: np.ndarray) -> int:
        """The action once both sides have a reward."""
        raise NotImplementedError

    @staticmethod
    def larger(al: float, lr: float) -> int:
        """AL if its score is at least LR's (BALLAD's tie rule), else LR."""
        return AL if al >= lr else LR

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reward={self.reward!r})"


class DiscountedGreedy(HistoryAgent):
    """The side with the larger discounted reward sum: each side's history summed with
    weight ``discount ** age``, age counted in that side's own rounds (latest = 0).
    """

    name = "discounted"

    def __init__(self, discount: float = 0.5, reward: str = "entropy") -> None:
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must lie in [0, 1], got {discount}")
        self.discount = discount
        super().__init__(reward)

    def score(self, side: int) -> float:
        """sum_k discount^(n - 1 - k) r_k over the side's n rewards."""
        total = 0.0
        for value in self.history[side]:
            total = self.discount * total + value
        return total

    def choose(self, observation: np.ndarray) -> int:
        return self.larger(self.score(AL), self.score(LR))


class UCB1(HistoryAgent):
    """UCB1: mean reward plus ``c * sqrt(2 ln t / n_side)``, t the rounds with a reward.

    The bonus assumes rewards in [0, 1]; BALLAD's rewards are mostly below 0.1, so with
    ``c = 1`` the bonus dominates and the rule nearly alternates.
    """

    name = "ucb1"

    def __init__(self, c: float = 1.0, reward: str = "entropy") -> None:
        if c < 0:
            raise ValueError(f"exploration weight c must be >= 0, got {c}")
        self.c = c
        super().__init__(reward)

    def index(self, side: int) -> float:
        """The side's upper confidence bound."""
        rewards = self.history[side]
        t = len(self.history[AL]) + len(self.history[LR])
        return float(np.mean(rewards)) + self.c * math.sqrt(2.0 * math.log(t) / len(rewards))

    def choose(self, observation: np.ndarray) -> int:
        return self.larger(self.index(AL), self.index(LR))


class EpsilonGreedy(HistoryAgent):
    """With probability ``epsilon`` a fair coin, else the side with the larger mean reward.

    The generator is ``numpy.random.default_rng(seed)`` from ``reset(seed)``; every
    decision draws the same numbers whichever branch it takes.
    """

    name = "epsilon-greedy"

    def __init__(self, epsilon: float = 0.1, reward: str = "entropy",
                 seed: int | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must lie in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        super().__init__(reward)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        """Forget the histories and reseed the generator."""
        super().reset(seed)
        self.rng = np.random.default_rng(seed)

    def choose(self, observation: np.ndarray) -> int:
        explore, coin = self.rng.random(), int(self.rng.integers(2))
        if explore < self.epsilon:
            return coin
        return self.larger(float(np.mean(self.history[AL])), float(np.mean(self.history[LR])))


class SlidingWindow(HistoryAgent):
    """The side with the larger mean of its last ``window`` rewards (rewards decay as
    labels accumulate, so old ones overstate a side)."""

    name = "sliding-window"

    def __init__(self, window: int = 3, reward: str = "entropy") -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        super().__init__(reward)

    def choose(self, observation: np.ndarray) -> int:
        al, lr = (float(np.mean(self.history[s][-self.window:])) for s in (AL, LR))
        return self.larger(al, lr)


class ValCostGreedy(RuleAgent):
    """Greedy on the validation-cost estimate (only labels paid for): a side's gain is the
    decrease of ``val_cost`` over that side's latest round; take the larger gain (ties AL).

    Starts LR then AL. A round that began with no labels at all has no estimate to
    decrease from and yields no gain; a side without a gain yet is taken to measure one.
    """

    name = "val-cost-greedy"

    def __init__(self) -> None:
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the gains and the last estimate."""
        self.gain: dict[int, float | None] = {AL: None, LR: None}
        self.taken: dict[int, int] = {AL: 0, LR: 0}
        self._before: float | None = None

    def act(self, observation: np.ndarray) -> int:
        if feature(observation, "budget_used") == 0.0:
            self.reset()
        now = feature(observation, "val_cost")
        for side, name in ((AL, "al"), (LR, "lr")):
            if feature(observation, f"prev_{name}") > 0.5:
                self.taken[side] += 1
                if self._before is not None:
                    self.gain[side] = self._before - now
        labeled = feature(observation, "labeled_train") + feature(observation, "labeled_val")
        self._before = now if labeled > 0 else None
        if not self.taken[LR]:
            return LR
        if not self.taken[AL]:
            return AL
        al, lr = self.gain[AL], self.gain[LR]
        if al is None:
            return AL
        if lr is None:
            return LR
        return AL if al >= lr else LR


class Half(RuleAgent):
    """HALF: alternate sides, LR first (as BALLAD's initialisation)."""

    name = "half"

    def act(self, observation: np.ndarray) -> int:
        return AL if feature(observation, "prev_lr") > 0.5 else LR


class LRFirst(RuleAgent):
    """The first ``percent`` % of the rounds (rounded up) to LR, the rest to AL."""

    def __init__(self, percent: float) -> None:
        if not 0.0 <= percent <= 100.0:
            raise ValueError(f"percent must lie in [0, 100], got {percent}")
        self.percent = percent
        self.name = f"lr-first-{percent:g}"

    def act(self, observation: np.ndarray) -> int:
        # budget_used is a float32 fraction: allow for its rounding at the boundary.
        return LR if feature(observation, "budget_used") < self.percent / 100.0 - 1e-6 else AL

    def __repr__(self) -> str:
        return f"LRFirst(percent={self.percent:g})"


def lr_first(name: str) -> LRFirst:
    """The ``LRFirst`` agent a name like ``"lr-first-20"`` describes."""
    match = _LR_FIRST.fullmatch(name)
    if match is None:
        raise ValueError(f"not an lr-first name: {name!r} (expected e.g. 'lr-first-20')")
    return LRFirst(float(match.group(1)))


def _lr_first_agent(name: str, env: Any) -> Agent:
    """The factory of a registered lr-first name (the environment is not needed)."""
    return lr_first(name)


#: Registered names and factories (the environment is not needed by any of them).
BANDIT_AGENTS: dict[str, AgentFactory] = {
    "discounted": lambda env: DiscountedGreedy(),
    "ucb1": lambda env: UCB1(),
    "epsilon-greedy": lambda env: EpsilonGreedy(),
    "sliding-window": lambda env: SlidingWindow(),
    "val-cost-greedy": lambda env: ValCostGreedy(),
    "half": lambda env: Half(),
    **{f"lr-first-{p}": functools.partial(_lr_first_agent, f"lr-first-{p}")
       for p in (20, 33, 50)},
}


#: Registered name patterns: (pattern, example name, factory taking the match and the
#: environment).
BANDIT_PATTERNS: tuple[tuple[str, str, Callable[[re.Match[str], Any], Agent]], ...] = (
    (_LR_FIRST.pattern, "lr-first-25", lambda match, env: LRFirst(float(match.group(1)))),
)

__all__ = ["BANDIT_AGENTS", "BANDIT_PATTERNS", "DiscountedGreedy", "EpsilonGreedy", "Half",
           "HistoryAgent", "LRFirst", "SlidingWindow", "UCB1", "ValCostGreedy", "lr_first"]
