"""The split schedule's minibatch step (``agents.ppo.split_step``) for the ``update-step``
study to time against the trainer's whole step.

Two variants, both with the half and apply steps loaded as the trainer loads them (the
ahead-of-time packages of ``step_cache``): both halves one after the other in one process
then the apply step (the whole minibatch's step to float32 rounding, so its weights agree
with the others'), and one process's share of a split step (its half, then the apply step
on its half and a stand-in for the other's): what each of the two processes computes per
minibatch, without the swap. Its weights follow another path (half a gradient), so its
agreement column measures nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from agents.experiments.training.config import Hyperparameters
from agents.experiments.training.progress import announce_compile
from agents.ppo import updates
from agents.ppo.split_step import HalfSteps, halves

Step = Callable[[torch.Tensor], torch.Tensor]


def split_variants(layout: updates.FlatLayout, hp: Hyperparameters, weights: torch.Tensor
                   ) -> dict[str, tuple[Step, torch.Tensor]]:
    """The two split variants by name, each on its own copy of ``weights``."""
    return {"split, both halves then apply, AOT packages": split_step(layout, hp, weights,
                                                                       both=True),
            "split, one process's half + apply, AOT packages": split_step(layout, hp, weights,
                                                                           both=False)}


def split_step(layout: updates.FlatLayout, hp: Hyperparameters, weights: torch.Tensor,
               both: bool) -> tuple[Step, torch.Tensor]:
    """A step computing both halves (``both``) or the first half only, then the apply
    step, on its own state; the step and its weights."""
    state = torch.stack([weights.clone(), torch.zeros_like(weights), torch.zeros_like(weights)])
    count = torch.zeros(())
    steps = HalfSteps(layout, hp, False)
    first, second = halves(hp.batch_size)
    steps.warm({(first, hp.batch_size), (second, hp.batch_size)}, layout.shapes[0][1],
               announce_compile)

    def step(batch: torch.Tensor) -> torch.Tensor:
        mine = steps.half(state[0], batch[:first], batch[:, -2])
        other = steps.half(state[0], batch[first:], batch[:, -2]) if both else mine
        return steps.apply(state, count, torch.stack([mine, other]))

    return step, state[0]


__all__ = ["split_step", "split_variants"]
