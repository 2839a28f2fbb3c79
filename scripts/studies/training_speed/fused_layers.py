"""The PPO step with the actor's and the critic's first layers as one product, for the
``update-step`` study to time against the trainer's step (``updates.ppo_step``).

The observations go through one ``addmm`` against the two first weights stacked (one
wider product and one tanh pass instead of two), the backward pass takes both first
layers' gradients as one product too; the rest is the trainer's step (its loss gradient,
clipping and Adam). The hidden layers after the first stay two products: one
block-diagonal product of twice the width does twice the arithmetic, half of it on
zeros. It gives the trainer's gradient to float32 rounding; the trainer keeps two passes
because this one measured no faster (``docs/training.md``, "Speed").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agents.experiments.training.config import Hyperparameters
from agents.ppo import core, updates


def fused_step(layout: updates.FlatLayout, hp: Hyperparameters, masked: bool,
               state: torch.Tensor, step: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    """``updates.ppo_step`` with :func:`fused_gradient`; the step's ``STATS``."""
    grad, stats = fused_gradient(layout, hp, masked, state[0], batch)
    updates.clip_and_adam(grad, state, step, hp)
    return stats


def fused_gradient(layout: updates.FlatLayout, hp: Hyperparameters, masked: bool,
                   flat: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``updates.gradient`` with the two first layers as one product, forward and back."""
    obs, *columns = updates.unpack(batch, layout.shapes[0][1])
    actor, critic, (wa, ba), (wv, bv) = layout.split(flat)
    width = actor[0][0].shape[0]
    first = core.tanh(torch.addmm(torch.cat([actor[0][1], critic[0][1]]), obs,
                                 torch.cat([actor[0][0], critic[0][0]]).t()))
    hidden_pi = [obs, *core.mlp(actor[1:], first[:, :width])]
    hidden_vf = [obs, *core.mlp(critic[1:], first[:, width:])]
    logits = torch.addmm(ba, hidden_pi[-1], wa.t())
    if masked:
        logits = torch.where(columns[0], logits, core.HUGE_NEG)
    values = torch.addmm(bv, hidden_vf[-1], wv.t())[:, 0]
    d_logits, d_values, stats = updates.loss_gradient(hp, masked, logits, values, columns)
    rest_pi, up_pi = _after_first(actor, hidden_pi, d_logits @ wa)
    rest_vf, up_vf = _after_first(critic, hidden_vf, d_values[:, None] @ wv)
    local = torch.cat([up_pi * (1 - hidden_pi[1] ** 2), up_vf * (1 - hidden_vf[1] ** 2)], 1)
    weight, bias = local.t() @ obs, local.sum(0)
    grads = [weight[:width], bias[:width], *rest_pi, weight[width:], bias[width:], *rest_vf,
             d_logits.t() @ hidden_pi[-1], d_logits.sum(0),
             d_values[None, :] @ hidden_vf[-1], d_values.sum(0, keepdim=True)]
    return torch.cat([g.reshape(-1) for g in grads]), stats


def _after_first(layers: Sequence[core.Layer], outs: Sequence[torch.Tensor],
                 upstream: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The (W, b) gradients of the layers after the first, from the loss's gradient at the
    last layer's output; and the loss's gradient at the first layer's output."""
    grads: list[torch.Tensor] = []
    for i in reversed(range(1, len(layers))):
        y = outs[i + 1]
        local = upstream * (1 - y * y)
        grads[:0] = [local.t() @ outs[i], local.sum(0)]
        upstream = local @ layers[i][0]
    return grads, upstream
