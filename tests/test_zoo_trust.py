"""rl-zoo3 runs parts of a hyperparameter file as Python (issue 39, item 1): the shipped
files hold data only, and the launcher refuses hyperparameters that hold code, a ``.py``
configuration and a trained agent (unpickled) unless ``--trust-conf-file`` is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import ballad_env
from agents.interop.zoo import ZOO_ALGOS, conf_file, main
from agents.interop.zoo.trust import config_problem, hyperparameter_problems

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
    assert "does not end in .yml or .yaml" in str(config_problem("mine.py"))
    assert "does not end in .yml or .yaml" in str(config_problem("my_package.hyperparams"))


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


class ReadByRlZoo3(BaseException):
    """Raised if rl-zoo3 reads a hyperparameter file the launcher should have refused."""


@pytest.fixture
def rl_zoo3_must_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """rl-zoo3's reading of the file stops the test (it would take gigabytes on a bomb)."""
    from rl_zoo3.exp_manager import ExperimentManager

    def read(self: object) -> None:
        raise ReadByRlZoo3("rl-zoo3 read the file")

    monkeypatch.setattr(ExperimentManager, "read_hyperparameters", read)


@pytest.mark.parametrize(("config", "module"), [("ppo47.Yaml", "ppo47"),
                                                ("hp47.YML", "hp47")])
def test_a_suffix_in_other_case_is_a_module_and_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
        config: str, module: str) -> None:
    """rl-zoo3 tests .yml/.yaml case-sensitively and imports any other name as a module:
    ``ppo.Yaml`` runs ``ppo.py``, ``hp.YML`` the package ``hp/``."""
    marker = tmp_path / "ran.txt"
    body = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nhyperparams = {{}}\n"
    if module == "hp47":
        (tmp_path / module).mkdir()
        (tmp_path / module / "__init__.py").write_text(body)
    else:
        (tmp_path / f"{module}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert config_problem(config) is not None
    assert run_zoo(["--conf-file", config], tmp_path) == 2
    assert not marker.exists()
    assert "does not end in .yml or .yaml (lower case)" in capsys.readouterr().err


def test_only_the_shipped_callables_are_named_without_the_opt_in() -> None:
    """A trusted first component is not enough: gymnasium.register then gymnasium.make run
    any entry point."""
    assert hyperparameter_problems({"env_wrapper": [
        "ballad_env.wrappers.ValidActionWrapper",
        "agents.experiments.training.envs.ValidActionWrapper"], "policy": "MlpPolicy"}) == []
    problems = hyperparameter_problems({
        "callback": [{"gymnasium.register": {"id": "X-v0", "entry_point": "os:system"}},
                     {"gymnasium.make": {"id": "X-v0"}},
                     "stable_baselines3.common.callbacks.CheckpointCallback"],
        "vec_env_wrapper": "rl_zoo3.wrappers.HistoryWrapper",
        "policy": "agents.policy.SomePolicy"})
    assert len(problems) == 5
    assert all("which rl-zoo3 imports and calls" in p for p in problems)


def test_a_register_and_make_callback_is_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    marker = tmp_path / "ran.txt"
    hyper = yaml.safe_load(conf_file("ppo").read_text())
    for section in hyper.values():
        section["callback"] = [
            {"gymnasium.register": {"id": "Hostile47-v0", "entry_point": "os:system"}},
            {"gymnasium.make": {"id": "Hostile47-v0", "command": f"touch {marker}"}}]
    path = tmp_path / "hostile.yml"
    path.write_text(yaml.safe_dump(hyper))
    assert run_zoo(["--conf-file", str(path)], tmp_path) == 2
    assert not marker.exists()
    assert "'gymnasium.register', which rl-zoo3 imports and calls" in capsys.readouterr().err


def alias_bomb(levels: int = 28) -> str:
    """A YAML of ``levels`` anchors, each aliasing the one before twice (2^levels leaves)."""
    lines = ["a0: &a0 [x, x]"] + [f"a{k}: &a{k} [*a{k - 1}, *a{k - 1}]"
                                  for k in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("text", "problem"), [
    (alias_bomb(), "its aliases expand to more than"),
    ("x: !!python/object/apply:os.system ['true']\n", "the tag !!python/object/apply:os.system"),
    ("x: &r [1, *r]\n", "names no finished anchor"),
    ("x: " + "[" * 100 + "]" * 100 + "\n", "nested more than"),
    ("x: [\n", "is not valid YAML (line 2)"),
    ("x: '" + "y" * (2 << 20) + "'\n", "larger than"),
])
@pytest.mark.parametrize("trust", [[], ["--trust-conf-file"]])
def test_a_yaml_past_its_bounds_is_refused_before_rl_zoo3_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture, rl_zoo3_must_not_read: None,
        text: str, problem: str, trust: list[str]) -> None:
    path = tmp_path / "hyper.yml"
    path.write_text(text)
    assert run_zoo(["--conf-file", str(path), *trust], tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and str(path) in err
    assert "\n" not in err  # one line


def test_the_shipped_and_rl_zoo3_files_pass_the_yaml_bounds() -> None:
    import rl_zoo3

    from agents.interop.zoo.conf_yaml import check_conf_yaml

    shipped = [conf_file(a) for a in ZOO_ALGOS]
    for path in [*shipped, *Path(rl_zoo3.__file__).parent.joinpath("hyperparams").glob("*.yml")]:
        check_conf_yaml(path)
