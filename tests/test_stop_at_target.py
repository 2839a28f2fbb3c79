"""The time-to-target study's stop at the target (a child process that writes fake
checkpoints stands in for a training run), a stopped run's facts read off its checkpoints,
and the seeds a study plans."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scripts.studies.timings.stop_at_target import saved_checkpoints, stopped_facts, watch
from scripts.studies.timings.time_to_target import (
    build_parser,
    checkpoints,
    evaluate,
    main,
    plan,
    run_facts,
)

#: A child that writes ``r_<100 k>_steps.zip`` for k = 1..10, one every ``argv[2]`` seconds,
#: then exits.
WRITER = """
import sys, time
from pathlib import Path
for k in range(1, 11):
    Path(sys.argv[1], f"r_{100 * k}_steps.zip").write_text("x")
    time.sleep(float(sys.argv[2]))
"""


def _writer(folder: Path, every_s: float) -> subprocess.Popen[bytes]:
    folder.mkdir()
    return subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(every_s)])


def _score(path: Path) -> float:
    """A checkpoint's fake cost: 1 less a tenth of its hundreds of steps (300 steps: 0.7)."""
    return 1 - int(path.stem.split("_")[1]) / 1000


def test_watch_ends_the_run_at_the_first_checkpoint_at_or_below_the_target(tmp_path: Path
                                                                           ) -> None:
    process = _writer(tmp_path / "checkpoints", 0.5)  # 5 s if it ran to the end
    seen = watch(process, tmp_path / "checkpoints", _score, 0.7, poll_s=0.02)
    assert process.returncode != 0  # ended, not finished
    assert seen.reached is not None and seen.reached.name == "r_300_steps.zip"
    assert [p.name for p in seen.costs] == ["r_100_steps.zip", "r_200_steps.zip",
                                           "r_300_steps.zip"]
    assert len(saved_checkpoints(tmp_path / "checkpoints")) < 10


def test_watch_scores_every_checkpoint_of_a_run_that_never_reaches_the_target(
        tmp_path: Path) -> None:
    process = _writer(tmp_path / "checkpoints", 0.02)
    seen = watch(process, tmp_path / "checkpoints", _score, -5.0, poll_s=0.02)
    assert process.returncode == 0 and seen.reached is None
    assert len(seen.costs) == 10 and seen.costs[tmp_path / "checkpoints" / "r_1000_steps.zip"
                                                ] == pytest.approx(0.0)


def test_a_scoring_that_fails_leaves_no_run_behind(tmp_path: Path) -> None:
    def score(path: Path) -> float:
        raise RuntimeError("a policy file that does not load")

    process = _writer(tmp_path / "checkpoints", 0.5)
    with pytest.raises(RuntimeError, match="does not load"):
        watch(process, tmp_path / "checkpoints", score, 0.0, poll_s=0.02)
    assert process.returncode is not None and process.returncode != 0


def test_a_stopped_runs_speed_and_setup_come_from_its_checkpoints() -> None:
    # 100 steps a second from 3 s on: training started at 2 s, 3 s of it to the last
    facts = stopped_facts([(100, 3.0), (200, 4.0), (300, 5.0)])
    assert facts == pytest.approx({"steps_per_s": 100.0, "setup_s": 2.0, "train_s": 3.0})
    with pytest.raises(ValueError, match="two checkpoints"):
        stopped_facts([(100, 3.0)])


def test_a_stopped_run_without_a_final_model_is_read_from_its_checkpoints(tmp_path: Path
                                                                         ) -> None:
    """A run writes its settings to its record first, its steps and clock only at the end."""
    run = tmp_path / "seeds-sb3-s0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "seeds-sb3-s0.json").write_text('{"run_name": "seeds-sb3-s0"}')
    for steps, wall in ((200, 14.0), (100, 12.0)):
        path = run / "checkpoints" / f"seeds-sb3-s0_{steps}_steps.zip"
        path.write_text("x")
        os.utime(path, (1000 + wall, 1000 + wall))
    assert [steps for steps, _ in checkpoints(run)] == [100, 200]
    facts = run_facts(run, 1000.0, [{"steps": 100, "wall_s": 12.0},
                                    {"steps": 200, "wall_s": 14.0}])
    assert facts["stopped"] and facts["steps_per_s"] == pytest.approx(50.0)
    assert facts["setup_s"] == pytest.approx(10.0)


