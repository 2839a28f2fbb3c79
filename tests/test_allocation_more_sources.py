"""The eighth round's parts: the embedding sources' names and groups, their cells, the
learning curve's training rows and candidates, and the shipped allocator on them, by
hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import v2_observation as observation

from ballad_env.data import load_dataset
from ballad_env.episode import LR
from ballad_env.settings import Settings
from scripts.studies.allocation import embedding_sources as E
from scripts.studies.allocation import more_sources as M
from scripts.studies.allocation import tasks_fit as F

LEVELS = ("default", "cfn10", "cfp10")


def test_one_data_is_one_group_whatever_its_embedding_or_class() -> None:
    assert E.source_group("MVTec-AD_bottle_r18") == E.source_group("MVTec-AD_bottle_vit") \
        == "MVTec-AD_bottle"
    assert E.source_group("MVTec-AD_metal_nut_vit") == "MVTec-AD_metal_nut"
    assert {E.source_group(f"CIFAR10_{k}_r18") for k in (0, 4, 6)} == {"CIFAR10"}
    assert E.source_group("SVHN_8_r18") == "SVHN"
    assert E.source_group("20news_3_bert") == E.source_group("20news_3_roberta") == "20news"
    assert E.source_group("task/MVTec-AD_grid_vit/real-7") == "MVTec-AD_grid"
    assert E.source_group("CIFAR10_0_r18@2000") == "CIFAR10"
    with pytest.raises(ValueError, match="no linked embedding source"):
        E.source_group("adbench/mnist")


def _mirror(root: Path, files: dict[str, int]) -> Path:
    """A folder shaped like ADBench's datasets: ``<folder>/<stem>.npz``, each with
    ``rows`` rows (a fifth anomalous)."""
    rng = np.random.default_rng(0)
    for relative, rows in files.items():
        path = root / f"{relative}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, X=rng.normal(size=(rows, 4)), y=(np.arange(rows) % 5 == 0).astype(int))
    return root


def test_linked_sources_load_by_name_and_keep_their_groups(tmp_path: Path) -> None:
    mirror = _mirror(tmp_path / "adbench", {"CV_by_ResNet18/MVTec-AD_bottle": 30,
                                            "CV_by_ViT/MVTec-AD_bottle": 30,
                                            "NLP_by_BERT/20news_3": 40, "Classical/1_ALOI": 9})
    folder = tmp_path / "linked"
    expected = {"20news_3_bert": "20news", "MVTec-AD_bottle_r18": "MVTec-AD_bottle",
                "MVTec-AD_bottle_vit": "MVTec-AD_bottle"}
    assert E.link_sources(mirror, folder) == expected
    assert E.link_sources(mirror, folder) == expected  # linking again changes nothing
    assert E.linked_sources(folder) == expected
    data = load_dataset("MVTec-AD_bottle_vit", data_dir=folder)
    assert data.X.shape == (30, 4) and int(data.y.sum()) == 6


def test_a_group_of_the_allocation_split_is_refused(tmp_path: Path) -> None:
    mirror = _mirror(tmp_path / "adbench", {"CV_by_ResNet18/mnist": 20})
    with pytest.raises(ValueError, match=r"\['mnist'\].*both sides"):
        E.link_sources(mirror, tmp_path / "linked")
    with pytest.raises(FileNotFoundError, match="no .npz file"):
        E.link_sources(tmp_path / "empty", tmp_path / "linked2")


def test_the_sources_cells_are_every_seed_at_the_three_levels() -> None:
    cells = E.real_cells(["a_r18", "b_vit"], 2)
    assert len(cells) == 12 and len(set(cells)) == 12
    assert {c[2] for c in cells} == {Settings(), Settings(c_fn=10.0), Settings(c_fp=10.0)}


def _rows(level: str, groups: list[str], k: list[int] | None = None) -> pd.DataFrame:
    """Rows of the given groups (All-in-LR 1, optimum 0; two-round budget)."""
    frame = pd.DataFrame([{"level": level, "dataset": g, "group": g, "seed": 0,
                           "n_rounds": 2, "unit": 1.0, "all-in-lr": 1.0, "optimal": 0.0,
                           "best-fixed-per-cell": 0.5, "obs": observation(log_size=0.1 * n),
                           "split_costs": np.array([0.9, 0.6, 0.8])}
                          for n, g in enumerate(groups)])
    return frame if k is None else frame.assign(k=k)


def test_each_point_trains_on_its_own_rows() -> None:
    tasks = _rows("task", ["a", "a", "b"], k=[0, 12, 3])
    new_real = _rows("default", ["N1", "N2"])
    new_tasks = _rows("task", ["N1", "N2", "N1"], k=[0, 0, 11])
    only_old = M.extra_rows(M.Point("p", 10, False, 0), tasks, new_real, new_tasks)
    assert sorted(only_old["group"]) == ["a", "b"]
    cells = M.extra_rows(M.Point("p", 10, True, 0), tasks, new_real, new_tasks)
    assert sorted(cells["group"]) == ["N1", "N2", "a", "b"]
    every = M.extra_rows(M.Point("p", 40, True, 40), tasks, new_real, new_tasks)
    assert len(every) == len(tasks) + len(new_real) + len(new_tasks)


#: One candidate: the smallest grid the curve's naming can be checked on.
ONE = {"alpha": 10.0, "z": 0.5, "margin": 0.0, "ood": 0.99, "task_weight": 1.0,
       "residual": False}


def test_the_curve_names_the_shipped_candidate_and_keeps_every_points_costs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "GRID", {k: (v,) for k, v in ONE.items()})
    real = pd.concat([_rows(lv, [f"d{j}" for j in range(5)]) for lv in LEVELS],
                     ignore_index=True)
    extras = {"first": _rows("task", ["d0", "d1", "d2"]),
              "second": pd.concat([_rows("task", ["d0", "d3"]), _rows("default", ["N1"])],
                                  ignore_index=True)}
    keys, results, folds = M.curve_results(real, extras, ONE, "first")
    assert [name for name, _ in keys] == [M.BASE, "second|safe 0", "all-in-lr"]
    assert len(folds) == 5
    _, alone, _ = F.out_of_fold_costs(real, extras["second"], M.GRID)
    assert results["second|safe 0"] == pytest.approx(alone["safe 0"])
    assert M.shippable(keys) == keys  # z > 0 and the trait check: all may ship
    with pytest.raises(ValueError, match="not in the grid"):
        M.curve_results(real, extras, {**ONE, "z": 1.0}, "first")


def test_the_shipped_allocator_on_the_new_sources_by_hand() -> None:
    """Group A: room 1, the allocator plays (LR, 1) at cost 0.6 (share 0.4), the best
    fixed split 0.5 (share 0.5). Group B: room 0.001, no share. Group C: room 1, the
    allocator pays 1.3 (it loses)."""
    lose = _rows("default", ["C"])
    lose["split_costs"] = [np.array([0.9, 1.3, 0.8])]
    new_real = pd.concat([_rows("default", ["A", "A"]),
                          _rows("default", ["B"]).assign(optimal=0.999), lose],
                         ignore_index=True)
    entry: dict[str, Any] = {
        "features": ["log_size"], "center": [0.0], "scale": [1.0], "coef": [[[0.0]]],
        "intercept": [[0.1]], "splits": [[LR, 1]], "z": 0.0, "margin": 0.0,
        "ood": {"features": ["log_size"], "center": [0.0], "precision": [[1.0]],
                "threshold": None}}
    table, summary = M.shipped_on_new(new_real, entry)
    table = table.set_index(["level", "group"])
    a, b = table.loc[("default", "A")], table.loc[("default", "B")]
    assert a["allocator - lr"] == pytest.approx(-0.4)
    assert a["share allocator"] == pytest.approx(0.4)
    assert a["share best fixed"] == pytest.approx(0.5)
    assert np.isnan(b["share allocator"]) and b["allocator - lr"] == pytest.approx(-0.4)
    row = summary.set_index("level").loc["default"]
    room = (1.0 + 0.001 + 1.0) / 3
    assert row["share allocator"] == pytest.approx((0.4 + 0.4 - 0.3) / 3 / room)
    assert row["share best fixed"] == pytest.approx(0.5 / room)
    assert row["groups it loses on"] == 1 and row["groups"] == 3
    assert row["cells it leaves all-in-lr"] == 1.0 and row["cells the trait check flags"] == 0.0
    # distance |log_size|: A's second row (0.1) lies beyond 0.05, the others (0) do not
    far = {**entry, "ood": {**entry["ood"], "threshold": 0.05}}
    row = M.shipped_on_new(new_real, far)[1].iloc[0]
    assert row["cells the trait check flags"] == pytest.approx(0.25)
    assert row["cells it leaves all-in-lr"] == pytest.approx(0.75)


def test_the_oracles_take_the_best_split_per_level_and_per_data_set() -> None:
    """Two data sets at one level, All-in-LR 1 and optimum 0. Split costs: a (0.2, 1.2,
    0.9), b (1.2, 0.4, 0.9). One split per level: the first (means 0.7, 0.8, 0.9 and
    All-in-LR's 1), share (0.8 - 0.2) / 2 = 0.3; one per data set: 0.2 and 0.4, share
    0.7."""
    rows = pd.DataFrame([{"level": lv, "dataset": d, "all-in-lr": 1.0, "optimal": 0.0,
                          "split_costs": np.array(c)}
                         for lv in LEVELS for d, c in (("a", [0.2, 1.2, 0.9]),
                                                       ("b", [1.2, 0.4, 0.9]))])
    table = M.oracle_shares(rows).set_index("oracle")
    assert table.loc["one split per level", "default"] == pytest.approx(0.3)
    assert table.loc["one split per data set", "cfp10"] == pytest.approx(0.7)
    assert table.loc["one split per data set", "mean"] == pytest.approx(0.7)
