"""Provenance of results: what data, which package versions and which source made them.

A results folder records these when it is created; resuming with other data, versions or
source is refused, so results of two code versions never mix.
"""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from typing import Any

import numpy as np

from ballad_env.data import Dataset
from ballad_env.replay.store import source_hash

VERSIONED_PACKAGES = ("ballad-env", "numpy", "scipy", "scikit-learn", "pyod", "scikit-optimize",
                      "gymnasium", "pandas")


def fingerprint(dataset: Dataset) -> dict[str, Any]:
    """Size, contamination and a content hash of a data set: resumes must see the same data."""
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(dataset.X).tobytes())
    digest.update(np.ascontiguousarray(dataset.y).tobytes())
    return {"n": dataset.n_samples, "d": dataset.n_features,
            "contamination": round(dataset.contamination, 6), "sha256": digest.hexdigest()[:16]}


#: The entry of ``package_versions`` that hashes the project's source.
SOURCE_KEY = "ballad-env source"


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape the results, and a hash of this
    project's own source (its version number does not change with every edit)."""
    versions = {"python": platform.python_version()}
    for package in VERSIONED_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    versions[SOURCE_KEY] = source_fingerprint()
    return versions


#: Modules that only present results (tables, figures, reports): editing them never
#: invalidates stored results.
PRESENTATION_MODULES = frozenset({
    "agents/reports/plots.py", "agents/reports/tables.py",
    "scripts/studies/paper/__main__.py", "agents/experiments/cli/bench.py",
    "agents/experiments/bench/episodes.py",
    "scripts/studies/crossed/label_free.py"})


def source_fingerprint() -> str:
    """Hash of the ``ballad_env`` and ``agents`` sources that make results (presentation
    modules excluded)."""
    import agents
    import ballad_env

    return source_hash([ballad_env, agents], PRESENTATION_MODULES)


__all__ = ["SOURCE_KEY", "VERSIONED_PACKAGES", "fingerprint", "package_versions",
           "source_fingerprint"]
