"""PPO's minibatch step as one function: the forward pass, SB3's loss, the backward pass by
hand, gradient-norm clipping and Adam, over one flat vector of the policy's parameters.

The batched trainer's step (``core``) runs SB3's ``MlpPolicy`` under autograd and
torch's fused Adam: dozens of small kernels a minibatch, each with its dispatch, autograd
bookkeeping and Python around it, so it runs well below the speed of the matrix products
it holds (``docs/training.md``, "Speed", gives the figures with their machine). Here the
step is plain tensor arithmetic written out once (:func:`ppo_step`):

* the two tanh MLPs and their heads as ``addmm`` calls on views of one flat parameter
  vector (:class:`FlatLayout`);
* the gradient of SB3's PPO loss with respect to the logits and the value in closed form
  (the clipped surrogate's, the entropy bonus's and the squared error's), then the chain
  rule through the layers, so no autograd graph is built;
* the gradient's norm clipped and Adam (torch's formula, eps 1e-5) on the flat vector.

It mutates the flat parameters and the Adam moments in place and returns the step's
statistics. :meth:`FlatUpdate.warm` loads it compiled ahead of time by AOTInductor from
the user's cache folder (``step_cache``: built there the first time on a machine), with its
elementwise work fused into a few loops around the matrix products; where compiling is
unavailable or switched off (``BALLAD_NO_COMPILE=1``, the test suite's setting) the same
function runs eagerly, still without autograd. Both give SB3's step to float32 rounding
(``tests/test_fused_training.py`` holds the gradient, the step and the Adam state against
the autograd path).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agents.ppo.core import (
    Hyperparameters,
    Layer,
    Rollout,
    gae,
    network,
    over_minibatches,
    ppo_update,
    tanh_mlps,
)
from agents.ppo.step_cache import Announce, load_step, once, warn_eager

#: Set to ``1`` to run the step eagerly instead of compiling it (tests, machines without a
#: C++ compiler); the run's JSON records which ran.
NO_COMPILE_ENV = "BALLAD_NO_COMPILE"
#: Adam's moment decays and epsilon (SB3's PPO: torch's defaults, eps 1e-5).
BETAS, ADAM_EPS = (0.9, 0.999), 1e-5
Step = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class FlatLayout:
    """Where each parameter of an SB3 ``MlpPolicy`` (separate actor and critic MLPs of tanh
    layers, a linear action head and value head) lies in one flat vector, in the order of
    ``policy.parameters()`` (so the flat vector is ``parameters_to_vector`` of them)."""

    #: The parameters' names (not part of the layout's identity: a compiled step's key and
    #: a comparison see the shapes only, so SB3's policy and :meth:`mlp_pair` agree).
    names: tuple[str, ...] = field(compare=False, repr=False)
    shapes: tuple[tuple[int, ...], ...]
    depth: int

    @classmethod
    def of(cls, policy: Any) -> FlatLayout:
        """The layout of ``policy``; a policy this step cannot run (another activation:
        :func:`~agents.ppo.core.tanh_mlps`; a shared network, a feature extractor with
        weights) is refused by name."""
        actor, _ = tanh_mlps(policy)
        named = list(policy.named_parameters())
        depth = sum(isinstance(layer, torch.nn.Linear) for layer in actor)
        expected = 4 * depth + 4
        if len(named) != expected or not named[-1][0].startswith("value_net"):
            raise ValueError(f"the flat PPO step expects actor, critic, action head and value "
                             f"head ({expected} tensors); this policy has "
                             f"{[n for n, _ in named]}: use --trainer batched")
        return cls(tuple(n for n, _ in named), tuple(tuple(p.shape) for _, p in named), depth)

    @classmethod
    def mlp_pair(cls, n_features: int, net_arch: tuple[int, ...], n_actions: int = 2
                 ) -> FlatLayout:
        """The layout of SB3's ``MlpPolicy`` of these sizes, without building one."""
        shapes: list[tuple[int, ...]] = []
        for _ in range(2):
            widths = (n_features, *net_arch)
            for n_in, n_out in zip(widths, widths[1:], strict=False):
                shapes += [(n_out, n_in), (n_out,)]
        shapes += [(n_actions, net_arch[-1]), (n_actions,), (1, net_arch[-1]), (1,)]
        return cls(tuple(f"p{k}" for k in range(len(shapes))), tuple(shapes), len(net_arch))

    @property
    def sizes(self) -> list[int]:
        return [math.prod(shape) for shape in self.shapes]

    @property
    def numel(self) -> int:
        return sum(self.sizes)

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """The parameters as views of ``flat`` (writes to one are writes to the other)."""
        out, offset = [], 0
        for size, shape in zip(self.sizes, self.shapes, strict=True):
            out.append(flat[offset:offset + size].view(shape))
            offset += size
        return out

    def split(self, flat: torch.Tensor) -> tuple[list[Layer], list[Layer], Layer, Layer]:
        """(actor layers, critic layers, action head, value head), each layer (W, b)."""
        v = self.views(flat)
        pairs = [(v[i], v[i + 1]) for i in range(0, len(v), 2)]
        d = self.depth
        return pairs[:d], pairs[d:2 * d], pairs[2 * d], pairs[2 * d + 1]

    def forward_flops(self, rows: int) -> int:
        """Multiply-adds x 2 of the matrix products of a forward pass at ``rows`` rows."""
        return 2 * rows * sum(o * i for o, i in (s for s in self.shapes if len(s) == 2))

    def flops(self, rows: int) -> int:
        """Multiply-adds x 2 of one :func:`ppo_step` at ``rows`` rows: the forward pass's
        matrix products, and in the backward pass the weight gradients of every layer and
        the input gradients of all but the first (the observations need none)."""
        weights = [s for s in self.shapes if len(s) == 2]
        first = sum(o * i for o, i in (weights[0], weights[self.depth]))
        return 3 * self.forward_flops(rows) - 2 * rows * first

    def flops_per_sample(self, n_epochs: int) -> int:
        """The matrix products' FLOP PPO spends on one environment step: its forward pass
        in the rollout and ``n_epochs`` minibatch steps' worth of rows (SB3's or these
        trainers', at any minibatch size)."""
        return self.forward_flops(1) + n_epochs * self.flops(1)


