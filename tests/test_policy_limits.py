"""Saved policies bounded in what they may make the loader allocate (issue 30).

A zip bomb, a member declaring gigabytes, a declared network far larger than its weights,
buffer sizes of 10^11 and a malformed settings JSON are each refused with a
``PolicyFileError`` naming the file, before anything large is read or built; no code from
the file runs (``test_policy_trust`` holds the genuine models these are made from).
"""

# ruff: noqa: F401, F811 - the fixture imported from test_policy_trust is a parameter by name

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
from test_policy_trust import genuine, rewrite, zip_data

from agents import policy_zip
from agents.policy import load_policy
from agents.policy_zip import PolicyFileError
from scripts.studies.robustness.hostile_files import with_declared_size


def _refused(model: Path, *fragments: str) -> str:
    with pytest.raises(PolicyFileError) as caught:
        load_policy(model)
    message = str(caught.value)
    for fragment in (str(model), *fragments):
        assert fragment in message, (fragment, message)
    return message


def test_a_zip_bomb_member_is_refused_by_its_inflated_size(genuine, tmp_path):
    """A ``data`` member of 40 MB of blanks (40 kB deflated) passes the data ceiling."""
    target = tmp_path / "bomb.zip"
    with zipfile.ZipFile(genuine["ppo"]) as src, \
            zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            body = src.read(name)
            if name == "data":
                body = body + b" " * (40 << 20)
            dst.writestr(name, body)
    target.with_suffix(".json").write_bytes(genuine["ppo"].with_suffix(".json").read_bytes())
    assert target.stat().st_size < 1 << 20
    _refused(target, "'data'", "inflates to", str(policy_zip.MEMBER_CEILINGS["data"]))


def _forge_size(archive: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size ``member`` declares (local and central headers)."""
    archive.write_bytes(with_declared_size(archive.read_bytes(), member, size))


def test_a_member_declaring_gigabytes_is_refused_before_reading(genuine, tmp_path):
    target = rewrite(genuine["dqn"], tmp_path / "declared.zip")
    _forge_size(target, "policy.pth", 3 << 30)
    _refused(target, "'policy.pth'", "inflates to 3221225472 bytes")


def test_a_declared_network_larger_than_its_weights_is_never_built(genuine, tmp_path,
                                                                   monkeypatch):
    from stable_baselines3 import PPO

    built: list[int] = []
    original = PPO._setup_model
    monkeypatch.setattr(PPO, "_setup_model", lambda self: (built.append(1), original(self)))
    data = zip_data(genuine["ppo"])
    data["policy_kwargs"] = {"net_arch": [3000, 3000]}
    _refused(rewrite(genuine["ppo"], tmp_path / "huge_net.zip", data), "net_arch",
             "[3000, 3000]", "parameters")
    assert built == []
    data["policy_kwargs"] = {"net_arch": {"pi": [64, 64], "vf": [20000, 20000]}}
    _refused(rewrite(genuine["ppo"], tmp_path / "huge_vf.zip", data), "net_arch")
    assert built == []
    assert load_policy(genuine["ppo"]).name == genuine["ppo"].stem  # its own still loads


@pytest.mark.parametrize(("algo", "key", "value"), [
    ("ppo", "n_steps", 10**11), ("ppo", "n_envs", 10**11), ("dqn", "buffer_size", 10**11),
    ("ppo", "n_steps", -5), ("ppo", "n_steps", 1e11), ("dqn", "batch_size", 10**11)])
def test_buffer_sizes_out_of_range_are_refused(genuine, tmp_path, algo, key, value):
    data = zip_data(genuine[algo])
    data[key] = value
    _refused(rewrite(genuine[algo], tmp_path / f"{key}.zip", data), key, str(value))


@pytest.mark.parametrize(("text", "fragment"), [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"algo": 5}', "algo"),
    ('{"algo": "ppo", "observation_features": 3}', "observation_features"),
    ('{"algo": "ppo", "observation_features": [1, 2]}', "observation_features"),
    ('{"algo": "ppo", "algorithm_kwargs": [1]}', "algorithm_kwargs"),
    ('{"algo": "dqn", "algorithm_kwargs": {"train_freq": 100000000000}}', "train_freq"),
    ('{"algo": "ppo", "config": "x"}', "config")])
def test_a_malformed_settings_json_is_refused_by_name(genuine, tmp_path, text, fragment):
    model = rewrite(genuine["ppo"] if '"dqn"' not in text else genuine["dqn"],
                    tmp_path / "run.zip")
    model.with_suffix(".json").write_text(text)
    with pytest.raises(PolicyFileError) as caught:
        load_policy(model)
    message = str(caught.value)
    assert str(model.with_suffix(".json")) in message and fragment in message, message
