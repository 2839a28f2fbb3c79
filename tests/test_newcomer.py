"""A newcomer's path, end to end (issue 38): one test per problem met on a fresh clone.

Extending (``--import`` from the current folder, agents registered in a script sent to
workers), training as the README writes it (one ``--datasets`` default, the batched
trainer's length, the documented run folder, Minari's store path), one-line errors (an
ADBench set offline, a missing extra), and what a newcomer expects (``--version``, a fast
``--help``, a LICENSE, an install from a clone, the summary's path).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import small_store, write_data_files
from test_fresh_machine import _BLOCK

import agents.experiments.run as run_module
from agents.experiments import Grid, RunError, run_grid
from agents.experiments.cli import import_plugins
from agents.experiments.cli import main as cli
from agents.experiments.cli import train as train_job
from agents.registry import AGENTS, register_agent
from ballad_env.plugins import _modules
from ballad_env.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TINY = Settings(prior="knn", budget_fraction=0.1)  # 5 rounds


# ------------------------------------------------------------------------------ extending
def test_import_finds_a_module_in_the_folder_the_command_runs_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``ballad-env`` script does not put its folder on the path as ``python -m`` does:
    ``--import my_agent`` failed there, though the error said the folder counts."""
    (tmp_path / "newcomer_plugin_x.py").write_text("LOADED = True\n")
    here = {"", ".", os.getcwd(), str(tmp_path)}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in here])
    monkeypatch.chdir(tmp_path)
    try:
        import_plugins(["compare", "--import", "newcomer_plugin_x"])
        assert sys.modules["newcomer_plugin_x"].LOADED
    finally:
        sys.modules.pop("newcomer_plugin_x", None)
        _modules.pop("newcomer_plugin_x", None)


