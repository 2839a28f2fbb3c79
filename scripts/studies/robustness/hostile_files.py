"""Hostile files and servers, for the robustness sweep
(``python -m scripts.studies.robustness --files``).

Where ``scripts.studies.robustness.damaged_files`` damages a file one byte at a time, this
module writes what a careless hand or an attacker would: manifests of the wrong shapes
(every section of ``run.json`` and ``store.json`` replaced by a list, a number, a string,
null, an object of the wrong values, or JSON nested 100,000 deep), saved policies whose
members declare or inflate to gigabytes or whose plain JSON asks for a huge network or
buffer, and a download server that sends an endless body, announces 10^13 bytes, trickles a
byte at a time, redirects to another scheme or in a loop, or finds a link planted at the
temporary file's name. Each case must be read identically or refused with an error naming
the file (the data set, for a download) within its time limit, leaving nothing behind:
:func:`check_damages` counts the manifest and policy cases, :func:`download_outcome` the
server's. The server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import collections
import functools
import http.server
import io
import json
import os
import struct
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.studies.robustness.damaged_files import FileKind, Outcome, check_damages

#: Values each manifest section is replaced by (a 100,000-deep list is written as text).
WRONG_VALUES: tuple[Any, ...] = ([], 5, "x", None, {}, [1], {"a": 1}, {"a": [1]}, True, 1e308)
NESTED = 100_000


@dataclass(frozen=True)
class Rewrite:
    """A whole-file replacement: ``apply`` returns the new bytes (``check_damages``'s
    protocol, like ``corruption.Damage``), ``label`` says what it is."""

    label: str
    make: Callable[[bytes], bytes]

    def apply(self, data: bytes) -> bytes:
        return self.make(data)

    def __str__(self) -> str:
        return self.label


# ------------------------------------------------------------------------------ manifests
def _nested_text() -> str:
    return "[" * NESTED + "]" * NESTED


def _with(data: bytes, path: tuple[str, ...], value: Any) -> bytes:
    """The JSON ``data`` with the entry at ``path`` replaced by ``value`` (``NESTED``: the
    100,000-deep list, spliced in as text)."""
    manifest = json.loads(data)
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "\0nested\0" if value is NESTED else value
    return json.dumps(manifest).replace('"\\u0000nested\\u0000"', _nested_text()).encode()


def manifest_rewrites(data: bytes) -> list[Rewrite]:
    """Every section of a manifest (and every entry of its object sections) replaced by
    each of :data:`WRONG_VALUES` and the deep list; and the whole file replaced by JSON of
    another shape."""
    manifest = json.loads(data)
    paths: list[tuple[str, ...]] = []
    for key, value in manifest.items():
        paths.append((key,))
        if isinstance(value, dict):
            paths += [(key, inner) for inner in value]
    rewrites = [Rewrite(f"{'.'.join(p)} = {json.dumps(v)[:20] if v is not NESTED else 'deep'}",
                        functools.partial(_with, path=p, value=v))
                for p in paths for v in (*WRONG_VALUES, NESTED)]
    for label, text in (("the file a deep list", _nested_text()), ("the file a list", "[]"),
                        ("the file a number", "5"), ("the file empty", "")):
        rewrites.append(Rewrite(label, functools.partial(_constant, text)))
    return rewrites


def _constant(text: str, data: bytes) -> bytes:
    return text.encode()


def rerun_kind(kind: FileKind) -> FileKind:
    """``run.json`` read as a rerun of the same grid reads it (``ResultStore.prepare``
    checks the stored run against the run asked for, then the table is loaded)."""
    from agents.experiments.stores.results import ResultStore, load_results

    intact = json.loads(kind.path.read_text())
    output = kind.path.parent

    def rerun() -> Any:
        ResultStore(output).prepare(intact)
        return load_results(output)

    return FileKind("run.json (a rerun)", kind.path, rerun, kind.same)


def manifest_outcomes(kinds: list[FileKind]) -> Iterator[Outcome]:
    """:func:`manifest_rewrites` of each manifest kind (``store.json``, ``run.json``)."""
    for kind in kinds:
        outcome = check_damages(kind, manifest_rewrites(kind.path.read_bytes()))
        yield Outcome(f"{kind.name} shapes", outcome.counts, outcome.failures)


# ------------------------------------------------------------------------------ policies
def rezip(data: bytes, change: Callable[[str, bytes], bytes | None]) -> bytes:
    """The zip ``data`` with each member's bytes passed through ``change`` (None: left out)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            body = change(name, src.read(name))
            if body is not None:
                dst.writestr(name, body)
    return out.getvalue()


