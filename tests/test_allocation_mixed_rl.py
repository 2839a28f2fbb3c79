"""The RL family on mixed tasks and costs (scripts/studies/allocation/mixed_rl.py): what each
fold's policy may learn from, and the cells it trains on."""

from __future__ import annotations

import pytest

from ballad_env.data.lookup import task_costs
from scripts.studies.allocation import mixed_rl as M
from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation.tasks_cells import group_of
from scripts.studies.common.split import load_split, played_names


def test_each_fold_policy_learns_only_from_the_other_folds_groups() -> None:
    names = played_names(load_split()["train"])
    groups = M.fold_groups()
    assert len(groups) == F.N_FOLDS + 1
    for fold, learned in zip(F.folds(names), groups, strict=False):
        assert not {group_of(n) for n in fold} & set(learned)
        assert {group_of(n) for n in names} == {group_of(n) for n in fold} | set(learned)
    assert groups[-1] == sorted({group_of(n) for n in names})
    assert not set(groups[-1]) & set(load_split()["held_out"])


def test_training_cells_play_each_task_at_its_own_costs() -> None:
    tasks = ["task/adbench/Hepatitis/real-0", "task/Glass/real-3"]
    cells = M.training_cells(tasks)
    assert [(name, seed) for name, seed, _ in cells] == [(t, 0) for t in tasks]
    for name, _, settings in cells:
        costs = task_costs(name)
        assert (settings.c_fp, settings.c_fn) == (costs["c_fp"], costs["c_fn"])
    assert cells[0][2] != cells[1][2]


def test_a_task_of_a_reserved_source_is_refused() -> None:
    reserved = load_split()["reserved"][0]
    with pytest.raises(ValueError, match="reserved"):
        M.training_cells([f"task/{reserved}/real-0"])
