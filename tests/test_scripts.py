"""Smoke tests: the jobs and the studies run as programs with tiny sizes and leave their outputs.

Each runs once as a subprocess (``python -m <module>``, from the repository's root: one seed,
the kNN prior, small data: built-in ``wdbc`` or two ~150-row files written to a temporary data
folder); further cases call its ``main`` in this process, which is faster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import load_job, write_data_files

from agents.experiments import Grid, load_results, run_grid
from agents.experiments.bench.episodes import PHASES
from ballad_env.settings import Settings
from scripts.studies import paper
from scripts.studies.allocators import build_lattices
from scripts.studies.authors_code import ablation as authors_code
from scripts.studies.authors_code import published as published_code

ROOT = Path(__file__).resolve().parents[1]
#: Every study's entry point, and the library's job modules.
STUDY_MAINS = sorted(f"scripts.studies.{p.name}.__main__"
                     for p in (ROOT / "scripts" / "studies").iterdir()
                     if (p / "__main__.py").is_file())


def run_job(module: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """A study as ``python -m scripts.studies.<study> ...``, or a library job's module as
    ``python -m ballad_env <job> ...``, from the repository's root."""
    from agents.experiments.cli import COMMANDS

    jobs = {f"agents.experiments.cli.{module}": job for job, (module, _) in COMMANDS.items()}
    command = ["ballad_env", jobs[module]] if module in jobs else [
        module.removesuffix(".__main__")]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("BALLAD_DATA_DIR", None)
    done = subprocess.run([sys.executable, "-m", *command, *args],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    if check:
        assert done.returncode == 0, done.stderr
    return done




@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Two small benchmark-style files, ``alpha.npz`` and ``beta.npz``."""
    return write_data_files(tmp_path / "data", {"alpha": 150, "beta": 120})


@pytest.mark.slow
def test_compare_agents_writes_results_and_resumes(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "run"
    args = ["--datasets", "all", "--data-dir", str(data_dir), "--seeds", "1", "--agents",
            "ballad", "all-in-lr", "--prior", "knn", "--n-jobs", "1", "--per-round",
            "--no-progress", "--output", str(output)]
    first = run_job("agents.experiments.cli.compare", *args)
    assert "Mean test cost per round" in first.stdout and "winner" in first.stdout
    assert (output / "run.json").is_file()
    assert len(list((output / "cells").glob("*.parquet"))) == 4  # alpha, beta x 2 agents
    assert (output / "summary.csv").is_file() and (output / "per_round.csv").is_file()
    results = load_results(output)  # labels spent: round x 2 % of |D|, up to the 30 % budget
    for _, cell in results.groupby(["dataset", "agent"]):
        np.testing.assert_allclose(cell["spent_fraction"], np.arange(1, 16) * 0.02)
    script = load_job("agents.experiments.cli.compare")
    assert script.main(args) == 0  # every cell is done: nothing reruns, same report
    assert capsys.readouterr().out == first.stdout
    assert script.main([*args[:-1], str(tmp_path / "x"), "--agents", "nope"]) == 2
    assert "unknown agent 'nope'" in capsys.readouterr().err
    assert script.main([*args, "--prior", "iforest"]) == 2  # another grid in the same folder
    assert "holds a different run" in capsys.readouterr().err


@pytest.mark.slow
def test_reproduce_paper_writes_figures_and_tables(tmp_path: Path, data_dir: Path) -> None:
    docs = tmp_path / "docs"
    run_job("scripts.studies.paper.__main__", "--data-dir", str(data_dir), "--seeds", "1",
               "--prior", "knn", "--questions", "q1", "q2", "q3", "q4", "--n-jobs", "1",
               "--no-progress", "--output", str(tmp_path / "results"), "--docs", str(docs))
    figures = {p.name for p in (docs / "figures").iterdir()}
    assert {"q1_cost_per_round_knn.png", "q2_entropy_vs_cosine_knn.png",
            "q3_reward_difference_knn.png", "q4_costs_knn.png"} <= figures
    tables = {p.name for p in (docs / "tables").iterdir()}
    assert {"q1_mean_cost_knn.md", "q2_table2_knn.md", "q2_al_share.md",
            "q3_reward_difference.md", "q4_knn_cfp10.md", "q4_knn_cfn10.md",
            "paper_vs_ours.md"} <= tables
    q1 = pd.read_csv(docs / "tables" / "q1_mean_cost_knn.csv", index_col=0)
    assert list(q1.index) == ["alpha", "beta", "mean"]
    assert {"ballad", "all-in-al", "all-in-lr", "winner", "paper"} <= set(q1.columns)


def test_bayes_comparison_report(tmp_path: Path) -> None:
    """The bayes report on stored tables (a real bayes run is too slow for a smoke test)."""
    setting = Settings(prior="knn", budget_fraction=0.1)
    main = run_grid(Grid(("wdbc",), (0,), paper.MAIN_AGENTS, (setting,)), tmp_path / "main",
                    n_jobs=1, progress=False)
    stand_in = main[main["agent"].isin(paper.Q1_AGENTS)].assign(
        setting="knn_bayes20_budget0.1", threshold_search="bayes")
    key: dict[str, object] = {}
    paper.bayes(main, stand_in, paper.Writer(tmp_path / "docs"), key)
    assert key["bayes"]["same_winner"] == 1 and key["bayes"]["datasets"] == 1
    assert (tmp_path / "docs" / "figures" / "q1_bayes_vs_exact.png").is_file()
    assert (tmp_path / "docs" / "tables" / "q1_bayes_vs_exact.md").is_file()


def test_spent_fraction_is_round_times_round_fraction(tmp_path: Path) -> None:
    """The results' x axis: labels bought so far as a share of |D|, whatever the round size."""
    settings = (Settings(prior="knn", budget_fraction=0.1),
                Settings(prior="knn", budget_fraction=0.2, round_fraction=0.05))
    results = run_grid(Grid(("wdbc",), (0,), ("all-in-lr",), settings), tmp_path, n_jobs=1,
                       progress=False)
    spent = results.groupby("setting", sort=False)["spent_fraction"].apply(list)
    np.testing.assert_allclose(spent["knn_budget0.1"], [0.02, 0.04, 0.06, 0.08, 0.1])
    np.testing.assert_allclose(spent["knn_budget0.2_round0.05"], [0.05, 0.1, 0.15, 0.2])


def test_bench_runs_without_the_rl_extra() -> None:
    """``make bench`` installs the experiments extra only: ``ballad-env bench`` must not import
    stable-baselines3 (only ``--vector`` needs it, when it runs)."""
    blocked = "import sys; sys.modules.update(dict.fromkeys(['stable_baselines3', 'sb3_contrib']))"
    code = f"{blocked}; from agents.experiments.cli.bench import main; main(['--help'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--vector" in done.stdout and "scripts.studies.timings" in done.stdout


@pytest.mark.slow
def test_bench_prints_timings_and_a_profile() -> None:
    done = run_job("agents.experiments.cli.bench", "--datasets", "wdbc", "--repeats", "1",
                   "--bayes-repeats", "0", "--prior", "knn")
    assert "exact s" in done.stdout and "peak MB" in done.stdout
    assert "slowest exact episode" in done.stdout
    assert "Profile of one exact episode on wdbc" in done.stdout
    for label, _, _ in PHASES:  # every phase is found: its function was called
        assert f"  {label} " in done.stdout, label


def test_build_lattices_builds_resumes_and_names_a_corrupt_file(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_job("agents.experiments.cli.lattices")
    store = tmp_path / "store"
    args = ["--out", str(store), "--datasets", "alpha", "beta", "--data-dir", str(data_dir),
            "--seeds", "1", "--prior", "knn", "--no-progress", "--summary", str(tmp_path)]
    assert script.main(args) == 0
    out = capsys.readouterr().out
    assert f"2 cells in {store}" in out and "hours_100_seeds" in out
    files = sorted(store.glob("knn/*/seed0.npz"))
    assert [f.parent.name for f in files] == ["alpha", "beta"]
    assert "| knn | alpha | 1 |" in (tmp_path / "lattice_build.md").read_text()
    files[0].write_bytes(b"not a zip")
    assert script.main(args) == 2
    assert f"lattice file {files[0]} cannot be read" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.parse_args(["--out", str(store)])  # no data sets


def test_train_policy_takes_a_replay_store(tmp_path: Path) -> None:
    script = load_job("agents.experiments.cli.train")
    config = script.config_from_args(script.parse_args(
        ["--datasets", "WBC", "--replay-store", str(tmp_path), "--episode-seeds", "5"]))
    assert (config.replay_store, config.episode_seeds) == (str(tmp_path), 5)
    assert config.name == "ppo-cost-WBC-replay-s0-3000steps"


@pytest.mark.slow
def test_bench_times_the_replay_against_the_live_environment() -> None:
    done = run_job("agents.experiments.cli.bench", "--replay", "--datasets", "wdbc",
                   "--prior", "knn", "--replay-seeds", "1", "--replay-steps", "3000",
                   "--live-episodes", "1")
    assert "store: 1 cells (wdbc)" in done.stdout
    assert "replay environment:" in done.stdout and "x the live one" in done.stdout


@pytest.mark.slow
def test_authors_ablation_grows_seed_by_seed_and_says_what_a_partial_run_holds(
        tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_job("scripts.studies.authors_code.__main__")
    grids: list[tuple[int, ...]] = []
    real_run_grid = script.run_grid

    def spy(grid: Grid, *args, **kwargs) -> pd.DataFrame:
        grids.append(grid.seeds)
        return real_run_grid(grid, *args, **kwargs)

    monkeypatch.setattr(script, "run_grid", spy)

    def two_settings(priors: object = None) -> tuple[Settings, ...]:
        """The defaults and one option: the ablation's machinery at a sixth of its cost."""
        return Settings(), Settings(split="authors")

    monkeypatch.setattr(authors_code, "ablation_settings", two_settings)
    monkeypatch.setattr(script, "ablation_settings", two_settings)
    output = tmp_path / "ablation"
    command = ["ablation", "--data-dir", str(data_dir), "--datasets", "alpha", "--priors",
               "iforest", "--output", str(output), "--no-progress"]
    script.main([*command, "--seeds", "1"])
    script.main([*command, "--seeds", "2"])  # grows from the seed stored
    assert grids == [(0,), (0,), (0, 1)]
    complete = pd.read_csv(output / "tables" / "authors_code_ablation.csv", index_col="setting")
    assert set(complete["seeds"].astype(str)) == {"2"}
    assert "1 data sets x 2 seeds" in (output / "tables" / "authors_code_ablation.md").read_text()
    # One setting has not finished seed 1: the tables drop that seed for every setting.
    (output / "cells" / "iforest_split-authors__alpha__all-in-lr__seed1.parquet").unlink()
    script.main(["ablation", "--output", str(output), "--priors", "iforest", "--report-only"])
    partial = pd.read_csv(output / "tables" / "authors_code_ablation.csv", index_col="setting")
    assert set(partial["seeds"].astype(str)) == {"1"}
    text = (output / "tables" / "authors_code_ablation.md").read_text()
    assert "1 data sets x 1 seeds" in text and "1 other pairs are left out" in text
    results = load_results(output, allow_partial=True)
    seed0 = results[results["seed"] == 0]
    defaults = seed0[(seed0["setting"] == "iforest") & (seed0["agent"] == "ballad")]
    assert partial.loc["iforest", "ballad"] == pytest.approx(
        defaults["test_cost_per_example"].mean(), abs=1e-12)


def test_authors_agreement_reports_the_strategies_it_has_played(tmp_path: Path,
                                                                 data_dir: Path) -> None:
    """A partial agreement (--report-only while the published run grows) leaves out the
    strategies ours has not started, and compares the rest with the published costs."""
    script = load_job("scripts.studies.authors_code.__main__")
    published = tmp_path / "published"

    def publish(strategy: str) -> None:  # an episode of the published run, mean cost 0.2
        store = published_code.prepare_store(published, ["alpha"], [0], [strategy],
                                             stream_seed=None)  # the preset: knn_authors...
        rows = pd.DataFrame({"dataset": "alpha", "seed": 0, "strategy": strategy,
                             "round": [1, 2], "test_cost": [0.1, 0.3]})
        store.write(published_code.episode_cell("alpha", 0, strategy), rows)

    publish("AL")
    output = tmp_path / "agreement"
    command = ["agreement", "--published", str(published), "--data-dir", str(data_dir),
               "--threshold-search", "exact", "--output", str(output), "--no-progress"]
    script.main(command)
    publish("LR")  # the published run goes on: an LR episode lands
    script.main([*command, "--report-only"])
    # the preset with the split seed's stream (the runner's here), named by its arithmetic
    name = "knn_authors_squashf-authors_lterms-authors_cos-authors"
    table = pd.read_csv(output / "tables" / f"authors_code_agreement_{name}.csv",
                        index_col="agent")
    assert list(table.index) == ["all-in-al"]
    assert table.loc["all-in-al", "published"] == pytest.approx(0.2, abs=1e-15)
    ours = load_results(output / name / "all-in-al_seed0")
    assert table.loc["all-in-al", "ours"] == pytest.approx(ours["test_cost"].mean(), abs=1e-12)
    with pytest.raises(SystemExit, match=f"no results of {name}"):
        script.main([*command[:-3], "--output", str(tmp_path / "empty"), "--report-only"])


def test_authors_agreement_pairs_the_runners_stream_seed() -> None:
    """The published-code runner seeds numpy's stream with 331 by default, as the published
    loader does (or the split seed); agreement takes the published run's seed from its
    store unless told one, which it then checks."""
    parser = load_job("scripts.studies.authors_code.__main__").build_parser()
    assert "query_seed" not in vars(parser.parse_args(["agreement"]))
    assert parser.parse_args(["agreement", "--query-seed", "331"]).query_seed == 331
    assert parser.parse_args(["published"]).stream_seed == 331
    assert parser.parse_args(["published", "--stream-seed", "split"]).stream_seed is None
    with pytest.raises(SystemExit):
        parser.parse_args(["agreement", "--query-seed", "loader"])


@pytest.mark.parametrize("module", ["agents.experiments.cli.compare",
                                    "agents.experiments.cli.bench",
                                    "agents.experiments.cli.lattices",
                                    "scripts.studies.paper.__main__",
                                    "scripts.studies.allocators.__main__",
                                    "scripts.studies.authors_code.__main__"])
def test_every_option_has_help(module: str) -> None:
    parser = load_job(module).build_parser()
    for action in parser._actions:
        assert action.help, action.option_strings


@pytest.mark.parametrize("module", STUDY_MAINS)
def test_every_study_prints_its_help(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        load_job(module).main(["--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


@pytest.mark.slow
def test_allocator_study_builds_replays_and_reports(tmp_path: Path) -> None:
    sizes = {f"d{k}": 100 + 10 * k for k in range(6)}
    data = write_data_files(tmp_path / "data", sizes)
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"rows": sizes, "train": ["d0", "d2", "d4", "d5"],
                                 "held_out": ["d1", "d3"]}))
    out = tmp_path / "out"
    args = ["--data-dir", str(data), "--out", str(out), "--costs", "default", "--seeds", "1",
            "--priors", "knn", "--split", str(split)]
    run_job("scripts.studies.allocators.__main__", *args)
    tables = out / "tables"
    goal = pd.read_csv(tables / "allocators_goal.csv")
    assert set(goal["evaluation"]) == {"held-out", "leave-three-out"}
    cv = pd.read_csv(tables / "allocators_cv.csv")
    lr = cv[cv["allocator"] == "all-in-lr"]
    assert len(lr) == 1 and (lr["cost_vs_lr"] == 0).all()  # one row per prior
    assert (cv[cv["allocator"] == "optimal"]["regret"] == 0).all()
    assert (tables / "allocators_paired.md").exists()
    assert len(list((out / "lattices").rglob("*.npz"))) == 6  # 6 data sets x 1 seed
    assert build_lattices(out, list(sizes), [0], ["knn"], ["default"], str(data)) == 0


# ------------------------------------------------------------------------- ballad-env
def test_ballad_env_lists_every_job_and_runs_each_ones_main(
        capsys: pytest.CaptureFixture[str]) -> None:
    from agents.experiments import cli

    assert cli.main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {name} " in listed for name in cli.COMMANDS)
    for name in cli.COMMANDS:
        with pytest.raises(SystemExit) as done:
            cli.main([name, "--help"])
        assert done.value.code == 0, name
        assert capsys.readouterr().out.startswith(f"usage: ballad-env {name}"), name
    assert cli.main(["no-such-job"]) == 2
    assert "unknown command 'no-such-job'" in capsys.readouterr().err
    assert cli.main([]) == 2


def test_every_jobs_help_shows_its_defaults(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every job's parser (and sub-parser) formats its help with the one ``HelpFormatter``,
    which ends each option's help with its default unless the help says it in words; no
    option's help hides a default."""
    import argparse

    from agents.experiments import cli

    seen: list[argparse.ArgumentParser] = []
    parse = argparse.ArgumentParser.parse_known_args

    def record(self, *args, **kwargs):
        seen.append(self)
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", record)
    for name in cli.COMMANDS:
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        assert seen and seen[-1].prog == f"ballad-env {name}", name
    parsers = list(seen)
    for parser in seen:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += action.choices.values()
    # `data` is ballad_env.data's own command line (below the command floor); its options
    # have no default to show, and its help says the data folder's in words.
    assert {p.prog for p in parsers if p.formatter_class is not cli.HelpFormatter} == {
        "ballad-env data"}
    silent = [f"{p.prog} {a.option_strings}" for p in parsers for a in p._actions
              if a.help and a.default not in (None, False, argparse.SUPPRESS)
              and "default" not in (p.formatter_class(p.prog)._get_help_string(a) or "")]
    assert not silent, f"options whose help hides their default: {silent}"
    capsys.readouterr()
    from scripts.studies.paper.__main__ import main as paper

    with pytest.raises(SystemExit):
        paper(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "repetitions: seeds 0..N-1 (default: 10)" in text
    assert "(default: $BALLAD_DATA_DIR)" in text and "(default: None)" not in text
    assert "hide progress bars (default: False)" not in text


def test_a_study_asked_of_ballad_env_says_how_to_run_it_from_a_clone(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The studies left the command (they are research, run from a clone): asking for one
    names its ``python -m`` line instead of "unknown command"."""
    from agents.experiments import cli

    assert cli.main(["paper", "--report-only"]) == 2
    assert "python -m scripts.studies.paper --help" in capsys.readouterr().err
    assert cli.main(["reports", "--check"]) == 2
    assert "python -m scripts.tools.reports" in capsys.readouterr().err
    assert not set(cli.STUDIES) & set(cli.COMMANDS)


@pytest.mark.slow
def test_a_study_runs_as_python_m_from_the_clone() -> None:
    done = run_job("scripts.studies.lattice", "--help")
    assert done.stdout.startswith("usage:") and "--update-docs" in done.stdout


def test_python_m_ballad_env_and_the_entry_point_run_the_command(data_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ballad_env", "data", "--data-dir",
                           str(data_dir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("| name | kind | n | d | contamination |")
    assert all(f"| `{name}` |" in done.stdout for name in ("alpha", "beta", "toy", "wdbc"))
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"ballad-env": "ballad_env.__main__:main"}
