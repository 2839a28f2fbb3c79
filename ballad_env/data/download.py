"""Verified downloads: a file reaches its final name only whole and with the registered hash.

One HTTP(S) GET (or ``file://`` copy) streams into a hidden temporary file beside the
target; the file's size and hashes are checked; only then ``os.replace`` gives it its name.
A failed, cut-short or mismatching transfer leaves nothing under the final name and raises
:class:`DownloadError` saying what happened, the address tried and where to put the file by
hand. Hashes: ``sha256`` (hex), ``git_blob_sha1`` (the id git gives the file's content: the
SHA-1 of ``b"blob <size>\\0"`` followed by the bytes, so a repository's tree verifies a file
exactly) and ``size`` (bytes); an entry checks every one it has.

Why the standard library and not pooch: four of ADBench's files can only be verified by
their git blob id, a hash pooch does not know, so pooch would put them under their final
name unchecked; pooch answers a cached file that no longer matches by downloading it
again, where a changed cached file must be refused; and what is left for it to do, one
GET into a temporary file and a rename, would bring requests and platformdirs into the
core install.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.client import HTTPException
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ballad_env.data.transfer import (
    Deadline,
    Refused,
    open_address,
    redact,
    set_read_timeout,
)
from ballad_env.files import (
    probe_writable,
    remove_stale_temporaries,
    temporary_path,
    terminated_as_exit,
    write_failure,
)

#: Seconds without progress (one socket read) before a download is abandoned.
TIMEOUT_S = 60.0
#: Seconds a whole download may take, whatever the server does (a trickle of bytes included);
#: ``$BALLAD_DOWNLOAD_DEADLINE`` (seconds) or ``download(deadline=...)`` sets another.
DEADLINE_S = 3600.0
DEADLINE_ENV = "BALLAD_DOWNLOAD_DEADLINE"
#: The longest deadline ``$BALLAD_DOWNLOAD_DEADLINE`` may set: 30 days, in seconds (a longer
#: one overflows the socket and timer calls it reaches).
MAX_DEADLINE_S = 30 * 86_400.0
#: Schemes a download (and a redirect) may use.
SCHEMES = ("http", "https", "file")
_CHUNK = 1 << 20
#: Held around the final check-and-rename, so threads of one process that download one file
#: together keep the first verified copy (between processes ``os.replace`` is atomic, and
#: every copy that reaches it is verified).
_RENAME = threading.Lock()


class DownloadError(OSError):
    """A download that failed, was cut short or did not match its registered hash."""


class IntegrityError(ValueError):
    """A file on disk that does not match its registered hash (changed after download)."""


def file_hashes(path: Path) -> dict[str, Any]:
    """``size``, ``sha256`` and ``git_blob_sha1`` of a file, read once."""
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode())  # noqa: S324 - git's own object id
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha256.update(chunk)
            blob.update(chunk)
    return {"size": size, "sha256": sha256.hexdigest(), "git_blob_sha1": blob.hexdigest()}


def mismatches(path: Path, expected: Mapping[str, Any]) -> list[str]:
    """The registered hashes ``path`` fails, as ``"sha256 <expected> != <found>"`` lines."""
    found = file_hashes(path)
    return [f"{key} {expected[key]} != {found[key]}" for key in ("size", "sha256", "git_blob_sha1")
            if expected.get(key) is not None and str(expected[key]) != str(found[key])]


def verify(path: Path, expected: Mapping[str, Any], what: str) -> Path:
    """``path`` if it matches ``expected``; else :class:`IntegrityError` (the file is kept)."""
    bad = mismatches(path, expected)
    if bad:
        raise IntegrityError(
            f"{path}: the file of {what} does not match its registered hash ({'; '.join(bad)}). "
            "It was changed or damaged after it was downloaded, so it is not used. Delete it "
            "and load the data set again to download a fresh copy.")
    return path


def check_scheme(url: str, where: str) -> None:
    """A ``ValueError`` naming ``where`` unless ``url`` is http(s) or file (no ftp, no data)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        raise ValueError(f"{where}: {redact(url)!r} uses {scheme or 'no'}:// which is not "
                         "supported; use an http://, https:// or file:// address, or a local "
                         "folder")


