"""The ``>>>`` examples in the library's docstrings run, as a Gymnasium user expects of an
environment's manual (``help(env.unwrapped)``): every module of ``ballad_env`` and
``agents`` that holds one is found and its examples run with :mod:`doctest`. An example
that needs a lattice store reads ``store``, a small one of the kNN prior built here."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest
from conftest import small_store

ROOT = Path(__file__).resolve().parents[1]


def modules_with_examples() -> list[str]:
    """The library's modules whose source holds a ``>>>`` example."""
    found = []
    for package in ("ballad_env", "agents"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text():
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


def test_the_environments_have_examples() -> None:
    assert {"ballad_env.env", "ballad_env.replay.vector"} <= set(modules_with_examples())


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The trainers' small store, with its cells at c_fn = 10 too (the mixed-cells example)."""
    from agents.experiments.lattice_build import build_store
    from ballad_env.settings import Settings

    data = tmp_path_factory.mktemp("data")
    root = small_store(data, tmp_path_factory.mktemp("store"))
    build_store(root, ["large"], [0, 1], [Settings(prior="knn", c_fn=10.0)], data_dir=data,
                progress=False)
    return root


@pytest.mark.parametrize("name", modules_with_examples())
def test_the_examples_run(name: str, request: pytest.FixtureRequest) -> None:
    module = importlib.import_module(name)
    needs_store = "store=store" in Path(module.__file__ or "").read_text()
    extra = {"store": request.getfixturevalue("store")} if needs_store else {}
    result = doctest.testmod(module, extraglobs=extra,
                             optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0 and result.failed == 0, result


def test_a_wrong_example_would_fail(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "wrong_example.py").write_text('def f():\n    """\n    >>> 1 + 1\n    3\n    """\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    result = doctest.testmod(importlib.import_module("wrong_example"), report=False)
    assert (result.attempted, result.failed) == (1, 1)
