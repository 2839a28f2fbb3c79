"""Writing the project's files safely: one writer of a store's manifest at a time, no partial
file under its final name or left behind, a full disk said in words, and the environment
variables that set a bound or a folder checked where they are read.

Every store the project writes (a lattice store's ``store.json``, a results folder's
``run.json``) is changed by a read-modify-write: :func:`manifest_lock` makes that one step
for every process on the machine (an advisory lock on a hidden file beside the manifest,
released by the operating system when its process dies, so a crash never leaves it held).
Every file is written to a hidden temporary name (:func:`temporary_path`) and renamed into
place by :func:`atomic_write`, which removes the temporary file whatever goes wrong; only a
SIGKILL can leave one behind (SIGTERM raises ``SystemExit`` meanwhile), and
:func:`remove_stale_temporaries` clears those at the next start, in the folders the caller
names: only files whose name carries this program's marker. None of this touches a
lattice's content, so this module is left out of the environment's fingerprint
(``lattice_store.NOT_IN_LATTICES``).
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import re
import shutil
import signal
import socket
import stat
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

from filelock import FileLock, Timeout

#: Seconds a process waits for another one's manifest lock (held for milliseconds at a time).
LOCK_TIMEOUT_S = 120.0
#: A temporary file written on another machine sharing the folder (its process cannot be
#: looked up from here) is stale once it has not changed for this many seconds; one of this
#: machine is stale as soon as the process named in it is gone.
STALE_AFTER_S = 3600.0
#: The marker every temporary file this program writes carries in its name, so that only
#: those are ever removed as stale: ``.NAME.~ballad-HOST-PID-HEX.tmp`` (HOST: 8 hex digits
#: of this machine's name, PID: the writer's process, HEX: random per file).
TEMPORARY_MARKER = "~ballad"
TEMPORARY_NAME = re.compile(r"^\..+\." + re.escape(TEMPORARY_MARKER)
                            + r"-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")
#: Bytes the writability probe writes and syncs (a full disk often still creates empty files).
PROBE_BYTES = 4096


#: Characters a file name keeps as they are; any other run of characters becomes one ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9.=+-]+")
#: Hex digits of the hash an altered name carries (80 bits: 40 were found to collide in
#: seconds, which merged two data sets' folders in a store).
NAME_HASH_DIGITS = 20


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


# ---------------------------------------------------------------- environment variables
class EnvVarError(ValueError):
    """An environment variable that sets a bound or a folder, with a value the project cannot
    use: out of range, not a number (``abc``, ``inf``, ``nan``), a file where a folder goes.
    Each is read at its first use, never at import (``--help`` always runs); the message is
    one line naming the variable and what it accepts, which every ``ballad-env`` job prints
    as ``error: ...`` with exit status 2."""


def env_number(name: str, *, low: float, high: float, default: float, meaning: str,
               whole: bool = False, low_open: bool = False) -> float:
    """``$name`` as a number from ``low`` to ``high`` (above ``low`` if ``low_open``; a whole
    number if ``whole``), or ``default`` when unset or blank; an :class:`EnvVarError` naming
    the variable, ``meaning`` (what the number is) and the accepted range otherwise."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    fits = (value > low if low_open else value >= low) and value <= high
    if not fits or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        lower = f"above {low:,g}" if low_open else f"from {low:,g}"
        raise EnvVarError(f"${name} is {text!r}: give {meaning}, {kind} {lower} to {high:,g} "
                          f"(unset: {default:,g})")
    return value


