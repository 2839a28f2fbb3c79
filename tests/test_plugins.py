"""Plugins that survive worker processes and the command line (issue 30).

A user's agent and prior, registered by importing ``tests/user_plugin.py``, reach the
cells of a grid that really goes to worker processes (``WORKER_START_S`` set to 0): by
``run_grid(plugins=[...])``, by ``ballad-env compare --import user_plugin``, and as an
installed entry point of the group ``ballad_env.plugins`` (a fresh Python whose path holds a
package's ``.dist-info``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.experiments import Grid
from agents.experiments import run as run_module
from agents.experiments.cli import main as cli
from agents.experiments.stores.results import load_results

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@pytest.fixture
def to_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every grid goes to worker processes, however small."""
    monkeypatch.setattr(run_module, "WORKER_START_S", 0.0)


def test_a_plugin_module_reaches_the_workers(to_workers, tmp_path: Path) -> None:
    from agents.experiments.run import run_grid
    from ballad_env.settings import Settings

    table = run_grid(Grid(("toy",), (0, 1), ("user-lr", "all-in-al"), (Settings(prior="knn"),)),
                     tmp_path / "out", n_jobs=2, progress=False, plugins=["user_plugin"])
    assert set(table.agent) == {"user-lr", "all-in-al"}
    assert (table[table.agent == "user-lr"].action == "LR").all()


def test_the_command_line_imports_a_plugin_in_every_worker(to_workers, tmp_path: Path,
                                                           capsys) -> None:
    status = cli(["compare", "--import", "user_plugin", "--datasets", "toy", "--seeds", "2",
                  "--agents", "user-lr", "--prior", "user-knn", "--n-jobs", "2",
                  "--no-progress", "--output", str(tmp_path / "cli")])
    assert status == 0, capsys.readouterr().err
    assert set(load_results(tmp_path / "cli").agent) == {"user-lr"}


def test_a_plugin_that_cannot_be_imported_is_named(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        cli(["compare", "--import", "no_such_plugin_module", "--datasets", "toy",
             "--output", str(tmp_path / "x")])
    assert info.value.code == 2
    assert "cannot import the plugin module 'no_such_plugin_module'" in capsys.readouterr().err


def test_n_jobs_zero_is_refused_by_argparse(capsys) -> None:
    from agents.experiments.cli.compare import parse_args

    with pytest.raises(SystemExit) as info:
        parse_args(["--datasets", "toy", "--n-jobs", "0"])
    assert info.value.code == 2
    assert "0 workers cannot run anything" in capsys.readouterr().err
    assert parse_args(["--datasets", "toy", "--n-jobs", "-2"]).n_jobs == -2


def _dist_info(folder: Path) -> None:
    """An installed package ``ballad-ep-plugin`` whose entry point registers ``ep-lr``."""
    (folder / "ep_plugin_mod.py").write_text(textwrap.dedent('''
        from agents.registry import is_agent_name, register_agent
        from agents.rules import AllInLR

        def register():
            if not is_agent_name("ep-lr"):
                register_agent("ep-lr", lambda env: AllInLR())
    '''))
    info = folder / "ballad_ep_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ballad-ep-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[ballad_env.plugins]\nep = ep_plugin_mod:register\n")


@pytest.mark.slow
def test_an_installed_entry_point_loads_at_startup_and_in_workers(tmp_path: Path) -> None:
    _dist_info(tmp_path)
    script = textwrap.dedent(f'''
        import sys
        from agents.experiments import run
        from agents.experiments.cli import main
        run.WORKER_START_S = 0.0
        sys.exit(main(["compare", "--datasets", "toy", "--seeds", "2", "--agents", "ep-lr",
                       "--prior", "knn", "--n-jobs", "2", "--no-progress",
                       "--output", {str(tmp_path / "ep")!r}]))
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(load_results(tmp_path / "ep").agent) == {"ep-lr"}
