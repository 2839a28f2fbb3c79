"""Replay episodes recorded as Minari datasets (Farama's format for offline RL).

A lattice store holds every episode of a (data set, seed, setting), so it also holds the
best one: the hindsight-optimal allocation (``Lattice.optimal_path``), an expert that costs
nothing to ask. :func:`record_dataset` plays one episode per stored cell (or as many as
asked, cells drawn by the environment) with a policy, through Minari's ``DataCollector``,
and writes a Minari dataset: observations, actions, rewards, terminations, truncations and
the numeric ``info`` (test cost, FPR, FNR, tau, ...). The environment is made by its id with
plain-JSON arguments (the store's path and the settings that differ from the defaults), so
:func:`recover_recorded` rebuilds it. A dataset's metadata is code to Minari (it imports and
calls the entry point its environment spec names): :func:`load_recorded` and
:func:`recover_recorded` check the spec first and accept only this project's environments.

The policies: ``optimal`` and ``optimal-final`` (the lattice's hindsight optima of the
mean cost over rounds and of the final cost), any registered agent name (``oracle``,
``ballad``, ``all-in-lr``, ...) and a saved policy (``<run>.zip``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

try:
    import minari
    from minari import DataCollector, StepDataCallback
except ModuleNotFoundError as err:  # minari comes with the 'minari' extra
    from agents.extras import missing_extra

    raise missing_extra(err, "recording Minari datasets") from err

import ballad_env
from agents.evaluation import run_episode
from agents.experiments.stores.results import RunError, writable_folder
from agents.registry import make_agent
from ballad_env.files import (
    env_folder,
    is_disk_full,
    open_regular,
    remove_stale_temporaries,
    temporary_path,
    terminated_as_exit,
    write_failure,
)
from ballad_env.settings import Settings

#: The lattice's hindsight optima, by policy name: the objective of ``Lattice.optimal_path``.
OPTIMA = {"optimal": "mean", "optimal-final": "final"}
#: The ``info`` keys recorded (every step's numbers; the data set's name, the action's and
#: the indices queried are left out: Minari stores fixed-shape numeric infos).
INFO_KEYS = ("round", "test_cost", "fpr", "fnr", "rejection_rate", "auc", "tau", "val_cost",
             "n_labeled_train", "n_labeled_val", "n_anomalies_found", "action_mask")


class NumericInfo(StepDataCallback):
    """Minari's step record with only the ``INFO_KEYS`` of ``info``."""

    def __call__(self, env: gym.Env, obs: Any, info: dict[str, Any], action: Any = None,
                 rew: Any = None, terminated: Any = None, truncated: Any = None) -> Any:
        step = super().__call__(env, obs, info, action, rew, terminated, truncated)
        step["info"] = {key: np.asarray(step["info"][key]) for key in INFO_KEYS}
        return step


class MarkedCollector(DataCollector):
    """Minari's ``DataCollector`` whose temporary folder (``tmp...``, a growing HDF5 file)
    lies in a folder carrying the project's temporary marker inside Minari's folder
    (``.minari-recording.~ballad-HOST-PID-HEX.tmp``), so the next recording clears a
    killed one's (:func:`~ballad_env.files.remove_stale_temporaries`). Minari takes no
    argument for it: it makes ``TemporaryDirectory(dir=self.datasets_path)`` at each reset
    of its storage; that attribute of this collector alone is pointed at the marked folder
    (not ``tempfile.tempdir`` nor ``$MINARI_DATASETS_PATH``, which every thread shares)."""

    datasets_path: str  # Minari's folder, from $MINARI_DATASETS_PATH (DataCollector's)
    marked: Path | None = None

    def _reset_storage(self) -> None:
        if self.marked is None:  # the first reset, in DataCollector.__init__
            self.marked = temporary_path(Path(self.datasets_path) / "minari-recording")
            self.marked.mkdir(mode=0o700)
            self.datasets_path = str(self.marked)
        super()._reset_storage()

    def close(self) -> None:
        """Close the collector and remove its marked folder with what is left in it."""
        try:
            super().close()
        finally:
            if self.marked is not None:
                shutil.rmtree(self.marked, ignore_errors=True)