def with_declared_size(data: bytes, member: str, size: int) -> bytes:
    """The zip ``data`` with ``member`` declaring ``size`` bytes (both of its headers)."""
    raw, name = bytearray(data), member.encode()
    for signature, offset, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        start = 0
        while (at := raw.find(signature, start)) >= 0:
            start = at + 4
            if raw[at + name_at: at + name_at + len(name)] == name:
                raw[at + offset: at + offset + 4] = struct.pack("<I", size)
    return bytes(raw)


def _data_json(change: Callable[[dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    def make(data: bytes) -> bytes:
        def member(name: str, body: bytes) -> bytes:
            if name != "data":
                return body
            values = json.loads(body)
            change(values)
            return json.dumps(values).encode()
        return rezip(data, member)
    return make


def policy_rewrites() -> list[Rewrite]:
    """Saved policies that ask for too much: members declaring 2^31 and 2^32 - 1 bytes, a
    ``data`` member inflating to 40 MB, networks of 10^8 parameters or malformed, buffers
    of 10^11, and a rollout of 10^7 steps x 10^4 environments."""
    rewrites = [Rewrite(f"{member} declares {size} bytes",
                        functools.partial(with_declared_size, member=member, size=size))
                for member in ("data", "policy.pth", "policy.optimizer.pth")
                for size in (2**31, 2**32 - 1)]
    rewrites.append(Rewrite("data inflates to 40 MB", _bloated))
    archs: tuple[Any, ...] = ([20000, 20000], {"pi": [64], "vf": [10**5, 10**5]}, [0], [-3],
                              ["x"], 5)
    for arch in archs:
        rewrites.append(Rewrite(f"net_arch {json.dumps(arch)}", _data_json(
            functools.partial(_set_entry, "policy_kwargs", {"net_arch": arch}))))
    for key in ("n_steps", "n_envs", "batch_size"):
        for value in (10**11, 1e11, -1, 0):
            rewrites.append(Rewrite(f"{key} {value}", _data_json(
                functools.partial(_set_entry, key, value))))
    rewrites.append(Rewrite("n_steps 10^7 x n_envs 10^4", _data_json(_huge_rollout)))
    return rewrites


def _huge_rollout(values: dict[str, Any]) -> None:
    """Each within its limit, their product a 6.5 TiB buffer (issue 39, item 15)."""
    values["n_steps"], values["n_envs"] = 10**7, 10**4


def _bloated(data: bytes) -> bytes:
    """The zip with 40 MB of blanks after its ``data`` member's JSON (40 kB deflated)."""
    return rezip(data, lambda name, body: body + b" " * (40 << 20) if name == "data" else body)


def _set_entry(key: str, value: Any, values: dict[str, Any]) -> None:
    values[key] = value


# ------------------------------------------------------------------------------ downloads
class HostileServer:
    """An HTTP server on 127.0.0.1 playing one trick per path: ``/endless`` (no length, up
    to 64 MB), ``/huge`` (announces 10^13 bytes), ``/trickle`` (a byte every 0.05 s),
    ``/to-ftp`` and ``/loop`` (redirects), ``/file`` (the genuine file)."""

    def __init__(self, body: bytes) -> None:
        self.body, self.sent = body, collections.Counter[str]()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                owner.trick(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def trick(self, handler: Any) -> None:
        path = handler.path
        if path in ("/to-ftp", "/loop"):
            handler.send_response(302)
            handler.send_header("Location", "ftp://127.0.0.1/x.npz" if path == "/to-ftp"
                                else "/loop")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if path == "/slow-headers":
            self.slow_headers(handler)
            return
        handler.send_response(200)
        length = {"/huge": str(10**13), "/trickle": str(len(self.body)),
                  "/file": str(len(self.body))}.get(path)
        if length is not None:
            handler.send_header("Content-Length", length)
        handler.end_headers()
        handler.close_connection = True
        try:
            if path == "/file":
                handler.wfile.write(self.body)
            elif path == "/trickle":
                for index in range(len(self.body)):
                    handler.wfile.write(self.body[index:index + 1])
                    handler.wfile.flush()
                    time.sleep(0.05)
            else:
                for _ in range(1024):
                    handler.wfile.write(b"\0" * 65536)
                    self.sent[path] += 65536
        except OSError:
            return

    def slow_headers(self, handler: Any) -> None:
        """The status line and headers a byte every 0.05 s (20 s in all), then the body."""
        head = (f"HTTP/1.1 200 OK\r\nContent-Length: {len(self.body)}\r\n"
                f"X-Padding: {'a' * 360}\r\n\r\n").encode()
        handler.close_connection = True
        try:
            for index in range(len(head)):
                handler.wfile.write(head[index:index + 1])
                handler.wfile.flush()
                time.sleep(0.05)
            handler.wfile.write(self.body)
        except OSError:
            return

    def __enter__(self) -> HostileServer:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


#: The server's tricks: path, and what a refusal must say.
DOWNLOAD_TRICKS = {"/endless": "more than its registered size", "/huge": "announces",
                   "/trickle": "total deadline", "/slow-headers": "total deadline",
                   "/to-ftp": "redirect", "/loop": "redirect"}
#: The password of the mirror address every trick is asked through: no message may show it.
PASSWORD = "s3cret-word"


def download_outcome(folder: Path, body: bytes, deadline: float = 0.5) -> Outcome:
    """Every trick of :class:`HostileServer`, and a link planted at the temporary name,
    against ``ballad_env.data.download.download`` of a file registered as ``body``: each
    must be a ``DownloadError`` naming the data set, saying why, within a few deadlines, with
    nothing left in the folder and the link's target untouched."""
    import hashlib

    from ballad_env.data import download as module

    expected = {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    victim = folder / "victim.txt"
    victim.write_text("keep me")
    with HostileServer(body) as server:
        cases: list[tuple[str, str, Callable[[Path], Path] | None]] = [
            (path, why, None) for path, why in DOWNLOAD_TRICKS.items()]
        cases.append(("/file", "temporary file", _planted(victim)))
        for path, why, plant in cases:
            dest = folder / path.strip("/") / "x.npz"
            dest.parent.mkdir()
            planted = plant(dest) if plant else None
            start = time.monotonic()
            url = server.url.replace("://", f"://mirror:{PASSWORD}@") + path
            try:
                if planted is not None:
                    original = module._part_path
                    module._part_path = functools.partial(_fixed, planted)
                err = within(10 * deadline, functools.partial(
                    module.download, url, dest, expected, "hostile/x", timeout=deadline,
                    deadline=deadline, progress=False))
            finally:
                if planted is not None:
                    module._part_path = original
            seconds = time.monotonic() - start
            if not isinstance(err, module.DownloadError):
                failures.append(f"{path}: {err or 'downloaded without an error'} after "
                                f"{seconds:.1f} s")
            elif "hostile/x" in str(err) and why in str(err) and PASSWORD not in str(err):
                counts["refused, naming the data set and why"] += 1
            else:
                failures.append(f"{path}: {err} after {seconds:.1f} s")
            left = sorted(p.name for p in dest.parent.iterdir() if p != planted)
            if left or victim.read_text() != "keep me":
                failures.append(f"{path}: left {left}, the link's target "
                                f"{'kept' if victim.read_text() == 'keep me' else 'written'}")
    return Outcome("download server", counts, failures)


def within(seconds: float, call: Callable[[], Any]) -> BaseException | str | None:
    """Run ``call`` in a daemon thread for at most ``seconds``: the exception it raised,
    ``None`` if it returned, or a string saying that it still ran (a hang is a failure to
    report, not a sweep that never ends)."""
    box: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            box.append(None)
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return box[0] if box else f"still running after {seconds:g} s"


def _fixed(path: Path, dest: Path) -> Path:
    return path


def _planted(victim: Path) -> Callable[[Path], Path]:
    def plant(dest: Path) -> Path:
        link = dest.with_name(f".{dest.name}.{os.getpid()}.planted.tmp")
        link.symlink_to(victim)
        return link
    return plant


def hostile_outcomes(folder: Path, policy: bool = True) -> Iterator[Outcome]:
    """Every hostile case, made in ``folder``: the manifests' shapes (``store.json``,
    ``run.json``), the policy zip's sizes (if ``policy``: it needs the ``rl`` extra and
    trains a few seconds) and the download server's tricks. One :class:`Outcome` per group,
    as each ends."""
    from scripts.studies.robustness.damaged_files import (
        lattice_kinds,
        policy_kind,
        result_kinds,
        sample_data,
        write_npz,
    )

    folder.mkdir(parents=True, exist_ok=True)
    run_file = result_kinds(folder)[1]
    yield from manifest_outcomes([lattice_kinds(folder)[1], run_file, rerun_kind(run_file)])
    if policy:
        outcome = check_damages(policy_kind(folder), policy_rewrites())
        yield Outcome("policy zip sizes", outcome.counts, outcome.failures)
    data = sample_data()
    write_npz(folder / "sample.npz", data.X, data.y)
    downloads = folder / "downloads"
    downloads.mkdir()
    yield download_outcome(downloads, (folder / "sample.npz").read_bytes())


__all__ = ["DOWNLOAD_TRICKS", "NESTED", "WRONG_VALUES", "HostileServer", "Rewrite",
           "with_declared_size", "within", "PASSWORD",
           "download_outcome", "hostile_outcomes", "manifest_outcomes", "manifest_rewrites",
           "policy_rewrites", "rerun_kind", "rezip"]