def _stream(url: str, handle: Any, limits: tuple[float, float, int | None], progress: bool
            ) -> tuple[int, int | None]:
    """Copy ``url`` into ``handle``; return (bytes received, bytes announced or None).

    ``limits`` is (seconds per read, seconds in all, most bytes or None). A server that
    announces or sends more than the most bytes, or is still sending at the deadline, is
    stopped with :class:`Refused` saying which limit it hit.
    """
    timeout, deadline, most = limits
    end = time.monotonic() + deadline
    passed = f"the download passed its total deadline of {deadline:g} s"
    with Deadline(deadline) as watchdog:
        try:
            response, total = open_address(url, min(timeout, deadline), watchdog)
        except (OSError, HTTPException):
            if watchdog.passed:
                raise Refused(f"{passed} (no answer yet)") from None
            raise
        with response:
            if most is not None and total is not None and total > most:
                raise Refused(f"the server announces {total} bytes, more than its registered "
                               f"size of {most} bytes")
            received = _copy(response, handle, (timeout, end, most), progress, total,
                             (url, passed))
        if watchdog.passed:
            raise Refused(f"{passed} ({received} bytes received)")
    return received, total


def _copy(response: Any, handle: Any, limits: tuple[float, float, int | None],
          progress: bool, total: int | None, said: tuple[str, str]) -> int:
    """Copy the body of ``response`` into ``handle`` within ``limits`` (seconds per read,
    the deadline's monotonic time, most bytes); the bytes copied. ``said``: the address,
    and what the deadline's refusal says."""
    timeout, end, most = limits
    url, passed = said
    received = 0
    bar = _progress_bar(total, url) if progress else None
    read = getattr(response, "read1", response.read)  # what has arrived, not 1 MB
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise Refused(f"{passed} ({received} bytes received)")
            set_read_timeout(response, min(timeout, left))
            try:
                chunk = read(_CHUNK)
            except TimeoutError:
                if end - time.monotonic() <= 0:
                    continue  # the deadline, said above
                raise Refused(f"the server sent no data for {timeout:g} s") from None
            if not chunk:
                break
            received += len(chunk)
            if most is not None and received > most:
                raise Refused(f"the server sent more than its registered size of {most} "
                               "bytes (stopped there)")
            handle.write(chunk)
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return received


def _progress_bar(total: int | None, url: str) -> Any:
    """A tqdm bar on stderr for transfers over 4 MB (or of unknown size) at a terminal."""
    if (total is not None and total < 4 << 20) or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=url.rsplit("/", 1)[-1])


def _configured_deadline() -> float:
    """``$BALLAD_DOWNLOAD_DEADLINE`` (seconds, above 0 and at most :data:`MAX_DEADLINE_S`) if
    set, else :data:`DEADLINE_S`; an ``EnvVarError`` naming the variable otherwise."""
    from ballad_env.files import env_number

    return env_number(DEADLINE_ENV, low=0, low_open=True, high=MAX_DEADLINE_S,
                      default=DEADLINE_S, meaning="the seconds a download may take")


