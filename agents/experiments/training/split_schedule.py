"""The torch trainers' PPO on both cores as two symmetric processes: each plays half of the
environments and computes half of every minibatch's gradient.

The pipelined schedule (``pipelined``) gives the second core the rollouts, which take a
fraction of the update's time, so that core mostly waits. Here the two processes (this
one, side 0, and a helper, side 1, started early as the rollout worker is:
``worker_process``) do the same work on the same weights (the steps and the exchange named
below are :mod:`agents.ppo`'s; this module runs the two processes):

1. each plays its half of the N environments for one rollout with its copy of the
   current weights (no policy lag: the algorithm is sequential PPO's), computes GAE for
   them and writes its rows into one shared table (``updates.pack``'s columns: side 0's
   rows first);
2. they meet (``exchange.Endpoint.swap``), then both draw the same permutation of all the
   rows (one seed) for every epoch;
3. for every minibatch each computes its half's share of the gradient
   (``split_step.half_gradient``: side 0 the first half of the minibatch's rows, side 1
   the rest, each normalised by the whole minibatch, whose advantage mean and standard
   deviation both compute from the shared table), they swap the two vectors, and each
   adds them in the same order and takes the clipped Adam step on its own copy
   (``split_step.apply_halves``).

The copies stay bit-identical with no weights sent: the same vectors, added in the same
order by the same (compiled or eager) function. Every rollout the helper sends a checksum
of the weights it played with, and the run fails loudly if it differs. The schedule is
fixed, not timed, so a seed gives the same run; :func:`one_process_update` computes it
in one process (both halves one after the other) for the tests.
"""

from __future__ import annotations

import functools
import os
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agents.experiments.training.config import Hyperparameters
from agents.experiments.training.pipelined import Helper
from agents.experiments.training.rollouts import Ended, Record, collect, make_envs
from agents.ppo.core import Rollout, gae, over_minibatches
from agents.ppo.exchange import Endpoint, Exchange
from agents.ppo.split_step import HalfSteps, halves
from agents.ppo.updates import (
    FlatLayout,
    FlatUpdate,
    outputs,
    pack,
)


def split_seeds(seed: int) -> tuple[int, int, int]:
    """Three independent seeds from a run's seed: side 0's actions, side 1's actions, the
    minibatches (both sides draw the same)."""
    first, second, third = np.random.SeedSequence(seed).generate_state(3)
    return int(first), int(second), int(third)


def checksum(state: torch.Tensor) -> int:
    """A checksum of the weights and Adam's moments, to compare the two sides' copies."""
    return zlib.crc32(state.numpy().tobytes())


@dataclass
class Plan:
    """What both sides share: the sizes, the run's seed and the shared table of a rollout's
    rows (side 0's first)."""

    layout: FlatLayout
    hp: Hyperparameters
    masked: bool
    n_envs: int
    seed: int
    table: torch.Tensor

    @classmethod
    def of(cls, layout: FlatLayout, hp: Hyperparameters, masked: bool, n_envs: int,
           seed: int) -> Plan:
        """A plan with its table allocated in shared memory."""
        if n_envs < 2:
            raise ValueError(f"the split schedule gives each process half of the environments: "
                             f"give --n-envs 2 or more, not {n_envs}")
        table = torch.zeros(hp.n_steps * n_envs, layout.shapes[0][1] + 6).share_memory_()
        return cls(layout, hp, masked, n_envs, seed, table)

    def envs_of(self, side: int) -> range:
        """The environments side ``side`` plays (side 0 takes the odd one)."""
        first = halves(self.n_envs)[0]
        return range(0, first) if side == 0 else range(first, self.n_envs)

    def half_rows(self) -> set[tuple[int, int]]:
        """The (rows, minibatch's rows) of every minibatch half of a rollout (the shapes
        the half step is compiled for)."""
        rows = self.table.shape[0]
        sizes = {min(self.hp.batch_size, rows), rows % self.hp.batch_size} - {0}
        return {(part, size) for size in sizes for part in halves(size)}