def test_an_agent_registered_in_a_script_is_refused_before_workers_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers never run the script: they failed with a 55-line traceback ending in
    "unknown agent"; now the run stops first and names plugins=."""
    def factory(env):
        return AGENTS["all-in-al"](env)

    factory.__module__ = "__main__"  # as a script's or a notebook's code is
    register_agent("newcomer-in-script", factory)
    monkeypatch.setattr(run_module, "WORKER_START_S", 0.0)  # every grid goes to workers
    grid = Grid(("toy",), (0, 1), ("newcomer-in-script",), (TINY,))
    try:
        with pytest.raises(RunError, match=r"registered in your script.*plugins="):
            run_grid(grid, tmp_path / "workers", n_jobs=2, progress=False)
        table = run_grid(grid, tmp_path / "here", n_jobs=1, progress=False)  # in-process: fine
        assert set(table.agent) == {"newcomer-in-script"}
    finally:
        AGENTS.unregister("newcomer-in-script")


def test_an_agent_registered_by_an_imported_module_is_refused_before_workers_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``import my_agent`` in a script registers the agent there only: the check looked for
    ``__main__`` alone, so workers started and failed with "unknown agent". Now the run stops
    first, naming the module to pass; passed as a plugin, the same grid is let through."""
    (tmp_path / "newcomer_agent_mod.py").write_text(
        "from agents.registry import AGENTS, register_agent\n"
        "register_agent('newcomer-imported', lambda env: AGENTS['all-in-al'](env))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(run_module, "WORKER_START_S", 0.0)  # every grid goes to workers
    grid = Grid(("toy",), (0, 1), ("newcomer-imported", "all-in-lr"), (TINY,))
    try:
        import newcomer_agent_mod  # noqa: F401 - registers the agent, as a user's script does
        with pytest.raises(RunError, match=r'plugins=\["newcomer_agent_mod"\]'):
            run_grid(grid, tmp_path / "workers", n_jobs=2, progress=False)
        run_module.check_workers_know(["all-in-lr"])  # the project's agents pass
        monkeypatch.setitem(_modules, "newcomer_agent_mod", None)  # as plugins= records it
        run_module.check_workers_know(["newcomer-imported", "all-in-lr"])
    finally:
        AGENTS.unregister("newcomer-imported")
        sys.modules.pop("newcomer_agent_mod", None)


def test_n_jobs_help_says_small_work_runs_in_this_process(capsys) -> None:
    with pytest.raises(SystemExit):
        cli(["compare", "--help"])
    assert "runs in this process" in " ".join(capsys.readouterr().out.split())


def test_agents_page_says_plugins_reach_workers() -> None:
    page = (ROOT / "docs" / "agents.md").read_text()
    assert "ship it in `agents/`" not in page
    assert "--import my_agents" in page and 'plugins=["my_agents"]' in page


# ------------------------------------------------------------------------------ training
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from agents.experiments.lattice_build import build_store

    data = write_data_files(tmp_path_factory.mktemp("data"), {"one": 120, "two": 130})
    root = tmp_path_factory.mktemp("store")
    build_store(root, ["one", "two"], [0], [Settings(prior="knn", budget_fraction=0.1)],
                data_dir=data, progress=False)
    return root


def test_both_trainers_default_to_the_stores_data_sets(store: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3's path took ``toy`` on a store ("store has no lattice of toy"), the batched
    trainer the store's data sets."""
    options = ["--replay-store", str(store), "--prior", "knn", "--budget-fraction", "0.1"]
    assert train_job.config_from_args(train_job.parse_args(options)).datasets == ("one", "two")
    assert train_job.config_from_args(train_job.parse_args([])).datasets == ("toy",)
    chosen = train_job.parse_args([*options, "--datasets", "two"])
    assert train_job.config_from_args(chosen).datasets == ("two",)
    with pytest.raises(ValueError, match="no lattice of setting"):
        train_job.config_from_args(train_job.parse_args(["--replay-store", str(store)]))


def test_the_batched_trainer_runs_more_than_one_rollout_by_default(tmp_path: Path) -> None:
    """Without ``--total-timesteps`` it took SB3's 3,000: one rollout of 15,360 steps. The
    command line builds one config whatever the trainer: the torch trainers' sizes and
    hyperparameters where none are given, the given ones over them."""
    store = small_store(tmp_path / "data", tmp_path / "store")
    options = ["--trainer", "batched", "--replay-store", str(store), "--prior", "knn"]
    config = train_job.config_from_args(train_job.parse_args(options))
    assert config.total_timesteps >= 50 * 15 * 1024 and config.n_envs == 1024
    assert config.datasets == ("large",)  # every data set of the store
    assert (config.hp.n_steps, config.hp.batch_size, config.hp.learning_rate) == (15, 1024, 1e-3)
    given = train_job.config_from_args(train_job.parse_args([*options, "--discount", "0.9"]))
    assert given.hyperparameters == {"gamma": 0.9} and given.hp.n_epochs == 4
    assert train_job.config_from_args(train_job.parse_args([])).total_timesteps == 3000


def test_the_documented_run_folder_is_the_real_one() -> None:
    page = (ROOT / "docs" / "training-policies.md").read_text()
    block = page[page.index("ballad-env train --algo maskable_ppo"):]
    command, folder = block.split("# -> results/policies/", 1)
    args = command.replace("ballad-env train", "").replace("\\\n", " ").split()
    config = train_job.config_from_args(train_job.parse_args(args))
    assert folder.split("/", 1)[0] == config.name


def test_a_minari_dataset_names_its_store_by_absolute_path(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative store path reloaded only from the folder the dataset was recorded in."""
    from agents.interop.minari_datasets import env_kwargs

    monkeypatch.chdir(tmp_path)
    kwargs = env_kwargs("results/lattices", Settings())
    assert kwargs["store"] == str(tmp_path / "results" / "lattices")


# ------------------------------------------------------------------------------ errors
def test_an_adbench_set_offline_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys) -> None:
    monkeypatch.setenv("BALLAD_DATA_MIRROR", f"file://{tmp_path / 'no-mirror'}")
    monkeypatch.setenv("BALLAD_DATA_HOME", str(tmp_path / "home"))
    status = cli(["compare", "--datasets", "adbench/breastw", "--seeds", "1", "--no-progress",
                  "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("error: could not download adbench/breastw") and err.count("\n") == 1


@pytest.mark.parametrize(("blocked", "args", "extra"), [
    (("torch", "stable_baselines3", "sb3_contrib"),
     ["compare", "--datasets", "toy", "--seeds", "1", "--agents", "maskable-ppo", "--prior",
      "knn", "--no-progress"], "rl"),
    (("minari",), ["minari", "--store", "s", "--policy", "optimal", "--dataset-id", "a/b-v0"],
     "minari"),
])
def test_a_missing_extra_is_one_line(blocked: tuple[str, ...], args: list[str], extra: str,
                                     tmp_path: Path) -> None:
    code = _BLOCK.format(blocked=set(blocked), code=(
        f"from ballad_env.__main__ import main; sys.argv = ['ballad-env', *{args!r}]; "
        "sys.exit(main())"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert f"-e '.[{extra}]'" in done.stderr


# ------------------------------------------------------------------------------ small things
def test_version_and_a_help_that_imports_no_job() -> None:
    """``--help`` imported the whole package (scikit-learn, scipy, the agents): 3.5 s."""
    code = ("import sys; from ballad_env.__main__ import main; sys.argv = ['ballad-env', "
            "sys.argv[1]]; status = main(); heavy = [m for m in ('sklearn', 'scipy.stats', "
            "'agents.registry', 'pandas') if m in sys.modules]; print(status, heavy)")
    for option in ("--help", "--version"):
        done = subprocess.run([sys.executable, "-c", code, option], capture_output=True,
                              text=True, timeout=60, cwd=ROOT)
        assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr
    version = subprocess.run([sys.executable, "-m", "ballad_env", "--version"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60).stdout
    assert re.fullmatch(r"ballad-env \S+\n", version)


def test_lazy_names_are_the_modules_own() -> None:
    import agents
    import ballad_env
    from agents.registry import make_agent
    from ballad_env.settings import Settings as settings_class

    assert ballad_env.Settings is settings_class and agents.make_agent is make_agent
    assert ballad_env.AL == 0 and ballad_env.LR == 1
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ballad_env.nope  # noqa: B018


def test_the_cli_reference_builds_without_torch() -> None:
    """``make docs`` installed the whole ``all`` extra, torch included, for the site: its
    command-line page needed ``train``'s parser, which imported torch for the algorithms'
    names."""
    code = _BLOCK.format(blocked={"torch", "stable_baselines3", "sb3_contrib", "minari"},
                         code="from scripts.tools.cli_reference import cli_reference; "
                              "print('maskable_ppo' in cli_reference())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "True", done.stderr[-3000:]


def test_the_landing_page_has_every_finding_of_the_readme() -> None:
    """The site's landing page lacked two of the README's five findings."""
    readme, index = ((ROOT / page).read_text() for page in ("README.md", "docs/index.md"))
    findings = re.findall(r"^- (\*\*[^*]+\*\*)", readme, re.M)
    assert len(findings) >= 5 and [f for f in findings if f not in index] == []


def test_the_answer_figures_labels_read_at_eleven_pixels_or_more() -> None:
    """Its cell labels were about 7, then 9 pixels on the page (the site shows it ~700 wide)."""
    from matplotlib import image

    from scripts.tools.reports.winners import LABEL_POINTS

    png = ROOT / "docs" / "figures" / "crossed_winners.png"
    width_px = image.imread(png).shape[1]
    dpi = 130  # agents.reports.plots.save_figure's
    assert LABEL_POINTS / 72 * dpi * 700 / width_px >= 11.5


def test_license_file_matches_the_declared_license() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "BSD-3-Clause" and meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Neither the name" in text


def test_install_is_from_a_clone_not_the_index() -> None:
    """``pip install ballad-env`` was offered, but the package is not on PyPI."""
    for page in ("README.md", "docs/getting-started.md"):
        text = (ROOT / page).read_text()
        assert not re.search(r"pip install ballad-env\b", text), page
        assert "from a clone" in text or "from the clone" in text, page
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "takes about 6 minutes on two cores" in readme  # make test's duration


def test_the_compare_plot_says_what_it_averages() -> None:
    """Its title said neither the data sets nor the number of seeds."""
    import pandas as pd

    from agents.reports.plots import averaged_over

    table = pd.DataFrame({"dataset": ["wdbc", "WBC", "wdbc"], "seed": [0, 1, 2]})
    assert averaged_over(table) == "WBC, wdbc; 3 seeds"
    many = pd.DataFrame({"dataset": list("abcde"), "seed": [0] * 5})
    assert averaged_over(many) == "5 data sets; 1 seed"


def test_the_summary_line_gives_its_folder(tmp_path: Path, capsys) -> None:
    status = cli(["compare", "--datasets", "toy", "--seeds", "1", "--agents", "all-in-lr",
                  "--prior", "knn", "--budget-fraction", "0.1", "--n-jobs", "1",
                  "--no-progress", "--output", str(tmp_path / "run")])
    assert status == 0
    assert f"summary: {tmp_path / 'run' / 'summary.csv'}" in capsys.readouterr().out
