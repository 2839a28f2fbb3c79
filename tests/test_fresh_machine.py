"""What a new user trips on, on a fresh machine (issue 19): one test per problem.

The data sets by name without a folder, the ``--datasets`` groups, tiny training runs,
PPO's minibatch, a warning given twice, the documentation of formats, rewards and
``info``, missing extras, what each make target installs, the training progress bar and
the package metadata.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest
from conftest import load_job, write_data_files

import ballad_env
from agents.experiments import dataset_names
from ballad_env.data import DATA_DIR_ENV, available_datasets

ROOT = Path(__file__).resolve().parents[1]




@pytest.fixture(autouse=True)
def _no_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


# ------------------------------------------------------------------------------ data


def test_the_papers_data_sets_play_by_name_without_a_folder() -> None:
    env = gym.make(ballad_env.ENV_ID, dataset="Cardiotocography", prior="knn")
    try:
        _, info = env.reset(seed=0)
        assert info["dataset"] == "Cardiotocography"
    finally:
        env.close()


def test_datasets_groups(tmp_path: Path) -> None:
    paper = dataset_names(["paper"])
    assert len(paper) == 18 and "KDDCup99" in paper
    assert dataset_names(["all"]) == paper  # no folder: the paper's 18
    adbench = dataset_names(["adbench"])
    assert len(adbench) == 47 and adbench[0] == "adbench/ALOI"
    folder = write_data_files(tmp_path / "data", {"alpha": 50, "Beta": 50})
    assert dataset_names(["all"], folder) == ("alpha", "Beta")  # the folder's files
    assert dataset_names(["paper", "WBC", "adbench/cover"]) == (*paper, "adbench/cover")
    with pytest.raises(FileNotFoundError, match="adbench/cover"):
        dataset_names(["cover"])


def test_scripts_default_to_the_bundled_data_not_a_folder_beside_the_clone() -> None:
    for name in ("agents/experiments/cli/lattices.py", "scripts/studies/allocators/__main__.py",
                 "scripts/studies/lattice/__main__.py", "scripts/studies/policies/__main__.py"):
        assert "shared" not in (ROOT / name).read_text(), name


# ------------------------------------------------------------------------------ training


def test_training_curve_of_a_run_shorter_than_one_episode(tmp_path: Path) -> None:
    """``train_policy.py --total-timesteps 14`` saved the model, then crashed plotting an
    empty monitor file (IndexError)."""
    from agents.experiments.training.curves import plot_training_curves

    monitor = tmp_path / "run" / "monitor"
    monitor.mkdir(parents=True)
    (monitor / "0.monitor.csv").write_text('#{"t_start": 0.0}\nr,l,t,test_cost,dataset\n')
    path = plot_training_curves({"short": [tmp_path / "run"]}, tmp_path / "curve.png")
    assert path.is_file() and path.stat().st_size > 0


def test_ppo_minibatch_of_one_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_job("agents.experiments.cli.train")
    assert script.main(["--batch-size", "1", "--datasets", "toy"]) == 2
    assert "batch_size must be at least 2 for PPO" in capsys.readouterr().err
    assert script.main(["--n-steps", "1", "--n-envs", "1"]) == 2
    assert "rollout of at least 2 steps" in capsys.readouterr().err


def test_train_policy_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load_job("agents.experiments.cli.train").parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option, default in (("--total-timesteps", "3,000 for sb3"), ("--n-envs", "2"),
                            ("--algo", "ppo"), ("--output-dir", "results/policies")):
        assert re.search(re.escape(option) + r"[^-]*\(default: " + re.escape(default), text)


def test_progress_bar_shows_the_latest_episodes() -> None:
    """The bar's figures stayed those of the first episodes (they were refreshed only when
    the step count was a multiple of 15, before SB3 added the episode that just ended)."""
    from agents.experiments.training.sb3 import TqdmProgress

    bar = TqdmProgress(total=40)
    buffer: deque = deque(maxlen=100)
    bar.model = SimpleNamespace(ep_info_buffer=buffer, num_timesteps=0,
                                get_env=lambda: SimpleNamespace(num_envs=1))
    bar._on_training_start()
    bar.bar.disable = True
    for step in range(1, 31):
        bar.on_step()
        if step == 15:
            buffer.append({"r": 0.5, "test_cost": 0.5})
        if step == 30:
            buffer.append({"r": 0.1, "test_cost": 0.1})
    bar._on_training_end()
    assert bar.figures == {"cost": "0.3000"}  # the mean of both ends, 0.5 and 0.1


# ------------------------------------------------------------------------------ docs


def test_help_of_the_environment_lists_rewards_and_info_keys() -> None:
    doc = ballad_env.BudgetAllocationEnv.__doc__
    rewards = doc[doc.index("## Rewards"):doc.index("## Info")]
    from ballad_env.rewards import REWARD_SIGNALS

    for name in REWARD_SIGNALS.names():
        assert f'"{name}"' in rewards, name
    env = gym.make(ballad_env.ENV_ID, dataset="toy", prior="knn")
    try:
        _, info = env.reset(seed=0)
    finally:
        env.close()
    documented = doc[doc.index("## Info"):doc.index("## Starting State")]
    missing = [key for key in info if not re.search(rf"\b{key}\b", documented)]
    assert not missing


def test_docs_document_formats_rewards_and_data() -> None:
    """The README is a landing page; the data and the options live in the site's pages."""
    data = (ROOT / "docs" / "datasets.md").read_text()
    for word in ("is_anomaly", "UTF-8", "BALLAD_DATA_HOME", "BALLAD_DATA_MIRROR",
                 "adbench/cover", "--datasets", "by hand"):
        assert word in data, word
    assert "val_sample_cost" in (ROOT / "docs" / "environment.md").read_text()
    for page in ["README.md", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]:
        assert "../shared" not in (ROOT / page).read_text(), page


