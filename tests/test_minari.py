"""Replay episodes as Minari datasets (agents.interop.minari_datasets and
ballad-env minari): recorded, loaded back equal to the episodes played, the environment
recovered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import small_store

import ballad_env
from agents.experiments.cli.minari_data import main as minari_main
from agents.interop.minari_datasets import INFO_KEYS, record_dataset
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings

minari = pytest.importorskip("minari")
SETTINGS = Settings(prior="knn", reward="cost")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return small_store(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("store"))


@pytest.fixture(autouse=True)
def minari_folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    return tmp_path / "minari"


def test_the_hindsight_optimum_is_recorded_and_loads_back(store) -> None:
    """Every stored cell once: the actions are the lattice's optimal path, the rewards sum
    to the start cost minus the final one, the infos hold the test cost of every step, and
    the recovered environment is the replay environment of the same store and setting."""
    record_dataset(store, "optimal-final", "ballad/test-optimal-v0")
    dataset = minari.load_dataset("ballad/test-optimal-v0")
    assert dataset.total_episodes == 2 and dataset.total_steps == 30
    lattices = [LatticeStore(store).load("large", s, SETTINGS) for s in (0, 1)]
    for episode, lattice in zip(dataset.iterate_episodes(), lattices, strict=True):
        assert tuple(episode.actions) == lattice.optimal_path("final")
        costs = episode.infos["test_cost"]
        assert len(costs) == 16 and costs[-1] == pytest.approx(lattice.costs_along(
            episode.actions)[-1])
        assert episode.rewards.sum() == pytest.approx(costs[0] - costs[-1])
        assert episode.terminations[-1] and not episode.truncations.any()
        assert set(episode.infos) == set(INFO_KEYS)
    env = dataset.recover_environment()
    assert env.spec.id == ballad_env.REPLAY_ENV_ID
    assert env.unwrapped.settings == SETTINGS
    first = next(dataset.iterate_episodes())
    obs, _ = env.reset(options={"dataset": "large", "seed": 0})
    assert np.array_equal(obs, first.observations[0])


def test_an_agent_and_drawn_episodes(store) -> None:
    """``episodes`` N: episode k is the environment's reset with seed + k, played by the
    agent: the same observations and actions as playing it again."""
    from agents.registry import make_agent

    record_dataset(store, "all-in-lr", "ballad/test-lr-v0", episodes=3, seed=5)
    dataset = minari.load_dataset("ballad/test-lr-v0")
    assert dataset.total_episodes == 3
    env = gym.make(ballad_env.REPLAY_ENV_ID, store=store, settings=SETTINGS)
    agent = make_agent("all-in-lr", env.unwrapped)
    for k, episode in enumerate(dataset.iterate_episodes()):
        obs, _ = env.reset(seed=5 + k)
        for t, action in enumerate(episode.actions):
            assert np.array_equal(obs, episode.observations[t])
            assert agent.predict(obs)[0] == action
            obs, *_ = env.step(int(action))
        assert np.array_equal(obs, episode.observations[-1])


def test_the_command_line(store, minari_folder, capsys) -> None:
    argv = ["--store", str(store), "--policy", "oracle", "--dataset-id", "ballad/cli-v0",
            "--minari-path", str(minari_folder)]
    assert minari_main(argv) == 0
    assert "recorded 2 episodes (30 steps)" in capsys.readouterr().out
    assert minari_main(argv) == 2  # the id exists now: refused before any episode
    assert "the Minari dataset ballad/cli-v0 exists already" in capsys.readouterr().err
    fresh = [*argv[:5], "ballad/cli-v1", *argv[6:]]
    assert minari_main([*fresh[:3], "nope", *fresh[4:]]) == 2
    assert "unknown agent 'nope'" in capsys.readouterr().err


def test_a_relative_minari_path_is_the_folder_it_names_from_here(store, tmp_path,
                                                                 monkeypatch) -> None:
    """``--minari-path a/b`` records into ./a/b (Minari joined a relative path twice, after
    every episode was played)."""
    monkeypatch.chdir(tmp_path)
    argv = ["--store", str(store), "--policy", "optimal", "--dataset-id", "ballad/rel-v0",
            "--minari-path", "a/b"]
    assert minari_main(argv) == 0
    assert (tmp_path / "a" / "b" / "ballad" / "rel-v0" / "data" / "main_data.hdf5").is_file()


def _leftovers(folder: Path) -> list[str]:
    """What a recording left in Minari's folder besides its namespaces' datasets."""
    return sorted(p.name for p in folder.iterdir() if p.name not in ("ballad", "namespace"))


def test_a_full_disk_while_writing_the_dataset_is_one_error_naming_the_folder(
        store, minari_folder, monkeypatch, capsys) -> None:
    import errno

    from minari import DataCollector

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(DataCollector, "create_dataset", full)
    argv = ["--store", str(store), "--policy", "optimal", "--dataset-id", "ballad/full-v0"]
    assert minari_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the disk is full") and str(minari_folder) in err
    assert "\n" not in err and _leftovers(minari_folder) == []


def _record_until_signal(store: Path, minari_folder: Path, signal_name: str,
                         dataset_id: str) -> Any:
    """Record ``dataset_id`` in a subprocess that sends itself ``signal_name`` once every
    episode is played (where Minari would write the dataset); the finished process."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    script = ("import os, signal\n"
              "from minari import DataCollector\n"
              "from agents.interop import minari_datasets as m\n"
              "def interrupted(self, *args, **kwargs):\n"
              f"    os.kill(os.getpid(), signal.{signal_name})\n"
              "DataCollector.create_dataset = interrupted\n"
              f"m.record_dataset({str(store)!r}, 'optimal', {dataset_id!r})\n")
    env = {**os.environ, "PYTHONPATH": str(root), "MINARI_DATASETS_PATH": str(minari_folder)}
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGKILL"), reason="POSIX signals")
def test_sigterm_while_recording_leaves_no_temporary_folder(store, minari_folder) -> None:
    """Minari's collector writes a growing HDF5 file in a temporary folder inside Minari's
    folder; a SIGTERM during the episodes removes it (the process exits with 143)."""
    done = _record_until_signal(store, minari_folder, "SIGTERM", "ballad/term-v0")
    assert done.returncode == 143, done.stderr[-2000:]
    assert _leftovers(minari_folder) == []