class HindsightOptimum:
    """The lattice's optimal path of the episode being played, as an agent: at reset it
    reads the path from the replay environment's lattice, then plays it."""

    def __init__(self, env: gym.Env, objective: str) -> None:
        self.env: Any = env.unwrapped
        self.objective = objective
        self.path: tuple[int, ...] = ()
        self.name = next(name for name, obj in OPTIMA.items() if obj == objective)

    def reset(self, seed: int | None = None) -> None:
        self.path = self.env.lattice.optimal_path(self.objective)

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[int, Any]:
        played = self.env.snapshot()
        return self.path[played.n_al + played.n_lr], state


def env_kwargs(store: str | Path, settings: Settings, observation: str = "v0",
               datasets: Sequence[str] | None = None, seeds: Sequence[int] | None = None
               ) -> dict[str, Any]:
    """The replay environment's arguments as plain JSON (what the dataset's environment
    spec stores): the store's absolute path (so the dataset reloads from any folder), the
    settings' fields that differ from the defaults, and the data sets, seeds and
    observation version when given."""
    default = Settings()
    kwargs: dict[str, Any] = {"store": str(Path(store).resolve())}
    kwargs.update({f.name: getattr(settings, f.name) for f in fields(Settings)
                   if getattr(settings, f.name) != getattr(default, f.name)})
    if datasets is not None:
        kwargs["datasets"] = list(datasets)
    if seeds is not None:
        kwargs["seeds"] = [int(s) for s in seeds]
    if observation != "v0":
        kwargs["observation"] = observation
    return kwargs


def make_policy(policy: str, env: gym.Env, trust_pickle: bool = False) -> Any:
    """The agent that plays the episodes: a hindsight optimum, an agent name or a saved
    policy's path (``agents.registry.make_agent``)."""
    if policy in OPTIMA:
        return HindsightOptimum(env, OPTIMA[policy])
    return make_agent(policy, env.unwrapped, trust_pickle=trust_pickle)


#: The most episodes one recording plays (``--episodes``).
MAX_EPISODES = 10**7


def check_dataset_id(dataset_id: str) -> None:
    """A ``ValueError`` naming ``dataset_id`` unless it is a well-formed, versioned Minari id
    (``(namespace/)name-vN``) not yet in Minari's folder."""
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.storage.datasets_root_dir import get_dataset_path

    try:
        version = parse_dataset_id(dataset_id)[2]
    except (ValueError, TypeError):  # TypeError: no -vN (minari's int(None))
        version = None
    if version is None:
        raise ValueError(f"Minari dataset id {dataset_id!r} is not of the form "
                         "(namespace/)name-vN, e.g. ballad/replay-optimal-v0")
    if get_dataset_path(dataset_id).exists():
        raise ValueError(f"the Minari dataset {dataset_id} exists already "
                         f"({get_dataset_path(dataset_id)}): pick another name or version, "
                         "or delete it first")


