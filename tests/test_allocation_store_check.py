"""The check that an older store holds the lattices today's code builds
(scripts/studies/allocation/store_check.py), on a store of a small data set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ballad_env.data import load_dataset
from ballad_env.data.lookup import task_costs
from ballad_env.settings import Settings
from scripts.studies.allocation import store_check as C


def _rewrite(path: Path, source: str | None = None, flip: bool = False) -> None:
    """Rewrite a lattice file as older code would have: another ``source`` in its header,
    or (``flip``) one byte of its packed arrays changed."""
    with np.load(path, allow_pickle=False) as data:
        header, packed = json.loads(str(data["header"])), data["packed"].copy()
    if source is not None:
        header["source"] = source
    if flip:
        packed.view(np.uint8)[0] ^= 1
    with open(path, "wb") as handle:
        np.savez_compressed(handle, header=np.array(json.dumps(header)), packed=packed)


def test_a_store_of_other_source_code_with_the_same_arrays_holds_the_same_lattices(
        tmp_path, tiny_xy) -> None:
    from agents.experiments.lattice_build import build_cells

    dataset = load_dataset(tiny_xy)
    cells = [(dataset, 0, Settings(c_fn=10.0))]
    build_cells(tmp_path / "old", cells, progress=False)
    (old,) = (tmp_path / "old").rglob("*.npz")
    _rewrite(old, source="0" * 16)
    table = C.check(tmp_path / "old", tmp_path / "new", cells)
    row = table.iloc[0]
    assert row["packed identical"] and row["same lattice"]
    assert set(row["header differs in"].split(", ")) <= {"source", "build_seconds"}
    assert "source" in row["header differs in"]
    _rewrite(old, flip=True)
    shutil.rmtree(tmp_path / "new")
    row = C.check(tmp_path / "old", tmp_path / "new", cells).iloc[0]
    assert not row["packed identical"] and not row["same lattice"]


def test_cells_are_parsed_with_their_level_or_their_own_costs() -> None:
    assert C.parse_cell("Glass:0:default") == ("Glass", 0, Settings())
    assert C.parse_cell("WBC:3:cfn10") == ("WBC", 3, Settings(c_fn=10.0))
    name, seed, settings = C.parse_cell("task/Glass/real-0:0:own")  # a bundled source
    assert (name, seed) == ("task/Glass/real-0", 0)
    assert {"c_fp": settings.c_fp, "c_fn": settings.c_fn} == task_costs(name) != \
        {"c_fp": 1.0, "c_fn": 1.0}
    for bad in ("Glass:0", "Glass:x:default", "Glass:0:cheap"):
        with pytest.raises(ValueError, match="a cell is name:seed:level"):
            C.parse_cell(bad)
