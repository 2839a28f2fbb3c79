"""What a resumed run checks against its ``run.json`` (issue 39, items 4 and 10): the code
each agent name stood for and the plugin modules imported, so a plugin's agent and a
built-in one never share a label; and the grid's axes compared in linear time, so a
2-million-seed run resumes in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.experiments.grid import Grid
from agents.experiments.run import prepare_run, run_grid
from agents.experiments.stores.results import ResultStore, RunError
from agents.registry import AGENTS, agent_source, make_agent
from ballad_env.data import Dataset
from ballad_env.plugins import plugin_modules
from ballad_env.settings import Settings

SETTING = Settings(prior="knn", budget_fraction=0.1)


def data() -> Dataset:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    X[:8] += 3.0
    y = np.zeros(80, dtype=np.int8)
    y[:8] = 1
    return Dataset("d", X, y)


def mine(env: Any) -> Any:
    """A plugin's agent under a built-in's name: the other all-in rule."""
    return make_agent("all-in-lr", env)


def test_a_run_records_each_agents_code() -> None:
    grid = Grid((data(),), (0,), ("all-in-al", "lr-first-25"), (SETTING,)).resolve(None)
    manifest, _ = prepare_run(grid)
    assert manifest["agents"]["all-in-al"] == agent_source("all-in-al")
    assert manifest["agents"]["all-in-al"].startswith("agents.")
    assert manifest["agents"]["lr-first-25"] != ""
    assert manifest["plugins"] == list(plugin_modules())  # those this process imported


def test_a_resume_under_another_implementation_of_a_name_is_refused(tmp_path: Path) -> None:
    grid = Grid((data(),), (0,), ("all-in-al",), (SETTING,))
    built_in = AGENTS.unregister("all-in-al")
    try:
        AGENTS.register("all-in-al", mine)
        run_grid(grid, tmp_path, n_jobs=1, progress=False)
    finally:
        AGENTS.unregister("all-in-al")
        AGENTS.register("all-in-al", built_in)
    with pytest.raises(RunError, match=r"agent all-in-al is implemented by agents\.\S+ now, "
                                       r"by test_resume_checks:mine when its results were "
                                       r"stored"):
        run_grid(grid, tmp_path, n_jobs=1, progress=False)


def test_a_resume_without_the_stored_runs_plugin_modules_is_refused(tmp_path: Path) -> None:
    grid = Grid((data(),), (0,), ("all-in-al",), (SETTING,)).resolve(None)
    manifest, _ = prepare_run(grid)
    ResultStore(tmp_path).prepare({**manifest, "plugins": ["my_plugin"]})
    with pytest.raises(RunError, match=r"plugins: the stored run imported my_plugin, this one "
                                       r"does not \(--import MODULE\)"):
        ResultStore(tmp_path).prepare(manifest)


class Counted(int):
    """A seed that counts how often it is compared."""

    calls = 0

    def __eq__(self, other: object) -> bool:
        Counted.calls += 1
        return int(self) == other

    __hash__ = int.__hash__


def test_the_grids_axes_are_compared_in_linear_time(tmp_path: Path) -> None:
    grid = Grid((data(),), (0,), ("all-in-al",), (SETTING,)).resolve(None)
    manifest, _ = prepare_run(grid)
    n = 3_000
    stored = {**manifest, "grid": {**manifest["grid"], "seeds": [Counted(s) for s in range(n)]}}
    wanted = {**manifest, "grid": {**manifest["grid"], "seeds": list(range(n))}}
    store = ResultStore(tmp_path)
    store.read_manifest = lambda: stored  # type: ignore[method-assign]
    Counted.calls = 0
    store.prepare(wanted)  # the same seeds: goes on
    assert Counted.calls < 5 * n  # a list's ``in``: n^2 / 2 = 4.5e6 times
    lost = {**wanted, "grid": {**wanted["grid"], "seeds": list(range(n - 1))}}
    with pytest.raises(RunError, match=r"grid.seeds: stored \[0, 1, 2, 3, 4, 5, 6, 7, \.\.\. "
                                       r"\(3,000 in all\)\].*\(lacking \[2999\]\)"):
        store.prepare(lost)


def _swap_all_in() -> None:
    """What the plugin ``swap`` does: ``all-in-al`` and ``all-in-lr`` trade factories."""
    al, lr = AGENTS.unregister("all-in-al"), AGENTS.unregister("all-in-lr")
    AGENTS.register("all-in-al", lr)
    AGENTS.register("all-in-lr", al)


def test_two_lambdas_of_one_module_are_told_apart() -> None:
    """Both were recorded as ``agents.rules:<lambda>``; the registration's hash tells them
    apart, stable across calls and the same in a fresh process."""
    import subprocess
    import sys

    al, lr = agent_source("all-in-al"), agent_source("all-in-lr")
    assert al.startswith("agents.rules:<lambda>@") and lr.startswith("agents.rules:<lambda>@")
    assert al != lr and agent_source("all-in-al") == al
    fresh = subprocess.run([sys.executable, "-c", "from agents.registry import agent_source; "
                            "print(agent_source('all-in-al'))"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert fresh == al


def test_a_resume_whose_plugin_swaps_two_names_is_refused(tmp_path: Path) -> None:
    """A run without plugins, resumed after a plugin swapped ``all-in-al`` and
    ``all-in-lr``: seed 1's all-in-al would be all-in-lr, averaged under one label."""
    run_grid(Grid((data(),), (0,), ("all-in-al",), (SETTING,)), tmp_path, n_jobs=1,
             progress=False)
    _swap_all_in()
    try:
        with pytest.raises(RunError, match=r"agent all-in-al is implemented by "
                                           r"agents\.rules:<lambda>@\w+ now, by "
                                           r"agents\.rules:<lambda>@\w+ when"):
            run_grid(Grid((data(),), (0, 1), ("all-in-al",), (SETTING,)), tmp_path,
                     n_jobs=1, progress=False)
    finally:
        _swap_all_in()
    assert len(ResultStore(tmp_path).finished(
        Grid((data(),), (0,), ("all-in-al",), (SETTING,)).resolve(None).cells())) == 1


def test_a_resume_with_a_plugin_the_stored_run_lacked_is_refused(tmp_path: Path) -> None:
    grid = Grid((data(),), (0,), ("all-in-al",), (SETTING,)).resolve(None)
    manifest, _ = prepare_run(grid)
    ResultStore(tmp_path).prepare({**manifest, "plugins": []})
    with pytest.raises(RunError, match=r"plugins: this run imports swap, the stored run did "
                                       r"not .*leave --import swap out"):
        ResultStore(tmp_path).prepare({**manifest, "plugins": ["swap"]})
    ResultStore(tmp_path).prepare({**manifest, "plugins": []})  # the same: resumed


def test_a_lambda_without_a_source_file_hashes_by_its_code() -> None:
    """A lambda made by exec (a notebook's, say) has no source to read: its bytecode and
    constants tell it apart, the same in every process (no address in the hash)."""
    from agents.registry import registration_hash

    first: dict[str, Any] = {}
    again: dict[str, Any] = {}
    exec("f = lambda env: 1\ng = lambda env: 2", first)  # noqa: S102 - the case itself
    exec("f = lambda env: 1", again)  # noqa: S102
    assert registration_hash(first["f"]) == registration_hash(again["f"])
    assert registration_hash(first["f"]) != registration_hash(first["g"])