@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGKILL"), reason="POSIX signals")
def test_a_killed_recordings_temporary_folder_is_removed_by_the_next_one(
        store, minari_folder) -> None:
    """A SIGKILL leaves the recording's temporary folder; it carries the project's marker,
    so the next recording removes it, and leaves a folder of someone else's alone."""
    from ballad_env.files import TEMPORARY_NAME

    done = _record_until_signal(store, minari_folder, "SIGKILL", "ballad/kill-v0")
    assert done.returncode == -9, done.stderr[-2000:]
    left = _leftovers(minari_folder)
    assert len(left) == 1 and TEMPORARY_NAME.match(left[0]), left
    assert any((minari_folder / left[0]).rglob("*.hdf5"))
    (minari_folder / "tmp_someone_else").mkdir()
    record_dataset(store, "optimal", "ballad/after-kill-v0")
    assert _leftovers(minari_folder) == ["tmp_someone_else"]


def _forge_spec(minari_folder: Path, dataset_id: str, change: dict, key: str = "env_spec",
                drop_spaces: bool = False) -> None:
    """Rewrite the recorded dataset's environment spec (``key``) with ``change``; without
    its spaces, Minari's own ``load_dataset`` makes the spec's environment."""
    path = minari_folder / dataset_id / "data" / "metadata.json"
    metadata = json.loads(path.read_text())
    spec = json.loads(metadata["env_spec"])
    spec.update(change)
    metadata[key] = json.dumps(spec)
    if drop_spaces:
        metadata.pop("observation_space", None)
        metadata.pop("action_space", None)
    path.write_text(json.dumps(metadata))


@pytest.mark.parametrize(("key", "change", "problem"), [
    ("env_spec", {"entry_point": "os:system"}, "entry_point is 'os:system'"),
    ("eval_env_spec", {"entry_point": "os:system"}, "entry_point is 'os:system'"),
    ("env_spec", {"id": "Hostile-v0", "entry_point": "os:system"}, "environment 'Hostile-v0'"),
    ("env_spec", {"additional_wrappers": [{"name": "W", "entry_point": "os:system",
                                           "kwargs": {}}]}, "adds wrappers"),
    ("env_spec", {"vector_entry_point": "os:system"}, "vector_entry_point is 'os:system'"),
])
def test_a_dataset_whose_spec_names_other_code_is_refused(
        store, minari_folder, tmp_path, key, change, problem) -> None:
    """``load_recorded(id).recover_environment()``, as docs/training.md showed, ran the
    entry point a dataset's metadata.json names; the spec is checked first now."""
    from agents.interop.minari_datasets import (
        RecordedDatasetError,
        load_recorded,
        recover_recorded,
    )

    record_dataset(store, "all-in-lr", "ballad/hostile-v0", episodes=1)
    marker = tmp_path / "ran"
    _forge_spec(minari_folder, "ballad/hostile-v0",
                {**change, "kwargs": {"command": f"touch {marker}"}}, key,
                drop_spaces=key == "env_spec")
    for call in (lambda: load_recorded("ballad/hostile-v0").recover_environment(eval_env=True),
                 lambda: recover_recorded("ballad/hostile-v0", eval_env=True)):
        with pytest.raises(RecordedDatasetError, match="ballad/hostile-v0") as caught:
            call()
        assert problem in str(caught.value) and "metadata.json" in str(caught.value)
        assert "\n" not in str(caught.value)
    assert not marker.exists()


def test_the_safe_recovery_is_the_recorded_environment(store) -> None:
    from agents.interop.minari_datasets import load_recorded, recover_recorded

    record_dataset(store, "all-in-lr", "ballad/safe-v0", episodes=1, seed=3)
    first = next(load_recorded("ballad/safe-v0").iterate_episodes())
    env = recover_recorded("ballad/safe-v0")
    assert env.spec.id == ballad_env.REPLAY_ENV_ID and env.unwrapped.settings == SETTINGS
    obs, _ = env.reset(seed=3)
    assert np.array_equal(obs, first.observations[0])
