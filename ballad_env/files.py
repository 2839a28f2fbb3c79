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
import hashlib
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO

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


#: Characters a file name keeps as they are; any other run of characters becomes one ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9.=+-]+")
#: Hex digits of the hash an altered name carries (40 bits).
NAME_HASH_DIGITS = 10


def safe_name(text: str) -> str:
    """``text`` as one component of a file name, injectively: a name of safe characters
    (letters, digits, ``. = + -`` and single inner ``_``; not ``.`` or ``..``) is kept as it
    is; any other is its sanitised form plus ``~`` and a short hash of the exact name
    (``"a b"`` -> ``"a_b~<hash>"``), so ``a b`` and ``a_b``, or ``adbench/cover`` and
    ``adbench_cover``, never share a file. A kept name has no ``~``, so it never equals an
    altered one; no result has ``__`` (the separator of a cell's parts) or a ``/``."""
    cleaned = _UNSAFE.sub("_", text)
    if cleaned == text and text not in ("", ".", "..") and "__" not in text \
            and not text.startswith("_") and not text.endswith("_"):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{cleaned.strip('_')}~{digest[:NAME_HASH_DIGITS]}"


def colliding(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of ``names`` whose :func:`safe_name` is one file on a case-insensitive file
    system (macOS's, Windows's): ``("Foo", "foo")``; each pair once, in the order given."""
    seen: dict[str, str] = {}
    pairs = []
    for name in names:
        folded = safe_name(name).casefold()
        if folded in seen and seen[folded] != name:
            pairs.append((seen[folded], name))
        seen.setdefault(folded, name)
    return pairs


def open_regular(path: str | os.PathLike, what: str = "file") -> IO[bytes]:
    """``path`` opened for reading only if it is a regular file: a FIFO, a device or a folder
    is refused with an ``OSError`` saying so, without blocking (a FIFO's ``open`` waits for a
    writer for ever). The file is opened non-blocking, checked, then read normally."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{what} {path} is not a regular file (a "
                          f"{_kind(mode)}): replace it with the file, or remove it")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: str | os.PathLike, what: str = "file") -> str:
    """The UTF-8 text of ``path``, a regular file (:func:`open_regular`)."""
    with open_regular(path, what) as handle:
        return handle.read().decode("utf-8")


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISDIR, "folder"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


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


__all__ = ["LOCK_TIMEOUT_S", "NAME_HASH_DIGITS", "PROBE_BYTES", "STALE_AFTER_S", "atomic_write",
           "colliding", "is_disk_full", "manifest_lock", "open_regular", "probe_writable",
           "read_regular_text", "remove_stale_temporaries", "safe_name", "temporary_path",
           "write_failure"]