def env_folder(name: str) -> Path | None:
    """``$name`` as a folder path (``~`` expanded), or ``None`` when unset or blank; an
    :class:`EnvVarError` naming the variable if something other than a folder is there."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise EnvVarError(f"${name} is {text!r}, which is not a folder: set it to a folder "
                          "(it is created if missing), or unset it")
    return path


#: The most bytes the arrays of one data or lattice file may take in memory, checked from
#: the file's headers before anything is inflated (ADBench's largest, census, takes 1.2 GB);
#: ``$BALLAD_MAX_ARRAY_BYTES`` sets another.
MAX_ARRAY_BYTES = 1_500_000_000
ARRAY_BYTES_ENV = "BALLAD_MAX_ARRAY_BYTES"
#: The most ``$BALLAD_MAX_ARRAY_BYTES`` may say (1 PB: beyond any machine's memory).
MAX_ARRAY_BYTES_LIMIT = 10**15


def array_ceiling() -> int:
    """``$BALLAD_MAX_ARRAY_BYTES`` (a whole number from 1 to :data:`MAX_ARRAY_BYTES_LIMIT`) if
    set, else :data:`MAX_ARRAY_BYTES`; an ``EnvVarError`` naming the variable otherwise."""
    return int(env_number(ARRAY_BYTES_ENV, low=1, high=MAX_ARRAY_BYTES_LIMIT,
                          default=MAX_ARRAY_BYTES, whole=True,
                          meaning="the most bytes a file's arrays may take in memory"))


def check_array_bytes(path: str | os.PathLike, nbytes: int, what: str) -> None:
    """A ``ValueError`` naming ``path`` if ``nbytes`` (what its headers declare) passes
    :func:`array_ceiling`."""
    ceiling = array_ceiling()
    if nbytes > ceiling:
        raise ValueError(f"{path}: its {what} would take {nbytes:,} bytes in memory, more than "
                         f"the ceiling of {ceiling:,}; refused before reading it. If the file "
                         f"is genuine, set ${ARRAY_BYTES_ENV} to a larger number of bytes")


def npz_array_bytes(archive: Any) -> int:
    """The bytes the arrays of an open ``numpy.load`` ``.npz`` archive declare in their
    ``.npy`` headers (read without inflating the data); a ``ValueError`` if one holds Python
    objects or declares no valid shape."""
    import numpy as np

    total = 0
    for member in archive.zip.namelist():
        with archive.zip.open(member) as handle:
            version = np.lib.format.read_magic(handle)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read(handle)
        if dtype.hasobject:
            raise ValueError(f"member {member} holds Python objects")
        count = 1
        for extent in shape:
            count *= int(extent)
        total += count * dtype.itemsize
    return total


#: The largest central directory of a zip read (a data ``.npz``, a lattice file, a saved
#: policy and the zips torch writes inside it; each lists a handful of members in well under
#: a kilobyte): Python's ``zipfile`` (behind ``numpy.load``) and torch's zip reader hold one
#: object per entry before they read any member, so a file of a few hundred megabytes listing
#: millions of empty entries would take gigabytes just to open.
MAX_ZIP_DIRECTORY_BYTES = 1 << 20
#: zipfile's reader of an archive's end record (zip64 included), and the index of the
#: directory's size in what it returns.
_END_RECORD, _DIRECTORY_SIZE = zipfile._EndRecData, zipfile._ECD_SIZE  # type: ignore[attr-defined]


def zip_directory_problem(handle: IO[bytes]) -> str | None:
    """Why the archive open in ``handle`` (seekable) is refused before its directory is
    parsed: a central directory declared larger than :data:`MAX_ZIP_DIRECTORY_BYTES` in its
    end record; None if not, or if the file has no end record (a zip reader then refuses it
    itself). The handle is rewound."""
    end = _END_RECORD(handle)
    handle.seek(0)
    size = None if end is None else end[_DIRECTORY_SIZE]
    if size is not None and size > MAX_ZIP_DIRECTORY_BYTES:
        return (f"its zip directory declares {size:,} bytes, more than the "
                f"{MAX_ZIP_DIRECTORY_BYTES:,} the project's archives may list (millions of "
                "entries would take gigabytes to open)")
    return None


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISDIR, "folder"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


class LockError(TimeoutError):
    """A lock that could not be taken: another process held it past the timeout, or its
    file cannot be a lock (a folder, say); the message names the lock and what it guards."""


def manifest_lock(manifest: str | os.PathLike, what: str | None = None,
                  timeout: float | None = None) -> AbstractContextManager[None]:
    """Hold the inter-process lock of ``manifest``'s read-modify-write (``.NAME.lock`` beside
    it) for a ``with`` block; re-entrant within a thread. A :class:`LockError` naming
    ``what`` (default: the manifest) if another process keeps it for ``timeout`` seconds
    (default :data:`LOCK_TIMEOUT_S`; 0: refuse at once), or if something else (a folder)
    sits at the lock's name."""
    timeout = LOCK_TIMEOUT_S if timeout is None else timeout
    path = Path(manifest)
    lock = FileLock(path.with_name(f".{path.name}.lock"), timeout=timeout, is_singleton=True)
    return _held(lock, what or str(path), timeout)


