"""How much of the machine an episode uses, and what it keeps from one reset to the next.

**Threads.** Every reset and step of an episode runs with its BLAS and OpenMP libraries
limited to one thread (``set_episode_threads`` changes that). Parallelism belongs across
episodes (the harness runs one episode per worker process), where it scales; two BLAS
threads inside one episode on a shared two-core machine measured slower, not faster
(``docs/scale.md``). One thread also makes the environment fork-safe: a forked worker
(Gymnasium's ``AsyncVectorEnv`` forks by default on Linux) deadlocks in its first OpenMP
call if the parent process had started an OpenMP thread pool, and a one-thread limit means
the episode never starts one. The limit is restored when the reset or step returns.

**The reset cache.** The label-free part of a reset (split and scaling, the prior's fit and
scores, the kernel width eta) depends on the data set, the seed, the prior, k and the
kernel options, but not on costs, rewards, threshold searches, budgets or agents. It is
kept in a least-recently-used cache bounded by bytes (``RESET_CACHE``, 1 GiB by default,
``$BALLAD_RESET_CACHE_MB`` or ``set_reset_cache_size``), so every setting, agent and
repeated episode of one (data set, seed) after the first starts at once. Entries are
read-only: results are the same with and without the cache (``tests/test_scale.py``).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

CACHE_SIZE_ENV = "BALLAD_RESET_CACHE_MB"
_DEFAULT_CACHE_MB = 1024
#: The largest reset cache ``$BALLAD_RESET_CACHE_MB`` may ask for (1 TiB).
MAX_CACHE_MB = 2**20

# ------------------------------------------------------------------------------- threads
_threads: int | None = 1
_controller: Any = None
_controller_modules = -1
_controller_lock = threading.Lock()


def episode_threads() -> int | None:
    """BLAS/OpenMP threads an episode runs with (None: whatever the libraries use)."""
    return _threads


def set_episode_threads(threads: int | None) -> None:
    """Run episodes with ``threads`` BLAS/OpenMP threads (default 1); None leaves the
    libraries' own settings (``OMP_NUM_THREADS`` and so on) alone.

    More than one thread speeds up the matrix products of a single large episode on an
    otherwise idle machine; it never changes results. With several threads, a process that
    forks workers after playing an episode may deadlock in them (see the module docstring).
    """
    global _threads
    if threads is not None and (isinstance(threads, bool) or int(threads) != threads
                                or threads < 1):
        raise ValueError(f"threads must be a whole number >= 1 or None, got {threads!r}")
    _threads = None if threads is None else int(threads)


def _thread_controller() -> Any:
    """A ``threadpoolctl`` controller of the loaded BLAS/OpenMP libraries, rebuilt when new
    modules were imported (a new extension module may bring a new library). Building one
    scans every loaded library (milliseconds); using it costs microseconds."""
    global _controller, _controller_modules
    with _controller_lock:
        if _controller is None or len(sys.modules) != _controller_modules:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
            _controller_modules = len(sys.modules)
        return _controller


@contextmanager
def thread_limit(threads: int | None = -1) -> Iterator[None]:
    """Limit BLAS and OpenMP to ``threads`` (by default ``episode_threads()``; None: no limit)
    while the block runs."""
    threads = _threads if threads == -1 else threads
    if threads is None:
        yield
        return
    with _thread_controller().limit(limits=threads):
        yield


# ------------------------------------------------------------------------------- cache
class ResetCache:
    """A least-recently-used map bounded by the bytes of its values.

    Keys hold ``id(owner)`` of an object the value was computed from (a data set); an entry
    lives no longer than its owner (a ``weakref.finalize`` drops it), so a new object that
    reuses the id never sees a stale entry. A value larger than the bound is not kept.
    """

    def __init__(self, max_bytes: int | None) -> None:
        self._max_bytes = None if max_bytes is None else int(max_bytes)
        self.hits = self.misses = 0
        self._entries: OrderedDict[tuple[int, Hashable], tuple[Any, int]] = OrderedDict()
        self._lock = threading.RLock()  # re-entrant: an owner may be collected while held

    @property
    def max_bytes(self) -> int:
        """The bound in bytes: as constructed or resized, else (``None``) the environment's
        (:func:`configured_cache_bytes`), read at the first use."""
        if self._max_bytes is None:
            self._max_bytes = configured_cache_bytes()
        return self._max_bytes

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        with self._lock:
            return sum(size for _, size in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_compute(self, owner: object, key: Hashable, compute: Callable[[], Any],
                       size: Callable[[Any], int]) -> Any:
        """The value for (``owner``, ``key``): cached, or ``compute()`` and cached if it fits."""
        full_key = (id(owner), key)
        with self._lock:
            entry = self._entries.get(full_key)
            if entry is not None:
                self._entries.move_to_end(full_key)
                self.hits += 1
                return entry[0]
            self.misses += 1
        value = compute()
        nbytes = int(size(value))
        if nbytes > self.max_bytes:
            return value
        with self._lock:
            if full_key not in self._entries:
                self._watch(owner)
            self._entries[full_key] = (value, nbytes)
            self._entries.move_to_end(full_key)
            self._evict()
        return value

    def clear(self) -> None:
        """Drop every entry and reset the hit counts."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def resize(self, max_bytes: int) -> None:
        """Change the bound, evicting the least recently used entries beyond it."""
        with self._lock:
            self._max_bytes = int(max_bytes)
            self._evict()

    def _evict(self) -> None:
        total = sum(size for _, size in self._entries.values())
        while total > self.max_bytes and self._entries:
            _, (_, size) = self._entries.popitem(last=False)
            total -= size

    def _watch(self, owner: object) -> None:
        """Drop the owner's entries when it is garbage-collected (once per owner)."""
        owner_id = id(owner)
        if any(key[0] == owner_id for key in self._entries):
            return
        try:
            weakref.finalize(owner, self._forget, owner_id)
        except TypeError:  # not weak-referenceable: its id could be reused, so never cache it
            raise ValueError(f"cannot cache values of a {type(owner).__name__}") from None

    def _forget(self, owner_id: int) -> None:
        with self._lock:
            for key in [key for key in self._entries if key[0] == owner_id]:
                del self._entries[key]


def configured_cache_bytes() -> int:
    """``$BALLAD_RESET_CACHE_MB`` (megabytes from 0 to :data:`MAX_CACHE_MB`; 0 turns the cache
    off) in bytes if set, else 1 GiB; an ``EnvVarError`` naming the variable otherwise."""
    from ballad_env.files import env_number

    megabytes = env_number(CACHE_SIZE_ENV, low=0, high=MAX_CACHE_MB, default=_DEFAULT_CACHE_MB,
                           meaning="the reset cache's size in MB (0 turns it off)")
    return int(megabytes * 2**20)


#: The process's cache of label-free reset parts (``ballad_env.episode``).
RESET_CACHE = ResetCache(None)  # sized from the environment at its first use


def set_reset_cache_size(megabytes: float) -> None:
    """Bound the reset cache to ``megabytes`` (0 turns it off)."""
    if not 0 <= megabytes <= MAX_CACHE_MB:
        raise ValueError(f"the reset cache's size must be from 0 to {MAX_CACHE_MB:,} MB, got "
                         f"{megabytes!r}")
    RESET_CACHE.resize(int(megabytes * 2**20))


__all__ = ["CACHE_SIZE_ENV", "MAX_CACHE_MB", "RESET_CACHE", "ResetCache",
           "configured_cache_bytes", "episode_threads", "set_episode_threads",
           "set_reset_cache_size", "thread_limit"]
