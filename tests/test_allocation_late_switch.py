"""The seventh round's late switch study (scripts/studies/allocation/late_switch.py): its
candidates, its replays and its tables, on hand-made cells."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

from agents.allocation import packaged_params
from agents.split_allocators import ALL_IN_LR
from ballad_env.data import load_dataset
from ballad_env.episode import AL, LR
from ballad_env.replay.lattice import Lattice, build_lattice
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.allocation import late_switch as S
from scripts.studies.allocation.tasks_cells import split_path

LEVELS = ("default", "cfn10", "cfp10")


def test_the_base_is_the_shipped_allocators_candidate() -> None:
    """safe-split-3's fifth-round candidate (docs/studies/ALLOCATION.md): penalty 100, task
    weight 0.25, z 0.5, margin 0.005, the trait check at the 0.99 quantile, no residual."""
    shipped = S.base_candidate(packaged_params()["families"][S.BASE])
    assert shipped == {"alpha": 100.0, "task_weight": 0.25, "z": 0.5, "margin": 0.005,
                       "ood": 0.99, "residual": False}
    assert S.base_name(shipped, shipped) == S.BASE
    assert S.base_name(shipped, {**shipped, "margin": 0.0, "task_weight": 1.0}) == \
        "margin 0, task weight 1"
    assert S.switch_name({"after": 2, "threshold": -0.5}) == \
        f"{S.BASE} + switch after 2, -0.5 se"


class _OneLattice:
    """A store holding one lattice under every key (``replay_costs`` reads ``load``)."""

    def __init__(self, lattice: Lattice) -> None:
        self.lattice = lattice

    def load(self, dataset: str, seed: int, settings: Settings) -> Lattice:
        return self.lattice


def test_replay_costs_play_each_fit_with_each_switch_on_the_cells_lattice(small_xy) -> None:
    lattice = build_lattice(load_dataset(small_xy), 0, Settings())
    entry = {"features": ["tau"], "center": [0.0], "scale": [1.0], "coef": [[[0.0]]],
             "intercept": [[0.1]], "splits": [[LR, 2]], "z": 0.0, "margin": 0.0,
             "ood": {"features": ["tau"], "center": [0.5], "precision": [[1.0]],
                     "threshold": None}}
    never = {**entry, "intercept": [[-0.1]]}  # predicted to lose: All-in-LR
    rows = pd.DataFrame([{"dataset": "d", "seed": 0, "level": "default"}])
    switch = {"after": 2, "threshold": 100.0}  # no AL round falls 100 se: LR after two
    costs, fired = S.replay_costs(cast(LatticeStore, _OneLattice(lattice)), rows,
                                  {"lr-then-al": entry, "never": never}, [None, switch])
    n = lattice.n_rounds
    assert costs["lr-then-al"][0] == lattice.mean_cost(split_path(lattice, (LR, 2)))
    cut = (LR, LR, AL, AL, *[LR] * (n - 4))
    assert costs[S.switch_name(switch, "lr-then-al")][0] == lattice.mean_cost(cut)
    assert costs[S.switch_name(switch, "lr-then-al")][0] != costs["lr-then-al"][0]
    assert fired[S.switch_name(switch, "lr-then-al")].tolist() == [True]
    assert not fired["lr-then-al"].any() and not fired[S.switch_name(switch, "never")].any()
    assert costs[S.switch_name(switch, "never")][0] == \
        lattice.mean_cost(split_path(lattice, ALL_IN_LR))


def test_reach_counts_where_the_base_leaves_lr_and_where_the_switch_fires() -> None:
    real = pd.DataFrame({"level": ["default", "default", "cfn10", "cfn10"]})
    fired = {S.SPLIT: np.array([True, True, True, False]),
             S.LR_FIRST: np.array([True, False, True, False]),
             "x": np.array([True, False, False, False])}
    table = S.reach(real, fired, "x").set_index("level")
    assert table.loc["default"].tolist() == [1.0, 0.5, 0.5, 2]
    assert table.loc["cfn10"].tolist() == [0.5, 0.5, 0.0, 2]
    assert table.loc["all"].tolist() == [0.75, 0.5, 0.25, 4]


def test_the_nested_choice_scores_each_fold_with_a_choice_made_without_it() -> None:
    """Five data sets, one per fold, All-in-LR 1 and optimum 0 at every level. The switch
    takes the whole room on d0 at c_fp = 10 and matches the base elsewhere: on the other
    four folds the two tie, so the rule keeps the table's first (the base) for outer fold
    0, and the switch, preferred on fold 0's evidence, for the others, where it scores as
    the base."""
    names = [f"d{k}" for k in range(5)]
    real = pd.DataFrame([{"level": lv, "dataset": d, "all-in-lr": 1.0, "optimal": 0.0}
                         for d in names for lv in LEVELS])
    gain = ((real["dataset"] == "d0") & (real["level"] == "cfp10")).to_numpy()
    results = {S.BASE: np.full(len(real), 0.9), "switch": np.where(gain, 0.0, 0.9),
               "all-in-lr": np.ones(len(real))}
    keys: list[tuple[str, dict[str, Any]]] = [(name, {}) for name in results]
    outer = S.nested(real, keys, results, [[d] for d in names])
    first = outer[outer["outer fold"] == 0]
    assert set(first["choice"]) == {S.BASE}
    assert first["switch"].tolist() == pytest.approx(first["base"].tolist())
    assert set(outer[outer["outer fold"] == 1]["choice"]) == {"switch"}
    assert outer["switch"].tolist() == pytest.approx(outer["base"].tolist())


def test_per_dataset_keeps_the_data_sets_where_either_leaves_all_in_lr() -> None:
    real = pd.DataFrame({"level": ["default"] * 4, "dataset": ["a", "a", "b", "b"],
                         "all-in-lr": [1.0, 1.0, 0.5, 0.5]})
    results = {S.BASE: np.array([0.8, 1.0, 0.5, 0.5]), "x": np.array([0.8, 0.9, 0.5, 0.5])}
    fired = {"x": np.array([False, True, False, False])}
    table = S.per_dataset(real, results, fired, "x")
    assert table["dataset"].tolist() == ["a"]
    assert table.iloc[0][["base - lr", "switch - lr", "switch fired"]].tolist() == \
        pytest.approx([-0.1, -0.15, 0.5])


def test_the_task_summary_pools_the_room_and_counts_the_losses() -> None:
    """Four tasks in two folds, All-in-LR 1 and optimum 0 on each: the candidate costs 0.5,
    1.0, 1.2 and 0.7, so it takes (0.5 + 0 - 0.2 + 0.3) / 4 = 0.15 of the room, loses 0.2 of
    4 (0.05) on one task in four; by fold 0.25 and 0.05 (standard error 0.1)."""
    tasks = pd.DataFrame({"level": ["task"] * 4, "dataset": ["t0", "t1", "t2", "t3"],
                          "all-in-lr": [1.0] * 4, "optimal": [0.0] * 4})
    costs = {"x": np.array([0.5, 1.0, 1.2, 0.7])}
    fired = {"x": np.array([False, True, True, False])}
    row = S.task_summary(tasks, costs, fired, np.array([0, 0, 1, 1])).iloc[0]
    assert row["share"] == pytest.approx(0.15) and row["se"] == pytest.approx(0.1)
    assert row["loss"] == pytest.approx(0.05) and row["loses on"] == 0.25
    assert row["switch fired"] == 0.5 and row["tasks"] == 4
