"""The PPO minibatch step, written two ways, timed side by side on this machine.

* ``hand``: ``updates.ppo_step`` (the forward pass, the loss's gradient written out, Adam by
  hand on one flat vector), compiled by ``torch.compile``, and as ``--trainer compiled``
  runs it: exported and compiled ahead of time, loaded from the user's cache
  (``step_cache``); and with the actor's and the critic's first layers as one product
  (``fused_layers``), compiled; and as the split schedule runs it (``split_halves``);
* ``autograd``: LeanRL's way (its compiled PPO): the forward pass and SB3's loss under
  autograd, ``loss.backward()``, ``clip_grad_norm_`` and torch's ``Adam`` (``fused=True``
  or ``foreach=True``), the whole step handed to ``torch.compile``; the parameters are one
  flat leaf tensor, as the hand step's are, so Adam and the clipping see one tensor.

Both are also timed eagerly. Every variant is compiled (and checked against the eager
hand step from the same state) before any timing; then ``--rounds`` rounds, each timing
``--steps`` minibatch steps of every variant in turn (the rounds interleaved, so a change
in the machine's load falls on all of them). Printed: each variant's median milliseconds
a step (wall-clock and CPU), its ratio to ``hand`` (compiled) in the same round (the median
of the rounds' ratios), the share of one core's matrix-product peak, and the first call's
seconds (compiling).

``python -m scripts.studies.training_speed update-step --rows 1024 --rounds 7``
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from agents.experiments.training.config import Hyperparameters
from agents.experiments.training.progress import announce_compile
from agents.ppo import updates
from agents.ppo.step_cache import load_step
from scripts.studies.common.matmul import matmul_peak
from scripts.studies.training_speed.fused_layers import fused_step
from scripts.studies.training_speed.split_halves import split_variants

Step = Callable[[torch.Tensor], torch.Tensor]


def random_batches(rows: int, n_features: int, count: int, seed: int) -> list[torch.Tensor]:
    """``count`` minibatches in ``updates.pack``'s layout with plausible values (actions 0 or
    1 with their log probabilities near log 1/2, unit-scale advantages and targets)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        obs = torch.randn(rows, n_features, generator=gen)
        masks = torch.ones(rows, 2, dtype=torch.bool)
        actions = torch.randint(0, 2, (rows,), generator=gen)
        old_logp = -0.69 + 0.05 * torch.randn(rows, generator=gen)
        adv, targets = torch.randn(rows, generator=gen), torch.randn(rows, generator=gen)
        out.append(updates.pack(obs, masks, actions, old_logp, adv, targets))
    return out


def initial_weights(layout: updates.FlatLayout, seed: int) -> torch.Tensor:
    """A flat parameter vector at the scale of SB3's initialisation."""
    gen = torch.Generator().manual_seed(seed)
    parts = [torch.randn(*shape, generator=gen) / (shape[-1] ** 0.5 if len(shape) == 2 else 10)
             for shape in layout.shapes]
    return torch.cat([p.reshape(-1) for p in parts])


def hand_step(layout: updates.FlatLayout, hp: Hyperparameters, weights: torch.Tensor,
              how: str, step: Callable[..., torch.Tensor] = updates.ppo_step
              ) -> tuple[Step, torch.Tensor]:
    """The hand-written ``step`` on its own copy of ``weights`` (``how``: ``eager``,
    ``compile``: torch.compile, ``package``: the ahead-of-time package the trainer loads
    from the user's cache); the step and its state."""
    state = torch.stack([weights.clone(), torch.zeros_like(weights), torch.zeros_like(weights)])
    count = torch.zeros(())
    body: Callable[..., torch.Tensor] = functools.partial(step, layout, hp, False)
    if how == "compile":
        body = torch.compile(body, dynamic=False, fullgraph=True)
    elif how == "package":
        batch = torch.zeros(hp.batch_size, layout.shapes[0][1] + 6)
        example = (state.clone(), count.clone(), batch)
        body = load_step(functools.partial(step, layout, hp, False), example,
                         announce_compile)[0]
    return functools.partial(body, state, count), state[0]