def test_the_seeds_phase_starts_at_the_first_seed() -> None:
    args = build_parser().parse_args(["--out", "x", "--seeds", "2", "--first-seed", "5",
                                      "--no-cold", "--long-trainers"])
    args.steps, args.every = {"sb3": 10, "compiled": 20}, {"sb3": 1, "compiled": 2}
    assert plan(args) == [("seeds", "sb3", 5, 10, 1), ("seeds", "compiled", 5, 20, 2),
                          ("seeds", "sb3", 6, 10, 1), ("seeds", "compiled", 6, 20, 2)]


def test_stopping_needs_a_target_fixed_beforehand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--out", "x", "--train-store", "t", "--heldout-store", "h",
              "--stop-at-target", "sb3"])
    assert "need --target-cost" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the compiled trainer's worker would not pause
        main(["--out", "x", "--stop-at-target", "compiled", "--target-cost", "0.04"])


class _FakeCells:
    """Cells whose cost of an agent (here a checkpoint's path) is read off its steps."""

    all_in_lr = 1.0

    def __init__(self, costs: dict[int, float]) -> None:
        self.costs, self.scored = costs, 0

    def cost(self, agent: str) -> float:
        self.scored += 1
        return self.costs[int(Path(agent).stem.split("_")[-2])] if "_steps" in agent \
            else self.costs[0]


def test_scoring_until_the_target_skips_all_but_the_last_checkpoint_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints at 100-500 steps and a final model (cost under key 0): with the target
    0.6, the first at or below it is 200's; 300 to 500 are skipped, the final model kept."""
    import agents.registry

    monkeypatch.setattr(agents.registry, "make_agent", str)
    run = tmp_path / "seeds-sb3-s0"
    (run / "checkpoints").mkdir(parents=True)
    for steps in (100, 200, 300, 400, 500):
        (run / "checkpoints" / f"seeds-sb3-s0_{steps}_steps.zip").write_text("x")
    (run / "seeds-sb3-s0.zip").write_text("x")
    (run / "seeds-sb3-s0.json").write_text('{"num_timesteps": 500}')
    costs = {100: 0.9, 200: 0.5, 300: 0.8, 400: 0.3, 500: 0.7, 0: 0.4}
    cells = _FakeCells(costs)
    rows = evaluate(run, 0.0, {"train": cells}, until=("train", 0.6))  # type: ignore[dict-item]
    assert [(r["steps"], r["train_cost"]) for r in rows] == [(100, 0.9), (200, 0.5),
                                                             (500, 0.4)]
    assert cells.scored == 3
    assert len(evaluate(run, 0.0, {"train": _FakeCells(costs)})) == 6  # type: ignore[dict-item]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_run_is_paused_while_its_checkpoints_are_scored(tmp_path: Path) -> None:
    """Each scoring finds the writer stopped (state T, once the signal has landed: it is
    sent, not waited for), and every pause is kept."""
    states: list[str] = []
    process = _writer(tmp_path / "checkpoints", 0.05)

    def state() -> str:
        return Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    def score(path: Path) -> float:
        deadline = time.monotonic() + 2.0
        while state() != "T" and time.monotonic() < deadline:
            time.sleep(0.001)
        states.append(state())
        return _score(path)

    seen = watch(process, tmp_path / "checkpoints", score, 0.5, poll_s=0.02)
    assert seen.reached is not None and states and set(states) == {"T"}
    assert seen.pauses and all(start <= end for start, end in seen.pauses)


def test_a_watched_runs_wall_times_are_less_its_pauses(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints saved 12 s and 20 s after the start, a 3 s pause between them: the
    second's wall time is 17 s, and the watch's cost is kept."""
    import agents.registry
    from scripts.studies.timings.stop_at_target import Watch

    monkeypatch.setattr(agents.registry, "make_agent", str)
    run = tmp_path / "seeds-sb3-s0"
    (run / "checkpoints").mkdir(parents=True)
    for steps, wall in ((100, 12.0), (200, 20.0)):
        path = run / "checkpoints" / f"seeds-sb3-s0_{steps}_steps.zip"
        path.write_text("x")
        os.utime(path, (1000 + wall, 1000 + wall))
    seen = Watch(costs={run / "checkpoints" / "seeds-sb3-s0_100_steps.zip": 0.123},
                 pauses=[(1013.0, 1016.0)])
    assert seen.paused_before(1012.0) == 0 and seen.paused_before(1020.0) == 3.0
    rows = evaluate(run, 1000.0, {"train": _FakeCells({100: 0.9, 200: 0.5})},  # type: ignore[dict-item]
                    ("train", seen))
    assert [(r["wall_s"], r["train_cost"]) for r in rows] == [(12.0, 0.123), (17.0, 0.5)]
