"""PPO's pieces over whole batches of environments: the (T, N) rollout tensors, generalised
advantage estimation and the clipped-surrogate update.

The loss is stable-baselines3's PPO loss term for term (``PPO.train``): the clipped
surrogate on advantages normalised per minibatch, the entropy bonus, the unclipped value
loss, the gradient norm clipped; with action masks, sb3-contrib's MaskablePPO (logits of
masked actions set to -1e8, so they get probability 0 and add nothing to the entropy).
What differs is only the shape of the work: every tensor is (T, N) or (T x N, ...), so a
rollout step is one forward pass of all N environments and an update a few minibatches of
thousands of rows. :mod:`agents.experiments.training.torch_trainer` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from torch.nn import functional

#: The logit a masked action gets (sb3-contrib's ``MaskableCategorical``).
HUGE_NEG = -1e8
#: The statistics of a PPO update, in the order a minibatch step returns them.
STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")

#: One layer's (weight, bias).
Layer = tuple[torch.Tensor, torch.Tensor]


class Hyperparameters(Protocol):
    """The hyperparameters PPO's steps read, by SB3's names and meanings. The training
    configuration's block (``agents.experiments.training.config.Hyperparameters``) is one;
    the algorithm names what it reads here so that it imports nothing of the harness."""

    @property
    def n_epochs(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def gae_lambda(self) -> float: ...
    @property
    def clip_range(self) -> float: ...
    @property
    def ent_coef(self) -> float: ...
    @property
    def vf_coef(self) -> float: ...
    @property
    def max_grad_norm(self) -> float: ...
    @property
    def normalize_advantage(self) -> bool: ...


class Rollout:
    """Preallocated (T, N) tensors of one rollout: observations, masks, actions, their log
    probabilities, values, rewards and episode ends (1 where the step ended an episode)."""

    def __init__(self, n_steps: int, n_envs: int, n_features: int, gamma: float,
                 device: str | torch.device) -> None:
        self.n_steps, self.n_envs, self.gamma = n_steps, n_envs, gamma
        shape = (n_steps, n_envs)
        self.obs = torch.zeros((*shape, n_features), dtype=torch.float32, device=device)
        self.masks = torch.ones((*shape, 2), dtype=torch.bool, device=device)
        self.actions = torch.zeros(shape, dtype=torch.long, device=device)
        self.logp, self.values, self.rewards, self.dones = (
            torch.zeros(shape, dtype=torch.float32, device=device) for _ in range(4))

    def write(self, t: int, obs: torch.Tensor, masks: torch.Tensor, actions: torch.Tensor,
              logp: torch.Tensor, values: torch.Tensor, rewards: Any, dones: Any) -> None:
        """Store vector step ``t`` (rewards and dones as numpy arrays of N)."""
        self.obs[t], self.masks[t], self.actions[t] = obs, masks, actions
        self.logp[t], self.values[t] = logp, values
        self.rewards[t] = torch.as_tensor(rewards, device=self.rewards.device)
        self.dones[t] = torch.as_tensor(dones, device=self.dones.device)


class _SigmoidTanh(torch.autograd.Function):
    """:func:`tanh` under autograd: the sigmoid form forward, ``1 - y^2`` backward (as
    torch's tanh's), so autograd keeps one tensor and computes no sigmoid's gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(2 * x).mul_(2).sub_(1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh as ``2 sigmoid(2x) - 1``: the same function within float32 rounding (2e-7),
    and on the CPUs measured faster than torch's ``tanh`` eagerly and inside inductor's
    compiled loops alike (``docs/training.md``, "Speed"); under autograd with tanh's own
    gradient."""
    if x.requires_grad:
        y: torch.Tensor = _SigmoidTanh.apply(x)
        return y
    return torch.sigmoid(2 * x) * 2 - 1


def mlp(layers: Sequence[Layer], x: torch.Tensor) -> list[torch.Tensor]:
    """The input and each tanh layer's output (the hand-written backward pass reads them
    all)."""
    outs = [x]
    for w, b in layers:
        outs.append(tanh(torch.addmm(b, outs[-1], w.t())))
    return outs


def network(actor: Sequence[Layer], critic: Sequence[Layer], action_head: Layer,
            value_head: Layer, obs: torch.Tensor, masks: torch.Tensor | None
            ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """The forward pass of SB3's ``MlpPolicy`` (separate tanh MLPs for the actor and the
    critic, linear heads) from its (weight, bias) pairs: the actor's and the critic's
    layer outputs, the logits (masked actions at ``HUGE_NEG``) and the values."""
    hidden_pi, hidden_vf = mlp(actor, obs), mlp(critic, obs)
    logits = torch.addmm(action_head[1], hidden_pi[-1], action_head[0].t())
    if masks is not None:
        logits = torch.where(masks, logits, HUGE_NEG)
    values = torch.addmm(value_head[1], hidden_vf[-1], value_head[0].t())[:, 0]
    return hidden_pi, hidden_vf, logits, values


def tanh_mlps(policy: Any) -> tuple[Any, Any]:
    """The actor's and the critic's networks of an SB3 ``MlpPolicy``, checked to be what
    both torch trainers' steps run: linear and tanh layers only; a policy with another
    activation is refused by name."""
    extractor = policy.mlp_extractor
    nets = extractor.policy_net, extractor.value_net
    for net in nets:
        kinds = {type(layer) for layer in net}
        if not kinds <= {torch.nn.Linear, torch.nn.Tanh}:
            raise ValueError(f"the torch trainers run tanh MLPs; this policy has "
                             f"{sorted(k.__name__ for k in kinds)}: train it with --trainer sb3")
    return nets


def policy_layers(policy: Any) -> tuple[list[Layer], list[Layer], Layer, Layer]:
    """The (weight, bias) pairs of an SB3 ``MlpPolicy``'s actor, critic and two heads; a
    policy with another activation (:func:`tanh_mlps`) is refused by name."""
    nets: list[list[Layer]] = [[(layer.weight, layer.bias) for layer in net
                                if isinstance(layer, torch.nn.Linear)]
                               for net in tanh_mlps(policy)]
    heads: list[Layer] = [(head.weight, head.bias)
                          for head in (policy.action_net, policy.value_net)]
    return nets[0], nets[1], heads[0], heads[1]


def policy_outputs(policy: Any, obs: torch.Tensor, masks: torch.Tensor | None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits (masked actions at ``HUGE_NEG``) and values of an SB3 ``MlpPolicy`` for a
    batch of observations (:func:`network` on its own parameters)."""
    return network(*policy_layers(policy), obs, masks)[2:]