def autograd_loss(layout: updates.FlatLayout, hp: Hyperparameters, flat: torch.Tensor,
                  batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SB3's PPO loss of a minibatch under autograd, and the step's statistics."""
    obs, _, actions, old_logp, advantages, targets = updates.unpack(batch, layout.shapes[0][1])
    logits, values = updates.outputs(layout, flat, obs, None)
    log_probs = torch.log_softmax(logits, dim=1)
    logp = log_probs.gather(1, actions[:, None])[:, 0]
    entropy = -(log_probs.exp() * log_probs).sum(1)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    clipped = torch.clamp(ratio, 1 - hp.clip_range, 1 + hp.clip_range)
    policy_loss = -torch.min(advantages * ratio, advantages * clipped).mean()
    value_loss = (targets - values).pow(2).mean()
    loss = policy_loss - hp.ent_coef * entropy.mean() + hp.vf_coef * value_loss
    with torch.no_grad():
        stats = torch.stack([policy_loss, value_loss, entropy.mean(),
                             ((ratio - 1) - log_ratio).mean(),
                             ((ratio - 1).abs() > hp.clip_range).float().mean()])
    return loss, stats


def autograd_step(layout: updates.FlatLayout, hp: Hyperparameters, weights: torch.Tensor,
                  compile: bool, adam: str) -> tuple[Step, torch.Tensor]:
    """LeanRL's step: autograd, ``clip_grad_norm_`` and torch's Adam (``adam``: ``fused``,
    ``foreach`` or ``capturable``, foreach with its step count a tensor) on one flat leaf;
    the whole step compiled with ``compile``."""
    flat = torch.nn.Parameter(weights.clone())
    optimizer = torch.optim.Adam([flat], lr=hp.learning_rate, eps=updates.ADAM_EPS,
                                 fused=adam == "fused", foreach=adam != "fused",
                                 capturable=adam == "capturable")

    def step(batch: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss, stats = autograd_loss(layout, hp, flat, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([flat], hp.max_grad_norm)
        optimizer.step()
        return stats

    return (torch.compile(step) if compile else step), flat


def variants(layout: updates.FlatLayout, hp: Hyperparameters, weights: torch.Tensor
             ) -> dict[str, tuple[Step, torch.Tensor]]:
    """Every variant by name, each on its own copy of ``weights``."""
    return {"hand, compiled": hand_step(layout, hp, weights, "compile"),
            "hand, first layers as one product, compiled": hand_step(
                layout, hp, weights, "compile", fused_step),
            "hand, AOT package (the trainer's)": hand_step(layout, hp, weights, "package"),
            **split_variants(layout, hp, weights),
            "autograd + fused Adam, compiled": autograd_step(layout, hp, weights, True, "fused"),
            "autograd + foreach Adam, compiled": autograd_step(layout, hp, weights, True,
                                                               "foreach"),
            "autograd + capturable foreach Adam, compiled": autograd_step(
                layout, hp, weights, True, "capturable"),
            "hand, eager": hand_step(layout, hp, weights, "eager"),
            "autograd + fused Adam, eager": autograd_step(layout, hp, weights, False, "fused")}


def time_block(step: Step, batches: list[torch.Tensor], steps: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds a step, over ``steps`` steps."""
    wall, cpu = time.perf_counter(), time.process_time()
    for k in range(steps):
        step(batches[k % len(batches)])
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def measure(rows: int, rounds: int, steps: int, net_arch: tuple[int, ...] = (64, 64),
            n_features: int = 18) -> dict[str, Any]:
    """Compile and check every variant, then ``rounds`` interleaved rounds of timings."""
    torch.set_num_threads(1)
    hp = Hyperparameters.of("compiled", "ppo", {"batch_size": rows, "net_arch": net_arch})
    layout = updates.FlatLayout.mlp_pair(n_features, net_arch)
    weights = initial_weights(layout, 0)
    batches = random_batches(rows, n_features, 8, 1)
    steps_by_name = variants(layout, hp, weights)
    first, agree, failed = {}, {}, {}
    for name, (step, _) in list(steps_by_name.items()):
        start = time.perf_counter()
        try:
            for batch in batches[:3]:
                step(batch)
        except Exception as err:  # noqa: BLE001 - a variant that fails is reported, not timed
            failed[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
            del steps_by_name[name]
            continue
        first[name] = time.perf_counter() - start
    reference = steps_by_name["hand, eager"][1]
    for name, (_, params) in steps_by_name.items():
        agree[name] = float((params.detach() - reference).abs().max())
    wall: dict[str, list[float]] = {name: [] for name in steps_by_name}
    cpu: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for _ in range(rounds):
        for name, (step, _) in steps_by_name.items():
            w, c = time_block(step, batches, steps)
            wall[name].append(w)
            cpu[name].append(c)
    return {"rows": rows, "wall": wall, "cpu": cpu, "first_call": first, "agree": agree,
            "failed": failed,
            "flops": layout.flops(rows), "peak": matmul_peak()["1024x64x64"],
            "load": os.getloadavg()}


def report(result: dict[str, Any]) -> str:
    """The table: median ms a step (wall, CPU), ratio to the compiled hand step (median of
    the rounds' ratios, CPU), GFLOP a CPU second and its share of the peak."""
    base = result["cpu"]["hand, compiled"]
    lines = [f"minibatch of {result['rows']} rows, {len(base)} rounds; load "
             f"{' '.join(f'{x:.1f}' for x in result['load'])}; one core's matmul peak "
             f"{result['peak']:.0f} GFLOP/s (1024x64x64)",
             "| step | ms wall (median) | ms CPU (median) | CPU x hand compiled | GFLOP/s CPU |"
             " share of peak | first 3 calls s | max |w - w_hand eager| after 3 steps |",
             "|---|---|---|---|---|---|---|---|"]
    for name in result["wall"]:
        w, c = statistics.median(result["wall"][name]), statistics.median(result["cpu"][name])
        ratio = statistics.median(x / b for x, b in zip(result["cpu"][name], base, strict=True))
        gflops = result["flops"] / c / 1e9
        lines.append(f"| {name} | {w * 1e3:.3f} | {c * 1e3:.3f} | {ratio:.2f} | {gflops:.1f} | "
                     f"{gflops / result['peak']:.0%} | {result['first_call'][name]:.1f} | "
                     f"{result['agree'][name]:.1e} |")
    lines += [f"{name}: failed ({why})" for name, why in result["failed"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1024, help="minibatch rows")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=100, help="minibatch steps a round")
    args = parser.parse_args(argv)
    print(report(measure(args.rows, args.rounds, args.steps)))

