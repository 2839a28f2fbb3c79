"""Hand-written allocation rules: BALLAD's greedy rule and the fixed baselines.

See ``docs/method.md``, Allocation and evaluation.
"""

from __future__ import annotations

import numpy as np

from agents.base import AL, LR, AgentFactory, ExactRewards, RuleAgent, feature
from ballad_env.rewards import SIDE_SIGNAL_NAMES


class BalladAgent(ExactRewards, RuleAgent):
    """BALLAD: LR first, then AL (the initialisation), then the side with the larger latest
    reward; ties go to AL. The rewards compared are the float64 ones of ``info`` when the
    caller shows it (``agents.base.show_info``; the published code compares float64), else
    the observation's float32 copies, whose rounding can turn a near-tie into a tie.

    Parameters
    ----------
    reward : str
        Which signal to compare, ``"entropy"`` (the paper's default) or ``"cosine"``.
    """

    def __init__(self, reward: str = "entropy") -> None:
        if reward not in SIDE_SIGNAL_NAMES:
            raise ValueError(f"unknown reward {reward!r}: use one of {SIDE_SIGNAL_NAMES}")
        self.reward = reward
        self.name = "ballad" if reward == "entropy" else f"ballad-{reward}"

    def act(self, observation: np.ndarray) -> int:
        if feature(observation, "lr_measured") < 0.5:
            return LR
        if feature(observation, "al_measured") < 0.5:
            return AL
        al = self.exact(observation, f"{self.reward}_al")
        lr = self.exact(observation, f"{self.reward}_lr")
        self.forget_info()
        return AL if al >= lr else LR

    def reset(self, seed: int | None = None) -> None:
        """Forget any info kept from an earlier episode."""
        self.forget_info()

    def __repr__(self) -> str:
        return f"BalladAgent(reward={self.reward!r})"


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


#: Registered names and factories (the environment is not needed by any of them).
RULE_AGENTS: dict[str, AgentFactory] = {
    "ballad": lambda env: BalladAgent("entropy"),
    "ballad-cosine": lambda env: BalladAgent("cosine"),
    "all-in-al": lambda env: AllInAL(),
    "all-in-lr": lambda env: AllInLR(),
    "random": lambda env: RandomAgent(),
}
