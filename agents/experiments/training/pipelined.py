"""The batched trainer on both cores: a worker process plays the next rollout while this one
updates on the last.

PPO alternates two pieces of work that each keep one core busy: a rollout (N environments
stepped ``n_steps`` times, a forward pass of the policy per step) and an update (``n_epochs``
passes of minibatch steps over that rollout). Run one after the other they leave a second
core idle; here a worker process owns the environments and plays rollout k + 1 while the
main process updates on rollout k. Rollout k + 1 is then played by the weights from before
update k (a policy lag of one update, as asynchronous PPO has: the clipped ratio is taken
against the log probabilities the rollout was actually drawn with, so the loss stays
PPO's). The schedule is fixed, not timed: rollouts 0 and 1 play the initial weights and
rollout k >= 2 the weights after update k - 2, so a seed gives the same run.

The two rollout buffers live in shared memory (the worker writes one while the update reads
the other); the weights go to the worker with each request (about 44 kB), the ended
episodes' returns and costs come back with each answer. The worker is a fresh process
(``spawn``, ``worker_process``), started at the start of the run (before the trainer is
imported) and its environments built before the run's clock starts (while the main process
imports the trainer, builds the model and loads or compiles its step), as the sequential
loop builds its environments before its clock.
"""

from __future__ import annotations

import functools
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from agents.experiments.training.config import Hyperparameters
from agents.experiments.training.rollouts import Ended, Record, collect, make_envs
from agents.ppo.core import Rollout
from agents.ppo.updates import FlatLayout, outputs, update_on

if TYPE_CHECKING:  # worker_process imports this module in the process it starts
    from agents.experiments.training.worker_process import WorkerProcess

#: What the worker answers a request with: (slot, ended episodes, its seconds in the
#: environment and in the whole rollout), or an error's traceback.
Answer = tuple[int, Ended, dict[str, float]]


def stream_seeds(seed: int) -> tuple[int, int]:
    """Two independent seeds from a run's seed: the worker's actions, the minibatches."""
    first, second = np.random.SeedSequence(seed).generate_state(2)
    return int(first), int(second)


def _worker(conn: Any, make_envs_args: tuple[Any, ...], layout: FlatLayout, masked: bool, *,
            seed: int, action_seed: int, bufs: Sequence[Rollout], lasts: torch.Tensor,
            threads: int, imported_at: float = 0.0) -> None:
    """The worker's loop: build the environments, say ``ready`` (with their observation
    space, for the main process to check against its model's, when the worker had
    imported its code and built them, ``time.time``, and its CPU seconds so far), then
    answer each request
    ``(slot, weights or None)`` with one rollout into ``bufs[slot]`` (and the values of the
    observations after it into ``lasts[slot]``); ``None`` ends it."""
    torch.set_num_threads(threads)
    try:
        envs = make_envs(*make_envs_args)
        flat = torch.zeros(layout.numel)
        forward = functools.partial(outputs, layout, flat)
        gen = torch.Generator().manual_seed(action_seed)
        returns = np.zeros(envs.num_envs)
        obs, _ = envs.reset(seed=seed)
        times = {"worker_imported": imported_at, "worker_ready": time.time(),
                 "worker_cpu_seconds": time.process_time()}
        conn.send(("ready", envs.single_observation_space, times))
        while (request := conn.recv()) is not None:
            slot, weights = request
            if weights is not None:
                flat.copy_(torch.from_numpy(weights))
            timer, cpu = {"env": 0.0, "rollout": 0.0}, time.process_time()
            obs, ended = collect(envs, forward, obs, bufs[slot], masked, gen, returns, timer)
            with torch.inference_mode():
                lasts[slot] = forward(torch.as_tensor(obs), None)[1]
            timer["cpu"] = time.process_time() - cpu
            conn.send((slot, ended, timer))
        envs.close()
    except Exception:  # noqa: BLE001 - any failure goes back to the main process as text
        conn.send(("error", traceback.format_exc()))


def serve(conn: Any) -> None:
    """A started worker process's life (``worker_process``): wait for its work (the keyword
    arguments of :func:`_worker`, or of the function its ``target`` names), then do it;
    nothing (``None``, or the pipe closed) ends it."""
    imported_at = time.time()  # this module and all it imports are loaded by now
    try:
        work = conn.recv()
    except EOFError:
        return
    if work is not None:
        target = work.pop("target", _worker)
        target(conn, **work, imported_at=imported_at)


