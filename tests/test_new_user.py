"""What a new user breaks (issue 13), one test per problem: data set keys and resume, stale
policies, reports written into docs/, SB3's evaluate_policy, small lattice studies, buried
errors, silent degenerate results, and the workflow (growing a run, checkpoints as agents,
retraining, killed runners).

Runs are tiny: data of ~150 rows, the kNN prior and 5-round budgets.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from conftest import load_job, make_xy, write_data_files

import agents.experiments.executor as executor
import agents.experiments.run as runner
from agents import make_agent
from agents.experiments import Grid, RunError, load_results, run_grid
from agents.registry import agent_names
from ballad_env import ENV_ID
from ballad_env.data import DataWarning, dataset_name, load_dataset
from ballad_env.protocol import BudgetWarning
from ballad_env.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SETTING = Settings(prior="knn", budget_fraction=0.1)  # 5 rounds




@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """``Alpha.npz`` (150 rows) and ``beta.npz`` (120 rows) in a data folder."""
    return write_data_files(tmp_path / "data", {"Alpha": 150, "beta": 120})


def played_tasks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, tuple[str, ...]]]:
    """Record the (data set, seed, agents) of every task the runner plays in this process."""
    played: list[tuple[str, int, tuple[str, ...]]] = []
    original = runner._run_task

    def spy(task: runner._Task, single_thread: bool):
        played.append((task.name, task.seed, task.agents))
        return original(task, single_thread)

    monkeypatch.setattr(runner, "_run_task", spy)
    return played


def run(grid: Grid, output: Path, data_dir: Path | None = None) -> pd.DataFrame:
    return run_grid(grid, output, data_dir=data_dir, n_jobs=1, progress=False)


# ------------------------------------------------------------------ one key per data set
def test_dataset_name_is_the_name_it_loads_under(data_dir: Path) -> None:
    assert dataset_name("alpha", data_dir) == "Alpha" == load_dataset("alpha", data_dir).name
    assert dataset_name(data_dir / "Alpha.npz") == "Alpha"
    assert dataset_name("wdbc", data_dir) == "wdbc"  # the built-in
    with pytest.raises(FileNotFoundError, match="unknown data set 'nosuch'"):
        dataset_name("nosuch", data_dir)


def test_data_set_given_by_path_or_other_case_resumes(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A path, a name in another case and a CSV path all finish, resume and load."""
    X, y = make_xy(n=140, n_anomalies=14, seed=3)
    csv_file = tmp_path / "gamma.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "label": y}).to_csv(csv_file, index=False)
    output = tmp_path / "run"
    first = run(Grid((str(data_dir / "Alpha.npz"), str(csv_file)), (0,), ("all-in-lr",),
                     (SETTING,)), output, data_dir)
    assert sorted(set(first["dataset"])) == ["Alpha", "gamma"]
    played = played_tasks(monkeypatch)
    again = run(Grid(("alpha", str(csv_file)), (0,), ("all-in-lr",), (SETTING,)), output,
                data_dir)
    assert played == []  # the same data sets: nothing reruns
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(load_results(output), first)


