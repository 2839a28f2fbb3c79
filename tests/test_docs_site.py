"""The documentation site's generated parts: the command line's reference drawn from the
parsers (scripts.tools.cli_reference), the landing page's figure of which allocation
wins where (scripts.tools.reports.winners), and the notes the guide gives for two
things Gymnasium and stable-baselines3 do not do for you (action masks through wrappers,
costs from evaluate_policy)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import gymnasium as gym
import pandas as pd
import pytest

import ballad_env
from agents import make_agent, run_episode
from agents.experiments.cli import COMMANDS
from scripts.tools.cli_reference import cli_reference, job_help, job_parser
from scripts.tools.reports.__main__ import main as reports_main
from scripts.tools.reports.winners import PER_DATASET, SOURCE, STEM, stale_answer, winners

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------ CLI reference


def test_every_job_parser_is_caught_with_its_command_line() -> None:
    for name in COMMANDS:
        parser = job_parser(name)
        assert parser.prog == f"ballad-env {name}"
        assert parser.format_help().startswith(f"usage: ballad-env {name}")


def test_reference_is_each_parsers_own_options_as_tables() -> None:
    """Each job is a section with a short usage line and its options in tables, worded as
    its parser words them (the page was each raw ``--help`` in one block, usage cut off)."""
    page = cli_reference()
    for name in COMMANDS:
        assert f"## `ballad-env {name}`" in page
    assert "```text\nballad-env compare --datasets DATASETS [DATASETS ...] [options]\n```" in page
    assert "| `--plot [PNG]` | also draw the cost by round" in page
    assert "| `--seeds SEEDS` | run seeds 0..N-1 (default: 10) |" in page
    assert "**Execution and output**" in page
    compare = dict(job_help("compare"))["ballad-env compare"]
    options = set(re.findall(r"(?m)^  (?:-\w, )?(--[\w-]+)", compare))  # the help's entries
    assert options and all(f"`{option}" in page or f", {option}" in page
                           for option in options), options
    code = re.findall(r"```text\n(.*?)```", page, re.S)  # usage lines, none cut off
    assert len(code) > len(COMMANDS) and max(len(line) for block in code
                                             for line in block.splitlines()) <= 88


def test_unknown_job_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="compare"):
        job_parser("nope")


# ------------------------------------------------------------------------ the answer figure


def test_winners_by_hand() -> None:
    table = pd.DataFrame({
        "detector": ["ssdo", "ssdo"], "rejector": ["confidence"] * 2, "protocol": ["ours"] * 2,
        "group": ["paper", "adbench"], "costs": ["default"] * 2,
        "all-in-al": [0.05, 0.09], "all-in-lr": [0.03, 0.12], "ballad": [0.04, 0.10],
        "sadal": [0.04, 0.11]})
    won = winners(table)
    assert won["winner"].tolist() == ["all-in-lr", "all-in-al"]
    assert won["cost"].tolist() == [0.03, 0.09]
    assert won["gain"].tolist() == pytest.approx([0.0, 1 - 0.09 / 0.12])
    with pytest.raises(ValueError, match="group"):
        winners(table.drop(columns="group"))


def test_committed_answer_is_current() -> None:
    """docs/tables/crossed_winners.csv is what the crossed study's table gives now, and the
    figure drawn from it is committed."""
    assert stale_answer(ROOT) == []
    assert (ROOT / "docs" / "figures" / f"{STEM}.png").is_file()


def test_reports_figures_redraws_and_checks(tmp_path: Path) -> None:
    (tmp_path / "docs" / "tables").mkdir(parents=True)
    for stem in (SOURCE, PER_DATASET):
        shutil.copy(ROOT / "docs" / "tables" / f"{stem}.csv", tmp_path / "docs" / "tables")
    assert reports_main(["--root", str(tmp_path), "--check", "--figures"]) == 1  # none yet
    assert reports_main(["--root", str(tmp_path), "--figures"]) == 0
    assert (tmp_path / "docs" / "figures" / f"{STEM}.png").is_file()
    assert reports_main(["--root", str(tmp_path), "--check", "--figures"]) == 0


# ------------------------------------------------------------------------ the guide's notes


def test_action_masks_through_gym_make_wrappers() -> None:
    """gym.make wraps the environment: its own methods are reached through the wrappers."""
    env = gym.make(ballad_env.ENV_ID, dataset="toy", prior="knn")
    try:
        _, info = env.reset(seed=0)
        assert not hasattr(env, "action_masks")  # what the guide warns about
        masks = env.get_wrapper_attr("action_masks")()
        assert masks.tolist() == env.unwrapped.action_masks().tolist() == [True, True]
        assert masks.tolist() == info["action_mask"].tolist()
    finally:
        env.close()


@pytest.mark.slow
def test_evaluate_policy_callback_gives_the_final_test_costs() -> None:
    """SB3's evaluate_policy scores the reward; its callback reads each episode's final test
    cost, the same as run_episode's last record."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    vec = make_vec_env(ballad_env.ENV_ID, n_envs=1, seed=0,
                       env_kwargs={"dataset": "toy", "prior": "knn"})
    costs: list[float] = []

    def final_cost(local: dict, _: dict) -> None:
        if local["done"]:
            costs.append(local["info"]["test_cost"])

    evaluate_policy(make_agent("all-in-lr"), vec, n_eval_episodes=2, callback=final_cost)
    assert len(costs) == 2  # the first episode is seed 0 (make_vec_env's seed + rank)
    env = gym.make(ballad_env.ENV_ID, dataset="toy", prior="knn")
    assert costs[0] == pytest.approx(run_episode(env, make_agent("all-in-lr"), 0)[-1]["test_cost"])