def record_dataset(store: str | Path, policy: str, dataset_id: str, *,
                   settings: Settings | None = None, observation: str = "v0",
                   datasets: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                   episodes: int | None = None, seed: int = 0, trust_pickle: bool = False,
                   author: str | None = None) -> Any:
    """Play ``policy`` on the replay environment of ``store`` and write the Minari dataset
    ``dataset_id`` (in Minari's folder: ``$MINARI_DATASETS_PATH``, default
    ``~/.minari/datasets``); returns the ``MinariDataset``.

    ``episodes`` None plays every stored cell once, in order (``reset`` options); N plays N
    episodes whose cells the environment draws, from ``reset(seed=seed)`` on.
    """
    from agents.experiments.lattice_build import store_settings

    folder = prepare_minari_folder()  # absolute and writable, before any episode is played
    remove_stale_temporaries([folder])  # a killed recording's temporary folder
    check_dataset_id(dataset_id)
    if episodes is not None and not 1 <= episodes <= MAX_EPISODES:
        raise ValueError(f"episodes (--episodes) must be from 1 to {MAX_EPISODES:,}, got "
                         f"{episodes}")
    settings = store_settings(store, settings, None)
    kwargs = env_kwargs(store, settings, observation, datasets, seeds)
    env = gym.make(ballad_env.REPLAY_ENV_ID, **kwargs)
    collector = MarkedCollector(env, step_data_callback=NumericInfo, record_infos=True,
                              data_format="hdf5")
    try:  # Minari's temporary folder (a growing HDF5 file) goes, whatever ends the recording
        with terminated_as_exit():
            agent = make_policy(policy, env, trust_pickle)
            count = _play(collector, agent, episodes, seed)
            name = getattr(agent, "name", policy)
            description = (f"{count} episodes of {ballad_env.REPLAY_ENV_ID} on the lattice "
                           f"store {store} (setting {settings.name}, reward "
                           f"{settings.reward}), played by {name}; infos hold "
                           f"{', '.join(INFO_KEYS)}.")
            return collector.create_dataset(dataset_id=dataset_id, eval_env=env.spec,
                                            algorithm_name=str(name), author=author,
                                            description=description)
    except OSError as err:
        if not is_disk_full(err):
            raise
        raise RunError(write_failure(folder, err, "give another --minari-path")) from err
    finally:
        collector.close()


def _play(collector: Any, agent: Any, episodes: int | None, seed: int) -> int:
    """Play the episodes through ``collector`` with ``agent`` (``run_episode``, the one
    episode loop): every stored cell once in order (``episodes`` None; episode k reset with
    seed k and the cell as options), else ``episodes`` drawn from ``reset(seed=seed)`` on;
    their count."""
    cells = list(collector.env.unwrapped.cells)
    count = len(cells) if episodes is None else episodes
    if count < 1:
        raise ValueError(f"episodes must be positive, got {episodes}")
    for k in range(count):
        if episodes is None:
            dataset, cell_seed = cells[k]
            run_episode(collector, agent, k, options={"dataset": dataset, "seed": cell_seed})
        else:
            run_episode(collector, agent, seed + k)
    return count


def prepare_minari_folder() -> Path:
    """Minari's folder (:func:`minari_folder`) made absolute in ``$MINARI_DATASETS_PATH`` (a
    relative one would be joined twice by Minari, after every episode was played), created
    and found writable: a ``RunError`` naming it otherwise (a full disk too)."""
    folder = minari_folder()
    os.environ["MINARI_DATASETS_PATH"] = str(folder)
    return writable_folder(folder, "--minari-path (or $MINARI_DATASETS_PATH)")


#: The environment ids a recorded dataset may name (and, for each, only its registered
#: entry points are accepted).
RECORDED_ENV_IDS = (ballad_env.REPLAY_ENV_ID, ballad_env.ENV_ID)
#: The largest ``metadata.json`` read (a dataset's holds a few kB).
MAX_METADATA_BYTES = 16 << 20


class RecordedDatasetError(ValueError):
    """A Minari dataset whose environment spec would run code other than this project's."""


