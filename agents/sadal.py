"""SADAL's allocation rule: the side whose discounted reward sum is larger (``docs/sadal.md``).

Stradiotti, Perini and Davis (ECAI 2024) score each side by the sum of its rewards, each
weighted by ``discount ** age`` (age in that side's own rounds, the latest 0; discount 0.5),
where each side's history starts with a pseudo-reward: 0.99 for AL and 1 for LR. AL is
taken iff its sum is strictly larger, so the first round goes to LR, and the second to AL
unless LR's first reward is at least 0.49.

How it differs from the ``discounted`` agent (``agents.bandits.DiscountedGreedy``), which
sums the same way: ``discounted`` forces LR then AL in its first two rounds and has no
pseudo-rewards, and takes AL on ties; ``sadal`` starts from the pseudo-rewards (which weigh
on later choices, halved every round of their side), forces nothing, and takes LR on ties.
The rewards it reads are the side rewards (``entropy``: BALLAD's one-term entropy change),
at float64 from ``info`` when the caller shows it (``agents.base.show_info``);
SADAL's own signals (the binary entropy of the anomaly and two-sided rejection
probabilities, ``ballad_env.rejection.two_sided.entropy_change``) reach it once the two-sided
rejector is part of the environment.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.bandits import HistoryAgent
from agents.base import AL, LR, AgentFactory, ExactRewards

#: SADAL's pseudo-rewards before any round: (AL, LR).
INITIAL_REWARDS = (0.99, 1.0)


def discounted_sum(rewards: Sequence[float], discount: float) -> float:
    """sum_k discount^(n - 1 - k) r_k: the latest reward weighs 1, the one before ``discount``."""
    total = 0.0
    for value in rewards:
        total = discount * total + value
    return total


def sadal_choice(al_rewards: Sequence[float], lr_rewards: Sequence[float],
                 discount: float = 0.5, initial: tuple[float, float] = INITIAL_REWARDS) -> int:
    """AL iff AL's discounted sum (its pseudo-reward first) is strictly larger than LR's."""
    al = discounted_sum([initial[0], *al_rewards], discount)
    lr = discounted_sum([initial[1], *lr_rewards], discount)
    return AL if al > lr else LR


class SadalAgent(ExactRewards, HistoryAgent):
    """SADAL's rule on the side rewards (``reward``: ``"entropy"`` or ``"cosine"``): the
    float64 ones of ``info`` when the caller shows it (``agents.base.show_info``; the
    published code sums float64), else the observation's float32 copies."""

    name = "sadal"

    def __init__(self, discount: float = 0.5, initial: tuple[float, float] = INITIAL_REWARDS,
                 reward: str = "entropy") -> None:
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must lie in [0, 1], got {discount}")
        self.discount, self.initial = discount, initial
        super().__init__(reward)

    def act(self, observation: np.ndarray) -> int:
        self.observe(observation)
        self.forget_info()
        return sadal_choice(self.history[AL], self.history[LR], self.discount, self.initial)

    def reward_of(self, observation: np.ndarray, name: str) -> float:
        """The previous round's reward of side ``name``, at float64 from the info."""
        return self.exact(observation, f"{self.reward}_{name}")

    def reset(self, seed: int | None = None) -> None:
        """Forget the reward histories and any info kept."""
        self.forget_info()
        super().reset(seed)

    def __repr__(self) -> str:
        return (f"SadalAgent(discount={self.discount}, initial={self.initial}, "
                f"reward={self.reward!r})")


#: Registered names and factories (``agents.registry`` registers the table).
SADAL_AGENTS: dict[str, AgentFactory] = {"sadal": lambda env: SadalAgent()}

__all__ = ["INITIAL_REWARDS", "SADAL_AGENTS", "SadalAgent", "discounted_sum", "sadal_choice"]