def _writable_cache(folder: Path, what: str) -> None:
    """Create ``folder`` and write a few kB there (``probe_writable``): a ``DownloadError``
    naming it and ``$BALLAD_DATA_HOME`` if it cannot be written (read-only, a full disk)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe_writable(folder)
    except OSError as err:
        raise DownloadError(write_failure(folder, err, "set $BALLAD_DATA_HOME to a folder "
                                          f"you can write to, then load {what} again")) from err


def _part_path(dest: Path) -> Path:
    """This call's temporary name beside ``dest``: ``.NAME.PID.HEX.tmp``, random per call (so
    threads never share one, and no one can plant a link at it in advance), and of the form
    :func:`~ballad_env.files.remove_stale_temporaries` clears after a kill."""
    return temporary_path(dest)


def _open_exclusive(path: Path) -> Any:
    """``path`` opened for writing only if this call creates it, never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_BINARY", 0)
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def download(url: str, dest: Path, expected: Mapping[str, Any], what: str, *,
             timeout: float | None = None, deadline: float | None = None,
             max_bytes: int | None = None, progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` and verify it against ``expected``.

    Parameters
    ----------
    url : str
        ``http://``, ``https://`` or ``file://`` address (a redirect only to http(s)).
    dest : pathlib.Path
        Final path; its folder is created. Nothing appears there unless the file is whole
        and matches ``expected``. A killed download's temporary files in that folder are
        removed first.
    expected : mapping
        Any of ``size``, ``sha256``, ``git_blob_sha1``; at least one hash is required.
    what : str
        The data set's name, for messages.
    timeout : float, optional
        Seconds without progress before giving up (default :data:`TIMEOUT_S`).
    deadline : float, optional
        Seconds the whole download may take (default ``$BALLAD_DOWNLOAD_DEADLINE``, else
        :data:`DEADLINE_S`, one hour).
    max_bytes : int, optional
        Most bytes to accept when ``expected`` has no ``size`` (a registered size is the
        limit when there is one): a longer body is stopped there, a longer announced
        length refused before the body is read.
    progress : bool, default True
        Show a progress bar for a large transfer at a terminal.

    Raises
    ------
    DownloadError
        If the address cannot be reached, answers with an error, redirects to another
        scheme, sends too much, passes a time limit, the transfer is cut short, the file
        does not match ``expected`` or the temporary file cannot be created.
    """
    shown = redact(url)
    if not (expected.get("sha256") or expected.get("git_blob_sha1")):
        raise ValueError(f"{what}: refusing to download {shown} without a registered hash")
    check_scheme(url, what)
    most = int(expected["size"]) if expected.get("size") is not None else max_bytes
    limits = (timeout or TIMEOUT_S, deadline or _configured_deadline(), most)
    _writable_cache(dest.parent, what)
    remove_stale_temporaries([dest.parent])
    tmp = _part_path(dest)
    by_hand = (f"To install it by hand, download {shown} on a machine that can reach it and "
               f"put it at {dest} (it is checked against its hash before use), or set "
               "$BALLAD_DATA_MIRROR to a folder or server holding the file.")
    with terminated_as_exit():  # a SIGTERM still removes the temporary file
        try:
            handle = _open_exclusive(tmp)
        except OSError as err:
            raise DownloadError(f"cannot create the temporary file {tmp} for {what} ({err}): "
                                "something else is at that name; remove it and run again"
                                ) from err
        try:
            with handle:
                received, total = _fetch_into(url, handle, limits, progress, what, by_hand)
            if total is not None and received != total:
                raise DownloadError(
                    f"the download of {what} from {shown} was cut short: {received} of "
                    f"{total} bytes. Nothing was saved under {dest}; run again. " + by_hand)
            bad = mismatches(tmp, expected)
            if bad:
                raise DownloadError(
                    f"the file downloaded for {what} from {shown} does not match its "
                    f"registered hash ({'; '.join(bad)}): the address serves another file or "
                    f"the transfer was damaged. Nothing was saved under {dest}. " + by_hand)
            with _RENAME:  # one rename at a time; a verified file already there stays
                if not (dest.is_file() and not mismatches(dest, expected)):
                    os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return dest


def _fetch_into(url: str, handle: Any, limits: tuple[float, float, int | None],
                progress: bool, what: str, by_hand: str) -> tuple[int, int | None]:
    """:func:`_stream`, with every failure a :class:`DownloadError` naming ``what``, with
    any password of ``url`` masked (a library's message may quote the address)."""
    try:
        return _fetch_named(url, handle, limits, progress, what, by_hand)
    except DownloadError as err:
        password = _password(url)
        if password and password in str(err):
            raise DownloadError(str(err).replace(password, "***")) from None
        raise


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _fetch_named(url: str, handle: Any, limits: tuple[float, float, int | None],
                 progress: bool, what: str, by_hand: str) -> tuple[int, int | None]:
    try:
        return _stream(url, handle, limits, progress)
    except Refused as err:
        raise DownloadError(f"could not download {what} from {redact(url)}: {err}. Nothing "
                            "was saved. " + by_hand) from None
    except (urllib.error.URLError, HTTPException, OSError) as err:
        if isinstance(err, urllib.error.HTTPError):
            err.close()  # it holds the response, and with it the connection
        reason = (err if isinstance(err, urllib.error.HTTPError)  # "HTTP Error 404: ..."
                  else getattr(err, "reason", None) or err)
        raise DownloadError(
            f"could not download {what} from {redact(url)} ({type(err).__name__}: {reason}). "
            + by_hand) from err


__all__ = ["DEADLINE_ENV", "DEADLINE_S", "MAX_DEADLINE_S", "SCHEMES", "TIMEOUT_S",
           "DownloadError", "IntegrityError", "check_scheme", "download", "file_hashes",
           "mismatches", "redact", "verify"]