def policy_forward(policy: Any) -> Callable[[torch.Tensor, torch.Tensor | None],
                                            tuple[torch.Tensor, torch.Tensor]]:
    """:func:`policy_outputs` with the policy's layers found once, for a loop that calls
    it every step: the parameter tensors are held, not copied, so updates to them (in
    place, or as the flat update's views) are what the next call reads."""
    layers = policy_layers(policy)

    def forward(obs: torch.Tensor, masks: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        logits, values = network(*layers, obs, masks)[2:]
        return logits, values

    return forward


def gae(buf: Rollout, last_values: torch.Tensor, gae_lambda: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and value targets (advantage + value) of a rollout,
    as SB3's ``RolloutBuffer.compute_returns_and_advantage``: an episode that ended at step t
    bootstraps nothing past it; the last step bootstraps from ``last_values``."""
    advantages = torch.zeros_like(buf.rewards)
    running = torch.zeros_like(last_values)
    for t in reversed(range(buf.n_steps)):
        next_values = last_values if t == buf.n_steps - 1 else buf.values[t + 1]
        alive = 1.0 - buf.dones[t]
        delta = buf.rewards[t] + buf.gamma * next_values * alive - buf.values[t]
        running = delta + buf.gamma * gae_lambda * alive * running
        advantages[t] = running
    return advantages, advantages + buf.values


def ppo_update(policy: Any, buf: Rollout, advantages: torch.Tensor, targets: torch.Tensor,
               hp: Hyperparameters, masked: bool, gen: torch.Generator) -> dict[str, float]:
    """``n_epochs`` passes over the rollout in shuffled minibatches of ``batch_size`` rows
    (the last may be smaller), each one SB3's PPO step; the means of the losses, the
    approximate KL divergence and the clipped fraction over the minibatches."""
    flat = buf.n_steps * buf.n_envs
    obs = buf.obs.reshape(flat, -1)
    masks = buf.masks.reshape(flat, 2)
    actions, old_logp = buf.actions.reshape(flat), buf.logp.reshape(flat)
    adv_all, target_all = advantages.reshape(flat), targets.reshape(flat)

    def step(idx: torch.Tensor) -> torch.Tensor:
        return _minibatch_step(policy, obs[idx], masks[idx] if masked else None, actions[idx],
                               old_logp[idx], adv_all[idx], target_all[idx], hp)

    return over_minibatches(flat, hp, gen, step)


def over_minibatches(rows: int, hp: Hyperparameters, gen: torch.Generator,
                     step: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, float]:
    """``hp.n_epochs`` passes over ``rows`` rows, each in a fresh permutation from ``gen``
    cut into minibatches of ``hp.batch_size`` (the last may be smaller), ``step(row
    indices)`` on each (a tensor of :data:`STATS`); the statistics' means. Both updates
    draw their minibatches here, so one seed gives both the same ones."""
    totals, batches = None, 0
    for _ in range(hp.n_epochs):
        order = torch.randperm(rows, generator=gen, device=gen.device)
        for start in range(0, rows, hp.batch_size):
            stats = step(order[start:start + hp.batch_size])
            totals = stats if totals is None else totals + stats
            batches += 1
    assert totals is not None  # n_epochs >= 1 and rows >= 1 (TrainConfig checks both)
    return dict(zip(STATS, (totals / batches).tolist(), strict=True))


def _minibatch_step(policy: Any, obs: torch.Tensor, masks: torch.Tensor | None,
                    actions: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                    targets: torch.Tensor, hp: Hyperparameters) -> torch.Tensor:
    """One gradient step of SB3's PPO loss on a minibatch under autograd; its
    :data:`STATS`, detached."""
    logits, values = policy_outputs(policy, obs, masks)
    log_probs = torch.log_softmax(logits, dim=1)
    logp = log_probs.gather(1, actions[:, None])[:, 0]
    entropy = -(log_probs.exp() * log_probs).sum(dim=1)
    if hp.normalize_advantage and len(advantages) > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    clipped = torch.clamp(ratio, 1 - hp.clip_range, 1 + hp.clip_range)
    policy_loss = -torch.min(advantages * ratio, advantages * clipped).mean()
    value_loss = functional.mse_loss(targets, values)
    loss = policy_loss - hp.ent_coef * entropy.mean() + hp.vf_coef * value_loss
    policy.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), hp.max_grad_norm)
    policy.optimizer.step()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clip_fraction = ((ratio - 1).abs() > hp.clip_range).float().mean()
        return torch.stack([policy_loss, value_loss, entropy.mean(), approx_kl,
                            clip_fraction]).detach()


__all__ = ["HUGE_NEG", "STATS", "Hyperparameters", "Layer", "Rollout", "gae", "mlp", "network",
           "over_minibatches", "policy_forward", "policy_layers", "policy_outputs", "ppo_update",
           "tanh", "tanh_mlps"]