def test_method_cites_only_the_repository() -> None:
    method = (ROOT / "docs" / "method.md").read_text()
    assert "SPEC" not in method and "../shared" not in method


def test_docs_table_lists_every_data_set() -> None:
    table = (ROOT / "docs" / "datasets.md").read_text()
    for name in available_datasets():
        assert f"| `{name}` |" in table, name


# ------------------------------------------------------------------------------ install

_BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
{code}
"""


#: a job (``python -m ballad_env <job> --help``) or a study (``python -m scripts.studies.<x>``)
_JOB = ("import runpy, sys; sys.argv = ['ballad-env', '{0}', '--help']; "
        "runpy.run_module('ballad_env', run_name='__main__')")
_STUDY = ("import runpy, sys; sys.argv = ['{0}', '--help']; "
          "runpy.run_module('{0}', run_name='__main__')")


@pytest.mark.parametrize(("blocked", "code", "extra"), [
    (("pandas",), "from agents.experiments import run_grid", "experiments"),
    (("pandas",), _JOB.format("compare"), "experiments"),
    (("pandas",), _STUDY.format("scripts.studies.authors_code"), "experiments"),
    (("torch", "stable_baselines3", "sb3_contrib"), "import agents.experiments.training.sb3", "rl"),
    # train's --help needs no torch (the site's reference is built without it); training does
    (("torch",), _JOB.format("train").replace(
        "'--help'", "'--total-timesteps', '10', '--output-dir', '/nonexistent/ballad-runs'"),
     "rl"),
    (("scikit_posthocs",), "from agents.reports.stats import require_stats_extra; "
                           "require_stats_extra()", "stats"),
])
def test_a_missing_extra_is_named(blocked: tuple[str, ...], code: str, extra: str) -> None:
    """After ``pip install .`` without extras, imports died with a bare ModuleNotFoundError."""
    code = _BLOCK.format(blocked=set(blocked), code=code)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode != 0
    assert f"pip install -e '.[{extra}]'" in done.stderr


_BASE_INSTALL = ("pandas", "pyarrow", "dask", "distributed", "torch", "stable_baselines3",
                 "sb3_contrib")
_COMMAND = ("from ballad_env.__main__ import main; sys.argv = ['ballad-env', *{args!r}]; "
            "sys.exit(main())")


@pytest.mark.parametrize(("args", "status"), [(["--help"], 0), (["data"], 0),
                                              (["compare", "--datasets", "toy"], 2)])
def test_the_command_on_a_base_install(args: list[str], status: int) -> None:
    """Without the extras, ``--help`` and ``data`` work; a job that needs one names it once
    (it said "the experiments extra" twice and exited 2 for ``--help`` too)."""
    code = _BLOCK.format(blocked=set(_BASE_INSTALL), code=_COMMAND.format(args=args))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == status, done.stderr[-2000:]
    if status:
        assert done.stderr.count("pip install -e '.[experiments]'") == 1, done.stderr
        assert "Traceback" not in done.stderr
    else:
        assert "Traceback" not in done.stderr and done.stdout


def test_a_saved_policy_without_the_rl_extra_names_it() -> None:
    code = _BLOCK.format(blocked=set(_BASE_INSTALL),
                         code="from agents import make_agent; make_agent('run.zip')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode != 0
    assert "loading the saved policy run.zip needs torch" in done.stderr
    assert done.stderr.count("pip install -e '.[rl]'") == 1


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_targets_install_what_they_need(tmp_path: Path) -> None:
    def installs(target: str) -> str:
        out = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60).stdout
        return " ".join(re.findall(r'pip install --quiet -e "(\S+)"', out))

    assert installs("run") == ".[experiments]"
    assert installs("bench") == ".[experiments]"
    assert installs("test") == ".[all]"
    assert installs("docs") == ".[experiments] .[docs]"  # no torch for the site


def test_license_is_an_spdx_string() -> None:
    """A license table makes setuptools print a deprecation banner at every install."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "BSD-3-Clause"
    assert "setuptools>=77" in meta["build-system"]["requires"]  # the first to accept it
    assert "ballad_env/data/benchmarks/*.npz" not in str(meta)  # package data is relative
    assert meta["tool"]["setuptools"]["package-data"]["ballad_env.data"]


def test_lattice_store_lists_cells_of_adbench_names(tmp_path: Path) -> None:
    """``adbench/cover`` is stored under ``adbench/cover/``; the store lost such cells."""
    from ballad_env.replay.store import LatticeStore
    from ballad_env.settings import Settings

    store = LatticeStore(tmp_path, create=True)
    for name, seed in (("adbench/cover", 3), ("Glass", 0)):
        path = store.path(name, seed, Settings())
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    assert store.cells(Settings()) == [("Glass", 0), ("adbench/cover", 3)]