class Helper:
    """A second process of the run given its ``work`` (the keyword arguments of its target:
    :func:`_worker` unless ``work["target"]`` names another), in its started ``process``
    (``worker_process``); a context manager that sends the work on entering. The process
    is ended by whoever started it. :class:`RolloutWorker` and
    ``split_schedule.SplitHelper`` are two."""

    #: How the messages name the process.
    role = "the rollout worker"

    def __init__(self, work: dict[str, Any], layout: FlatLayout, *,
                 process: WorkerProcess) -> None:
        self.work, self.layout = work, layout
        self.worker_process = process
        self.conn, self.process = process.conn, process.process
        #: When the worker's process was started (``time.perf_counter``).
        self.started = process.started

    def __enter__(self) -> Helper:
        """Send the work (the process then builds its environments on its own)."""
        try:
            self.conn.send(self.work)
        except (BrokenPipeError, OSError) as err:
            raise RuntimeError(f"{self.role} died before its work reached it (exit "
                               f"code {self.process.exitcode})") from err
        return self

    def ready(self, space: Any) -> dict[str, float]:
        """Wait until the process has built its environments, and check that they observe
        ``space`` (the observation space of the policy it plays); when the worker's
        process started, had imported its code and was ready (``time.time``), and its CPU
        seconds by then."""
        answer = self._receive()
        if not (isinstance(answer, tuple) and answer[0] == "ready"):
            raise RuntimeError(f"{self.role} answered {answer!r} instead of 'ready'")
        if answer[1] != space:
            raise ValueError(f"the replay environment's observations are {answer[1]}, the "
                             f"policy's {space}")
        return {"worker_started": self.worker_process.started_at, **answer[2]}

    def __exit__(self, *exc: object) -> None:
        """Nothing to undo here: the process's starter ends it."""

    def _receive(self) -> Any:
        try:
            answer = self.conn.recv()
        except EOFError as err:
            raise RuntimeError(f"{self.role} died (exit code {self.process.exitcode})"
                               ) from err
        if isinstance(answer, tuple) and answer[0] == "error":
            raise RuntimeError(f"{self.role} failed:\n{answer[1]}")
        return answer


class RolloutWorker(Helper):
    """The worker's two shared rollout buffers and its started ``process``; it plays
    rollouts on request (:meth:`request`, :meth:`receive`)."""

    def __init__(self, make_envs_args: tuple[Any, ...], layout: FlatLayout, hp: Hyperparameters,
                 n_envs: int, n_features: int, masked: bool, seed: int, threads: int, *,
                 process: WorkerProcess) -> None:
        self.bufs = [Rollout(hp.n_steps, n_envs, n_features, hp.gamma, "cpu") for _ in range(2)]
        for buf in self.bufs:
            for tensor in vars(buf).values():
                if isinstance(tensor, torch.Tensor):
                    tensor.share_memory_()
        self.lasts = torch.zeros(2, n_envs).share_memory_()
        work = {"make_envs_args": make_envs_args, "layout": layout, "masked": masked,
                "seed": seed, "action_seed": stream_seeds(seed)[0], "bufs": self.bufs,
                "lasts": self.lasts, "threads": threads}
        super().__init__(work, layout, process=process)

    def request(self, slot: int, weights: torch.Tensor | None) -> None:
        """Ask for a rollout into ``slot``, played with ``weights`` (None: the last ones)."""
        self.conn.send((slot, None if weights is None else weights.detach().cpu().numpy().copy()))

    def receive(self) -> Answer:
        """The next finished rollout: (slot, ended episodes, the worker's seconds)."""
        answer: Answer = self._receive()
        return answer


def overlapped_loop(worker: RolloutWorker, updater: Any, hp: Hyperparameters,
                    n_rollouts: int, update_seed: int, record: Record
                    ) -> tuple[int, float, dict[str, float]]:
    """``n_rollouts`` rollouts and updates, the worker playing one rollout ahead; after each
    update ``record(steps, ended episodes, statistics)``. Returns the steps, the seconds
    and the time split (environment, the rest of the rollouts, updates, the main process's
    wait for rollouts, and the CPU seconds of both processes)."""
    gen = torch.Generator().manual_seed(update_seed)
    timer = {"env": 0.0, "rollout": 0.0, "update": 0.0, "wait": 0.0, "cpu": 0.0}
    steps_each = hp.n_steps * worker.bufs[0].n_envs
    start, cpu_start = time.perf_counter(), time.process_time()
    worker.request(0, updater.weights())
    if n_rollouts > 1:
        worker.request(1, None)
    steps = 0
    for k in range(n_rollouts):
        tick = time.perf_counter()
        slot, ended, spent = worker.receive()
        timer["wait"] += time.perf_counter() - tick
        timer["env"] += spent["env"]
        timer["rollout"] += spent["rollout"] - spent["env"]
        timer["cpu"] += spent["cpu"]
        stats = update_on(updater, worker.bufs[slot], worker.lasts[slot], gen, timer)
        if k + 2 < n_rollouts:
            worker.request(slot, updater.weights())
        steps += steps_each
        record(steps, ended, stats)
    timer["cpu"] += time.process_time() - cpu_start
    return steps, time.perf_counter() - start, timer


__all__ = ["Helper", "RolloutWorker", "overlapped_loop", "stream_seeds"]
