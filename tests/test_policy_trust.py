"""Saved policies run no code from their file unless trusted (issue 21).

A crafted policy zip (a genuine model whose ``data`` gains a pickled entry that writes a
marker file) runs its pickle under stable-baselines3's full loader (``trust_pickle=True``,
``--trust-pickle``) and never by default; genuine policies act the same either way; what
the safe loader cannot interpret is refused, naming the file, the problem and the opt-in.
"""

from __future__ import annotations

import base64
import json
import pathlib
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from agents import make_agent, run_episode
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.sb3 import train
from agents.policy import ALGORITHMS, load_policy
from agents.policy_zip import PolicyFileError
from ballad_env import BudgetAllocationEnv
from ballad_env.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PRIOR = "knn"


class WriteMarker:
    """Unpickling this calls ``Path(marker).write_text("ran")``: code run by loading."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "ran"))


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> dict[str, Path]:
    """A tiny trained model of every algorithm (two rollouts of 15 steps)."""
    out = tmp_path_factory.mktemp("genuine")
    paths = {}
    for algo in ALGORITHMS:
        config = TrainConfig(algo=algo, datasets=("toy",),
                             settings=Settings(reward="cost", prior=PRIOR), total_timesteps=30,
                             n_envs=1, vec_env="dummy", seed=1,
                             hyperparameters={"n_steps": 15, "batch_size": 15},
                             output_dir=str(out), progress_bar=False)
        paths[algo] = train(config).model_path
    return paths


def rewrite(model: Path, target: Path, data: dict | None = None,
            members: dict[str, bytes | None] | None = None) -> Path:
    """A copy of ``model`` (and its settings JSON) at ``target`` with its ``data`` member
    replaced by ``data`` and other members replaced (or, given ``None``, left out)."""
    changes = dict(members or {})
    if data is not None:
        changes["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model) as src, zipfile.ZipFile(target, "w") as dst:
        for name in src.namelist():
            content = changes.get(name, src.read(name))
            if content is not None:
                dst.writestr(name, content)
    shutil.copy(model.with_suffix(".json"), target.with_suffix(".json"))
    return target


def zip_data(model: Path) -> dict:
    with zipfile.ZipFile(model) as archive:
        return json.loads(archive.read("data"))


def evil_copy(model: Path, folder: Path) -> tuple[Path, Path]:
    """The genuine model with a pickled entry that writes ``folder/marker``, and ``{"algo"}``
    beside it as its settings JSON, as issue 21 describes the attack."""
    marker = folder / "marker"
    data = zip_data(model)
    data["evil"] = {":type:": "<class 'object'>",
                    ":serialized:": base64.b64encode(pickle.dumps(WriteMarker(marker))).decode()}
    evil = rewrite(model, folder / "evil.zip", data)
    evil.with_suffix(".json").write_text(json.dumps({"algo": "ppo"}))
    return evil, marker


def test_a_crafted_policy_runs_code_only_when_trusted(genuine, tmp_path):
    evil, marker = evil_copy(genuine["ppo"], tmp_path)
    safe = load_policy(evil)  # the pickled entry is ignored: the model itself is genuine
    make_agent(str(evil))
    assert not marker.exists()
    obs = BudgetAllocationEnv("toy", prior=PRIOR).reset(seed=0)[0]
    assert safe.predict(obs)[0] == load_policy(genuine["ppo"]).predict(obs)[0]
    make_agent(str(evil), trust_pickle=True)  # SB3's loader: the hole, kept as an opt-in
    assert marker.read_text() == "ran"


def _compare_agents():
    """The command line behind ``ballad-env compare`` (a shim of ``ballad-env
    compare``)."""
    from agents.experiments.cli import compare

    return compare


@pytest.mark.slow
def test_compare_agents_runs_no_code_from_a_policy_without_the_flag(genuine, tmp_path, capsys):
    evil, marker = evil_copy(genuine["ppo"], tmp_path)
    args = ["--datasets", "toy", "--seeds", "1", "--prior", PRIOR, "--agents", str(evil),
            "--n-jobs", "1", "--no-progress"]
    main = _compare_agents().main
    assert main([*args, "--output", str(tmp_path / "safe")]) == 0
    assert not marker.exists()
    assert main([*args, "--output", str(tmp_path / "trusted"), "--trust-pickle"]) == 0
    assert marker.exists()
    help_text = _compare_agents().build_parser().format_help()
    assert "--trust-pickle" in help_text and "RUNS ANY CODE" in help_text


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_a_genuine_policy_acts_as_under_the_full_loader(genuine, algo):
    """The same actions and costs on fixed episodes, the same probabilities and weights."""
    import torch

    env = BudgetAllocationEnv("toy", reward="cost", prior=PRIOR)
    safe, full = load_policy(genuine[algo], env), load_policy(genuine[algo], env,
                                                              trust_pickle=True)
    for seed in (5, 6):
        a, b = run_episode(env, safe, seed=seed), run_episode(env, full, seed=seed)
        assert [(r["action"], r["test_cost"]) for r in a] == \
               [(r["action"], r["test_cost"]) for r in b]
    obs = np.random.default_rng(0).random((64, 18)).astype(np.float32)
    np.testing.assert_array_equal(safe.action_probabilities(obs),
                                  full.action_probabilities(obs))
    ours, theirs = safe.model.policy.state_dict(), full.model.policy.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert type(safe.model) is type(full.model)
    assert safe.model.policy_kwargs == full.model.policy_kwargs
    assert safe.model.gamma == full.model.gamma
    if algo == "dqn":
        assert safe.model.exploration_final_eps == full.model.exploration_final_eps == 0.05
        assert safe.model.train_freq == full.model.train_freq


def _refused(model: Path, *fragments: str) -> None:
    with pytest.raises(PolicyFileError) as caught:
        load_policy(model)
    message = str(caught.value)
    for fragment in (str(model), "trust_pickle=True", "runs any code", *fragments):
        assert fragment in message, (fragment, message)


def test_pickled_policy_arguments_are_refused(genuine, tmp_path):
    """An activation function is only stored pickled: the safe loader cannot rebuild it."""
    data = zip_data(genuine["ppo"])
    data["policy_kwargs"] = {":type:": "<class 'dict'>", ":serialized:": "AAAA",
                             "net_arch": [64, 64],
                             "activation_fn": "<class 'torch.nn.modules.activation.ReLU'>"}
    _refused(rewrite(genuine["ppo"], tmp_path / "relu.zip", data), "activation_fn")
    # A2C pickles its policy_kwargs (it adds RMSprop), which it rebuilds the same: loads.
    assert load_policy(genuine["a2c"]).model.policy_kwargs["net_arch"] == [64, 64]
    other = zip_data(genuine["a2c"])
    other["policy_kwargs"]["optimizer_class"] = "<class 'torch.optim.adam.Adam'>"
    _refused(rewrite(genuine["a2c"], tmp_path / "adam.zip", other), "differ")


def test_what_the_safe_loader_cannot_interpret_is_refused(genuine, tmp_path):
    model = genuine["maskable_ppo"]
    _refused(rewrite(model, tmp_path / "noweights.zip", members={"policy.pth": None}),
             "policy.pth")
    narrow = zip_data(model)
    narrow["policy_kwargs"] = {"net_arch": [32]}
    _refused(rewrite(model, tmp_path / "narrow.zip", narrow), "do not fit")
    wide = zip_data(model)
    wide["observation_space"]["_shape"] = "[21]"
    _refused(rewrite(model, tmp_path / "wide.zip", wide), "observation_space")
    cnn = zip_data(model)
    cnn["policy_class"]["__module__"] = "somewhere.else"
    _refused(rewrite(model, tmp_path / "cnn.zip", cnn), "somewhere.else")
    marker = tmp_path / "marker"
    pickled = pickle.dumps({"w": WriteMarker(marker)}, protocol=2)
    _refused(rewrite(model, tmp_path / "pickled.zip", members={"policy.pth": pickled}),
             "policy.pth", "not plain tensors")
    assert not marker.exists()
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    shutil.copy(model.with_suffix(".json"), junk.with_suffix(".json"))
    with pytest.raises(PolicyFileError, match="junk.zip: not a readable"):
        load_policy(junk)
