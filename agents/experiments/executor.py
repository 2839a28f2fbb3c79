"""The harness's one executor: tasks run in this process, in local worker processes or on a
Dask cluster, their results handed back as each one finishes.

Every study and the grid runner run their cells through :func:`execute`: ``work(task,
single_thread)`` computes one task (in a worker, with one BLAS/OpenMP thread), and the
caller writes each result to its store as it arrives, so an interrupted run loses only the
tasks in flight and a rerun resumes from the store. :func:`progress_bar` is the bar every
run shows.

Local worker processes do not outlive the process that started them: joblib's loky
workers wait for work for minutes after their parent is gone, and finish the cell they
hold first. A runner killed with SIGKILL, or with SIGTERM (Python's default
handler exits without any cleanup), would leave them computing results nobody reads. The
harness makes its local pools with :func:`local_parallel`: each worker watches its parent
from its first moment and exits as soon as the parent is gone.

Plugins reach the workers: every task sent to a worker (local or Dask) first loads the
plugin entry points and imports the plugin modules this process imported by name
(``ballad_env.plugins``), so a user's agent or prior registered there is known wherever
its cells run.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agents.experiments.stores.results import RunError
from ballad_env.plugins import load_plugins, plugin_modules

T = TypeVar("T")
R = TypeVar("R")

#: How often a worker checks that its parent is still there.
POLL_SECONDS = 0.5


def exit_with_parent(parent_pid: int) -> None:
    """In a worker process that ``parent_pid`` started (the initializer of
    :func:`local_parallel`'s workers): exit as soon as that process is gone, or now if it
    died while this worker was starting, and leave Ctrl-C (SIGINT) to the runner. In the
    parent itself (joblib may run the work in-process) it does nothing, so a runner never
    ties itself to its own parent.
    """
    if os.getpid() == parent_pid:
        return
    if os.getppid() != parent_pid:  # re-parented already: the runner is gone
        os._exit(1)
    # Ctrl-C reaches every process of the terminal's group: the runner says it in one line
    # and ends its workers, which must not each print a traceback meanwhile.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch, args=(parent_pid,), name="exit-with-parent",
                     daemon=True).start()


def _watch(parent_pid: int) -> None:
    """Poll the parent's id; once the worker is re-parented, its parent is gone: exit now."""
    while os.getppid() == parent_pid:
        time.sleep(POLL_SECONDS)
    os._exit(1)


def local_parallel(n_jobs: int, **options: Any) -> Any:
    """A ``joblib.Parallel`` over local loky processes that exit with this process
    (``options`` are Parallel's, e.g. ``return_as="generator_unordered"``)."""
    from joblib import Parallel, parallel_config

    with parallel_config(backend="loky", initializer=exit_with_parent,
                         initargs=(os.getpid(),)):
        return Parallel(n_jobs=n_jobs, **options)


def worker_limits(single_thread: bool) -> Any:
    """A context with one BLAS/OpenMP thread in a worker (``single_thread``), else nothing."""
    if single_thread:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(1)
    return nullcontext()


@dataclass(frozen=True)
class WithPlugins(Generic[T, R]):
    """``work`` behind the plugins: called in a worker, it first loads the entry points and
    imports ``modules`` (once per process), then runs ``work(task, single_thread)``."""

    work: Callable[[T, bool], R]
    modules: tuple[str, ...]

    def __call__(self, task: T, single_thread: bool) -> R:
        load_plugins(self.modules)
        return self.work(task, single_thread)


def execute(tasks: Iterable[T], work: Callable[[T, bool], R], n_jobs: int = 1,
            scheduler: str | None = None) -> Iterator[R]:
    """Yield ``work(task, single_thread)`` of each task as it finishes: in this process
    (``n_jobs`` 1, in order), in ``n_jobs`` local workers that exit with this process even on
    SIGKILL (-1: all cores), or on the Dask cluster at ``scheduler`` (through joblib's dask
    backend). ``single_thread`` is true in workers: ``work`` should then hold BLAS to one
    thread (:func:`worker_limits`), since the workers already fill the cores. ``work`` and
    the tasks must pickle (a module-level function and plain data)."""
    if scheduler is None and n_jobs == 1:
        for task in tasks:
            yield work(task, False)
        return
    from joblib import Parallel, delayed, parallel_config

    plugged = WithPlugins(work, plugin_modules())
    jobs = (delayed(plugged)(task, True) for task in tasks)
    if scheduler is None:  # local workers that exit with this process, even on SIGKILL
        yield from local_parallel(n_jobs, return_as="generator_unordered")(jobs)
        return
    with connect(scheduler) as client, parallel_config(backend="dask"):
        if sum(client.ncores().values()) < 2:
            # joblib runs a one-thread backend in this process: say so rather than surprise.
            import warnings

            warnings.warn(f"the Dask cluster at {scheduler} has a single worker thread; joblib "
                          "then runs the cells in this process", RuntimeWarning, stacklevel=3)
        yield from Parallel(n_jobs=-1, return_as="generator_unordered")(jobs)


#: Seconds to wait for a Dask scheduler before saying it cannot be reached.
SCHEDULER_TIMEOUT = 10.0


def connect(scheduler: str) -> Any:
    """A Dask client of the scheduler at ``scheduler``; ``RunError`` if it does not answer
    within ``SCHEDULER_TIMEOUT`` seconds, a server that accepts the connection and never
    answers included (Dask's own timeout covers the connection, not its handshake: the
    client is made in a daemon thread, abandoned at the deadline)."""
    from dask.distributed import Client

    made: list[Any] = []

    def make() -> None:
        try:
            made.append(Client(scheduler, timeout=SCHEDULER_TIMEOUT))
        except BaseException as err:  # noqa: BLE001 - handed to the caller below
            made.append(err)

    thread = threading.Thread(target=make, name="dask-connect", daemon=True)
    thread.start()
    thread.join(SCHEDULER_TIMEOUT + 1.0)
    outcome: Any = made[0] if made else TimeoutError("no answer to Dask's handshake")
    if isinstance(outcome, OSError | ValueError):  # timeouts are OSErrors; a bad address too
        raise RunError(f"cannot reach the Dask scheduler at {scheduler} within "
                       f"{SCHEDULER_TIMEOUT:g} s ({outcome}). Check the address "
                       "(tcp://host:8786) and that a scheduler runs there with workers, or "
                       "leave out --scheduler to run on this machine.") from outcome
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def progress_bar(total: int, done: int = 0, enabled: bool = True, unit: str = "cell",
                 desc: str = "cells") -> Any:
    """A tqdm bar on stderr of ``total`` tasks, ``done`` of them already finished (resumed)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, unit=unit, desc=desc, disable=not enabled,
                dynamic_ncols=True, smoothing=0.1)


__all__ = ["POLL_SECONDS", "SCHEDULER_TIMEOUT", "WithPlugins", "connect", "execute",
           "exit_with_parent", "local_parallel", "progress_bar", "worker_limits"]
