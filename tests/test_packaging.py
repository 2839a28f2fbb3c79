"""What the wheel ships: the library (``ballad_env``, ``agents``) and its data, never the
research (``scripts/``: the studies and the docs' tools run from a clone)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_holds_the_library_only(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("ballad_env-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("ballad_env-")}
    assert tops == {"ballad_env", "agents"}, tops
    assert not [name for name in names if "studies" in name.split("/")[:-1]]
    # the library's data and its benchmark come along
    assert "ballad_env/data/benchmarks/manifest.json" in names
    assert "agents/experiments/bench/vector.py" in names
    assert "agents/ppo/step_cache.py" in names  # the trainers' PPO, a package of its own
    assert "agents/allocation_params.json" in names
