"""Downloads bounded against a hostile or careless server (issue 30), served from 127.0.0.1.

A server that sends an endless body or announces a huge length, one that trickles a byte at
a time, one that redirects elsewhere, a symlink planted at the temporary file's name, a
killed download's leftovers, and several threads of one process loading one data set. The
server and the registry are those of ``test_download``; every deadline here is a fraction
of a second.
"""

# ruff: noqa: F401, F811 - the fixtures imported from test_download are parameters by name

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from test_download import (
    COMMIT,
    FOLDER,
    _cached,
    _leftovers,
    _Server,
    fixture_registry,
    server,
)

from ballad_env import files
from ballad_env.data import MIRROR_ENV, DownloadError, adbench, load_dataset
from ballad_env.data import download as download_module

ALPHA = f"/{COMMIT}/{FOLDER}/1_Alpha.npz"


def test_endless_body_stops_at_the_registered_size(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    server.modes[ALPHA] = "endless"
    with pytest.raises(DownloadError, match=r"more than its registered size") as info:
        load_dataset("adbench/Alpha")
    assert "adbench/Alpha" in str(info.value)
    size = len(fixture_registry["1_Alpha.npz"])
    assert server.sent.get(ALPHA, 0) < size + 8 * (1 << 20)  # stopped, not at 64 MB
    assert _leftovers(tmp_path) == []


def test_a_larger_content_length_is_refused_before_reading(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    server.modes[ALPHA] = "huge"
    with pytest.raises(DownloadError, match=r"announces 10000000000000 bytes"):
        load_dataset("adbench/Alpha")
    assert server.sent.get(ALPHA, 0) < 8 * (1 << 20)  # the client hung up first
    assert _leftovers(tmp_path) == []


def test_a_trickle_hits_the_total_deadline(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    server.modes[ALPHA] = "trickle"  # one byte every 0.05 s: never a socket timeout
    monkeypatch.setattr(download_module, "DEADLINE_S", 0.3)
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"total deadline of 0.3 s"):
        load_dataset("adbench/Alpha")
    assert time.monotonic() - start < 3.0
    assert _leftovers(tmp_path) == []


def test_the_deadline_can_be_set_by_the_environment(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    server.modes[ALPHA] = "trickle"
    monkeypatch.setenv(download_module.DEADLINE_ENV, "0.25")
    with pytest.raises(DownloadError, match=r"total deadline of 0.25 s"):
        load_dataset("adbench/Alpha")
    monkeypatch.setenv(download_module.DEADLINE_ENV, "soon")
    with pytest.raises(ValueError, match=r"BALLAD_DOWNLOAD_DEADLINE is 'soon'"):
        load_dataset("adbench/Alpha")


def test_the_deadline_is_an_option_and_the_socket_timeout_is_named_apart(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    server.modes[ALPHA] = "trickle"
    row = adbench.entry("adbench/Alpha")
    dest = tmp_path / "alpha.npz"
    with pytest.raises(DownloadError, match=r"total deadline of 0.2 s"):
        download_module.download(server.url + ALPHA, dest, adbench.hashes(row), "alpha",
                                 deadline=0.2)
    server.modes[ALPHA] = "stall"  # sends nothing after the headers
    with pytest.raises(DownloadError, match=r"no data for 0.2 s"):
        download_module.download(server.url + ALPHA, dest, adbench.hashes(row), "alpha",
                                 timeout=0.2, deadline=5.0)
    assert not dest.exists()


def test_a_redirect_to_another_scheme_is_refused(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    server.redirects[ALPHA] = "ftp://127.0.0.1/1_Alpha.npz"
    with pytest.raises(DownloadError, match=r"redirect.*ftp"):
        load_dataset("adbench/Alpha")
    server.redirects[ALPHA] = "/elsewhere/1_Alpha.npz"  # http to http is followed
    server.files["/elsewhere/1_Alpha.npz"] = fixture_registry["1_Alpha.npz"]
    assert load_dataset("adbench/Alpha").n_samples == 120


def test_an_ftp_mirror_is_refused(fixture_registry: dict[str, bytes],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MIRROR_ENV, "ftp://mirror.example/adbench")
    with pytest.raises(ValueError, match=r"BALLAD_DATA_MIRROR.*ftp.*http"):
        load_dataset("adbench/Alpha")


def test_a_symlink_at_the_temporary_name_is_never_followed(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    folder = _cached(tmp_path, "1_Alpha.npz").parent
    folder.mkdir(parents=True)
    old_name = folder / f".1_Alpha.npz.part{os.getpid()}"  # the name earlier versions used
    old_name.symlink_to(victim)
    planted = folder / ".1_Alpha.npz.planted.tmp"
    planted.symlink_to(victim)
    monkeypatch.setattr(download_module, "_part_path", lambda dest: planted)
    with pytest.raises(DownloadError, match=r"temporary file"):
        load_dataset("adbench/Alpha")
    assert victim.read_text() == "keep me"
    assert planted.is_symlink()  # not ours: left alone
    monkeypatch.undo()


def test_the_temporary_names_are_unpredictable(tmp_path: Path) -> None:
    dest = tmp_path / "x.npz"
    names = {download_module._part_path(dest).name for _ in range(20)}
    assert len(names) == 20
    host = files._host()
    assert all(name.startswith(f".x.npz.~ballad-{host}-{os.getpid()}-") for name in names)


def test_a_killed_downloads_leftovers_are_removed_at_the_next_start(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    """A dead writer's file of this machine goes at once (issue 39, item 21), another
    machine's after ``STALE_AFTER_S``; a live writer's and a user's look-alikes stay."""
    folder = _cached(tmp_path, "1_Alpha.npz").parent
    folder.mkdir(parents=True)
    dead, host = 99_999_999, files._host()  # above any pid_max: no such process
    stale = [folder / f".1_Alpha.npz.~ballad-{host}-{dead}-0123abcd.tmp",
             folder / f".2_beta.npz.~ballad-0badf00d-{dead}-0123abcd.tmp"]
    for path in stale:
        path.write_bytes(b"x" * 1000)
    old = time.time() - files.STALE_AFTER_S - 1
    os.utime(stale[1], (old, old))
    kept = [folder / f".1_Alpha.npz.~ballad-{host}-{os.getpid()}-89abcdef.tmp",  # live
            folder / f".3_gamma.npz.~ballad-0badf00d-{dead}-0123abcd.tmp",  # elsewhere, recent
            folder / ".thesis.4000000.tmp", folder / ".config.part4000002",  # the user's
            folder / f".notes.{dead}.0123abcd.tmp"]
    for path in kept:
        path.write_bytes(b"y")
        if "gamma" not in path.name:
            os.utime(path, (old, old))
    assert load_dataset("adbench/Alpha").n_samples == 120
    assert not any(path.exists() for path in stale)
    assert all(path.exists() for path in kept)
    again = folder / f".1_Alpha.npz.~ballad-{host}-{dead}-fedcba98.tmp"
    again.write_bytes(b"x")
    assert load_dataset("adbench/Alpha").n_samples == 120  # cached: no download, yet cleaned
    assert not again.exists()


def test_a_sigterm_during_a_download_leaves_no_temporary_file(tmp_path: Path) -> None:
    """SIGTERM ends a download with its temporary file removed (issue 39, item 21)."""
    import subprocess
    import sys
    import textwrap

    folder = tmp_path / "cache"
    script = textwrap.dedent(f"""
        import http.server, threading, time, pathlib, hashlib
        from ballad_env.data.download import download
        class Slow(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.send_header("Content-Length", "100000")
                self.end_headers()
                for _ in range(1000):
                    self.wfile.write(b"x" * 100); self.wfile.flush(); time.sleep(0.05)
            def log_message(self, *a): pass
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        print("ready", flush=True)
        url = f"http://127.0.0.1:{{httpd.server_address[1]}}/x"
        download(url, pathlib.Path({str(folder)!r}) / "x.npz",
                 {{"size": 100000, "sha256": "0" * 64}}, "slow/x", progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 20
    # the download's own temporary file (the cache's write probe makes one for a moment too)
    while not any(folder.glob(".x.npz.*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(folder.glob(".x.npz.*.tmp"))
    proc.terminate()
    assert proc.wait(timeout=20) == 143
    assert list(folder.iterdir()) == []


def test_threads_of_one_process_load_one_data_set_together(
        server: _Server, fixture_registry: dict[str, bytes], tmp_path: Path) -> None:
    server.modes[ALPHA] = "slow"  # every transfer overlaps the others
    errors: list[BaseException] = []
    sizes: list[int] = []

    def load() -> None:
        try:
            sizes.append(load_dataset("adbench/Alpha").n_samples)
        except BaseException as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [] and sizes == [120] * 4
    assert _leftovers(tmp_path) == ["1_Alpha.npz"]


@pytest.mark.parametrize(("name", "why"), [
    ("Glass@-5", "'-5'"), ("Glass@1e9", "'1e9'"), ("Glass@abc", "'abc'"),
    ("Glass@100:-1", "'100:-1'"), ("Glass@", "''")])
def test_a_malformed_sample_says_what_the_at_part_must_be(name: str, why: str) -> None:
    with pytest.raises(ValueError, match=rf"{why}.*<rows> or <rows>:<seed>") as info:
        load_dataset(name)
    assert "unknown data set" not in str(info.value)
    from ballad_env.data import dataset_name

    with pytest.raises(ValueError, match=r"<rows> or <rows>:<seed>"):
        dataset_name(name)