@contextmanager
def _held(lock: FileLock, what: str, timeout: float) -> Iterator[None]:
    try:
        lock.acquire()
    except Timeout as err:
        held = f"has held the lock of {what} ({lock.lock_file}) for {timeout:g} s" \
            if timeout > 0 else f"holds the lock of {what} ({lock.lock_file})"
        raise LockError(f"another process {held}: wait for it to finish, or write "
                        "elsewhere") from err
    except OSError as err:  # a folder or a file of another owner at the lock's name
        raise LockError(f"cannot take the lock of {what}: {lock.lock_file} is not a lock file "
                        f"({err.strerror or err}); remove it, or write elsewhere") from err
    try:
        yield
    finally:
        lock.release()


def temporary_path(path: str | os.PathLike) -> Path:
    """A hidden temporary name beside ``path`` for this process, with the program's marker
    (``.NAME.~ballad-HOST-PID-HEX.tmp``; :data:`TEMPORARY_NAME`)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{TEMPORARY_MARKER}-{_host()}-{os.getpid()}-"
                          f"{uuid.uuid4().hex[:8]}.tmp")


def _host() -> str:
    """8 hex digits of this machine's name (what a temporary name says of its writer)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


@contextmanager
def terminated_as_exit() -> Iterator[None]:
    """Within the ``with`` block, SIGTERM raises ``SystemExit`` (status 143) in the main
    thread instead of ending the process at once, so ``finally`` blocks remove temporary
    files; Python's default is restored after. Elsewhere (another thread, a handler of the
    caller's own in place) it changes nothing."""
    main = threading.current_thread() is threading.main_thread()
    if not main or not hasattr(signal, "SIGTERM") or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _exit_on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` a temporary file, then rename it to ``path``: ``path`` is complete or
    absent, and the temporary file is removed whatever happens (the error propagates)."""
    path = Path(path)
    tmp = temporary_path(path)
    with terminated_as_exit():
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
    probe = temporary_path(Path(folder) / "write-test")
    with terminated_as_exit():  # SIGTERM during the probe leaves no probe file either
        try:
            handle = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(handle, b"\0" * PROBE_BYTES)
                os.fsync(handle)
            finally:
                os.close(handle)
        finally:
            probe.unlink(missing_ok=True)


def remove_stale_temporaries(folders: Iterable[str | os.PathLike], now: float | None = None
                             ) -> list[Path]:
    """Remove the temporary files and folders (a recording's, removed whole) in ``folders``
    (not below) that a killed writer left: only names with this program's marker
    (:data:`TEMPORARY_NAME`) whose process is gone (on this machine), or in which nothing
    changed for ``STALE_AFTER_S`` seconds (a writer on another machine). One that cannot
    be removed (a read-only folder, such as a shared download cache) is left: it is stale,
    and nothing reads it. Returns what was removed."""
    now = time.time() if now is None else now
    removed = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        for path in folder.glob(f".*{TEMPORARY_MARKER}-*.tmp"):
            if not _stale(path, now):
                continue
            try:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(path)
            except OSError:  # removed by another process already, or not ours to remove
                continue
    return removed


def _stale(path: Path, now: float) -> bool:
    """Whether ``path`` is a temporary file or folder of this program that its writer
    left."""
    match = TEMPORARY_NAME.match(path.name)
    if match is None or path.is_symlink() or not (path.is_file() or path.is_dir()):
        return False
    if match["host"] == _host():
        return not _alive(int(match["pid"]))
    try:
        changed = max(p.lstat().st_mtime for p in (path, *path.rglob("*")))
        return now - changed >= STALE_AFTER_S
    except FileNotFoundError:
        return False


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


__all__ = ["ARRAY_BYTES_ENV", "LOCK_TIMEOUT_S", "MAX_ARRAY_BYTES", "MAX_ARRAY_BYTES_LIMIT",
           "NAME_HASH_DIGITS",
           "PROBE_BYTES", "STALE_AFTER_S", "EnvVarError", "array_ceiling", "check_array_bytes",
           "env_folder", "env_number",
           "npz_array_bytes",
           "TEMPORARY_MARKER", "TEMPORARY_NAME", "LockError", "atomic_write", "colliding",
           "is_disk_full", "manifest_lock", "open_regular", "probe_writable",
           "read_regular_text", "remove_stale_temporaries", "safe_name", "temporary_path",
           "terminated_as_exit", "write_failure",
           "MAX_ZIP_DIRECTORY_BYTES", "zip_directory_problem"]
