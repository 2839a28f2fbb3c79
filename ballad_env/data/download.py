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
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.client import HTTPException
from pathlib import Path
from typing import Any

#: Seconds without progress before a download is abandoned.
TIMEOUT_S = 60.0
_CHUNK = 1 << 20
_USER_AGENT = "ballad-env verified data download (python urllib)"


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


def _stream(url: str, handle: Any, timeout: float, progress: bool) -> tuple[int, int | None]:
    """Copy ``url`` into ``handle``; return (bytes received, bytes announced or None)."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        received = 0
        bar = _progress_bar(total, url) if progress else None
        try:
            while chunk := response.read(_CHUNK):
                handle.write(chunk)
                received += len(chunk)
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
    return received, total


def _progress_bar(total: int | None, url: str) -> Any:
    """A tqdm bar on stderr for transfers over 4 MB (or of unknown size) at a terminal."""
    if (total is not None and total < 4 << 20) or not sys.stderr.isatty():
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=url.rsplit("/", 1)[-1])


def download(url: str, dest: Path, expected: Mapping[str, Any], what: str, *,
             timeout: float | None = None, progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` and verify it against ``expected``.

    Parameters
    ----------
    url : str
        ``http://``, ``https://`` or ``file://`` address.
    dest : pathlib.Path
        Final path; its folder is created. Nothing appears there unless the file is whole
        and matches ``expected``.
    expected : mapping
        Any of ``size``, ``sha256``, ``git_blob_sha1``; at least one hash is required.
    what : str
        The data set's name, for messages.
    timeout : float, optional
        Seconds without progress before giving up (default :data:`TIMEOUT_S`).
    progress : bool, default True
        Show a progress bar for a large transfer at a terminal.

    Raises
    ------
    DownloadError
        If the address cannot be reached, answers with an error, the transfer is cut short
        or the file does not match ``expected``.
    """
    if not (expected.get("sha256") or expected.get("git_blob_sha1")):
        raise ValueError(f"{what}: refusing to download {url} without a registered hash")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part{os.getpid()}")
    by_hand = (f"To install it by hand, download {url} on a machine that can reach it and put "
               f"it at {dest} (it is checked against its hash before use), or set "
               "$BALLAD_DATA_MIRROR to a folder or server holding the file.")
    try:
        with tmp.open("wb") as handle:
            try:
                received, total = _stream(url, handle, timeout or TIMEOUT_S, progress)
            except (urllib.error.URLError, HTTPException, OSError) as err:
                if isinstance(err, urllib.error.HTTPError):
                    err.close()  # it holds the response, and with it the connection
                reason = (err if isinstance(err, urllib.error.HTTPError)  # "HTTP Error 404: ..."
                          else getattr(err, "reason", None) or err)
                raise DownloadError(
                    f"could not download {what} from {url} ({type(err).__name__}: {reason}). "
                    + by_hand) from err
        if total is not None and received != total:
            raise DownloadError(
                f"the download of {what} from {url} was cut short: {received} of {total} "
                f"bytes. Nothing was saved under {dest}; run again. " + by_hand)
        bad = mismatches(tmp, expected)
        if bad:
            raise DownloadError(
                f"the file downloaded for {what} from {url} does not match its registered hash "
                f"({'; '.join(bad)}): the address serves another file or the transfer was "
                f"damaged. Nothing was saved under {dest}. " + by_hand)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


__all__ = ["TIMEOUT_S", "DownloadError", "IntegrityError", "download", "file_hashes",
           "mismatches", "verify"]
