"""Local worker processes that do not outlive the process that started them.

joblib's loky workers wait for work for minutes after their parent is gone, and finish the
cell they hold first. A runner killed with SIGKILL, or with SIGTERM (Python's default
handler exits without any cleanup), would leave them computing results nobody reads. The
harness makes its local pools with :func:`local_parallel`: each worker watches its parent
from its first moment and exits as soon as the parent is gone.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

#: How often a worker checks that its parent is still there.
POLL_SECONDS = 0.5


def exit_with_parent(parent_pid: int) -> None:
    """In a worker process that ``parent_pid`` started (the initializer of
    :func:`local_parallel`'s workers): exit as soon as that process is gone, or now if it
    died while this worker was starting. In the parent itself (joblib may run the work
    in-process) it does nothing, so a runner never ties itself to its own parent.
    """
    if os.getpid() == parent_pid:
        return
    if os.getppid() != parent_pid:  # re-parented already: the runner is gone
        os._exit(1)
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


__all__ = ["POLL_SECONDS", "exit_with_parent", "local_parallel"]
