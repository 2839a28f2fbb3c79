"""Whether a lattice store that older environment code built holds the lattices the running
code builds (docs/studies/ALLOCATION.md, "Seventh round").

A store refuses to load once the ``ballad_env`` source's fingerprint has changed, whatever
the change. This check reads the old store's files raw instead: it rebuilds some of its
cells with the running code into a scratch store and compares each pair of files, the
packed arrays byte for byte and the headers field by field (the ``source`` fingerprint
differs by construction, ``build_seconds`` by the clock). Identical arrays mean the old
lattices are the ones today's code computes, so a study may read them with the older
``ballad_env`` that accepts them.

    python -m scripts.studies.allocation.store_check --store /tmp/s2fit-study/lattices \\
        --scratch /tmp/alloc-rebuild --cell Glass:0:default --cell WBC:1:cfn10 \\
        --cell task/adbench/Hepatitis/real-0:0:own
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ballad_env.data import Dataset
from ballad_env.data.lookup import dataset_name, task_costs
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.allocation.tasks_cells import LEVELS

#: Header fields that differ between two builds of the same lattice by construction.
EXPECTED = ("build_seconds", "source")


def parse_cell(text: str) -> tuple[str, int, Settings]:
    """``name:seed:level``: a level of ``tasks_cells.LEVELS``, or ``own`` for a generated
    task at its own costs."""
    try:
        name, seed, level = text.rsplit(":", 2)
        settings = Settings().replace(**task_costs(name)) if level == "own" else LEVELS[level]
        return name, int(seed), settings
    except (ValueError, KeyError) as err:
        raise ValueError(f"a cell is name:seed:level with level one of {', '.join(LEVELS)} "
                         f"or own (a task's costs), got {text!r}") from err


def compare_files(new: Path, old: Path) -> dict[str, Any]:
    """Whether two lattice files hold the same packed arrays, and the header fields they
    differ in."""
    with np.load(new, allow_pickle=False) as a, np.load(old, allow_pickle=False) as b:
        same = a["packed"].dtype == b["packed"].dtype and \
            a["packed"].tobytes() == b["packed"].tobytes()
        head_a, head_b = json.loads(str(a["header"])), json.loads(str(b["header"]))
    differ = sorted(k for k in set(head_a) | set(head_b) if head_a.get(k) != head_b.get(k))
    return {"packed identical": bool(same), "header differs in": ", ".join(differ),
            "same lattice": bool(same) and set(differ) <= set(EXPECTED)}


def check(store: Path, scratch: Path, cells: Sequence[tuple[str | Dataset, int, Settings]]
          ) -> pd.DataFrame:
    """Rebuild ``cells`` with the running code into ``scratch`` and compare each file with
    ``store``'s (the same path under each root)."""
    from agents.experiments.lattice_build import build_cells

    build_cells(scratch, cells, progress=False)
    fresh = LatticeStore(scratch)
    rows = []
    for source, seed, settings in cells:
        name = dataset_name(source)
        new = fresh.path(name, seed, settings)
        old = Path(store) / new.relative_to(fresh.root)
        if not old.exists():
            raise FileNotFoundError(f"{store} holds no {name!r} seed {seed} at "
                                    f"{settings.name}: check the cells against the store")
        rows.append({"dataset": name, "seed": seed,
                     "setting": new.relative_to(fresh.root).parts[0],
                     **compare_files(new, old)})
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring); exit status 1 if any cell differs."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True, help="the old store's folder")
    p.add_argument("--scratch", type=Path, required=True, help="where to rebuild the cells")
    p.add_argument("--cell", action="append", required=True, type=parse_cell,
                   help="name:seed:level (default, cfn10, cfp10, or own for a task)")
    args = p.parse_args(argv)
    table = check(args.store, args.scratch, args.cell)
    print(table.to_string(index=False))
    return 0 if table["same lattice"].all() else 1


if __name__ == "__main__":
    sys.exit(main())
