"""Two data-set names whose safe file names collide (issue 39, item 7): the hash is long
enough that the pair found for the 40-bit one no longer collides, and a store entry whose
recorded name differs from the one asked for stops the build, instead of "0 cells built"
and a failure at load time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agents.experiments.lattice_build import build_store
from agents.experiments.stores.results import RunError
from ballad_env import files
from ballad_env.data import Dataset
from ballad_env.settings import Settings

#: Two names with one 40-bit hash (found in 2 s).
PAIR = ("a )!;^b", "a$[[#;b")
SETTING = Settings(prior="knn", budget_fraction=0.1)


def data(name: str) -> Dataset:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    X[:8] += 3.0
    y = np.zeros(80, dtype=np.int8)
    y[:8] = 1
    return Dataset(name, X, y)


def test_the_known_collision_gets_two_names() -> None:
    assert files.safe_name(PAIR[0]) != files.safe_name(PAIR[1])
    assert len(files.safe_name(PAIR[0]).split("~")[1]) == files.NAME_HASH_DIGITS >= 16


def test_a_store_entry_of_another_name_stops_the_build(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "NAME_HASH_DIGITS", 10)  # the old hash: the pair collides
    assert files.safe_name(PAIR[0]) == files.safe_name(PAIR[1])
    build_store(tmp_path, [data(PAIR[0])], [0], [SETTING], progress=False)
    with pytest.raises(RunError, match=r"holds data set 'a \)!;\^b', not 'a\$\[\[#;b': the two "
                                       r"names share a folder"):
        build_store(tmp_path, [data(PAIR[1])], [0], [SETTING], progress=False)
