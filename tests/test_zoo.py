"""rl-zoo3 on the BALLAD environments (agents/interop/zoo): the shipped hyperparameter
files, and tiny trainings run by rl-zoo3 in a subprocess, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import small_store

import ballad_env
from agents.interop.zoo import ZOO_ALGOS, conf_file, zoo_argv

pytest.importorskip("rl_zoo3")
#: The smallest run rl-zoo3 makes: 2 environments x 32 steps, one update.
TINY = ["-n", "64", "--seed", "0", "--eval-freq", "-1", "-params", "n_envs:2",
        "n_steps:32", "batch_size:32"]


def zoo(args: list[str], tmp_path: Path, module: str = "rl_zoo3.train") -> Path:
    """Run rl-zoo3 in a subprocess, offline; the saved model's path."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    run = subprocess.run([sys.executable, "-m", module, *args, "-f", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    models = sorted(tmp_path.rglob("*-v0.zip"))
    assert len(models) == 1, sorted(tmp_path.rglob("*"))
    return models[0]


def test_every_file_holds_both_environments() -> None:
    for algo in ZOO_ALGOS:
        hyper = yaml.safe_load(conf_file(algo).read_text())
        assert set(hyper) == {ballad_env.ENV_ID, ballad_env.REPLAY_ENV_ID}
        assert all(h["policy"] == "MlpPolicy" and h["gamma"] == 1.0 for h in hyper.values())
    with pytest.raises(ValueError, match="no rl-zoo3 hyperparameters for 'sac'"):
        conf_file("sac")
    assert zoo_argv(["--algo", "ppo_mask"]) == ["--algo", "ppo_mask", "--gym-packages",
                                                "ballad_env", "--conf-file",
                                                str(conf_file("ppo_mask"))]


@pytest.mark.slow
def test_rl_zoo3_trains_ppo_on_the_replay_env_by_name(tmp_path) -> None:
    store = small_store(tmp_path / "data", tmp_path / "store")
    model = zoo(["--algo", "ppo", "--env", ballad_env.REPLAY_ENV_ID, "--gym-packages",
                 "ballad_env", "--conf-file", str(conf_file("ppo")), "--env-kwargs",
                 f"store:{str(store)!r}", "prior:'knn'", "reward:'cost'", *TINY],
                tmp_path / "logs")
    assert model.parent.parent.name == "ppo"


@pytest.mark.slow
def test_maskable_ppo_trains_on_the_live_env(tmp_path) -> None:
    """``python -m agents.interop.zoo``: rl-zoo3 with ppo_mask, the live environment on
    the built-in toy data set, the project's hyperparameter file filled in."""
    model = zoo(["--algo", "ppo_mask", "--env", ballad_env.ENV_ID, *TINY], tmp_path / "logs",
                module="agents.interop.zoo")
    assert model.parent.parent.name == "ppo_mask"
