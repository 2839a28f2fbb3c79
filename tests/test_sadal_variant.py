"""A variant of ``Settings.sadal()`` on the published SADAL episodes
(``scripts.studies.sadal_published.variant``, ``agreement --set option=value``): the options
it reads and refuses, its table (written, resumed) and its comparison, on a stand-in
published store and hand-checkable rounds."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_data_files

from agents.experiments.stores.results import ResultStore
from ballad_env.settings import Settings
from ballad_env.settings.cli import setting_from_text
from scripts.studies.common.episodes import episode_cell, grow_store
from scripts.studies.sadal_published.__main__ import main
from scripts.studies.sadal_published.agreement import PRESET_TABLE
from scripts.studies.sadal_published.variant import (
    compare_rounds,
    variant_episodes,
    variant_settings,
    variant_summary,
    variant_table,
)

EXACT = ["--set", "threshold_search=exact", "--set", "ssif-trees=10"]  # 10 trees: fast
TABLE = "preset_ssif_trees=10+threshold_search=exact"


def test_options_read_as_their_command_line_options_and_unknown_ones_are_named() -> None:
    assert setting_from_text("threshold_search=exact") == ("threshold_search", "exact")
    assert setting_from_text("ssif-trees=10") == ("ssif_trees", 10)
    assert setting_from_text("c_r=gamma") == ("c_r", None)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown 'treshold_search'"):
        setting_from_text("treshold_search=exact")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown 'threshold_search'.*use one"):
        setting_from_text("threshold_search")  # no value
    with pytest.raises(argparse.ArgumentTypeError,
                       match="unknown threshold_search 'gridded': use one of .*exact"):
        setting_from_text("threshold_search=gridded")
    with pytest.raises(argparse.ArgumentTypeError, match="ssif_trees"):
        setting_from_text("ssif_trees=many")


def test_a_variant_must_change_the_preset() -> None:
    changes = {"threshold_search": "exact", "ssif_trees": 10}
    assert variant_settings(changes) == Settings.sadal(threshold_search="exact", ssif_trees=10)
    assert variant_table(changes) == TABLE  # options in alphabetical order
    with pytest.raises(ValueError, match="at least one option"):
        variant_settings({})
    for same in ({"threshold_search": "authors-bayes"}, {"bayes_calls": 50}):  # the
        with pytest.raises(ValueError, match="leaves Settings.sadal"):  # preset's; ignored
            variant_settings(same)


def test_rounds_compare_by_number() -> None:
    published = pd.DataFrame({"round": [1, 2], "action": ["LR", "AL"], "left": [0.3, 0.4],
                              "right": [0.6, 0.7], "test_cost": [0.1, 0.3],
                              "rejection_rate": [0.2, 0.0]})
    variant = pd.DataFrame({"round": [2, 1], "action": ["LR", "LR"], "left": [0.4, 0.35],
                            "right": [0.5, 0.6], "test_cost": [0.2, 0.2],
                            "rejection_rate": [0.1, 0.1]})
    assert compare_rounds(published, variant) == pytest.approx(
        {"rounds": 2, "published": 0.2, "variant": 0.2, "same_action": 0.5,
         "rejection_published": 0.1, "rejection_variant": 0.1,
         "left_difference": 0.025, "right_difference": 0.1}, abs=1e-15)
    episodes = pd.DataFrame({"dataset": ["a", "b", "a"], "seed": [0, 0, 0],
                             "agent": ["sadal", "sadal", "all-in-lr"], "rounds": [10] * 3,
                             "published": [0.1, 0.3, 0.2], "variant": [0.1, 0.2, 0.3],
                             "same_action": [1.0, 0.5, 1.0],
                             "rejection_published": [0.1, 0.3, 0.0],
                             "rejection_variant": [0.0, 0.1, 0.0],
                             "left_difference": [0.0, 0.2, 0.1],
                             "right_difference": [0.1, 0.1, 0.0]})
    summary = variant_summary(episodes)
    assert list(summary.index) == ["sadal", "all-in-lr"]
    assert summary.loc["sadal"].to_dict() == pytest.approx(
        {"episodes": 2, "published": 0.2, "variant": 0.15, "relative_difference": -0.25,
         "same_action": 0.75, "rejection_published": 0.2, "rejection_variant": 0.05,
         "left_difference": 0.1, "right_difference": 0.1}, abs=1e-15)
    assert summary.loc["all-in-lr", "relative_difference"] == pytest.approx(0.5, abs=1e-15)


def _published_store(folder: Path) -> None:
    """A stand-in published store: one All-in-LR episode on "alpha", 10 hand-made rounds."""
    store = grow_store(folder, ["alpha"], [0], ["LR"], "sadal_published", stream_seed="split")
    rows = pd.DataFrame({"dataset": "alpha", "seed": 0, "strategy": "LR",
                         "round": np.arange(1, 11), "action": "LR", "new_train": "",
                         "new_val": "1", "fix": "", "left": 0.4, "right": 0.6,
                         "test_cost": np.linspace(0.05, 0.5, 10),
                         "rejection_rate": 0.25})
    store.write(episode_cell("alpha", 0, "LR"), rows)


def test_the_variant_is_played_into_its_table_resumed_and_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = write_data_files(tmp_path / "data", {"alpha": 80})
    output = tmp_path / "published"
    _published_store(output)
    command = ["agreement", "--output", str(output), "--data-dir", str(data_dir),
               "--no-preset", *EXACT]
    assert main(command) == 0
    assert "played 1 episode(s) of the variant (table " + TABLE in capsys.readouterr().out
    store = ResultStore(output)
    cell = episode_cell("alpha", 0, "LR", table=TABLE)
    rows = store.read(cell)
    assert rows["action"].tolist() == ["LR"] * 10 and rows["round"].tolist() == list(range(1, 11))
    assert not store.path(episode_cell("alpha", 0, "LR", table=PRESET_TABLE)).exists()
    written = store.path(cell).stat().st_mtime_ns
    assert main(command) == 0  # resumed: nothing to play, the table as it was
    assert "played 0 episode(s) of the variant" in capsys.readouterr().out
    assert store.path(cell).stat().st_mtime_ns == written
    compared = variant_episodes(output, TABLE)
    assert compared[["dataset", "seed", "agent", "rounds"]].values.tolist() == [
        ["alpha", 0, "all-in-lr", 10]]
    episode = compared.iloc[0]
    assert episode["published"] == pytest.approx(0.275, abs=1e-12)  # mean of 0.05..0.5
    assert episode["variant"] == pytest.approx(rows["test_cost"].mean(), abs=1e-15)
    assert episode["same_action"] == 1.0 and episode["rejection_published"] == 0.25
    assert episode["rejection_variant"] == pytest.approx(rows["rejection_rate"].mean())
    assert episode["left_difference"] == pytest.approx(np.mean(np.abs(rows["left"] - 0.4)))
    assert episode["right_difference"] == pytest.approx(np.mean(np.abs(rows["right"] - 0.6)))


@pytest.mark.parametrize(("arguments", "message"), [
    (["agreement", "--set", "treshold_search=exact"], "unknown 'treshold_search'"),
    (["agreement", "--set", "threshold_search=authors-bayes"], "leaves Settings.sadal"),
    (["episodes", "--set", "threshold_search=exact"], "belong to agreement")])
def test_the_command_line_refuses_a_variant_by_name(
        arguments: list[str], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*arguments, "--output", str(tmp_path / "out")])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
