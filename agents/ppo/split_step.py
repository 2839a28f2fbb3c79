"""PPO's minibatch step cut in two for two processes: each computes the gradient on its half
of the minibatch's rows, and both apply the sum.

The loss of a minibatch is a mean over its rows, with the advantages normalised by their
mean and standard deviation over the minibatch. Given the whole minibatch's advantages
(each process reads them alike from the shared rollout; :func:`updates.whole_minibatch`
takes their row count, mean and standard deviation inside the compiled step), a half's
gradient with every row's term divided by the whole's row count is that half's share of
the whole's gradient: the two halves' gradients (and statistics)
add up to the whole minibatch's, to float32 rounding (``updates.gradient`` with
``whole``). :func:`half_gradient` returns a half's share as one vector (the gradient, then
the ``STATS``), and :func:`apply_halves` adds the two vectors, always in the same order
(the first half's plus the second's), clips the sum's norm and takes Adam's step on the
flat parameters: two processes that start from the same state and apply the same two
vectors hold bit-identical states afterwards, with no weights sent between them.

:class:`HalfSteps` loads both compiled ahead of time through ``step_cache`` (built once per
machine, as the whole step is) or runs them eagerly.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable

import torch

from agents.ppo.core import Hyperparameters
from agents.ppo.step_cache import Announce, load_step, once, warn_eager
from agents.ppo.updates import (
    FlatLayout,
    Step,
    clip_and_adam,
    compile_wanted,
    gradient,
    whole_minibatch,
)


def halves(rows: int) -> tuple[int, int]:
    """The rows of a minibatch's first and second half (the first takes the odd row)."""
    first = (rows + 1) // 2
    return first, rows - first


def half_gradient(layout: FlatLayout, hp: Hyperparameters, masked: bool, flat: torch.Tensor,
                  batch: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """The share of ``batch`` (``updates.pack``'s rows, part of a minibatch whose
    advantages are ``advantages``) in that minibatch's loss gradient with respect to
    ``flat``, then its share of the ``STATS``, as one vector."""
    whole = whole_minibatch(hp, advantages)
    grad, stats = gradient(layout, hp, masked, flat, batch, whole)
    return torch.cat([grad, stats])


def apply_halves(hp: Hyperparameters, state: torch.Tensor, step: torch.Tensor,
                 parts: torch.Tensor) -> torch.Tensor:
    """Add the two halves' vectors (``parts``, (2, P + 5): the first half's, then the
    second's), clip the gradient's norm and take Adam's step on ``state`` ((3, P):
    parameters and moments) and its step count in place; the minibatch's ``STATS``."""
    total = parts[0] + parts[1]
    n_params = state.shape[1]
    clip_and_adam(total[:n_params], state, step, hp)
    return total[n_params:]


class HalfSteps:
    """:func:`half_gradient` and :func:`apply_halves` for one run's sizes, each compiled
    ahead of time (``step_cache``) where :meth:`warm` could load or build it, else eager."""

    def __init__(self, layout: FlatLayout, hp: Hyperparameters, masked: bool,
                 compile: bool = True) -> None:
        self.layout, self.hp = layout, hp
        self.half_eager = functools.partial(half_gradient, layout, hp, masked)
        self.apply_eager = functools.partial(apply_halves, hp)
        #: The compiled half step by (its rows, the whole minibatch's rows), and the
        #: compiled apply step (:meth:`warm`).
        self.half_compiled: dict[tuple[int, int], Step] = {}
        self.apply_compiled: Step | None = None
        self.compile = compile and compile_wanted()
        self.compiled = self.built = False

    def half(self, flat: torch.Tensor, batch: torch.Tensor, advantages: torch.Tensor
             ) -> torch.Tensor:
        """:func:`half_gradient` on ``batch``: compiled for its shapes where loaded (a
        package reads its inputs as laid out when it was built, so a strided view, such as
        a table's column, is copied first; a contiguous tensor is passed as it is)."""
        step = self.half_compiled.get((batch.shape[0], advantages.shape[0]), self.half_eager)
        return step(flat, batch.contiguous(), advantages.contiguous())

    def apply(self, state: torch.Tensor, step: torch.Tensor, parts: torch.Tensor
              ) -> torch.Tensor:
        """:func:`apply_halves`: compiled where loaded."""
        return (self.apply_compiled or self.apply_eager)(state, step, parts)

    def warm(self, half_rows: Iterable[tuple[int, int]], n_features: int,
             announce: Announce | None = None) -> float:
        """Load (or build, after ``announce()``) the half step for each of ``half_rows``
        ((a half's rows, its minibatch's rows); an empty half runs eagerly) and the apply
        step; its seconds. Where that fails both run eagerly, with a warning."""
        if not self.compile:
            return 0.0
        start = time.perf_counter()
        announce_once = once(announce)
        state = torch.zeros(3, self.layout.numel)
        try:
            for rows, whole in sorted(shape for shape in set(half_rows) if shape[0]):
                example = (state[0].clone(), torch.zeros(rows, n_features + 6),
                           torch.zeros(whole))
                self.half_compiled[rows, whole], built = load_step(self.half_eager, example,
                                                                    announce_once)
                self.built = self.built or built
            parts = torch.zeros(2, self.layout.numel + 5)
            self.apply_compiled, built = load_step(self.apply_eager,
                                                   (state, torch.zeros(()), parts),
                                                   announce_once)
            self.built = self.built or built
        except Exception as err:  # noqa: BLE001 - export's and inductor's errors share no base
            warn_eager("the split PPO step", err)
            self.half_compiled.clear()
            self.apply_compiled = None
        self.compiled = self.apply_compiled is not None
        return time.perf_counter() - start


__all__ = ["HalfSteps", "apply_halves", "half_gradient", "halves"]
