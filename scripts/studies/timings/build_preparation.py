"""Time the preparation of one lattice build of many generated tasks, each at its own costs:
the store's checks, the sweep of stale temporaries, the pending check and the table of one
``lattice_build.build_cells`` call, with the building of lattices replaced by nothing, so
only the work that grows with the call's tasks and settings is timed.

    python -m scripts.studies.timings.build_preparation --tasks 200 400

Each task is a small in-memory data set named like a generated task (``task/bench/<k>``,
seed 0) at unit costs of its own, drawn log-uniform over [1, 20] (as ``ballad_env.data.tasks``
draws them) from a seeded generator; each count of tasks is one call into a fresh store.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from agents.experiments import lattice_build
from ballad_env.data import Dataset
from ballad_env.settings import Settings

#: Rows and anomalies of each task's data: the preparation never reads them past a hash.
ROWS, ANOMALIES = 60, 6


def generated_cells(n_tasks: int, seed: int = 0) -> list[tuple[Dataset, int, Settings]]:
    """``n_tasks`` cells (task, seed 0, its settings): small data sets named like generated
    tasks, each with the kNN prior at unit costs c_fp and c_fn of its own."""
    rng = np.random.default_rng(seed)
    cells = []
    for k in range(n_tasks):
        X = rng.normal(size=(ROWS, 3))
        X[:ANOMALIES] += 3.0
        y = np.zeros(ROWS, dtype=np.int8)
        y[:ANOMALIES] = 1
        c_fp, c_fn = np.exp(rng.uniform(0.0, np.log(20.0), size=2))
        settings = Settings(prior="knn", c_fp=float(c_fp), c_fn=float(c_fn))
        cells.append((Dataset(f"task/bench/{k}", X, y), 0, settings))
    return cells


def _build_nothing(tasks: Sequence[Any], *_: Any) -> Iterator[list[Any]]:
    """Stands in for ``executor.execute``: no lattice is built."""
    return iter(())


def preparation_seconds(cells: Sequence[tuple[Dataset, int, Settings]], root: Path) -> float:
    """Seconds of one ``build_cells`` call on ``cells`` into ``root``, nothing built."""
    with mock.patch.object(lattice_build, "execute", _build_nothing):
        start = time.perf_counter()
        lattice_build.build_cells(root, cells, progress=False)
        return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring): one line per count of tasks."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, nargs="+", default=[200, 400],
                   help="counts of tasks, one build call each (default: 200 400)")
    args = p.parse_args(argv)
    if min(args.tasks) < 1:
        p.error(f"--tasks must be positive counts, got {args.tasks}")
    for n_tasks in args.tasks:
        cells = generated_cells(n_tasks)
        with tempfile.TemporaryDirectory() as folder:
            seconds = preparation_seconds(cells, Path(folder) / "lattices")
        print(f"{n_tasks} tasks: {seconds:.2f} s ({1e3 * seconds / n_tasks:.2f} ms a task)",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