def outputs(layout: FlatLayout, flat: torch.Tensor, obs: torch.Tensor,
            masks: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits (masked actions at ``HUGE_NEG``) and values of the policy whose parameters
    are ``flat`` (``core.network`` on its views)."""
    return network(*layout.split(flat), obs, masks)[2:]


def _backward(layers: Sequence[Layer], outs: Sequence[torch.Tensor], grad: torch.Tensor,
              head: torch.Tensor) -> list[torch.Tensor]:
    """The (W, b) gradients of one MLP, first layer first, from ``grad`` (the loss's
    gradient at the head's output) and ``head`` (the head's weight)."""
    grads: list[torch.Tensor] = []
    upstream = grad @ head
    for i in reversed(range(len(layers))):
        y = outs[i + 1]
        local = upstream * (1 - y * y)
        grads[:0] = [local.t() @ outs[i], local.sum(0)]
        if i:
            upstream = local @ layers[i][0]
    return grads


def pack(obs: torch.Tensor, masks: torch.Tensor, actions: torch.Tensor,
         old_logp: torch.Tensor, advantages: torch.Tensor, targets: torch.Tensor
         ) -> torch.Tensor:
    """A rollout's rows as one float table (observations, the two mask bits, the action,
    its old log probability, advantage, value target), so an epoch's shuffle is one gather
    and a minibatch a slice of it."""
    columns = (masks.to(obs.dtype), actions.to(obs.dtype)[:, None], old_logp[:, None],
               advantages[:, None], targets[:, None])
    return torch.cat([obs, *columns], dim=1)


def unpack(batch: torch.Tensor, n_features: int) -> tuple[torch.Tensor, ...]:
    """:func:`pack`'s columns again: (obs, masks, actions, old log p, advantages, targets)."""
    f = n_features
    return (batch[:, :f], batch[:, f:f + 2] > 0.5, batch[:, f + 2].long(), batch[:, f + 3],
            batch[:, f + 4], batch[:, f + 5])


