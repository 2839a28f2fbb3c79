"""The allocation split (docs/allocation_split.json) and the refusal of reserved data sets."""

from __future__ import annotations

import pytest

from scripts.studies.common.split import (
    GROUPS,
    NEAR_RESERVED,
    RESERVED,
    base_name,
    draw_split,
    load_split,
    played_names,
    refuse_reserved,
    reserved_in,
)


def test_committed_split_is_the_seeded_draw():
    assert load_split() == draw_split()


def test_split_sides_are_disjoint_groups_and_hold_no_reserved_set():
    split = load_split()
    train, held = set(split["train"]), set(split["held_out"])
    assert not train & held
    assert train | held | set(split["left_out"]) == set(GROUPS)
    assert not train & set(NEAR_RESERVED)  # sharing data with a reserved set: never fitted
    assert sorted(split["reserved"]) == sorted(RESERVED) and len(RESERVED) == 16
    members = [m for g in GROUPS.values() for m in g]
    assert not reserved_in(members)
    assert len(members) == len(set(members))  # a data set belongs to one group
    # one group per block held out (plus the near-reserved ones the paper needs)
    for block in split["blocks"]:
        assert len(set(block) & held) == 1


def test_played_names_sample_the_large_files_by_name():
    names = played_names(["KDDCup99", "cover"])
    assert names == ["KDDCup99", "adbench/http@20000", "adbench/smtp@20000",
                     "adbench/cover@20000"]


@pytest.mark.parametrize("name", ["adbench/breastw", "Ionosphere", "adbench/ionosphere@100",
                                  "adbench/satimage-2@50:3", "/data/yeast.npz", "WINE"])
def test_reserved_names_are_refused_in_any_spelling(name):
    assert base_name(name) in {r.lower() for r in RESERVED}
    with pytest.raises(ValueError, match="reserved data set"):
        refuse_reserved(["Pima", name], "training")


def test_library_accepts_reserved_sets_and_the_studies_refuse_them(tmp_path):
    """The reserved sets are the allocation studies' rule, not the library's: the trainer
    takes ``adbench/cardio``; the studies that fit allocators refuse it."""
    from agents.experiments.training.config import TrainConfig
    from scripts.studies.allocation.rl import train_policies
    from scripts.studies.allocators.cells import build_lattices

    assert TrainConfig(datasets=("Pima", "adbench/cardio")).datasets == ("Pima", "adbench/cardio")
    with pytest.raises(ValueError, match="training refuses the reserved data set"):
        train_policies(tmp_path, ["Pima", "adbench/cardio"], steps=10)
    with pytest.raises(ValueError, match="allocator study refuses"):
        build_lattices(tmp_path, ["adbench/musk@500"], [0])
    refuse_reserved(["Pima", "adbench/Cardiotocography", "adbench/satellite"], "x")  # passes


# ------------------------------------------------------------------ every spelling (issue 39)
@pytest.mark.parametrize("name", ["45_wine.npz", "wine.CSV", "/cache/adbench/45_WINE.NPZ",
                                  "ADBENCH/Wine@100:3", "ｗｉｎｅ", " wine ", "wine.npz.csv",
                                  "wine.", "C:\\data\\wine.arff", "12_fault.mat"])
def test_a_reserved_set_is_refused_in_every_spelling(name: str) -> None:
    with pytest.raises(ValueError, match="refuses the reserved data set"):
        refuse_reserved([name], "the allocation study")


def test_a_reserved_sets_file_is_refused_under_any_path(tmp_path, monkeypatch) -> None:
    """A link to the cached file, or a copy of its bytes under another name."""
    import hashlib

    from ballad_env.data import adbench

    body = b"the bytes of a reserved file"
    registry = adbench.registry()
    rows = [{**row, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
            if row["name"] == "wine" else row for row in registry["datasets"]]
    monkeypatch.setattr(adbench, "registry", lambda: {**registry, "datasets": rows})
    cached = tmp_path / "45_wine.npz"
    cached.write_bytes(body)
    (tmp_path / "harmless.npz").symlink_to(cached)
    (tmp_path / "copy.npz").write_bytes(body)
    (tmp_path / "other.npz").write_bytes(b"x" * len(body))
    names = [str(tmp_path / n) for n in ("harmless.npz", "copy.npz", "other.npz")]
    assert reserved_in(names) == names[:2]


def test_a_split_file_whose_groups_hold_a_reserved_set_is_refused(tmp_path) -> None:
    import json

    split = draw_split()
    split["groups"]["Glass"].append("adbench/45_Wine.npz")
    path = tmp_path / "split.json"
    path.write_text(json.dumps(split))
    with pytest.raises(ValueError, match=r"split.json: its groups hold the reserved data "
                                         r"set\(s\) adbench/45_Wine.npz"):
        load_split(path)
    split["groups"]["Glass"] = "adbench/glass"
    path.write_text(json.dumps(split))
    with pytest.raises(ValueError, match="'groups' must map each group to a list"):
        load_split(path)
