"""Two processes trading one vector each per step through shared memory, with a barrier.

The split schedule (``split_schedule``) has two processes meet once per minibatch step
(about a millisecond apart): each puts its half's gradient in, and both read the two. A
pipe or a semaphore would cost a system call and a wake-up each way; here each side has a
sequence counter in shared memory. :meth:`Endpoint.swap` writes its vector into the slot
of this exchange, raises its own counter to the exchange's number and waits until the
other's counter has reached it too. The slots alternate (two of them), so a side that
moves on to the next exchange never overwrites a vector the other side may still read: to
reach exchange k + 2 it must have passed exchange k + 1, which the other side enters only
after reading exchange k.

The wait spins a few thousand reads of the counter (the other side is usually a few
microseconds behind on an idle machine), then yields the core (``os.sched_yield``) for a
few milliseconds, then sleeps in short naps: on a loaded machine the other side may be
waiting for a core, and a spinning waiter would take it. While it waits it checks that
the run has not failed (either side can mark it, :meth:`Endpoint.fail`) and, about once a
second, that the other process is alive.

The counter is written after the vector, by the same thread, and read before it: on x86
(total store order) the reader then sees the whole vector. Other CPUs (ARM) may reorder
the stores, so the split schedule is refused there (``config.stores_in_order``) and their
default is the pipelined schedule, whose pipe is a barrier. Where the system has no
``os.sched_yield`` (Windows) the yield is a zero-length sleep.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
import torch

#: Reads of the other side's counter before yielding the core.
SPINS = 2000
#: Seconds of yielding the core before napping; the nap's length; seconds between checks
#: that the other process is alive.
YIELD_SECONDS, NAP_SECONDS, ALIVE_EVERY = 0.002, 50e-6, 1.0
#: The counters' index of the failure flag (after the two sides' sequence numbers).
FAILED = 2
#: Give up the core for a moment (``os.sched_yield`` where the system has it).
_yield_core: Callable[[], None] = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class Exchange:
    """The shared memory of one pair: the two sequence counters and a failure flag, and two
    slots of two vectors of ``width`` float32 values. Send it to the other process (its
    tensors travel as shared memory handles) and take one :class:`Endpoint` on each side."""

    def __init__(self, width: int) -> None:
        self.counts = torch.zeros(3, dtype=torch.int64).share_memory_()
        self.slots = torch.zeros(2, 2, width).share_memory_()


class Endpoint:
    """One side (0 or 1) of an :class:`Exchange`; ``alive()`` says whether the other
    process still runs (checked while waiting)."""

    def __init__(self, exchange: Exchange, side: int, alive: Callable[[], bool]) -> None:
        if side not in (0, 1):
            raise ValueError(f"an exchange has sides 0 and 1, not {side}")
        self.counts: np.ndarray = exchange.counts.numpy()
        self.slots, self.side, self.other, self.alive = exchange.slots, side, 1 - side, alive
        #: The exchanges done, and the seconds spent waiting in them.
        self.done, self.waited = 0, 0.0

    def swap(self, vector: torch.Tensor | None = None) -> torch.Tensor:
        """Put ``vector`` in (None: meet only), wait for the other side; the exchange's
        (2, width) slot: side 0's vector, then side 1's. It stays valid until the next
        exchange but one."""
        number = self.done + 1
        slot = self.slots[number % 2]
        if vector is not None:
            slot[self.side].copy_(vector)
        self.counts[self.side] = number
        if self.counts[self.other] < number:
            tick = time.perf_counter()
            self._wait(number)
            self.waited += time.perf_counter() - tick
        self.done = number
        return slot

    def _wait(self, number: int) -> None:
        """Until the other side's counter reaches ``number``: spin, then yield, then nap."""
        counts, other = self.counts, self.other
        for _ in range(SPINS):
            if counts[other] >= number:
                return
        start = checked = time.perf_counter()
        while counts[other] < number:
            now = time.perf_counter()
            if counts[FAILED]:
                raise RuntimeError("the other process of the split schedule failed")
            if now - checked > ALIVE_EVERY:
                if not self.alive():
                    raise RuntimeError("the other process of the split schedule ended "
                                       "without finishing the run")
                checked = now
            if now - start < YIELD_SECONDS:
                _yield_core()
            else:
                time.sleep(NAP_SECONDS)

    def fail(self) -> None:
        """Mark the run failed, so the other side stops waiting (and raises)."""
        self.counts[FAILED] = 1


__all__ = ["Endpoint", "Exchange"]
