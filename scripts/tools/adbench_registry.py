#!/usr/bin/env python3
"""Write ``ballad_env/data/adbench.json``: ADBench's classical data sets, pinned and hashed.

Maintainers run it once per pinned commit, on a bare git copy of Minqi824/ADBench::

    python -m scripts.tools.adbench_registry /path/to/ADBench.git \\
        --commit 3dac8221081e190f157d78e93bfa8867f90d0965

Every file of ``adbench/datasets/Classical`` at the commit gets its git blob id (from the
tree: it verifies a download exactly as git does). A file present in the copy also gets
its size and SHA256, and n, d and the anomaly count read from the file itself; a file the
copy lacks (a partial clone leaves out the largest) gets n, d and the anomaly count from
the table of the repository's README at the same commit, and says so in ``figures_from``.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FOLDER = "adbench/datasets/Classical"
_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True,
                          capture_output=True).stdout


def readme_table(repo: Path, commit: str) -> dict[int, tuple[int, int, int]]:
    """ADBench's README table: number -> (samples, features, anomalies)."""
    rows = {}
    for line in git(repo, "show", f"{commit}:README.md").decode().splitlines():
        match = _ROW.match(line.strip())
        if match:
            rows[int(match[1])] = (int(match[3]), int(match[4]), int(match[5]))
    return rows


def entry(repo: Path, commit: str, blob: str, size: str, path: str,
          table: dict[int, tuple[int, int, int]]) -> dict[str, object]:
    from ballad_env.data.download import file_hashes

    file = path.rsplit("/", 1)[-1]
    number, stem = file.removesuffix(".npz").split("_", 1)
    row: dict[str, object] = {"name": stem, "file": file, "git_blob_sha1": blob}
    present = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}:{path}"],
                             capture_output=True).returncode == 0
    if present:
        content = git(repo, "show", f"{commit}:{path}")
        tmp = REPO / ".adbench_registry.tmp"
        tmp.write_bytes(content)
        try:
            hashes = file_hashes(tmp)
        finally:
            tmp.unlink()
        assert hashes["git_blob_sha1"] == blob, file
        with np.load(io.BytesIO(content), allow_pickle=False) as archive:
            n, d = archive["X"].shape
            anomalies = int(np.asarray(archive["y"]).sum())
        row.update(size=hashes["size"], sha256=hashes["sha256"], figures_from="file")
    else:
        n, d, anomalies = table[int(number)]
        row.update(size=None, sha256=None,
                   figures_from=f"README.md table of ADBench at {commit[:7]} (file not read)")
    row.update(n=int(n), d=int(d), anomalies=anomalies,
               contamination=round(anomalies / int(n), 6))
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a (bare) git copy of Minqi824/ADBench")
    p.add_argument("--commit", required=True, help="the commit to pin (40 hex digits)")
    p.add_argument("--output", type=Path, default=REPO / "ballad_env" / "data" / "adbench.json",
                   help="registry file to write (default: %(default)s)")
    args = p.parse_args(argv)
    table = readme_table(args.repo, args.commit)
    listing = git(args.repo, "ls-tree", "-l", args.commit, f"{FOLDER}/").decode().splitlines()
    rows = []
    for line in listing:
        meta, path = line.split("\t", 1)
        _, _, blob, size = meta.split()
        rows.append(entry(args.repo, args.commit, blob, size, path, table))
    rows.sort(key=lambda r: int(str(r["file"]).split("_", 1)[0]))
    registry = {"repository": "Minqi824/ADBench", "commit": args.commit, "folder": FOLDER,
                "datasets": rows}
    args.output.write_text(json.dumps(registry, indent=1) + "\n")
    print(f"{len(rows)} data sets written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