# ------------------------------------------------------------------------ the site's pages


def nav_pages(node: object) -> list[str]:
    """Every page path the nav of mkdocs.yml names."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in nav_pages(value)]
    return []


def test_nav_names_pages_that_exist_or_are_generated() -> None:
    """A page moved or renamed breaks the fast suite too, not only `make docs`."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    generated = {"reference/cli.md", "reference/api.md", "extending.md"}  # docs/hooks/
    missing = [p for p in pages if p not in generated and not (ROOT / "docs" / p).is_file()]
    assert not missing
    assert {"index.md", "environment.md", "REPLAY.md", "studies/CROSSED.md"} <= set(pages)
    assert config["theme"]["font"] is False  # built offline: no web fonts


def test_readme_is_a_landing_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 175  # the training section builds its store first
    for needed in ("make run", "make test", "docs/figures/crossed_winners.png",
                   "docs/getting-started.md", "docs/environment.md"):
        assert needed in readme, needed


def load_hook():
    """docs/hooks/reference.py, the build's hook, as a module (it imports mkdocs only when
    the build calls it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs/hooks/reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_covers_every_package_and_module() -> None:
    hook = load_hook()
    packages = hook.api_packages()
    assert {"ballad_env", "ballad_env.replay", "agents", "agents.reports"} <= set(
        packages)
    assert not any(p.startswith(("scripts", "agents.experiments.cli")) for p in packages)
    assert "agents.reports.plots" in packages["agents.reports"]
    assert "agents.experiments.bench.vector" in packages["agents.experiments.bench"]
    assert "ballad_env.__main__" not in packages["ballad_env"]
    page = hook.api_page("ballad_env.replay", packages["ballad_env.replay"])
    assert "::: ballad_env.replay.vector\n" in page
    nav = hook._replace_index([{"Reference": [{"API": "reference/api.md"}]}], ["x"])
    assert nav == [{"Reference": [{"API": ["x"]}]}]


def test_extending_is_cut_from_the_architecture_page() -> None:
    hook = load_hook()
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    page = hook.extending_page(architecture)
    assert page.startswith("# Extending") and "**An agent.**" in page
    assert hook.extending_page("# A\n\n## Where to add things\n\n- x\n\n## Next\n\n- y\n"
                               ).endswith("- x\n")
    with pytest.raises(ValueError, match="Where to add things"):
        hook.extending_page("# A page without it\n")
