"""The allocator study (ALLOCATORS.md): can a deployable rule beat buying validation labels?

Every allocator is replayed on cached lattices (``ballad_env.lattice``): one per data set,
seed, prior and cost setting, built once and pickled under ``<out>/lattices``. Agents are
scored by their mean test cost over rounds, their regret against the hindsight-optimal
path and their rank within each cell; the study tunes on the policy split's training
data sets only and reports on the held-out ones and by leave-three-out folds.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ballad_env.lattice import Lattice, build_lattice
from ballad_env.settings import Settings

#: Cost settings of the study, by the tag used in paths and tables.
COST_SETTINGS: dict[str, dict[str, float]] = {
    "default": {}, "cfn10": {"c_fn": 10.0}, "cfp10": {"c_fp": 10.0}}
PRIORS = ("iforest", "knn")


def study_settings(costs: str, prior: str) -> Settings:
    """The episode settings of one cost tag and prior."""
    if costs not in COST_SETTINGS:
        raise ValueError(f"unknown cost setting {costs!r}: use one of {', '.join(COST_SETTINGS)}")
    return Settings(prior=prior, **COST_SETTINGS[costs])


# ---------------------------------------------------------------------------- lattice cache
def lattice_path(root: Path, costs: str, prior: str, dataset: str, seed: int) -> Path:
    """Where one cell's pickled lattice lives."""
    return Path(root) / "lattices" / costs / prior / dataset / f"seed{seed}.pkl"


def load_lattice(path: Path) -> Lattice:
    """A pickled lattice (written by :func:`build_lattices`)."""
    with open(path, "rb") as handle:
        lattice = pickle.load(handle)
    if not isinstance(lattice, Lattice):
        raise ValueError(f"{path} does not hold a Lattice")
    return lattice


def build_lattices(root: Path, datasets: Sequence[str], seeds: Iterable[int],
                   priors: Sequence[str] = PRIORS, costs: Sequence[str] = ("default",),
                   data_dir: str | None = None,
                   log: Callable[[str], None] | None = None) -> int:
    """Build and pickle every missing lattice (cost tag, prior, data set, seed), in that
    order; each file is written to a temporary name and renamed, so a killed run resumes.
    Returns the number built."""
    built = 0
    seeds = list(seeds)
    for tag in costs:
        for prior in priors:
            settings = study_settings(tag, prior)
            for name in datasets:
                for seed in seeds:
                    path = lattice_path(root, tag, prior, name, seed)
                    if path.exists():
                        continue
                    start = time.perf_counter()
                    lattice = build_lattice(name, seed, settings, data_dir=data_dir)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
                    with open(tmp, "wb") as handle:
                        pickle.dump(lattice, handle, protocol=pickle.HIGHEST_PROTOCOL)
                    tmp.replace(path)
                    built += 1
                    if log is not None:
                        log(f"{tag} {prior} {name} seed {seed}: "
                            f"{time.perf_counter() - start:.2f} s")
    return built


def iter_lattices(root: Path, costs: str, prior: str, datasets: Sequence[str],
                  seeds: Iterable[int]) -> Iterable[tuple[str, int, Lattice]]:
    """(data set, seed, lattice) for every cached cell of one cost tag and prior."""
    for name in datasets:
        for seed in seeds:
            path = lattice_path(root, costs, prior, name, seed)
            if path.exists():
                yield name, seed, load_lattice(path)


__all__ = ["COST_SETTINGS", "PRIORS", "build_lattices", "iter_lattices", "lattice_path",
           "load_lattice", "study_settings"]
