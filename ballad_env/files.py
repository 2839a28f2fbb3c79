"""Writing the project's files safely: one writer of a store's manifest at a time, no partial
file under its final name or left behind, and a full disk said in words.

Every store the project writes (a lattice store's ``store.json``, a results folder's
``run.json``) is changed by a read-modify-write: :func:`manifest_lock` makes that one step
for every process on the machine (an advisory lock on a hidden file beside the manifest,
released by the operating system when its process dies, so a crash never leaves it held).
Every file is written to a hidden temporary name (:func:`temporary_path`) and renamed into
place by :func:`atomic_write`, which removes the temporary file whatever goes wrong; only a
SIGKILL can leave one behind, and :func:`remove_stale_temporaries` clears those at the next
start. None of this touches a lattice's content, so this module is left out of the
environment's fingerprint (``lattice_store.NOT_IN_LATTICES``).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

#: Seconds a process waits for another one's manifest lock (held for milliseconds at a time).
LOCK_TIMEOUT_S = 120.0
#: A temporary file is stale when the process named in it is gone and it has not changed for
#: this many seconds (a writer on another machine sharing the folder is never a local pid).
STALE_AFTER_S = 60.0
#: Names of temporary files: ``.NAME.PID.HEX.tmp`` (and ``.NAME.PID.tmp``), the probe's
#: ``.write-test-PID-HEX``, plus the lattice, store and download names of earlier versions
#: (``.seed4.tmp123.npz``, ``.store.json.tmp123``, ``.10_cover.npz.part123``).
TEMPORARY_NAMES = (re.compile(r"^\..+?\.(?P<pid>\d+)(\.[0-9a-f]{8})?\.tmp$"),
                   re.compile(r"^\.write-test-(?P<pid>\d+)-[0-9a-f]{8}$"),
                   re.compile(r"^\.seed\d+\.tmp(?P<pid>\d+)\.npz$"),
                   re.compile(r"^\.store\.json\.tmp(?P<pid>\d+)$"),
                   re.compile(r"^\..+\.part(?P<pid>\d+)$"))
#: Bytes the writability probe writes and syncs (a full disk often still creates empty files).
PROBE_BYTES = 4096


def manifest_lock(manifest: str | os.PathLike, what: str | None = None
                  ) -> AbstractContextManager[None]:
    """Hold the inter-process lock of ``manifest``'s read-modify-write (``.NAME.lock`` beside
    it) for a ``with`` block; re-entrant within a thread. A ``TimeoutError`` naming ``what``
    (default: the manifest) if another process keeps it for ``LOCK_TIMEOUT_S`` seconds."""
    path = Path(manifest)
    lock = FileLock(path.with_name(f".{path.name}.lock"), timeout=LOCK_TIMEOUT_S,
                    is_singleton=True)
    return _held(lock, what or str(path))


@contextmanager
def _held(lock: FileLock, what: str) -> Iterator[None]:
    try:
        lock.acquire()
    except Timeout as err:
        raise TimeoutError(f"another process has held the lock of {what} ({lock.lock_file}) "
                           f"for {LOCK_TIMEOUT_S:g} s: wait for it to finish, or write "
                           "elsewhere") from err
    try:
        yield
    finally:
        lock.release()


def temporary_path(path: str | os.PathLike) -> Path:
    """A hidden temporary name beside ``path`` for this process (``.NAME.PID.HEX.tmp``)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` a temporary file, then rename it to ``path``: ``path`` is complete or
    absent, and the temporary file is removed whatever happens (the error propagates)."""
    path = Path(path)
    tmp = temporary_path(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` says the device is full (ENOSPC or EDQUOT, also in the message of
    libraries such as pyarrow that do not set ``errno``)."""
    codes = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    if isinstance(err, OSError) and err.errno in codes:
        return True
    text = str(err)
    return "No space left on device" in text or "Disk quota exceeded" in text or \
        any(f"[Errno {code}]" in text for code in codes)


def write_failure(path: str | os.PathLike, err: OSError, fix: str) -> str:
    """Why writing ``path`` failed, in words, and ``fix``: a full disk says so, with where
    and how much is free."""
    path = Path(path)
    if is_disk_full(err):
        return (f"the disk is full: cannot write {path} (no space left on the device holding "
                f"{_existing(path)}, {_free(path)} free). Free some space there and run the "
                f"same command again (what is finished is kept), or {fix}")
    return f"cannot write to {path} ({err.strerror or err}): {fix}"


def probe_writable(folder: str | os.PathLike) -> None:
    """Write, sync and remove ``PROBE_BYTES`` bytes in ``folder``: an ``OSError`` if it cannot
    be written, a full disk included."""
    probe = Path(folder) / f".write-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        handle = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(handle, b"\0" * PROBE_BYTES)
            os.fsync(handle)
        finally:
            os.close(handle)
    finally:
        probe.unlink(missing_ok=True)


def remove_stale_temporaries(folders: Iterable[str | os.PathLike], recursive: bool = False,
                             now: float | None = None) -> list[Path]:
    """Remove the temporary files in ``folders`` (and below, if ``recursive``) that a killed
    writer left: the process named in the file's name is gone and the file has not changed
    for ``STALE_AFTER_S`` seconds. Returns the files removed."""
    now = time.time() if now is None else now
    removed = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        for path in folder.rglob(".*") if recursive else folder.glob(".*"):
            pid = _temporary_pid(path.name)
            if pid is None or _alive(pid) or not path.is_file():
                continue
            try:
                if now - path.stat().st_mtime >= STALE_AFTER_S:
                    path.unlink()
                    removed.append(path)
            except FileNotFoundError:  # another process removed it first
                continue
    return removed


def _temporary_pid(name: str) -> int | None:
    for pattern in TEMPORARY_NAMES:
        match = pattern.match(name)
        if match:
            return int(match["pid"])
    return None


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (this one included)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists but belongs to someone else
        return True
    return True


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _free(path: Path) -> str:
    try:
        free = float(shutil.disk_usage(_existing(path)).free)
    except OSError:
        return "unknown space"
    for unit in ("bytes", "kB", "MB", "GB"):
        if free < 1000 or unit == "GB":
            return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
        free /= 1000
    return f"{free:.1f} TB"


__all__ = ["LOCK_TIMEOUT_S", "PROBE_BYTES", "STALE_AFTER_S", "atomic_write", "is_disk_full",
           "manifest_lock", "probe_writable", "remove_stale_temporaries",
           "temporary_path", "write_failure"]
