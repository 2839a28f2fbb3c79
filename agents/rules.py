"""Hand-written allocation rules: BALLAD's greedy rule and the fixed baselines.

See ``docs/method.md``, Allocation and evaluation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.base import AL, LR, AgentFactory, ExactRewards, RuleAgent, built_for, feature
from ballad_env.rewards import SIDE_SIGNAL_NAMES
from ballad_env.settings import Settings

#: How BALLAD starts: ``"paper"``, LR then AL, whatever the rewards (the paper's
#: initialisation), or ``"authors"``, the published ``run_BALLAD``'s: the stored rewards
#: start at AL 0.99 and LR 1 (``AUTHORS_INITIAL_REWARDS``) and are compared from the first
#: round, so LR comes first and AL second only if LR's first reward is at most 0.99 (a NaN
#: compares false: LR again).
BALLAD_STARTS = ("paper", "authors")
#: The published ``run_BALLAD``'s initial stored rewards (AL, LR).
AUTHORS_INITIAL_REWARDS = (0.99, 1.0)


class BalladAgent(ExactRewards, RuleAgent):
    """BALLAD: LR first, then AL (the initialisation), then the side with the larger latest
    reward; ties go to AL, and a NaN reward (the published cosine rule's) compares false, so
    LR is played, as in the published code. The rewards compared are the float64 ones of
    ``info`` when the caller shows it (``agents.base.show_info``; the published code compares
    float64), else the observation's float32 copies, whose rounding can turn a near-tie into
    a tie (a NaN observes as 1, which AL's reward does not beat unless it is 1).

    Parameters
    ----------
    reward : str
        Which signal to compare, ``"entropy"`` (the paper's default) or ``"cosine"``.
    start : str or None
        ``"paper"`` (default) or ``"authors"`` (``BALLAD_STARTS``): the published start, the
        comparison from the first round with each side's reward at its published initial
        value until the side is played. With the entropy reward the two start alike (the
        first LR reward is below 0.99); with the published cosine rule the first LR reward
        is NaN and the published code plays LR twice. ``None``: the start of the settings in
        force (``ballad_start``: ``"authors"`` under ``cosine_rule="authors"``), read from
        the environment the agent plays in (``observe_settings``, which ``run_episode`` and
        ``Lattice.replay`` call); it refuses to act before. ``make_agent("ballad-cosine")``
        is that agent.
    """

    def __init__(self, reward: str = "entropy", start: str | None = "paper") -> None:
        if reward not in SIDE_SIGNAL_NAMES:
            raise ValueError(f"unknown reward {reward!r}: use one of {SIDE_SIGNAL_NAMES}")
        if start is not None and start not in BALLAD_STARTS:
            raise ValueError(f"unknown start {start!r}: use one of {BALLAD_STARTS} or None")
        self.reward = reward
        self.start_rule = start  # None: the settings' (``observe_settings``)
        self.start: str | None = start
        self.name = "ballad" if reward == "entropy" else f"ballad-{reward}"

    def observe_settings(self, settings: Any) -> None:
        """Take the start of ``settings`` (those of the environment about to be played),
        unless the agent was built with a start of its own."""
        if self.start_rule is None:
            self.start = ballad_start(settings)

    def act(self, observation: np.ndarray) -> int:
        if self.start is None:
            raise RuntimeError(f"{self!r} starts as the environment's settings say "
                               "(cosine_rule): play it with run_episode(env, agent), or call "
                               "agent.observe_settings(env.unwrapped.settings) first")
        measured = [feature(observation, f"{side}_measured") >= 0.5 for side in ("al", "lr")]
        if self.start == "paper" and not measured[LR]:
            return LR
        if self.start == "paper" and not measured[AL]:
            return AL
        al, lr = (self.exact(observation, f"{self.reward}_{side}") if measured[index]
                  else AUTHORS_INITIAL_REWARDS[index]
                  for index, side in ((AL, "al"), (LR, "lr")))
        self.forget_info()
        return AL if al >= lr else LR

    def reset(self, seed: int | None = None) -> None:
        """Forget any info kept from an earlier episode."""
        self.forget_info()

    def __repr__(self) -> str:
        start = "" if self.start_rule == "paper" else f", start={self.start_rule!r}"
        return f"BalladAgent(reward={self.reward!r}{start})"


def ballad_start(settings: Settings) -> str:
    """BALLAD's start under ``settings`` (``BALLAD_STARTS``): ``"authors"`` with the
    published cosine rule, else ``"paper"``."""
    return "authors" if settings.cosine_rule == "authors" else "paper"


class AllInAL(RuleAgent):
    """All-in-AL: every round to Active Learning; tau is then set on the biased training labels."""

    name = "all-in-al"

    def act(self, observation: np.ndarray) -> int:
        return AL


class AllInLR(RuleAgent):
    """All-in-LR: every round to Learning to Reject; the detector never sees a training label."""

    name = "all-in-lr"

    def act(self, observation: np.ndarray) -> int:
        return LR


class RandomAgent(RuleAgent):
    """A fair coin each round, from a generator seeded by ``reset(seed)``."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def act(self, observation: np.ndarray) -> int:
        return int(self._rng.integers(2))


#: Registered names and factories (``ballad-cosine`` reads the settings of the environment it
#: plays in; ``built_for`` tells it of the builder's, for a caller's own loop).
RULE_AGENTS: dict[str, AgentFactory] = {
    "ballad": lambda env: BalladAgent("entropy"),
    "ballad-cosine": lambda env: built_for(BalladAgent("cosine", start=None), env),
    "all-in-al": lambda env: AllInAL(),
    "all-in-lr": lambda env: AllInLR(),
    "random": lambda env: RandomAgent(),
}
