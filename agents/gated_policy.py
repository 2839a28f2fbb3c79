"""A learned policy behind the split family's safety fallback (docs/studies/ALLOCATION.md).

``GatedPolicy`` decides once, at the episode's first observation (observation v2: the
task's label-free traits and its costs), whether to leave All-in-LR, by the same evidence
``safe-split`` needs (:meth:`agents.split_allocators.SafeSplit.choose`): the lower bound of
the best split's predicted gain clears the margin, and the task's traits lie within the
distance threshold of the training tasks'. Where either fails it plays LR to the end, as
All-in-LR, the split the user already has; where both hold, the policy acts, behind
``ConfidentPolicy``'s threshold (AL only where the policy puts at least that probability
on it; 0.5 is the greedy policy). So the policy only ever plays where the split family
would have left All-in-LR too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.allocation import ConfidentPolicy
from agents.base import LR, RuleAgent, feature
from agents.split_allocators import ALL_IN_LR, SafeSplit


class GatedPolicy(RuleAgent):
    """``policy`` (``action_probabilities(observation)``, as ``PolicyAgent``) where
    ``gate`` leaves All-in-LR, All-in-LR elsewhere (the module docstring)."""

    name = "gated-policy"
    observation_version = "v2"

    def __init__(self, gate: SafeSplit, policy: Any, threshold: float = 0.5) -> None:
        self.gate = gate
        self.inner = ConfidentPolicy(policy, threshold)
        self.leaves: bool | None = None

    def reset(self, seed: int | None = None) -> None:
        """Forget the episode's decision."""
        self.leaves = None
        self.inner.reset(seed)

    def act(self, observation: np.ndarray) -> int:
        if self.leaves is None or feature(observation, "budget_used") == 0.0:
            self.leaves = self.gate.choose(observation)[0] != ALL_IN_LR
        return self.inner.act(observation) if self.leaves else LR

    def __repr__(self) -> str:
        return f"GatedPolicy(gate={self.gate!r}, inner={self.inner!r})"


__all__ = ["GatedPolicy"]
