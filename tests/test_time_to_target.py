"""The time-to-target study on a hand-made table (the target, each run's time to it, the
medians' intervals) and on one tiny real run (its checkpoints scored); nothing timed."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scripts.studies.timings import target_table
from scripts.studies.timings.time_to_target import main, pairs, report


def _table(curves: dict[tuple[str, int], list[tuple[int, float, float]]],
           all_in_lr: float = 0.05) -> pd.DataFrame:
    """A study table: per (trainer, seed), checkpoints (steps, wall_s, held-out cost)."""
    rows = [{"phase": "seeds", "trainer": trainer, "seed": seed, "commit": "abc",
             "setup_s": 2.0, "steps_per_s": 1000.0, "load_end": 1.0, "steps": steps,
             "wall_s": wall, "heldout_cost": cost, "heldout_all_in_lr": all_in_lr,
             "train_cost": cost / 2, "train_all_in_lr": all_in_lr}
            for (trainer, seed), points in curves.items() for steps, wall, cost in points]
    return pd.DataFrame(rows)


CURVES = {("sb3", 0): [(10, 5.0, 0.06), (20, 60.0, 0.045), (30, 90.0, 0.041)],
          ("sb3", 1): [(10, 6.0, 0.06), (20, 70.0, 0.052), (30, 100.0, 0.049)],
          ("compiled", 0): [(10, 3.0, 0.07), (20, 4.0, 0.040), (30, 5.0, 0.044)]}


def test_target_is_a_share_of_the_best_improvement_over_all_in_lr() -> None:
    target = target_table.choose_target(_table(CURVES), 0.9)
    # the best checkpoint is 0.040, 0.010 below All-in-LR's 0.05: 90% of it is 0.009
    assert target.reference == "all-in-lr" and target.best_cost == pytest.approx(0.040)
    assert target.cost == pytest.approx(0.041)
    assert target_table.choose_target(_table(CURVES), 0.0).cost == 0.05  # All-in-LR's own
    train = target_table.choose_target(_table(CURVES), 0.5, "train")  # costs halved: 0.020
    assert train.best_cost == pytest.approx(0.020) and train.cost == pytest.approx(0.035)
    with pytest.raises(ValueError, match="unknown measure"):
        target_table.choose_target(_table(CURVES), 0.5, "test")


def test_without_any_improvement_the_target_is_measured_from_the_first_checkpoints() -> None:
    target = target_table.choose_target(_table(CURVES, all_in_lr=0.03), 0.5)
    # the worst first checkpoint is 0.07 (compiled), the best 0.040: half the way is 0.055
    assert target.reference == "first checkpoint" and target.reference_cost == 0.07
    assert target.cost == pytest.approx(0.055)
    with pytest.raises(ValueError, match="fraction"):
        target_table.choose_target(_table(CURVES), 1.5)


def test_time_to_target_is_the_first_checkpoint_at_or_below_it() -> None:
    times = target_table.times_to_target(_table(CURVES), 0.045).set_index(["trainer", "seed"])
    assert times.loc[("sb3", 0), "wall_s"] == 60.0 and times.loc[("sb3", 0), "steps"] == 20
    assert times.loc[("compiled", 0), "wall_s"] == 4.0  # the later rise does not matter
    assert np.isinf(times.loc[("sb3", 1), "wall_s"]) and times.loc[("sb3", 1), "steps"] == 0


def test_median_interval_keeps_runs_that_never_reached_as_infinite() -> None:
    rng = np.random.default_rng(0)
    median, low, high = target_table.median_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), rng)
    assert median == 3.0 and 1.0 <= low <= 3.0 <= high <= 5.0
    median, low, high = target_table.median_interval(np.array([1.0, 2.0, np.inf, np.inf,
                                                               np.inf]), rng)
    assert median == np.inf and high == np.inf and np.isfinite(low)
    ratio, low, high = target_table.ratio_interval(np.array([1.0, 1.0, 1.0]),
                                                   np.array([4.0, 5.0, 6.0]), rng)
    assert ratio == pytest.approx(0.2) and 1 / 6 <= low <= ratio <= high <= 1 / 4
    ratio, low, high = target_table.ratio_interval(np.array([1.0, np.inf, np.inf]),
                                                   np.array([2.0, np.inf, np.inf]), rng)
    assert ratio == np.inf and high == np.inf and 0 <= low <= 0.5  # never NaN


def test_report_names_the_target_and_the_ratio() -> None:
    text = report(_table(CURVES), 0.05)
    # SB3 reaches 0.0495 at 60 and 100 s (median 80), the compiled trainer at 4 s
    assert "target 0.0495" in text and "| seeds | sb3 | 2 | 2 | 80.0 [60.0, 100.0]" in text
    assert "seeds compiled / SB3 seeds: 0.050" in text
    assert "never reached" in report(_table(CURVES), 0.5)


def test_the_study_prints_its_help_and_refuses_bad_pairs(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "--train-store" in capsys.readouterr().out
    assert pairs(["compiled=--batch-size 2048"]) == {"compiled": "--batch-size 2048"}
    with pytest.raises(SystemExit):
        main(["--out", "x", "--steps", "ppo=10"])


def test_the_bench_points_its_old_held_out_option_at_the_study(
        capsys: pytest.CaptureFixture[str]) -> None:
    from agents.experiments.cli.bench import main as bench_main

    assert bench_main(["--heldout-store", "h"]) == 2
    assert "python -m scripts.studies.timings.time_to_target --heldout-store" in \
        capsys.readouterr().err


@pytest.mark.slow
def test_a_real_runs_checkpoints_are_scored_with_their_wall_times(tmp_path: Path) -> None:
    """A batched run with a checkpoint every 60 steps: one row per checkpoint and one for the
    final model, in step order, each with its file's time since the start, a held-out cost
    on every cell and All-in-LR's beside it."""
    from conftest import small_store, train_replay

    from scripts.studies.timings.time_to_target import Cells, evaluate

    store = small_store(tmp_path / "data", tmp_path / "store")
    started = time.time()
    run = train_replay(store, algo="ppo", n_envs=4, total_timesteps=180,
                       output_dir=tmp_path / "runs", run_name="b-s0", checkpoint_freq=60)
    cells = Cells(str(store), str(store))
    rows = evaluate(run, started, {"heldout": cells})
    assert [r["steps"] for r in rows] == [60, 120, 180, 180] and len(cells.lattices) == 2
    walls = [r["wall_s"] for r in rows]
    assert 0 < walls[0] <= walls[1] <= walls[2] <= walls[3] <= time.time() - started
    assert all(0 <= r["heldout_cost"] <= 1 and r["heldout_all_in_lr"] == cells.all_in_lr
               for r in rows)


