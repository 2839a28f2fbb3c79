"""The robustness sweep's hostile conditions of a whole run
(``scripts.studies.robustness.hostile_runs``): every environment variable that sets a bound
or a folder at values that overflow or are no number, Ctrl-C during every job, and every
folder a job writes into read-only or full; each ends in one line naming the input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.studies.robustness.hostile_runs import (
    BAD_NUMBERS,
    environment_cases,
    interrupt_cases,
    outcome,
    unwritable_cases,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_that_sets_a_bound_is_checked_at_first_use(tmp_path: Path) -> None:
    cases = environment_cases(tmp_path)
    result = outcome("environment", cases, limit=60.0)
    assert result.failures == []
    assert result.counts["refused, naming the input"] == len(cases) >= 3 * len(BAD_NUMBERS) + 4


def test_bad_variables_leave_import_and_help_working(tmp_path: Path) -> None:
    """Each variable is read at its first use, not at import: ``--help`` still runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BALLAD_RESET_CACHE_MB": "abc",
           "BALLAD_MAX_ARRAY_BYTES": "inf", "BALLAD_DOWNLOAD_DEADLINE": "1e308",
           "BALLAD_DATA_HOME": str(Path(__file__)), "BALLAD_NO_COMPILE": "maybe"}
    done = subprocess.run([sys.executable, "-m", "ballad_env", "compare", "--help"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--datasets" in done.stdout


def test_ctrl_c_during_every_job_is_one_line(tmp_path: Path) -> None:
    cases = interrupt_cases(tmp_path)
    result = outcome("interrupts", cases, limit=120.0)
    assert result.failures == []
    assert result.counts["refused, naming the input"] == len(cases) >= 4


def test_every_written_folder_read_only_or_full_is_one_line(tmp_path: Path) -> None:
    cases = unwritable_cases(tmp_path)
    result = outcome("folders", cases, limit=120.0)
    assert result.failures == []
    assert result.counts["refused, naming the input"] == len(cases) >= 6


def test_a_relative_data_home_variable_pointing_at_a_file_is_named(tmp_path: Path,
                                                                  monkeypatch) -> None:
    from ballad_env.data.adbench import data_home
    from ballad_env.files import EnvVarError

    (tmp_path / "home").write_text("x")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BALLAD_DATA_HOME", "home")
    with pytest.raises(EnvVarError, match=r"\$BALLAD_DATA_HOME is 'home', which is not a folder"):
        data_home()
    monkeypatch.setenv("BALLAD_DATA_HOME", "cache")
    assert data_home() == Path("cache")


def test_train_on_a_full_disk_is_one_line_naming_the_folder(tmp_path: Path, monkeypatch,
                                                            capsys) -> None:
    """SB3's checkpoint save on a full disk (its zip written through Python's files)."""
    import errno

    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common import base_class

    from agents.experiments.cli import main

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(base_class, "save_to_zip_file", full)
    output = tmp_path / "policies"
    assert main(["train", "--algo", "ppo", "--datasets", "toy", "--prior", "knn",
                 "--total-timesteps", "30", "--n-steps", "15", "--batch-size", "15",
                 "--n-envs", "1", "--vec-env", "dummy", "--checkpoint-freq", "15",
                 "--output-dir", str(output), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the disk is full") and str(output) in err and "\n" not in err