class Half:
    """One side's part of the run: its environments and rollout, its copy of the weights and
    Adam's moments (``state``, (3, P), and the step count) and its half steps."""

    def __init__(self, plan: Plan, side: int, envs: Any, steps: HalfSteps,
                 state: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.plan, self.side, self.envs, self.steps = plan, side, envs, steps
        self.state, self.count = state
        hp, n_envs = plan.hp, len(plan.envs_of(side))
        self.buf = Rollout(hp.n_steps, n_envs, plan.table.shape[1] - 6, hp.gamma, "cpu")
        start = plan.envs_of(side).start * hp.n_steps
        self.rows = slice(start, start + hp.n_steps * n_envs)
        self.gen = torch.Generator().manual_seed(split_seeds(plan.seed)[side])
        self.returns = np.zeros(n_envs)
        self.obs, _ = envs.reset(seed=plan.seed + plan.envs_of(side).start)
        self.forward = functools.partial(outputs, plan.layout, self.state[0])

    def rollout(self, timer: dict[str, float]) -> Ended:
        """Play one rollout with the current weights; write its rows (with GAE's advantages
        and targets) into the shared table; the episodes that ended."""
        self.obs, ended = collect(self.envs, self.forward, self.obs, self.buf,
                                  self.plan.masked, self.gen, self.returns, timer)
        with torch.inference_mode():
            last = self.forward(torch.as_tensor(self.obs), None)[1]
        advantages, targets = gae(self.buf, last, self.plan.hp.gae_lambda)
        flat = self.buf.n_steps * self.buf.n_envs
        self.plan.table[self.rows] = pack(
            self.buf.obs.reshape(flat, -1), self.buf.masks.reshape(flat, 2),
            self.buf.actions.reshape(flat), self.buf.logp.reshape(flat),
            advantages.reshape(flat), targets.reshape(flat))
        return ended

    def part(self, idx: torch.Tensor, side: int | None = None) -> torch.Tensor:
        """The share of side ``side`` (this one's unless given) of the minibatch ``idx``
        (rows of the table) in its gradient and statistics."""
        side = self.side if side is None else side
        table = self.plan.table
        first = halves(len(idx))[0]
        mine = idx[:first] if side == 0 else idx[first:]
        return self.steps.half(self.state[0], table[mine], table[idx, -2])

    def apply(self, parts: torch.Tensor) -> torch.Tensor:
        """The Adam step on this side's copy from both halves' vectors; the statistics."""
        return self.steps.apply(self.state, self.count, parts)

    def update(self, endpoint: Endpoint, gen: torch.Generator) -> dict[str, float]:
        """``n_epochs`` passes over the table, each minibatch's halves swapped with the
        other side; the statistics' means."""
        return over_minibatches(self.plan.table.shape[0], self.plan.hp, gen,
                                lambda idx: self.apply(endpoint.swap(self.part(idx))))


def one_process_update(half: Half, gen: torch.Generator) -> dict[str, float]:
    """The split update computed in one process: both halves' shares of every minibatch
    one after the other, then the same Adam step (for the tests: the two-process update's
    arithmetic without the second process)."""
    return over_minibatches(half.plan.table.shape[0], half.plan.hp, gen,
                            lambda idx: half.apply(torch.stack([half.part(idx, 0),
                                                                half.part(idx, 1)])))


def serve_half(conn: Any, *, plan: Plan, exchange: Exchange, make_envs_args: tuple[Any, ...],
               n_rollouts: int, threads: int, imported_at: float = 0.0) -> None:
    """The helper's life (side 1; ``pipelined.serve`` calls it with its work): build its
    environments and say ``ready``; on ``start`` (the initial state, step count and
    whether to load the compiled steps) play and update ``n_rollouts`` times, sending after
    each rollout its ended episodes, the checksum of the weights it played and its CPU
    seconds; then ``done`` with the final checksum. Errors go back as text."""
    torch.set_num_threads(threads)
    parent = os.getppid()
    endpoint = Endpoint(exchange, 1, lambda: os.getppid() == parent)
    try:
        envs = make_envs(*make_envs_args)
        conn.send(("ready", envs.single_observation_space,
                   {"worker_imported": imported_at, "worker_ready": time.time(),
                    "worker_cpu_seconds": time.process_time()}))
        message = conn.recv()
        if message is None:
            return
        _, state, count, compiled = message
        steps = HalfSteps(plan.layout, plan.hp, plan.masked, compile=compiled)
        steps.warm(plan.half_rows(), plan.table.shape[1] - 6)
        half = Half(plan, 1, envs, steps, (state, count))
        gen = torch.Generator().manual_seed(split_seeds(plan.seed)[2])
        cpu = time.process_time()
        for _ in range(n_rollouts):
            played = checksum(half.state)
            timer = {"env": 0.0, "rollout": 0.0}
            ended = half.rollout(timer)
            conn.send((ended, played, timer, time.process_time() - cpu))
            endpoint.swap()
            half.update(endpoint, gen)
        conn.send(("done", checksum(half.state), time.process_time() - cpu))
        envs.close()
    except Exception:  # noqa: BLE001 - any failure goes back to the main process as text
        endpoint.fail()
        conn.send(("error", traceback.format_exc()))


class SplitUpdate(FlatUpdate):
    """The flat update whose minibatch steps run as two halves (:class:`HalfSteps`), this
    process's state the policy's (so the model saves as ``FlatUpdate``'s does)."""

    #: The configuration's block, whose rollout sizes the plan reads too.
    hp: Hyperparameters

    def __init__(self, policy: Any, hp: Hyperparameters, masked: bool) -> None:
        super().__init__(policy, hp, masked)
        self.halves = HalfSteps(self.layout, hp, masked)

    def warm(self, buf: Rollout, announce: Callable[[], None] | None = None) -> float:
        """Load (or build) the half and apply steps for ``buf``'s rollout sizes."""
        plan = Plan(self.layout, self.hp, self.masked, buf.n_envs, 0,
                    torch.empty(buf.n_steps * buf.n_envs, 0))
        seconds = self.halves.warm(plan.half_rows(), buf.obs.shape[-1], announce)
        self.compiled, self.built = self.halves.compiled, self.halves.built
        return seconds


class SplitHelper(Helper):
    """Side 1 of a split run in its started ``process`` (``worker_process``): its work is
    :func:`serve_half`'s; this side's :class:`~exchange.Endpoint` beside it."""

    role = "the split schedule's second process"

    def __init__(self, plan: Plan, make_envs_args: tuple[Any, ...], n_rollouts: int,
                 threads: int, *, process: Any) -> None:
        self.plan, self.exchange = plan, Exchange(plan.layout.numel + 5)
        work = {"target": serve_half, "plan": plan, "exchange": self.exchange,
                "make_envs_args": make_envs_args, "n_rollouts": n_rollouts, "threads": threads}
        super().__init__(work, plan.layout, process=process)
        self.endpoint = Endpoint(self.exchange, 0, process.process.is_alive)

    def __exit__(self, *exc: object) -> None:
        """After a failure here, let the other side stop waiting for this one."""
        if exc[0] is not None:
            self.endpoint.fail()

    def start(self, state: torch.Tensor, count: torch.Tensor, compiled: bool) -> None:
        """Give the helper the initial weights and Adam state (copies), and whether to load
        the compiled steps (this process has built them by now)."""
        self.conn.send(("start", state.clone(), count.clone(), compiled))

    def receive(self) -> Any:
        """The helper's next message (after a rollout, or ``done`` at the end)."""
        return self._receive()

    def why(self, err: Exception, seconds: float = 5.0) -> Exception:
        """What to raise for ``err`` (this side's failure in the loop): the helper's own
        error with its traceback where it sent one within ``seconds`` (it failed first),
        else ``err``."""
        while self.conn.poll(seconds):
            try:
                self._receive()  # raises the helper's error; its other messages are spent
            except RuntimeError as theirs:
                return theirs
            except EOFError:
                break
        return err


def split_loop(helper: SplitHelper, half: Half, n_rollouts: int, record: Record
               ) -> tuple[int, float, dict[str, float]]:
    """``n_rollouts`` rollouts and updates of side 0 (``half``) beside the helper; after
    each update ``record(steps, both sides' ended episodes, statistics)``. Returns the
    steps, the seconds and the time split (this side's environment and rollout, the
    updates, the waits in the exchange, both processes' CPU seconds). Raises where the
    two sides' weights differ."""
    plan, endpoint = half.plan, helper.endpoint
    gen = torch.Generator().manual_seed(split_seeds(plan.seed)[2])
    timer = {"env": 0.0, "rollout": 0.0, "update": 0.0}
    steps_each = plan.table.shape[0]
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        for k in range(n_rollouts):
            played = checksum(half.state)
            ended = half.rollout(timer)
            endpoint.swap()  # both sides' rows are in the table
            their_ended, their_played, _, _ = helper.receive()
            _same(played, their_played, f"before rollout {k}")
            tick = time.perf_counter()
            stats = half.update(endpoint, gen)
            timer["update"] += time.perf_counter() - tick
            record((k + 1) * steps_each, ended + their_ended, stats)
        answer = helper.receive()
    except RuntimeError as err:  # the helper's traceback, where it failed first
        raise helper.why(err) from err
    _same(checksum(half.state), answer[1], "at the end")
    timer["rollout"] -= timer["env"]
    timer["wait"] = endpoint.waited
    timer["cpu"] = time.process_time() - cpu_start + answer[2]
    return n_rollouts * steps_each, time.perf_counter() - start, timer


def _same(mine: int, theirs: int, when: str) -> None:
    """Fail loudly where the two sides' weights differ (they must be bit-identical)."""
    if mine != theirs:
        raise RuntimeError(f"the split schedule's two copies of the weights differ {when} "
                           f"(checksums {mine} and {theirs}): the run is not the algorithm's")


__all__ = ["Half", "Plan", "SplitHelper", "SplitUpdate", "checksum", "one_process_update",
           "serve_half", "split_loop", "split_seeds"]
