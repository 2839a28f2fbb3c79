"""rl-zoo3 runs parts of a hyperparameter file as Python (issue 39, item 1): the shipped
files hold data only, and the launcher refuses hyperparameters that hold code, a ``.py``
configuration and a trained agent (unpickled) unless ``--trust-conf-file`` is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import ballad_env
from agents.experiments.training.zoo import ZOO_ALGOS, conf_file, main
from agents.experiments.training.zoo.trust import config_problem, hyperparameter_problems

pytest.importorskip("rl_zoo3")
TINY = ["-n", "64", "--seed", "0", "--eval-freq", "-1", "-params", "n_envs:2", "n_steps:32",
        "batch_size:32"]


def hostile_file(folder: Path, marker: Path, key: str = "policy_kwargs") -> Path:
    """The shipped PPO file with ``key`` a string that writes ``marker`` when eval'd."""
    hyper = yaml.safe_load(conf_file("ppo").read_text())
    for section in hyper.values():
        section[key] = f"__import__('pathlib').Path({str(marker)!r}).write_text('ran') and {{}}"
    path = folder / "hostile.yml"
    path.write_text(yaml.safe_dump(hyper))
    return path


def run_zoo(args: list[str], folder: Path) -> int:
    os.environ.setdefault("WANDB_MODE", "disabled")
    return main(["--algo", "ppo", "--env", ballad_env.ENV_ID, *args, *TINY, "-f",
                 str(folder / "logs")])


def test_the_shipped_files_hold_no_code() -> None:
    for algo in ZOO_ALGOS:
        assert config_problem(str(conf_file(algo))) is None
        for section in yaml.safe_load(conf_file(algo).read_text()).values():
            assert hyperparameter_problems(section) == []
            assert section["policy_kwargs"] == {"net_arch": [64, 64]}


def test_what_rl_zoo3_would_run_is_named() -> None:
    problems = hyperparameter_problems({
        "policy_kwargs": "dict(net_arch=[8])", "normalize": "dict(norm_obs=True)",
        "monitor_kwargs": "{}", "env_wrapper": ["os.system", {"subprocess.run": {}}],
        "callback": "agents.experiments.training.envs.ValidActionWrapper"})
    assert len(problems) == 5
    assert "policy_kwargs is the string" in problems[0]
    assert any("'os.system'" in p for p in problems)
    assert any("'subprocess.run'" in p for p in problems)
    assert "not a .yml/.yaml file" in str(config_problem("mine.py"))
    assert "not a .yml/.yaml file" in str(config_problem("my_package.hyperparams"))


@pytest.mark.parametrize("key", ["policy_kwargs", "normalize", "monitor_kwargs"])
def test_a_file_whose_strings_rl_zoo3_evals_is_refused(tmp_path: Path, key: str,
                                                       capsys: pytest.CaptureFixture) -> None:
    marker = tmp_path / "ran.txt"
    code = run_zoo(["--conf-file", str(hostile_file(tmp_path, marker, key))], tmp_path)
    assert code == 2
    assert not marker.exists()
    err = capsys.readouterr().err
    assert f"{key} is the string" in err and "--trust-conf-file" in err


def test_a_python_configuration_is_refused_before_it_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    marker = tmp_path / "ran.txt"
    script = tmp_path / "hyper.py"
    script.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                      "hyperparams = {}\n")
    assert run_zoo(["--conf-file", str(script)], tmp_path) == 2
    assert not marker.exists()
    assert "rl-zoo3 executes a .py file" in capsys.readouterr().err


def test_a_trained_agent_is_refused_unless_trusted(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    agent = tmp_path / "agent.zip"
    agent.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # never opened
    assert run_zoo(["-i", str(agent)], tmp_path) == 2
    assert "unpickles it" in capsys.readouterr().err


@pytest.mark.slow  # trains 64 steps on the live environment
def test_trusted_the_file_runs_as_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    code = run_zoo(["--conf-file", str(hostile_file(tmp_path, marker)), "--trust-conf-file"],
                   tmp_path)
    assert code == 0 and marker.read_text() == "ran"