def recorded_specs(dataset_id: str) -> dict[str, dict[str, Any]]:
    """The environment specs of a recorded dataset (``env_spec``, and ``eval_env_spec`` when
    there), read as plain JSON from its ``metadata.json`` and checked before Minari reads
    them: Minari's ``load_dataset`` makes the environment of the spec when the metadata lacks
    its spaces, and ``recover_environment`` always does, importing and calling whatever
    entry point (``os:system``) and wrappers the file names. A spec is accepted only for one
    of :data:`RECORDED_ENV_IDS`, with that id's registered entry point (and vector entry
    point, or none), no additional wrappers and plain keyword arguments; anything else is a
    :class:`RecordedDatasetError` naming the dataset and the file."""
    from minari.storage.datasets_root_dir import get_dataset_path

    path = Path(get_dataset_path(dataset_id)) / "data" / "metadata.json"
    try:
        with open_regular(path, "the Minari metadata") as handle:
            raw = handle.read(MAX_METADATA_BYTES + 1)
        if len(raw) > MAX_METADATA_BYTES:
            raise ValueError(f"larger than {MAX_METADATA_BYTES:,} bytes")
        metadata = json.loads(raw)
        specs = {key: json.loads(metadata[key]) for key in ("env_spec", "eval_env_spec")
                 if isinstance(metadata, dict) and metadata.get(key) is not None}
        for spec in specs.values():
            _check_spec(spec)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"no Minari dataset {dataset_id} ({path} is missing)") from err
    except (OSError, ValueError, TypeError, RecursionError) as err:
        raise RecordedDatasetError(f"the Minari dataset {dataset_id} ({path}) is refused: "
                                   f"{err}; record it again with ballad-env minari") from err
    if "env_spec" not in specs:
        raise RecordedDatasetError(f"the Minari dataset {dataset_id} ({path}) records no "
                                   "environment spec: it was not recorded by ballad-env minari")
    return specs


def _check_spec(spec: Any) -> None:
    """A ``ValueError`` unless ``spec`` (a spec's JSON) names one of our environments as it
    is registered (see :func:`recorded_specs`)."""
    if not isinstance(spec, dict) or spec.get("id") not in RECORDED_ENV_IDS:
        env_id = spec.get("id") if isinstance(spec, dict) else spec
        raise ValueError(f"its environment {env_id!r} is none of {', '.join(RECORDED_ENV_IDS)}")
    registered = gym.spec(spec["id"])
    for key in ("entry_point", "vector_entry_point"):
        if spec.get(key) != getattr(registered, key):
            raise ValueError(f"its environment's {key} is {spec.get(key)!r}, not "
                             f"{getattr(registered, key)!r} (Minari would import and call it)")
    if spec.get("additional_wrappers"):
        raise ValueError(f"its environment adds wrappers {spec['additional_wrappers']!r} "
                         "(Minari would import and call them)")
    if not isinstance(spec.get("kwargs", {}), dict):
        raise ValueError(f"its environment's kwargs are {spec.get('kwargs')!r}, not an object")


def load_recorded(dataset_id: str) -> Any:
    """``minari.load_dataset`` (the dataset as recorded, from Minari's folder), once its
    environment specs are checked (:func:`recorded_specs`), so the dataset's
    ``recover_environment()`` makes this project's environment only."""
    recorded_specs(dataset_id)
    return minari.load_dataset(dataset_id)


def recover_recorded(dataset_id: str, eval_env: bool = False) -> gym.Env:
    """The environment a recorded dataset was played on (its evaluation environment with
    ``eval_env``, when recorded), made from this project's registration of the checked id
    with the recorded keyword arguments (:func:`recorded_specs`): nothing the file names is
    imported."""
    specs = recorded_specs(dataset_id)
    spec = specs.get("eval_env_spec", specs["env_spec"]) if eval_env else specs["env_spec"]
    return gym.make(spec["id"], **spec.get("kwargs", {}))


def minari_folder() -> Path:
    """Where Minari reads and writes datasets, as an absolute path: ``$MINARI_DATASETS_PATH``
    (an ``EnvVarError`` if it names a file) or Minari's default."""
    folder = env_folder("MINARI_DATASETS_PATH") or Path.home() / ".minari" / "datasets"
    return folder.absolute()


__all__ = ["INFO_KEYS", "MAX_EPISODES", "MAX_METADATA_BYTES", "OPTIMA", "RECORDED_ENV_IDS",
           "HindsightOptimum", "MarkedCollector", "NumericInfo", "RecordedDatasetError",
           "check_dataset_id", "env_kwargs", "load_recorded", "make_policy", "minari_folder",
           "prepare_minari_folder", "record_dataset", "recorded_specs", "recover_recorded"]