def ppo_step(layout: FlatLayout, hp: Hyperparameters, masked: bool, state: torch.Tensor,
             step: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    """One gradient step of SB3's PPO loss (MaskablePPO's with ``masked``) on a minibatch
    (:func:`pack`'s rows): ``state`` (the flat parameters and Adam's two moments, (3, P))
    and Adam's step count (a 0-d tensor) are updated in place; the step's (policy loss,
    value loss, entropy, approximate KL, clipped fraction: ``STATS``) returned."""
    grad, stats = gradient(layout, hp, masked, state[0], batch)
    clip_and_adam(grad, state, step, hp)
    return stats


def gradient(layout: FlatLayout, hp: Hyperparameters, masked: bool, flat: torch.Tensor,
             batch: torch.Tensor, whole: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient of SB3's PPO loss on a minibatch with respect to the flat parameters
    ``flat``, by hand (what ``loss.backward()`` would give, without autograd), and the
    minibatch's ``STATS``. With ``whole`` (:func:`whole_minibatch` of a larger minibatch
    that ``batch`` is part of) both are this part's share of that minibatch's: the parts'
    sums are the whole's gradient and statistics."""
    obs, *columns = unpack(batch, layout.shapes[0][1])
    actor, critic, (wa, _), (wv, _) = layers = layout.split(flat)
    hidden_pi, hidden_vf, logits, values = network(*layers, obs, columns[0] if masked else None)
    d_logits, d_values, stats = loss_gradient(hp, masked, logits, values, columns, whole)
    grads = [*_backward(actor, hidden_pi, d_logits, wa),
             *_backward(critic, hidden_vf, d_values[:, None], wv),
             d_logits.t() @ hidden_pi[-1], d_logits.sum(0),
             d_values[None, :] @ hidden_vf[-1], d_values.sum(0, keepdim=True)]
    return torch.cat([g.reshape(-1) for g in grads]), stats


def whole_minibatch(hp: Hyperparameters, advantages: torch.Tensor) -> torch.Tensor:
    """What a part of a minibatch needs of the whole for its share of the loss's gradient:
    (the whole's rows, the mean and the standard deviation + 1e-8 its advantages are
    normalised by; 0 and 1 where they are not: ``normalize_advantage`` off, or one row)."""
    rows = advantages.shape[0]
    if hp.normalize_advantage and rows > 1:
        return torch.stack([advantages.new_tensor(float(rows)), advantages.mean(),
                            advantages.std() + 1e-8])
    return advantages.new_tensor([float(rows), 0.0, 1.0])


def loss_gradient(hp: Hyperparameters, masked: bool, logits: torch.Tensor,
                  values: torch.Tensor, columns: Sequence[torch.Tensor],
                  whole: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SB3's PPO loss's gradient with respect to the logits and the values of a minibatch
    (``columns``: :func:`unpack`'s after the observations), and its ``STATS``; with
    ``whole`` (:func:`whole_minibatch`), this part's share of a larger minibatch's."""
    masks, actions, old_logp, advantages, targets = columns
    if whole is None:
        whole = whole_minibatch(hp, advantages)
    rows = whole[0]
    log_probs = torch.log_softmax(logits, dim=1)
    probs = log_probs.exp()
    chosen = torch.nn.functional.one_hot(actions, logits.shape[1]).to(logits.dtype)
    logp = (log_probs * chosen).sum(1)
    entropy = -(probs * log_probs).sum(1)
    advantages = (advantages - whole[1]) / whole[2]
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    surrogate = advantages * ratio
    clipped = advantages * torch.clamp(ratio, 1 - hp.clip_range, 1 + hp.clip_range)
    policy_loss = -torch.minimum(surrogate, clipped).sum() / rows
    value_loss = (targets - values).pow(2).sum() / rows
    # d loss / d logits: the surrogate's through log p(a) (where the unclipped term is the
    # smaller: torch.min's gradient, split evenly on ties, sums to the same), then the
    # entropy bonus's, d(-H)/dz_j = p_j (log p_j + H); masked logits get none.
    d_logp = torch.where(surrogate <= clipped, -surrogate, 0.0) / rows
    d_logits = d_logp[:, None] * (chosen - probs) + (hp.ent_coef / rows) * probs * (
        log_probs + entropy[:, None])
    if masked:
        d_logits = torch.where(masks, d_logits, 0.0)
    d_values = (2 * hp.vf_coef / rows) * (values - targets)
    approx_kl = ((ratio - 1) - log_ratio).sum() / rows
    clip_fraction = ((ratio - 1).abs() > hp.clip_range).to(ratio.dtype).sum() / rows
    return d_logits, d_values, torch.stack([policy_loss, value_loss, entropy.sum() / rows,
                                            approx_kl, clip_fraction])


def clip_and_adam(grad: torch.Tensor, state: torch.Tensor, step: torch.Tensor,
                   hp: Hyperparameters) -> None:
    """``clip_grad_norm_`` then ``torch.optim.Adam``'s update of ``state`` (parameters,
    first and second moments) in place."""
    flat, exp_avg, exp_avg_sq = state[0], state[1], state[2]
    coef = torch.clamp(hp.max_grad_norm / (grad.norm() + 1e-6), max=1.0)
    grad = grad * coef
    step.add_(1)
    beta1, beta2 = BETAS
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    correction1 = 1 - torch.pow(beta1, step)
    correction2 = 1 - torch.pow(beta2, step)
    # The step size and the second correction's root as one tensor: compiled, inductor
    # then computes them once; as two loose scalars it inlined both powers into the loop
    # over every parameter, ten times the loop's cost (docs/training.md, "The second core
    # on the update"). The arithmetic is the same.
    scale = torch.stack([hp.learning_rate / correction1, correction2.sqrt()])
    denom = exp_avg_sq.sqrt() / scale[1] + ADAM_EPS
    flat.sub_(scale[0] * exp_avg / denom)


def compile_wanted() -> bool:
    """Whether to compile: not when ``$BALLAD_NO_COMPILE`` is set to a true value (1, true,
    yes, on); unset, blank or a false one (0, false, no, off) compiles. Any other value is
    an ``EnvVarError`` naming the variable, not a guess."""
    from ballad_env.files import EnvVarError

    text = os.environ.get(NO_COMPILE_ENV, "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return True
    if text in ("1", "true", "yes", "on"):
        return False
    raise EnvVarError(f"${NO_COMPILE_ENV} is {text!r}: give 1 (do not compile the batched "
                      "trainer's step) or 0 (compile it), or unset it")


class FlatUpdate:
    """``core.ppo_update`` with :func:`ppo_step`: the policy's parameters become
    views of one flat vector (so the rollouts' forward passes through the SB3 policy read
    the updated weights with no copy), Adam's moments are flat vectors beside it, and
    each minibatch is one call of the (compiled) step. The minibatches are drawn as
    ``ppo_update``'s (``core.over_minibatches``: a permutation per epoch from the run's
    generator)."""

    def __init__(self, policy: Any, hp: Hyperparameters, masked: bool,
                 compile: bool = True) -> None:
        self.policy, self.hp, self.masked = policy, hp, masked
        self.layout = FlatLayout.of(policy)
        params = list(policy.parameters())
        flat = torch.nn.utils.parameters_to_vector(params).detach()
        self.state = torch.stack([flat, torch.zeros_like(flat), torch.zeros_like(flat)])
        for param, view in zip(params, self.layout.views(self.state[0]), strict=True):
            param.data = view
        self.step = torch.zeros((), device=flat.device)
        self.eager = functools.partial(ppo_step, self.layout, hp, masked)
        #: The compiled step by minibatch rows (filled by :meth:`warm`).
        self.compiled_steps: dict[int, Step] = {}
        self.compile = compile and compile_wanted()
        #: Whether the step runs compiled, and whether :meth:`warm` built it (the first run
        #: on this machine) rather than loading it.
        self.compiled = self.built = False

    def _step(self, state: torch.Tensor, step: torch.Tensor, batch: torch.Tensor
              ) -> torch.Tensor:
        """One minibatch step: the compiled one for its rows where :meth:`warm` loaded it."""
        return self.compiled_steps.get(batch.shape[0], self.eager)(state, step, batch)

    def update(self, buf: Rollout, advantages: torch.Tensor, targets: torch.Tensor,
               gen: torch.Generator) -> dict[str, float]:
        """``n_epochs`` passes over the rollout; the mean statistics over the minibatches."""
        flat = buf.n_steps * buf.n_envs
        table = pack(buf.obs.reshape(flat, -1), buf.masks.reshape(flat, 2),
                     buf.actions.reshape(flat), buf.logp.reshape(flat),
                     advantages.reshape(flat), targets.reshape(flat))
        return over_minibatches(flat, self.hp, gen,
                                lambda idx: self._step(self.state, self.step, table[idx]))

    def warm(self, buf: Rollout, announce: Announce | None = None) -> float:
        """Load the compiled step for each minibatch shape of ``buf``'s rollouts from the
        user's cache (``step_cache``; built there the first time, after one ``announce()``
        for them all), so it happens before a run's clock; its seconds. Where building or
        loading fails the step runs eagerly, with a warning."""
        if not self.compile:
            return 0.0
        flat = buf.n_steps * buf.n_envs
        sizes = {min(self.hp.batch_size, flat), flat % self.hp.batch_size} - {0}
        start = time.perf_counter()
        announce_once = once(announce)
        try:
            for rows in sorted(sizes):
                example = (self.state.clone(), self.step.clone(),
                           torch.zeros(rows, buf.obs.shape[-1] + 6, device=self.state.device))
                self.compiled_steps[rows], built = load_step(self.eager, example, announce_once)
                self.built = self.built or built
        except Exception as err:  # noqa: BLE001 - export's and inductor's errors share no base
            warn_eager("the PPO step", err)
            self.compiled_steps.clear()
        self.compiled = bool(self.compiled_steps)
        return time.perf_counter() - start

    def weights(self) -> torch.Tensor:
        """The flat parameters (a view: copy it to keep it)."""
        return self.state[0]

    def sync(self) -> None:
        """Give SB3's Adam the moments and step count (copies), so ``model.save`` writes
        what SB3's training would have (a checkpoint's parameters are still views)."""
        moments = zip(self.layout.views(self.state[1]), self.layout.views(self.state[2]),
                      strict=True)
        optimizer = self.policy.optimizer
        for param, (avg, avg_sq) in zip(self.policy.parameters(), moments, strict=True):
            optimizer.state[param] = {"step": self.step.clone(), "exp_avg": avg.clone(),
                                      "exp_avg_sq": avg_sq.clone()}

    def finish(self) -> None:
        """:meth:`sync`, and give the policy its own parameter tensors again."""
        self.sync()
        for param in self.policy.parameters():
            param.data = param.data.clone()


class AutogradUpdate:
    """``core.ppo_update`` on the SB3 policy and its own optimizer (the batched trainer's
    update), behind the interface of :class:`FlatUpdate` (``warm``, ``update``,
    ``finish``) so one training loop runs either."""

    compiled = False

    def __init__(self, policy: Any, hp: Hyperparameters, masked: bool) -> None:
        self.policy, self.hp, self.masked = policy, hp, masked
        self.layout = FlatLayout.of(policy)  # what a rollout worker's forward pass reads

    def warm(self, buf: Rollout, announce: Announce | None = None) -> float:
        """Nothing to prepare (nothing compiles, so nothing to announce): 0 seconds."""
        return 0.0

    def update(self, buf: Rollout, advantages: torch.Tensor, targets: torch.Tensor,
               gen: torch.Generator) -> dict[str, float]:
        return ppo_update(self.policy, buf, advantages, targets, self.hp, self.masked, gen)

    def weights(self) -> torch.Tensor:
        """The policy's parameters as one flat vector (a copy)."""
        return torch.nn.utils.parameters_to_vector(self.policy.parameters()).detach()

    def sync(self) -> None:
        """The policy and its optimizer always hold everything ``save`` writes."""

    def finish(self) -> None:
        """As :meth:`sync`: nothing to do."""



def update_on(updater: FlatUpdate | AutogradUpdate, buf: Rollout, last_values: torch.Tensor,
              gen: torch.Generator, timer: dict[str, float]) -> dict[str, float]:
    """One update on a finished rollout, the same in the sequential and the overlapped loop:
    GAE from its values and ``last_values`` (those of the observations after it), then
    ``updater.update``, its seconds added to ``timer["update"]``; the update's statistics."""
    advantages, targets = gae(buf, last_values, updater.hp.gae_lambda)
    tick = time.perf_counter()
    stats = updater.update(buf, advantages, targets, gen)
    timer["update"] += time.perf_counter() - tick
    return stats


__all__ = ["ADAM_EPS", "BETAS", "NO_COMPILE_ENV", "AutogradUpdate", "FlatLayout",
           "FlatUpdate", "clip_and_adam", "compile_wanted", "gradient", "loss_gradient",
           "outputs", "pack", "ppo_step", "unpack", "update_on", "whole_minibatch"]