def test_one_data_set_under_two_names_is_refused(tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(ValueError, match="Alpha, alpha.* the same data set 'Alpha'"):
        run(Grid(("Alpha", "alpha"), (0,), ("all-in-lr",), (SETTING,)), tmp_path / "r",
            data_dir)
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------ reports outside docs/
def test_study_reports_go_to_the_results_folder_unless_asked(tmp_path: Path) -> None:
    docs = ROOT / "docs"
    lattice = load_job("scripts.studies.lattice.__main__")
    options = lattice.parse_options(["--out", str(tmp_path / "lat"), "--datasets", "wdbc"])
    assert options.docs == tmp_path / "lat"
    assert lattice.parse_options(["--datasets", "wdbc", "--update-docs"]).docs == docs
    paper = load_job("scripts.studies.paper.__main__")
    assert paper.report_folder(paper.parse_args(["--output", str(tmp_path / "p")])) \
        == tmp_path / "p"
    assert paper.report_folder(paper.parse_args(["--update-docs"])) == docs
    policies = load_job("scripts.studies.policies.__main__")
    args = policies.build_parser().parse_args(["--study-dir", str(tmp_path / "s"), "report"])
    assert policies.report_folder(args) == tmp_path / "s"
    args = policies.build_parser().parse_args(["report", "--update-docs"])
    assert policies.report_folder(args) == docs


# ------------------------------------------------------------------ SB3's evaluate_policy
@pytest.mark.slow
def test_evaluate_policy_runs_every_registered_agent() -> None:
    """The README's promise: every agent works with SB3's evaluate_policy, given a plain
    environment or a one-environment vector env (the oracle bound to it), observing in the
    version the agent reads (``observation_version``; v1 agents need ``observation="v1"``)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    def make(version: str = "v0") -> gym.Env:
        return gym.make(ENV_ID, dataset=make_xy(n=120, n_anomalies=12), prior="knn",
                        budget_fraction=0.1, observation=version)

    for name in (*agent_names(), "lr-first-40"):
        version = getattr(make_agent(name, make_vec_env(make, n_envs=1)),
                          "observation_version", "v0")
        vec_env = make_vec_env(lambda version=version: make(version), n_envs=1)
        mean, _ = evaluate_policy(make_agent(name, vec_env), vec_env, n_eval_episodes=1,
                                  warn=False)
        assert np.isfinite(mean), name
    env = make()  # only the oracle depends on the environment it is given
    mean, _ = evaluate_policy(make_agent("oracle", env), env, n_eval_episodes=1, warn=False)
    assert np.isfinite(mean)
    with pytest.raises(ValueError, match="one environment"):
        make_agent("oracle", make_vec_env(make, n_envs=2)).predict(np.zeros((2, 18)))


# ------------------------------------------------------------------ small lattice studies
def test_lattice_study_options_refuse_no_seeds() -> None:
    lattice = load_job("scripts.studies.lattice.__main__")
    with pytest.raises(SystemExit):
        lattice.parse_options(["--datasets", "wdbc", "--seeds", "0"])


@pytest.mark.slow
def test_small_lattice_study_on_the_builtin_wdbc(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The built-in wdbc is a data set like any other, and the heat map shows a studied one."""
    lattice = load_job("scripts.studies.lattice.__main__")
    out = tmp_path / "out"
    committed = {path: path.stat().st_mtime_ns for folder in ("tables", "figures")
                 for path in (ROOT / "docs" / folder).glob("lattice_*")}
    assert lattice.main(["--datasets", "wdbc", "--seeds", "1", "--prior", "knn", "--agents",
                         "ballad", "--crosscheck", "0", "--n-jobs", "1", "--out",
                         str(out)]) == 0, capsys.readouterr().err
    assert (out / "figures" / "lattice_heatmap.png").stat().st_size > 0
    assert (out / "tables" / "lattice_summary.md").is_file()
    assert {path: path.stat().st_mtime_ns for path in committed} == committed  # docs/ untouched


# ------------------------------------------------------------------ errors that say what to do
def test_train_policy_names_a_bad_data_set_before_starting_workers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_job("agents.experiments.cli.train")
    code = script.main(["--datasets", "NoSuch", "toy", "--vec-env", "subproc", "--n-envs", "2",
                        "--total-timesteps", "30", "--no-progress", "--output-dir",
                        str(tmp_path)])
    assert code == 2
    assert "unknown data set 'NoSuch'" in capsys.readouterr().err


def test_reproduce_paper_names_the_unknown_data_set(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_job("scripts.studies.paper.__main__")
    assert script.main(["--datasets", "NoSuchSet", "--data-dir", str(data_dir), "--output",
                        str(tmp_path / "p"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown data set 'NoSuchSet'" in err and "--bayes-datasets" not in err


def test_unreachable_scheduler_fails_fast_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(executor, "SCHEDULER_TIMEOUT", 1.0)
    start = time.perf_counter()
    with pytest.raises(RunError, match=r"cannot reach the Dask scheduler at "
                                       r"tcp://127.0.0.1:9(.|\n)*--scheduler"):
        run_grid(Grid(("toy",), (0,), ("all-in-lr",), (SETTING,)), tmp_path / "r",
                 scheduler="tcp://127.0.0.1:9", progress=False)
    assert time.perf_counter() - start < 10


def test_unwritable_output_folder_is_a_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(RunError, match="cannot write to .*a_file.* another --output"):
        run(Grid(("toy",), (0,), ("all-in-lr",), (SETTING,)), blocker / "run")
    script = load_job("agents.experiments.cli.compare")
    assert script.main(["--datasets", "toy", "--seeds", "1", "--agents", "all-in-lr",
                        "--prior", "knn", "--budget-fraction", "0.1", "--n-jobs", "1",
                        "--no-progress", "--output", str(blocker)]) == 2
    assert "cannot write to" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["empty.npz", "empty.mat", "text.npz", "text.mat"])
def test_empty_or_foreign_data_files_are_named(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"" if name.startswith("empty") else b"X,y\n1,0\n")
    kind = ".npz" if name.endswith(".npz") else "MATLAB .mat"
    with pytest.raises(ValueError, match=rf"{name}: not a readable {kind} file"):
        load_dataset(path)


def test_scikit_learn_detector_as_prior_is_refused_with_advice() -> None:
    from sklearn.ensemble import IsolationForest

    with pytest.raises(TypeError, match="scikit-learn.*pyod.models.iforest.IForest"):
        Settings(prior=IsolationForest())


# ------------------------------------------------------------------ degenerate results warn
def test_constant_data_warns_that_nothing_can_be_told_apart() -> None:
    X, y = np.ones((200, 3)), (np.arange(200) < 20).astype(np.int8)
    with pytest.warns(DataWarning, match="every row of X is the same"):
        env = gym.make(ENV_ID, dataset=(X, y), prior="knn", budget_fraction=0.1)
    with pytest.warns(DataWarning, match="scores every training example alike"):
        _, info = env.reset(seed=0)
    assert info["auc"] == 0.5


def test_prior_that_ties_every_example_warns() -> None:
    """Five rows, each repeated 50 times: the kNN prior scores every training example 0."""
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(5, 2)), 50, axis=0)
    y = (np.arange(250) % 10 == 0).astype(np.int8)
    with pytest.warns(DataWarning, match="scores every training example alike"):
        env = gym.make(ENV_ID, dataset=(X, y), prior="knn", budget_fraction=0.1)
        _, info = env.reset(seed=0)
    assert info["auc"] == 0.5


@pytest.mark.parametrize("n_anomalies", [2, 4])
def test_test_split_without_anomalies_warns(n_anomalies: int) -> None:
    X, y = make_xy(n=200, n_anomalies=n_anomalies)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning given, not only the first of each
        env = gym.make(ENV_ID, dataset=(X, y), prior="knn", budget_fraction=0.1)
        _, info = env.reset(seed=0)
        env.reset(seed=1)
    shown = [w for w in caught if issubclass(w.category, DataWarning)]
    assert len(shown) == 1 and "test set gets no anomaly" in str(shown[0].message)
    assert np.isnan(info["auc"]) and info["fnr"] == 0.0


def test_budget_that_rounds_warns_and_exact_ones_do_not() -> None:
    with pytest.warns(BudgetWarning, match=r"6 rounds of 5.45% spend 32.7% of \|D\|, not 30%"):
        Settings(round_fraction=0.0545)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        warnings.simplefilter("error", DataWarning)
        for budget, size in ((0.3, 0.02), (0.1, 0.02), (0.2, 0.05), (0.3, 0.1), (0.3, 0.3)):
            assert Settings(budget_fraction=budget, round_fraction=size).n_rounds >= 1
        gym.make(ENV_ID, dataset=make_xy(), prior="knn").reset(seed=0)  # ordinary data


# ------------------------------------------------------------------ workflow
def test_a_finished_run_grows_on_every_axis(tmp_path: Path, data_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "run"
    small = Grid(("Alpha",), (0,), ("all-in-lr",), (SETTING,))
    run(small, output, data_dir)
    wider = SETTING.replace(c_fn=2.0)
    grown = Grid(("Alpha", "beta"), (0, 1), ("all-in-lr", "all-in-al"), (SETTING, wider))
    played = played_tasks(monkeypatch)
    table = run(grown, output, data_dir)
    assert sum(len(agents) for *_, agents in played) == len(grown.cells()) - 1
    fresh = run(grown, tmp_path / "fresh", data_dir)
    pd.testing.assert_frame_equal(table, fresh)
    pd.testing.assert_frame_equal(load_results(output), fresh)
    with pytest.raises(RunError, match=r"grid.seeds: stored \[0, 1\], now \[0\](.|\n)*grow"):
        run(Grid(("Alpha", "beta"), (0,), ("all-in-lr",), (SETTING,)), output, data_dir)
    with pytest.raises(RunError, match="grid.settings"):
        run(Grid(("Alpha",), (0,), ("all-in-lr",), (SETTING.replace(c_fp=2.0),)), output,
            data_dir)


ORPHAN_RUN = """
import sys
from agents.experiments import Grid, run_grid
from ballad_env.settings import Settings
run_grid(Grid(("toy",), tuple(range(500)), ("ballad",), (Settings(prior="knn"),)), sys.argv[1],
         n_jobs=2, progress=False)
"""


@pytest.mark.slow
def test_killed_runner_leaves_no_worker_processes(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    runners = {sig: subprocess.Popen([sys.executable, "-c", ORPHAN_RUN, str(tmp_path / sig.name)],
                                     env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
               for sig in (signal.SIGKILL, signal.SIGTERM)}
    children: dict[signal.Signals, list] = {}
    deadline = time.monotonic() + 120
    while len(children) < len(runners) and time.monotonic() < deadline:
        for sig, proc in runners.items():
            # once a cell is stored, both workers are busy with the next ones: kill the runner
            if sig not in children and any((tmp_path / sig.name / "cells").glob("*.parquet")):
                children[sig] = [(c, " ".join(c.cmdline()))
                                 for c in psutil.Process(proc.pid).children(recursive=True)]
                proc.send_signal(sig)
        time.sleep(0.1)
    try:
        assert set(children) == set(runners), "the runners stored no cell"
        for proc in runners.values():
            proc.wait(timeout=30)
        everyone = dict(kid for kids in children.values() for kid in kids)
        assert sum("LokyProcess" in line for line in everyone.values()) == 4
        gone, alive = psutil.wait_procs(list(everyone), timeout=10)
        assert not alive, [everyone[c] for c in alive]
    finally:
        for proc in runners.values():
            proc.kill()
        for kids in children.values():
            for child, _ in kids:
                if child.is_running():
                    child.kill()


# ------------------------------------------------------------------ saved policies
@pytest.fixture(scope="module")
def retrained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A policy trained twice under one run name (evaluations and checkpoints on), with a
    run of the grid on the first one in between."""
    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.sb3 import train

    out = tmp_path_factory.mktemp("policies")
    results = tmp_path_factory.mktemp("results") / "run"

    def train_once(seed: int) -> Path:  # the second time replaces the first (overwrite)
        config = TrainConfig(algo="ppo", datasets=("toy",), settings=Settings(prior="knn",
                             reward="cost", budget_fraction=0.1), total_timesteps=40,
                             n_envs=1, vec_env="dummy", seed=seed,
                             hyperparameters={"n_steps": 20, "batch_size": 20},
                             eval_freq=20, eval_episodes=1, checkpoint_freq=20,
                             output_dir=str(out), run_name="retrained", progress_bar=False,
                             overwrite=seed > 0)
        return train(config).model_path

    model = train_once(0)
    first_rows = (model.parent / "eval" / "evaluations.csv").read_text().splitlines()
    grid = Grid(("toy",), (0,), (str(model),), (SETTING,))
    run(grid, results)
    model = train_once(1)
    return {"model": model, "grid": grid, "results": results, "first_rows": first_rows}


@pytest.mark.slow
def test_retraining_starts_fresh_evaluations(retrained) -> None:
    model = retrained["model"]
    rows = (model.parent / "eval" / "evaluations.csv").read_text().splitlines()
    assert rows[0] == "timesteps,mean_return,mean_test_cost"
    assert len(rows) == len(retrained["first_rows"]) == 3  # evaluations at 20 and 40 steps


@pytest.mark.slow
def test_a_retrained_policy_is_not_taken_for_the_old_one(retrained) -> None:
    with pytest.raises(RunError, match=r"retrained.zip has changed since(.|\n)*another --output"):
        run(retrained["grid"], retrained["results"])


def test_policy_study_refuses_a_policy_changed_since_its_evaluation(tmp_path: Path) -> None:
    from scripts.studies.common.policy_runs import prepare_rounds
    from scripts.studies.policies import study as policy_study

    model = tmp_path / "ppo-cost-train2-s0.zip"
    model.write_bytes(b"the first policy")
    first = policy_study.check_evaluated_policies(tmp_path, [str(model), "ballad"])
    prepare_rounds(tmp_path, ["d"], [0], ["ppo-cost-train2-s0"], policies=first)
    assert policy_study.check_evaluated_policies(tmp_path, [str(model)]) == first
    model.write_bytes(b"a policy retrained under the same path")
    with pytest.raises(RuntimeError, match="ppo-cost-train2-s0.zip has changed"):
        policy_study.check_evaluated_policies(tmp_path, [str(model)])


@pytest.mark.slow
def test_checkpoints_and_best_model_are_agents(retrained, tmp_path: Path) -> None:
    run_dir = retrained["model"].parent
    checkpoint = run_dir / "checkpoints" / "retrained_20_steps.zip"
    best = run_dir / "eval" / "best_model.zip"
    assert not checkpoint.with_suffix(".json").exists() and not best.with_suffix(".json").exists()
    table = run(Grid(("toy",), (0,), (str(checkpoint), str(best)), (SETTING,)),
                tmp_path / "run")
    assert list(dict.fromkeys(table["agent"])) == ["policy:retrained_20_steps",
                                                   "policy:retrained/best_model"]
