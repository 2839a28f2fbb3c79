"""The minibatch-size learning study (scripts/studies/training_speed/learning.py): its runs'
options, and a study that saves after every run and resumes from the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scripts.studies.training_speed import learning


def test_variants_are_compiled_runs_with_the_options_added() -> None:
    """``LABEL=OPTIONS`` adds a compiled run at its defaults with the options after its own;
    a spec without ``=`` is a one-line error naming the form."""
    runs = learning.plan([1024], 400, 200, 100, learning.variants(["split=--schedule split"]))
    assert list(runs) == ["SB3 PPO", "compiled, minibatch 1024", "compiled, split"]
    assert runs["compiled, split"][-2:] == ["--schedule", "split"]
    assert "--batch-size" not in runs["compiled, split"]
    assert runs["compiled, split"][:-2] == runs["compiled, minibatch 1024"][:-2]
    assert runs["SB3 PPO"][runs["SB3 PPO"].index("--total-timesteps") + 1] == "200"
    with pytest.raises(ValueError, match="LABEL=OPTIONS"):
        learning.variants(["split"])
    assert list(learning.plan([], 400, 0, 100, learning.variants(["s="]))) == ["compiled, s"]


def test_report_only_merges_the_trainers_of_other_saved_studies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--merge`` adds another file's trainers to the table, beside the first file's SB3."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"SB3 PPO": {"0": {"0": [0.1], "5": [0.2]}}}))
    second.write_text(json.dumps({"compiled, s": {"0": {"0": [0.1], "5": [0.3]}}}))
    learning.main(["--save", str(first), "--merge", str(second), "--report-only"])
    rows = [line.split("|")[1:3] for line in capsys.readouterr().out.splitlines()[3:]]
    assert rows == [[" SB3 PPO ", " 5 "], [" compiled, s ", " 5 "]]


def test_the_study_saves_after_each_run_and_a_rerun_skips_those_saved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A study stopped after its first run keeps that run's costs in ``--save``; the rerun
    trains only the runs missing from the file, and the file then holds every run with its
    integer seeds and steps."""
    trained: list[str] = []

    def fake_run(_: object, argv: list[str], out: str, name: str) -> str:
        if len(trained) == 1 and name == "r1-s0" and not (tmp_path / "stop").exists():
            (tmp_path / "stop").touch()
            raise KeyboardInterrupt  # the first study stops after one run
        trained.append(name)
        return name

    def fake_costs(run: str, eval_store: str) -> dict[int, list[float]]:
        return {0: [0.5, 0.5], 100: [float(len(run)), float(run[-1])]}

    monkeypatch.setattr(learning, "in_fresh_process", fake_run)
    monkeypatch.setattr(learning, "held_out_costs", fake_costs)
    runs = {"a": ["--x"], "b": ["--y"]}
    save = str(tmp_path / "costs.json")
    with pytest.raises(KeyboardInterrupt):
        learning.measure("S", "E", range(2), runs, save)
    assert list(json.loads(Path(save).read_text())) == ["a"]
    costs = learning.measure("S", "E", range(2), runs, save)
    assert trained == ["r0-s0", "r1-s0", "r0-s1", "r1-s1"]  # r0-s0 not trained twice
    assert learning.load_costs(save) == costs
    assert costs["b"][1] == {0: [0.5, 0.5], 100: [5.0, 1.0]}


def test_load_costs_names_a_file_of_another_layout(tmp_path: Path) -> None:
    """The earlier layout (a list of seeds per trainer) is refused with the fix named."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"SB3 PPO": [{"0": [0.1]}]}))
    with pytest.raises(ValueError, match="give --save a new file"):
        learning.load_costs(str(old))


def test_the_report_gives_each_trainers_iqm_less_sb3s_at_the_same_steps() -> None:
    """A trainer worse than SB3 by 0.01 in every seed and cell: the difference column says
    +0.0100 with an interval around it above 0; SB3's own rows and a step count SB3 lacks
    leave the column empty."""
    import numpy as np

    from agents.reports.policy_stats import iqm

    rng = np.random.default_rng(5)
    sb3 = [{0: [0.03] * 4, 200: list(0.03 + 0.01 * rng.random(4))} for _ in range(5)]
    fast = [{0: [0.03] * 4, 100: [0.05] * 4, 200: [c + 0.01 for c in s[200]]} for s in sb3]
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line.split("|")
            for line in learning.report({"SB3 PPO": sb3, "fast": fast}).splitlines()[2:]}
    difference = rows[("fast", "200")][5].strip()
    value, low, high = (float(x) for x in re.findall(
        r"([+-][\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\]", difference)[0])
    expected = iqm(np.array([s[200] for s in fast])) - iqm(np.array([s[200] for s in sb3]))
    assert value == pytest.approx(expected, abs=5e-5) == pytest.approx(0.01, abs=5e-5)
    assert 0 < low <= value <= high
    assert rows[("SB3 PPO", "200")][5].strip() == rows[("fast", "100")][5].strip() == ""
    kept = learning.report({"SB3 PPO": sb3, "fast": fast}, shown=[100]).splitlines()[3:]
    assert [line.split("|")[1:3] for line in kept] == [[" fast ", " 100 "]]


def test_the_reports_intervals_draw_whole_seeds() -> None:
    """Three seeds whose policies cost 0.02, 0.04 and 0.06 in every cell: a copy that draws
    the first seed three times (1 in 27) holds only 0.02, so the interval reaches down to
    it; seeds drawn cell by cell would mix them and keep the low end near the middle."""
    seeds = [{0: [0.03] * 4, 100: [cost] * 4} for cost in (0.02, 0.04, 0.06)]
    row = next(line.split("|") for line in learning.report({"SB3 PPO": seeds}).splitlines()
               if line.split("|")[2].strip() == "100")
    value, low, high = (float(x) for x in re.findall(
        r"([\d.]+) \[([\d.]+), ([\d.]+)\]", row[3])[0])
    assert (low, value, high) == (0.02, 0.04, 0.06)
