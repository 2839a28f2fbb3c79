"""The paper's 18 benchmark data sets, shipped inside the package (2.8 MB of ``.npz``).

``benchmarks/manifest.json`` holds, per data set, the file, its SHA256 and size, n, d and
contamination, the paper's table row (``paper``), the public source the file was rebuilt
from and a note on how it differs from the paper's. :func:`data_card` renders one entry;
:func:`verify_bundled` checks every file's hash (the test suite does; loading does not).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from ballad_env.data.download import mismatches

BUNDLED_DIR = Path(__file__).resolve().parent / "benchmarks"


@functools.cache
def manifest() -> dict[str, dict[str, Any]]:
    """The bundled manifest: data set name -> its entry."""
    entries: dict[str, dict[str, Any]] = json.loads(
        (BUNDLED_DIR / "manifest.json").read_text(encoding="utf-8"))
    return entries


def bundled_names() -> list[str]:
    """The paper's 18 data sets, by name, in the paper's (alphabetical) order."""
    return sorted(manifest(), key=str.lower)


def bundled_name(name: str) -> str | None:
    """The bundled data set ``name`` (any case) stands for, or ``None``."""
    return next((key for key in manifest() if key.lower() == name.lower()), None)


def bundled_file(name: str) -> Path:
    """The file of the bundled data set ``name`` (exact name, as :func:`bundled_name`)."""
    return BUNDLED_DIR / manifest()[name]["file"]


def verify_bundled() -> dict[str, list[str]]:
    """Every bundled file whose size or SHA256 differs from the manifest, with what differs
    (empty when the package is intact)."""
    bad = {}
    for name, entry in manifest().items():
        path = BUNDLED_DIR / entry["file"]
        found = (mismatches(path, {"size": entry["bytes"], "sha256": entry["sha256"]})
                 if path.is_file() else ["file missing"])
        if found:
            bad[name] = found
    return bad


def _row(label: str, ours: Any, paper: Any) -> str:
    if ours == paper:
        mark = ""
    elif isinstance(ours, float) and abs(ours - paper) <= 1.5e-4:  # 4 decimals, rounded
        mark = "  (rounding)"
    else:
        mark = "  (differs)"
    return f"  {label:<14}{ours!s:>10}{paper!s:>10}{mark}"


def data_card(name: str) -> str:
    """A data set's card: source, how this copy was made, and its size beside the paper's.

    Raises ``KeyError`` listing the bundled names if ``name`` is not one (any case).
    """
    key = bundled_name(name)
    if key is None:
        raise KeyError(f"no data card for {name!r}: the bundled data sets are "
                       f"{', '.join(bundled_names())}")
    entry = manifest()[key]
    paper = entry["paper"]
    lines = [f"{key} (bundled with ballad-env: {entry['file']}, {entry['bytes']} bytes)",
             f"  source: {entry['source']}",
             f"  made: {entry['note'] or 'as the source, unchanged'}",
             f"  {'':<14}{'ours':>10}{'paper':>10}",
             _row("n", entry["n"], paper["n"]), _row("d", entry["d"], paper["d"]),
             _row("contamination", entry["contamination"], paper["contamination"]),
             f"  sha256: {entry['sha256']}"]
    return "\n".join(lines)


__all__ = ["BUNDLED_DIR", "bundled_file", "bundled_name", "bundled_names", "data_card",
           "manifest", "verify_bundled"]
