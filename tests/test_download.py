"""Verified downloads of ADBench's data sets, served by a local HTTP server (127.0.0.1).

Every test runs offline: a ``ThreadingHTTPServer`` on a free local port serves small
``.npz`` files made here, the registry is swapped for one that lists them, and the cache
is a temporary folder. The server is started and stopped by the fixture; every request
times out after a few seconds.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import make_xy

import ballad_env
from ballad_env.data import (
    DATA_HOME_ENV,
    MIRROR_ENV,
    DownloadError,
    IntegrityError,
    adbench,
    available_datasets,
    data_file,
    dataset_name,
    download,
    load_dataset,
)
from ballad_env.data.download import file_hashes

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FOLDER = "adbench/datasets/Classical"


def _npz_bytes(seed: int) -> bytes:
    X, y = make_xy(n=120, n_anomalies=8, d=3, seed=seed)
    buffer = io.BytesIO()
    np.savez(buffer, X=X, y=y)
    return buffer.getvalue()


class _Server:
    """Files by URL path; ``truncate`` paths announce their full length and send half.

    ``modes`` play a hostile server on a path: ``"endless"`` (no length, 64 MB of zeros),
    ``"huge"`` (announces 10^13 bytes), ``"trickle"`` (one byte every 0.05 s), ``"stall"``
    (headers, then nothing for 3 s), ``"slow"`` (0.2 s before the body); ``redirects`` answer
    302 to another address; ``sent`` counts the body bytes each path got out.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.truncate: set[str] = set()
        self.modes: dict[str, str] = {}
        self.redirects: dict[str, str] = {}
        self.sent: dict[str, int] = {}
        self.requests: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                owner.requests.append(self.path)
                if self.path in owner.redirects:
                    self.send_response(302)
                    self.send_header("Location", owner.redirects.pop(self.path))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = owner.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                mode = owner.modes.get(self.path)
                self.send_response(200)
                if mode in ("endless", "huge"):
                    self._endless(mode)
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if mode in ("trickle", "stall"):
                    self._trickle(body, mode)
                elif self.path in owner.truncate:
                    self.wfile.write(body[: len(body) // 2])
                    self.close_connection = True
                else:
                    if mode == "slow":
                        time.sleep(0.2)
                    self.wfile.write(body)

            def _endless(self, mode: str) -> None:
                if mode == "huge":
                    self.send_header("Content-Length", str(10**13))
                self.end_headers()
                self.close_connection = True
                owner.sent[self.path] = 0
                try:
                    for _ in range(1024):  # 64 MB in all, unless the client hangs up
                        self.wfile.write(b"\0" * 65536)
                        owner.sent[self.path] += 65536
                except OSError:
                    return

            def _trickle(self, body: bytes, mode: str) -> None:
                self.close_connection = True
                try:
                    if mode == "stall":
                        time.sleep(3.0)
                        return
                    for index in range(min(len(body), 100)):
                        self.wfile.write(body[index:index + 1])
                        self.wfile.flush()
                        time.sleep(0.05)
                except OSError:
                    return

            def log_message(self, *args: Any) -> None:  # keep the test output quiet
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
        thread.join(timeout=5)


def _row(name: str, file: str, content: bytes, *, sha256: bool = True) -> dict[str, Any]:
    """A registry entry of ``content``: its git blob id always, size and SHA256 if asked
    (computed here independently of the package's code)."""
    blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    return {"name": name, "file": file, "git_blob_sha1": blob,
            "size": len(content) if sha256 else None,
            "sha256": hashlib.sha256(content).hexdigest() if sha256 else None,
            "n": 120, "d": 3, "anomalies": 8, "contamination": 8 / 120, "figures_from": "file"}


@pytest.fixture
def fixture_registry(server: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                     ) -> dict[str, bytes]:
    """Two fixture data sets, ``adbench/Alpha`` (size, SHA256 and blob id registered) and
    ``adbench/beta`` (blob id only, like ADBench's four largest files), served at the
    pinned address; the cache is ``tmp_path / "cache"``; no mirror."""
    contents = {"1_Alpha.npz": _npz_bytes(1), "2_beta.npz": _npz_bytes(2)}
    registry = {"repository": "test/ADBench", "commit": COMMIT, "folder": FOLDER,
                "datasets": [_row("Alpha", "1_Alpha.npz", contents["1_Alpha.npz"]),
                             _row("beta", "2_beta.npz", contents["2_beta.npz"], sha256=False)]}
    monkeypatch.setattr(adbench, "registry", lambda: registry)
    monkeypatch.setattr(adbench, "URL_TEMPLATE", server.url + "/{commit}/{folder}/{file}")
    monkeypatch.setattr(download, "TIMEOUT_S", 5.0)
    monkeypatch.setenv(DATA_HOME_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    for key in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(key, "127.0.0.1,localhost")
    for file, content in contents.items():
        server.files[f"/{COMMIT}/{FOLDER}/{file}"] = content
    return contents


def _cached(tmp_path: Path, file: str) -> Path:
    return tmp_path / "cache" / "adbench" / COMMIT[:12] / file


def _leftovers(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "adbench" / COMMIT[:12]
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ------------------------------------------------------------------------------ downloads


def test_download_then_cache_hit_without_a_request(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    ds = load_dataset("ADBench/ALPHA")
    assert ds.name == "adbench/Alpha" and ds.X.shape == (120, 3)
    X, y = make_xy(n=120, n_anomalies=8, d=3, seed=1)
    np.testing.assert_array_equal(ds.X, X)
    assert server.requests == [f"/{COMMIT}/{FOLDER}/1_Alpha.npz"]
    assert _cached(tmp_path, "1_Alpha.npz").read_bytes() == fixture_registry["1_Alpha.npz"]
    again = load_dataset("adbench/alpha")
    np.testing.assert_array_equal(again.X, ds.X)
    assert len(server.requests) == 1  # the second load used the cache
    assert _leftovers(tmp_path) == ["1_Alpha.npz"]


def test_git_blob_id_alone_verifies_a_download(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    assert load_dataset("adbench/beta").n_samples == 120
    _cached(tmp_path, "2_beta.npz").write_bytes(fixture_registry["1_Alpha.npz"])
    with pytest.raises(IntegrityError, match="git_blob_sha1"):
        load_dataset("adbench/beta")


def test_git_blob_id_is_gits_object_id(tmp_path: Path) -> None:
    """``git hash-object`` of b"hello\\n" is ce01362...; an empty file's is e69de29..."""
    (tmp_path / "hello").write_bytes(b"hello\n")
    (tmp_path / "empty").write_bytes(b"")
    assert file_hashes(tmp_path / "hello")["git_blob_sha1"] == (
        "ce013625030ba8dba906f756967f9e9ca394464a")
    assert file_hashes(tmp_path / "empty")["git_blob_sha1"] == (
        "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")


def test_wrong_hash_leaves_no_file(server: _Server, fixture_registry: dict[str, bytes],
                                   tmp_path: Path) -> None:
    server.files[f"/{COMMIT}/{FOLDER}/1_Alpha.npz"] = _npz_bytes(7)  # another file
    with pytest.raises(DownloadError) as info:
        load_dataset("adbench/Alpha")
    message = str(info.value)
    assert "does not match its registered hash" in message and "sha256" in message
    assert f"{server.url}/{COMMIT}/{FOLDER}/1_Alpha.npz" in message
    assert _leftovers(tmp_path) == []


def test_truncated_transfer_leaves_no_file(server: _Server, fixture_registry: dict[str, bytes],
                                           tmp_path: Path) -> None:
    server.truncate.add(f"/{COMMIT}/{FOLDER}/1_Alpha.npz")
    with pytest.raises(DownloadError, match="adbench/Alpha") as info:
        load_dataset("adbench/Alpha")
    assert re.search(r"cut short|IncompleteRead", str(info.value))
    assert _leftovers(tmp_path) == []
    server.truncate.clear()  # the next try downloads it whole
    assert load_dataset("adbench/Alpha").n_samples == 120


def test_mirror_replaces_the_address_base(server: _Server, fixture_registry: dict[str, bytes],
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    server.files["/mirror/1_Alpha.npz"] = fixture_registry["1_Alpha.npz"]
    monkeypatch.setenv(MIRROR_ENV, server.url + "/mirror/")
    assert load_dataset("adbench/alpha").n_samples == 120
    assert server.requests == ["/mirror/1_Alpha.npz"]


def test_mirror_can_be_a_local_folder(fixture_registry: dict[str, bytes], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "2_beta.npz").write_bytes(fixture_registry["2_beta.npz"])
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "copy"))
    assert load_dataset("adbench/beta").n_samples == 120
    assert _cached(tmp_path, "2_beta.npz").is_file()


def test_offline_error_names_file_address_and_where_to_put_it(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    closed = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens there now: connection refused
    monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{port}")
    with pytest.raises(DownloadError) as info:
        load_dataset("adbench/Alpha")
    message = str(info.value)
    assert f"http://127.0.0.1:{port}/1_Alpha.npz" in message
    assert str(_cached(tmp_path, "1_Alpha.npz")) in message and "by hand" in message
    assert _leftovers(tmp_path) == []
    monkeypatch.delenv(MIRROR_ENV)
    server.files.clear()  # 404 at the pinned address
    with pytest.raises(DownloadError, match="404"):
        load_dataset("adbench/Alpha")


def test_tampered_cached_file_is_refused(server: _Server, fixture_registry: dict[str, bytes],
                                         tmp_path: Path) -> None:
    path = data_file("adbench/Alpha")
    assert path == _cached(tmp_path, "1_Alpha.npz")
    content = bytearray(path.read_bytes())
    content[-30] ^= 0xFF
    path.write_bytes(bytes(content))
    with pytest.raises(IntegrityError, match=r"does not match its registered hash.*Delete it"):
        load_dataset("adbench/Alpha")
    assert path.is_file() and len(server.requests) == 1  # kept for inspection, not refetched


def test_env_plays_a_downloaded_data_set(server: _Server,
                                         fixture_registry: dict[str, bytes]) -> None:
    env = gym.make(ballad_env.ENV_ID, dataset="adbench/alpha", prior="knn")
    try:
        _, info = env.reset(seed=0)
        assert info["dataset"] == "adbench/Alpha"
    finally:
        env.close()


def test_listing_says_what_is_cached(server: _Server, fixture_registry: dict[str, bytes]
                                     ) -> None:
    rows = {row.name: row for row in available_datasets(details=True)}
    assert rows["adbench/Alpha"].cached is False and rows["adbench/Alpha"].n == 120
    load_dataset("adbench/Alpha")
    rows = {row.name: row for row in available_datasets(details=True)}
    assert rows["adbench/Alpha"].cached is True and rows["adbench/beta"].cached is False
    assert rows["Glass"].kind == "bundled" and rows["Glass"].cached is True


# ------------------------------------------------------------------------------ registry


def test_adbench_registry_is_pinned_and_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MIRROR_ENV, raising=False)  # the pinned address, whatever the shell sets
    registry = json.loads(adbench.REGISTRY_FILE.read_text())
    assert registry["commit"] == "3dac8221081e190f157d78e93bfa8867f90d0965"
    rows = registry["datasets"]
    assert len(rows) == 47
    assert len({row["name"].lower() for row in rows}) == 47
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{40}", row["git_blob_sha1"]), row
        assert row["file"].split("_", 1)[1] == row["name"] + ".npz"
        assert 0 < row["contamination"] < 0.5 and row["n"] > 0 and row["d"] > 0
        if row["sha256"] is None:  # not read: its figures are ADBench's published table's
            assert row["figures_from"].startswith("README.md table")
    unread = sorted(row["name"] for row in rows if row["sha256"] is None)
    assert unread == ["backdoor", "census", "fraud", "speech"]
    cover = next(row for row in rows if row["name"] == "cover")
    assert (cover["n"], cover["d"], cover["anomalies"]) == (286048, 10, 2747)
    assert adbench.source_url(cover) == (
        "https://github.com/Minqi824/ADBench/raw/3dac8221081e190f157d78e93bfa8867f90d0965/"
        "adbench/datasets/Classical/10_cover.npz")


def test_adbench_names_resolve_without_a_download(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_HOME_ENV, str(tmp_path))
    assert dataset_name("ADBench/COVER") == "adbench/cover"
    assert dataset_name("adbench/wbc") == "adbench/WBC"
    assert dataset_name("wbc") == "WBC"  # a bare name is the paper's bundled copy
    with pytest.raises(FileNotFoundError, match="adbench/cover.*adbench/yeast"):
        load_dataset("adbench/nope")
    with pytest.raises(FileNotFoundError, match="'adbench/cover'"):
        load_dataset("cover")  # never downloaded under a bare name: the error says how
    assert not list(tmp_path.iterdir())
