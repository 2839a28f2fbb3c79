"""The rollout worker's process, started at the start of a run, before the trainer is
imported.

A fresh (``spawn``) process spends its first seconds importing torch, the environment and
the rollout code. Started here, with nothing but the standard library imported for it,
those seconds overlap the main process's own imports (the trainer, torch,
stable-baselines3) and its model, instead of following them. The process imports
``pipelined`` at once, then waits for its work, which ``pipelined.RolloutWorker`` sends
(:func:`pipelined.serve`); it ends when told to, or when the main process closes the pipe
or dies.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any


def _serve(conn: Any) -> None:
    """The process's target: import the rollout code, then serve (``pipelined.serve``)."""
    from agents.experiments.training.pipelined import serve

    serve(conn)


class WorkerProcess:
    """A started rollout process and the main process's end of its pipe."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), daemon=True)
        #: When the process was started (``time.perf_counter``, and ``time.time`` for the
        #: run's setup timeline, which the worker's own times join).
        self.started, self.started_at = time.perf_counter(), time.time()
        self.process.start()

    def end(self) -> None:
        """Tell the process to end (``None``) and wait for it, briefly; then end it by force
        if it is still there. Safe to call more than once."""
        if self.process.is_alive():
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.process.join(timeout=10)
            if self.process.is_alive():
                self.process.terminate()
        self.conn.close()


__all__ = ["WorkerProcess"]
