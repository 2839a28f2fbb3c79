"""A training run's folder and the stores' locks (issue 39, items 2, 5 and 12): a run name is
one path component, so ``--run-name ..`` never clears another folder; two trainings into one
folder at once are refused, not mixed; a lock path that is a folder is said in words."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agents.experiments.grid import Grid
from agents.experiments.run import run_grid
from agents.experiments.stores.results import RunError
from ballad_env.data import Dataset
from ballad_env.settings import Settings

pytest.importorskip("stable_baselines3")
from agents.experiments.cli.train import main as train_main  # noqa: E402
from agents.experiments.training.config import TrainConfig  # noqa: E402
from agents.experiments.training.record import append_row, write_eval  # noqa: E402
from agents.experiments.training.run_folder import check_run_name, run_lock  # noqa: E402
from agents.experiments.training.sb3 import train  # noqa: E402

NOT_NAMES = ["..", ".", "", " ", "a/b", "../x", "/tmp/x", "a\\b", "C:", "x\0y", " pad"]


@pytest.mark.parametrize("name", NOT_NAMES)
def test_a_run_name_that_is_not_one_component_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a name: give one folder name"):
        check_run_name(name)
    with pytest.raises(ValueError, match="is not a name"):
        TrainConfig(run_name=name)


def test_names_pass_as_they_are() -> None:
    for name in ("ppo-cost-toy-s0-3000steps", "my run", "a.b+c=d_e~f"):
        assert check_run_name(name) == name


def test_train_with_run_name_dotdot_touches_nothing(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    keep = tmp_path / "logs" / "keep.txt"
    keep.parent.mkdir()
    keep.write_text("mine")
    (tmp_path / "curve.png").write_text("mine")
    code = train_main(["--output-dir", str(tmp_path / "sub"), "--run-name", "..",
                       "--total-timesteps", "60", "--vec-env", "dummy", "--no-progress"])
    assert code == 2
    assert "run name '..' is not a name" in capsys.readouterr().err
    assert keep.read_text() == "mine" and (tmp_path / "curve.png").read_text() == "mine"


def test_a_second_training_into_a_held_folder_is_refused(tmp_path: Path) -> None:
    config = TrainConfig(output_dir=str(tmp_path), run_name="shared", total_timesteps=60,
                         vec_env="dummy", progress_bar=False)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from agents.experiments.training.run_folder import run_lock
        with run_lock({str(config.run_dir)!r}):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunError, match=r"another process holds the lock of the run "
                                           r"folder .*shared.*name this run apart"):
            train(config)
        assert not (config.run_dir / "monitor").exists()
    finally:
        holder.kill()
        holder.wait()
    with run_lock(config.run_dir):  # released with its process
        pass


def test_a_folder_at_a_lock_path_is_said_in_words(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = np.zeros(80, dtype=np.int8)
    y[:8] = 1
    output = tmp_path / "run"
    (output / ".run.json.lock").mkdir(parents=True)
    grid = Grid((Dataset("d", X, y),), (0,), ("all-in-al",),
                (Settings(prior="knn", budget_fraction=0.1),))
    with pytest.raises(RunError, match=r"\.run\.json\.lock is not a lock file \(Is a "
                                       r"directory\); remove it"):
        run_grid(grid, output, n_jobs=1, progress=False)


TRAIN = ["--algo", "ppo", "--datasets", "toy", "--prior", "knn", "--total-timesteps", "30",
         "--n-steps", "15", "--batch-size", "15", "--n-envs", "1", "--vec-env", "dummy",
         "--no-progress", "--run-name", "long"]


def _interrupted_run(run: Path, checkpoints: int = 20) -> list[Path]:
    """What a run SIGTERM'd after ``checkpoints`` checkpoints leaves: its settings JSON,
    monitor and logs, the checkpoints, no model."""
    saved = []
    for k in range(1, checkpoints + 1):
        saved.append(run / "checkpoints" / f"long_{500 * k}_steps.zip")
        saved[-1].parent.mkdir(parents=True, exist_ok=True)
        saved[-1].write_bytes(b"checkpoint %d" % k)
    (run / "monitor").mkdir()
    (run / "monitor" / "0.monitor.csv").write_text("#{}\nr,l,t\n")
    (run / "long.json").write_text('{"algo": "ppo"}')
    return saved


def test_an_unfinished_run_is_refused_not_cleared(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    """The same command again after a SIGTERM deleted the run's 20 checkpoints silently."""
    saved = _interrupted_run(tmp_path / "long")
    assert train_main([*TRAIN, "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds an unfinished run of this name (20 checkpoints" in err
    assert "--overwrite" in err and "\n" not in err
    assert all(path.read_bytes() == b"checkpoint %d" % k for k, path in enumerate(saved, 1))
    assert train_main([*TRAIN, "--output-dir", str(tmp_path), "--overwrite"]) == 0
    assert not any(path.exists() for path in saved)
    assert (tmp_path / "long" / "long.zip").is_file()


def test_a_link_in_a_run_folder_is_never_written_through(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    """``monitor/`` a link to a folder outside the run: refused, or with --overwrite the link
    itself removed; nothing is written outside the run either way."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    run = tmp_path / "out" / "long"
    run.mkdir(parents=True)
    (run / "monitor").symlink_to(outside, target_is_directory=True)
    assert train_main([*TRAIN, "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{run / 'monitor'} is a link inside the run folder" in err and "\n" not in err
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert train_main([*TRAIN, "--output-dir", str(tmp_path / "out"), "--overwrite"]) == 0
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "mine"
    monitor = run / "monitor"
    assert monitor.is_dir() and not monitor.is_symlink() and list(monitor.glob("*.monitor.csv"))


def test_a_runs_tables_take_their_header_once_then_rows(tmp_path: Path) -> None:
    """``record.append_row``, the one appender of a run's CSV tables: the folder made, the
    header written only into a new file, and rows appended after what is there."""
    table = tmp_path / "logs" / "progress.csv"
    append_row(table, ["timesteps", "loss"], ["8", "0.5"])
    append_row(table, ["timesteps", "loss"], ["16", "0.25"])
    assert table.read_text().splitlines() == ["timesteps,loss", "8,0.5", "16,0.25"]
    monitor = tmp_path / "monitor.csv"
    monitor.write_text('#{"t_start": 0}\nr,l\n')  # a header written when the run opened
    append_row(monitor, ["r", "l"], ["1.0", "64"])
    assert monitor.read_text().splitlines() == ['#{"t_start": 0}', "r,l", "1.0,64"]
    write_eval(tmp_path, 128, -0.25, 0.125)
    assert (tmp_path / "eval" / "evaluations.csv").read_text().splitlines() == [
        "timesteps,mean_return,mean_test_cost", "128,-0.250000,0.125000"]
