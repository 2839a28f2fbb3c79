"""The shell commands of the README and of Getting started run as written, in order, in a
fresh folder beside a clone (issue 38): the README's training section builds a lattice
store, trains on it with both trainers and rl-zoo3, and records a Minari dataset from it;
Getting started compares three agents with a figure.

Each command runs with options appended that make it small (argparse keeps the last value
of an option, so ``--seeds 1`` after ``--seeds 10`` wins); nothing else is changed. The
``make`` lines set up the clone (CI runs them itself), so they are the only lines left out,
and a fast test holds that every other command of the README is one this file knows how
to run small.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: command prefix -> options appended to make it small (a prefix absent here fails the test)
SMALL = {
    "ballad-env lattices": ["--seeds", "1", "--no-progress"],
    "ballad-env train --trainer batched": ["--total-timesteps", "2000", "--n-envs", "64",
                                           "--no-progress"],
    "ballad-env train": ["--total-timesteps", "600", "--n-envs", "2", "--no-progress"],
    "python -m rl_zoo3.train": ["-n", "256", "-params", "n_envs:2", "n_steps:64",
                                "batch_size:64", "--seed", "0"],
    "ballad-env minari": [],
    "ballad-env compare": ["--seeds", "2", "--n-jobs", "1", "--no-progress"],
}
#: the pages whose commands run (the other pages' commands are studies of hours)
PAGES = ("README.md", "docs/getting-started.md")
#: commands that set up the clone, run by CI and the Makefile themselves
SET_UP = ("make ",)


def shell_commands(page: Path) -> list[str]:
    """The commands of the page's ``bash`` blocks, one string each: continuation lines
    joined, comments dropped."""
    text = page.read_text()
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def small(command: str) -> list[str] | None:
    """The command's argv with its small-size options, or ``None`` for a set-up command;
    ``KeyError`` for a command this file does not know."""
    if command.startswith(SET_UP):
        return None
    prefix = max((p for p in SMALL if command.startswith(p)), key=len, default=None)
    if prefix is None:
        raise KeyError(f"the README runs {command!r}: add it to SMALL in {__file__}")
    argv = shlex.split(command) + SMALL[prefix]
    if argv[0] == "ballad-env":
        script = shutil.which("ballad-env", path=str(Path(sys.executable).parent))
        argv = ([script] if script else [sys.executable, "-m", "ballad_env"]) + argv[1:]
    elif argv[0] == "python":
        argv[0] = sys.executable
    return argv


def test_every_readme_command_is_known() -> None:
    for page in PAGES[1:]:
        assert all(small(c) is not None or c.startswith(SET_UP)
                   for c in shell_commands(ROOT / page))
    commands = shell_commands(ROOT / "README.md")
    runnable = [c for c in commands if small(c) is not None]
    assert len(runnable) >= 5 and runnable[0].startswith("ballad-env lattices"), runnable
    assert any("reward:\"'cost'\"" in c and "--log-folder results/" in c for c in runnable)


def test_each_docs_comparison_has_its_own_output_folder() -> None:
    """The docs' ``--stats`` example, run after Getting started, was refused ("results/run
    holds a different run"): both wrote to the default folder. Every ``ballad-env compare``
    of the README and the docs names its ``--output``, and no two share one."""
    outputs: dict[str, str] = {}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        for block in re.findall(r"^```\w*\n(.*?)^```", page.read_text(), re.S | re.M):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                if not line.strip().startswith("ballad-env compare "):
                    continue
                argv = shlex.split(line.split(" #")[0])
                assert "--output" in argv, f"{page.name}: {line.strip()} has no --output"
                folder = argv[argv.index("--output") + 1]
                assert folder not in outputs, f"{page.name} and {outputs[folder]} share {folder}"
                outputs[folder] = page.name
    assert len(outputs) >= 3, outputs


@pytest.mark.slow
def test_the_readmes_commands_run_in_order(tmp_path: Path) -> None:
    """A fresh folder that sees the clone's files (the rl-zoo3 command names its
    configuration by a path in the clone), every command in turn, each must exit 0."""
    (tmp_path / "agents").symlink_to(ROOT / "agents")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg",
           "MINARI_DATASETS_PATH": str(tmp_path / "minari")}
    for command in shell_commands(ROOT / "README.md"):
        argv = small(command)
        if argv is None:
            continue
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (tmp_path / "results" / "lattices" / "store.json").is_file()
    runs = sorted(p.name for p in (tmp_path / "results" / "policies").iterdir())
    assert len(runs) == 2 and all((tmp_path / "results" / "policies" / r / f"{r}.zip").is_file()
                                  for r in runs), runs
    assert (tmp_path / "results" / "zoo").is_dir() and not (tmp_path / "logs").exists()
    assert (tmp_path / "minari" / "ballad" / "opt-v0").is_dir()


@pytest.mark.slow
def test_getting_starteds_commands_run(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    commands = [small(c) for c in shell_commands(ROOT / PAGES[1])]
    for argv in filter(None, commands):
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "results" / "getting-started-cli" / "cost_by_round.png").is_file()
