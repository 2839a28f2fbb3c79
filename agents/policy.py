"""A learned allocation policy: a saved SB3 / sb3-contrib model acting through the agent protocol.

``load_policy("results/policies/run/run.zip", env)`` reads the model and the settings JSON
saved next to it (``run.json``, written by :func:`agents.experiments.training.sb3.train`) and
returns a :class:`PolicyAgent` named after the file stem. A checkpoint or the run's
``eval/best_model.zip`` takes its run's JSON (``agents.policy_files``). The experiment runner
resolves an agent spec ending in ``.zip`` through this function, so a learned policy is
compared by path next to ``ballad``, ``all-in-al``, ``all-in-lr``, ``random`` and ``oracle``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, DQN, PPO

from agents.base import built_for, mask_from_observation
from agents.policy_files import ALGORITHMS, is_policy_path, policy_name, settings_file
from agents.policy_zip import PolicyFileError, load_model_safely
from ballad_env.files import read_regular_text
from ballad_env.observation import OBSERVATION_FEATURES, OBSERVATIONS

#: Algorithms by command-line name (``policy_files.ALGORITHMS``, their names without torch);
#: ``maskable_ppo`` uses the environment's action masks.
ALGORITHM_CLASSES: dict[str, type[Any]] = dict(zip(ALGORITHMS, (PPO, A2C, DQN, MaskablePPO),
                                                   strict=True))


def settings_path(model_path: str | Path) -> Path:
    """The settings JSON of a saved model: beside it (same stem), or its training run's for a
    checkpoint or ``best_model.zip`` (``agents.policy_files.settings_file``)."""
    return settings_file(model_path)


class PolicyAgent:
    """A trained SB3 model behind the agents' ``predict`` / ``reset`` protocol.

    Actions never fall on an exhausted label pool: the model's action probabilities are
    masked with the availability features of the observation (for every algorithm, not only
    MaskablePPO). ``deterministic=True`` takes the most probable valid action (ties to AL);
    ``deterministic=False`` samples with a generator seeded by ``reset(seed)``, so a stochastic
    run is reproducible too without touching torch's global seed.

    Parameters
    ----------
    model : stable_baselines3 algorithm
        The loaded model (PPO, A2C, DQN or MaskablePPO).
    settings : dict
        The run's settings JSON (``algo``, ``config``, ...).
    name : str
        Name in result tables; ``load_policy`` uses the model file's stem.
    """

    def __init__(self, model: Any, settings: dict[str, Any], name: str) -> None:
        self.model = model
        self.settings = settings
        self.name = name
        self.algo = settings["algo"]
        #: The observation version it reads (``Lattice.replay`` and ``play_agents`` use it).
        self.observation_version = observation_version(
            settings.get("observation_features", OBSERVATION_FEATURES), name)
        self._rng = np.random.default_rng()

    def observe_env(self, env: Any) -> None:
        """A ``ValueError`` unless ``env`` (about to be played: ``agents.base.play_in``)
        gives observations of the shape the model was trained on (the features are
        dataset-agnostic, so any data set will do)."""
        space = getattr(env, "observation_space", None)
        trained = self.model.observation_space.shape
        if space is not None and space.shape != trained:
            raise ValueError(f"{self.name} expects observations of shape {trained}, the "
                             f"environment gives {space.shape}")

    def reset(self, seed: int | None = None) -> None:
        """Seed the sampling generator (used only by stochastic predictions)."""
        self._rng = np.random.default_rng(seed)

    def action_probabilities(self, observation: np.ndarray) -> np.ndarray:
        """Probabilities of (AL, LR) per observation row, restricted to valid actions.

        Actor-critic models give their policy's distribution; DQN gives the epsilon-greedy
        distribution around its best Q-value, with its final exploration rate.
        """
        obs = np.atleast_2d(np.asarray(observation, dtype=np.float32))
        mask = mask_from_observation(obs)
        policy = self.model.policy
        with torch.no_grad():
            tensor, _ = policy.obs_to_tensor(obs)
            if self.algo == "dqn":
                probs = self._epsilon_greedy(policy.q_net(tensor).cpu().numpy(), mask)
            else:
                probs = policy.get_distribution(tensor).distribution.probs.cpu().numpy()
        masked = probs.astype(np.float64) * mask  # float64: sampling needs sums of exactly 1
        total = masked.sum(axis=1, keepdims=True)
        # A policy putting ~all its mass on an exhausted pool falls back to the valid action.
        uniform = mask / mask.sum(axis=1, keepdims=True)
        return np.where(total > 1e-12, masked / np.maximum(total, 1e-12), uniform)

    def _epsilon_greedy(self, q: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Each action eps / n, plus 1 - eps on the best valid Q-value; eps is the model's
        final exploration rate (``exploration_final_eps``, saved in the model file)."""
        eps = float(self.model.exploration_final_eps)
        best = np.argmax(np.where(mask, q, -np.inf), axis=1)
        probs = np.full(q.shape, eps / q.shape[1])
        probs[np.arange(len(q)), best] += 1.0 - eps
        return probs

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray | int, Any]:
        """Action for one observation (an int) or a batch (an array), as SB3's ``predict``."""
        probs = self.action_probabilities(observation)
        if deterministic:
            actions = np.argmax(probs, axis=1)
        else:
            actions = np.array([self._rng.choice(probs.shape[1], p=p) for p in probs])
        if np.asarray(observation).ndim == 1:
            return int(actions[0]), state
        return actions, state

    def __repr__(self) -> str:
        return f"PolicyAgent(name={self.name!r}, algo={self.algo!r})"


