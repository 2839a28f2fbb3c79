"""A newcomer's dead ends at the command line and in Python: a closed pipe, a misspelled
option, names that tab completion cannot see.

Each test runs what a new user typed and checks what they get back: a quiet end, one short
error with a suggestion, the lazily exported names listed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ballad_env.__main__ import BROKEN_PIPE_STATUS

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- closed pipe
@pytest.mark.parametrize(("args", "status"), [
    (["--help"], BROKEN_PIPE_STATUS), (["--version"], BROKEN_PIPE_STATUS),
    pytest.param(["data"], BROKEN_PIPE_STATUS, marks=pytest.mark.slow),
    # argparse drops its own write errors, and exits with 0
    pytest.param(["compare", "--help"], 0, marks=pytest.mark.slow)])
def test_a_closed_pipe_ends_quietly(args: list[str], status: int) -> None:
    """``ballad-env data | head -2`` printed a ``BrokenPipeError`` traceback. The reader here
    is gone before the command writes anything, so every write meets a closed pipe."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "ballad_env", *args], stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    finally:
        os.close(writer)
    assert done.stderr == "", done.stderr
    assert done.returncode == status
