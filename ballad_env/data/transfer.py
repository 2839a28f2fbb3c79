"""The transfer under a download (``ballad_env.data.download``): one address opened with a
deadline over the whole exchange, redirects only to http(s), a mirror's password sent only to
its own host and never shown, and a local file read only if it is a regular file.

A socket's timeout bounds one read: a server that sends its status line and headers a byte
at a time would keep urllib waiting past any total deadline, since the headers are read
before ``urlopen`` returns. :class:`Deadline` shuts the download's sockets when the deadline
passes, wherever the exchange then is.
"""

from __future__ import annotations

import base64
import os
import socket
import threading
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit

from ballad_env.files import open_regular

_USER_AGENT = "ballad-env verified data download (python urllib)"


class Refused(Exception):
    """Why a transfer was stopped before it ended (the message goes into ``DownloadError``)."""


def redact(url: str) -> str:
    """``url`` as messages show it: a password in it (``https://user:secret@host/``) masked
    as ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a malformed port or address: show its scheme only
        return f"{url.split(':', 1)[0]}:<malformed address>"
    if not password:
        return url
    user = f"{parts.username}:***" if parts.username else ":***"
    host = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"{user}@{host}").geturl()


class SafeRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another http(s) address (urllib alone would follow ftp)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        if urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise Refused(f"the server answered with a redirect to {redact(newurl)}, which "
                           "is not an http(s) address")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class Deadline:
    """Shuts the connections of one download when its deadline passes, wherever the transfer
    then is: a server that trickles its status line and headers is stopped too (a socket's
    timeout bounds one read only, and urllib reads the headers before it returns)."""

    def __init__(self, seconds: float) -> None:
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.passed:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.passed = True
            for sock in self._sockets:
                _shut(sock)

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already
        pass


def _watched(connection: Any, deadline: Deadline) -> Any:
    """A factory of ``connection`` objects whose socket ``deadline`` watches once connected."""
    def make(*args: Any, **kwargs: Any) -> Any:
        conn = connection(*args, **kwargs)
        connect = conn.connect

        def watched_connect() -> None:
            connect()
            deadline.watch(conn.sock)

        conn.connect = watched_connect
        return conn
    return make


class _WatchedHTTP(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_watched(http_class, self.deadline), req, **kwargs)


class _WatchedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_watched(http_class, self.deadline), req, **kwargs)


def open_address(url: str, timeout: float, deadline: Deadline) -> tuple[Any, int | None]:
    """The response to ``url`` (a ``file://`` one only if it is a regular file: a FIFO in a
    mirror folder would block for ever) and the length it announces."""
    if urlsplit(url).scheme.lower() == "file":
        handle = open_regular(urllib.request.url2pathname(urlsplit(url).path), "mirror file")
        return handle, os.fstat(handle.fileno()).st_size
    opener = urllib.request.build_opener(SafeRedirects, _WatchedHTTP(deadline),
                                         _WatchedHTTPS(deadline))
    parts = urlsplit(url)
    request = urllib.request.Request(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1])
                                     .geturl(), headers={"User-Agent": _USER_AGENT})
    if parts.username is not None:  # a mirror's user and password: never sent on a redirect
        token = base64.b64encode(f"{unquote(parts.username)}:"
                                 f"{unquote(parts.password or '')}".encode()).decode()
        request.add_unredirected_header("Authorization", f"Basic {token}")
    response = opener.open(request, timeout=timeout)
    length = response.headers.get("Content-Length")
    return response, int(length) if length and length.isdigit() else None


def set_read_timeout(response: Any, seconds: float) -> None:
    """Bound the next socket read of an HTTP response to ``seconds`` (a file has no socket)."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    if isinstance(sock, socket.socket):
        sock.settimeout(max(seconds, 1e-3))


__all__ = ["Deadline", "Refused", "SafeRedirects", "open_address", "redact", "set_read_timeout"]