def test_a_given_target_cost_is_kept_and_its_share_of_the_best_improvement_named() -> None:
    """``--target-cost`` fixes the target whatever the table's best: 0.045 is half of the
    best 0.010 improvement on All-in-LR's 0.05, and the report says so; SB3 seed 0 reaches
    it at 60 s and seed 1 never (median infinite)."""
    target = target_table.choose_target(_table(CURVES), 0.95, cost=0.045)
    assert (target.cost, target.given, target.reference) == (0.045, True, "all-in-lr")
    assert target.fraction == pytest.approx(0.5)
    text = report(_table(CURVES), 0.95, target_cost=0.045)
    assert "target 0.0450 (given): all-in-lr (0.0500) less 0.5 x" in text
    assert "| seeds | sb3 | 2 | 1 | inf [60.0, inf]" in text


def test_the_split_schedule_has_its_own_row_and_ratio_to_sb3() -> None:
    """Runs of the ``split`` trainer (the compiled trainer with ``--schedule split``) are
    summarised on their own, with their median time over SB3's: 8 s against 80 s."""
    from scripts.studies.timings.time_to_target import TRAINERS

    assert TRAINERS["split"][-2:] == ["--schedule", "split"]
    curves = {**CURVES, ("split", 0): [(10, 3.0, 0.07), (20, 8.0, 0.045)]}
    text = report(_table(curves), 0.05)
    assert "| seeds | split | 1 | 1 | 8.0 [8.0, 8.0]" in text
    assert "seeds split / SB3 seeds: 0.100" in text