def observation_version(features: Sequence[str], name: str = "the policy") -> str:
    """The observation version whose features a policy was trained on (``v0`` or ``v1``);
    features of no version are an error: the policy was trained on an older environment."""
    for version, names in OBSERVATIONS.items():
        if list(features) == list(names):
            return version
    raise ValueError(f"{name} was trained on observation features {list(features)}, which "
                     f"no observation version of the environment has "
                     f"({ {v: list(n) for v, n in OBSERVATIONS.items()} }): retrain it")


#: The most steps between DQN updates a settings JSON may name (it sizes nothing, but a
#: number of 10^11 is no setting anyone trained with).
MAX_TRAIN_FREQ = 10**7


def read_settings(json_file: Path) -> dict[str, Any]:
    """A saved policy's settings JSON, its types and ranges checked: an object whose ``algo``
    is a known algorithm, whose ``observation_features`` (if any) are names, whose
    ``algorithm_kwargs`` and ``config`` (if any) are objects, and whose DQN ``train_freq``
    (if any) is a whole number in [1, :data:`MAX_TRAIN_FREQ`]. Anything else is a
    :class:`PolicyFileError` naming the file."""
    def refuse(problem: str) -> PolicyFileError:
        return PolicyFileError(f"{json_file}: {problem}; a policy's settings JSON is written "
                               "by ballad-env train and needs at least "
                               '{"algo": "ppo"|"a2c"|"dqn"|"maskable_ppo"}')

    try:
        settings = json.loads(read_regular_text(json_file, "policy settings file"))
    except (ValueError, RecursionError) as err:  # a 5,000-digit number is a ValueError too
        raise refuse(f"not valid JSON ({type(err).__name__}: {err})") from None
    if not isinstance(settings, dict):
        raise refuse(f"not a JSON object but a {type(settings).__name__}")
    algo = settings.get("algo")
    if not isinstance(algo, str) or algo not in ALGORITHM_CLASSES:
        raise refuse(f"unknown algo {algo!r}; use one of {tuple(ALGORITHM_CLASSES)}")
    features = settings.get("observation_features", [])
    if not (isinstance(features, list) and all(isinstance(f, str) for f in features)):
        raise refuse(f"its observation_features {features!r} are not a list of names")
    for key in ("algorithm_kwargs", "config"):
        if settings.get(key) is not None and not isinstance(settings[key], dict):
            raise refuse(f"its {key} {settings[key]!r} is not a JSON object")
    train_freq = (settings.get("algorithm_kwargs") or {}).get("train_freq")
    if train_freq is not None and not (isinstance(train_freq, int) and not isinstance(
            train_freq, bool) and 1 <= train_freq <= MAX_TRAIN_FREQ):
        raise refuse(f"its algorithm_kwargs train_freq {train_freq!r} is not a whole number "
                     f"in [1, {MAX_TRAIN_FREQ}]")
    return settings


def load_policy(path: str | Path, env: Any = None, *, trust_pickle: bool = False
                ) -> PolicyAgent:
    """Load a saved model and its settings JSON as an agent named after the file stem
    (``agents.policy_files.policy_name``: ``<run>/best_model`` for a run's best model).

    By default no code from the file runs (``agents.policy_zip.load_model_safely``): the
    weights load as plain tensors and the architecture is rebuilt from the settings JSON and
    the plain JSON of the zip; a file it cannot interpret is refused (``PolicyFileError``).
    ``trust_pickle=True`` loads it with stable-baselines3's own ``load`` instead, which
    unpickles the file's serialized entries and so **runs any code stored in it**: only for
    files from people you trust.

    ``env``, when given, is only checked (``PolicyAgent.observe_env``, which ``run_episode``
    calls again with the environment played).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved model at {path}")
    settings = read_settings(settings_path(path))
    algo = settings["algo"]
    features = settings.get("observation_features", list(OBSERVATION_FEATURES))
    version = observation_version(features, path.name)
    if trust_pickle:
        model = ALGORITHM_CLASSES[algo].load(path, device="cpu")
    else:
        model = load_model_safely(path, ALGORITHM_CLASSES[algo], version,
                                  settings.get("algorithm_kwargs"))
    return built_for(PolicyAgent(model, settings, name=policy_name(path)), env)


__all__ = ["ALGORITHMS", "ALGORITHM_CLASSES", "PolicyAgent", "PolicyFileError", "is_policy_path",
           "load_policy", "observation_version", "read_settings", "settings_path"]
