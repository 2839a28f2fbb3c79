"""A saved policy's files, read without loading the model (so without torch): its settings
JSON, the name it goes by in results, and a fingerprint of its content.

``agents.experiments.training.sb3.train`` writes a run to ``<out>/<run>/``: the final model
``<run>.zip`` with its settings ``<run>.json`` beside it, checkpoints under
``checkpoints/`` and the best evaluated model as ``eval/best_model.zip``. A checkpoint or
the best model has no JSON of its own: it takes its run's.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

from ballad_env.files import open_regular

#: The algorithms' command-line names (``agents.policy.ALGORITHM_CLASSES`` maps them to their
#: classes), here so that parsers name them without importing torch.
ALGORITHMS = ("ppo", "a2c", "dqn", "maskable_ppo")

#: Sub-folders of a training run holding models saved during training.
TRAINING_SUBFOLDERS = ("checkpoints", "eval")
#: The command-line opt-in to stable-baselines3's full loader (``load_policy(trust_pickle=)``).
TRUST_PICKLE_HELP = (
    "load saved policies (.zip) with stable-baselines3's full loader, which RUNS ANY CODE "
    "stored in the file (it unpickles it): only for files from people you trust. Without "
    "it, a policy loads as weights and plain JSON only, and a file that needs more is refused")


def add_trust_pickle_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup
                              ) -> None:
    """Add ``--trust-pickle`` (``args.trust_pickle``) to a command line taking policy files."""
    parser.add_argument("--trust-pickle", action="store_true", help=TRUST_PICKLE_HELP)


def is_policy_path(spec: str | os.PathLike) -> bool:
    """Whether an agent spec names a saved policy (a path ending in ``.zip``)."""
    return str(spec).lower().endswith(".zip")


def training_run(model: str | os.PathLike) -> Path | None:
    """The training run a checkpoint or best model was saved in (``<run>/checkpoints/`` or
    ``<run>/eval/``), when that run's settings JSON is there; else ``None``."""
    folder = Path(model).parent
    if folder.name not in TRAINING_SUBFOLDERS:
        return None
    run = folder.parent
    return run if (run / f"{run.name}.json").is_file() else None


def settings_file(model: str | os.PathLike) -> Path:
    """The settings JSON of a saved model: beside it with the same stem, else (a checkpoint
    or ``best_model.zip``) its training run's ``<run>/<run>.json``."""
    model = Path(model)
    beside = model.with_suffix(".json")
    if beside.is_file():
        return beside
    run = training_run(model)
    if run is not None:
        return run / f"{run.name}.json"
    raise FileNotFoundError(
        f"no settings file {beside} beside the model, nor a training run's for a checkpoint "
        f"or best model (<run>/<run>.json above {'/ or '.join(TRAINING_SUBFOLDERS)}/): "
        "ballad-env train writes it; a model trained elsewhere needs at least "
        "{\"algo\": \"ppo\"|\"a2c\"|\"dqn\"|\"maskable_ppo\"}")


def policy_name(model: str | os.PathLike) -> str:
    """A saved policy's name in results: its file stem. A model saved during training (under
    ``<run>/checkpoints/`` or ``<run>/eval/``) whose stem does not say its run, such as
    ``best_model``, is named ``<run>/<stem>``, so the best models of two runs stay apart.
    The name depends on the path only, so stored results keep their names."""
    model = Path(model)
    run = model.parent.parent.name
    if model.parent.name in TRAINING_SUBFOLDERS and run and not model.stem.startswith(run):
        return f"{run}/{model.stem}"
    return model.stem


def policy_fingerprint(model: str | os.PathLike) -> str:
    """A hash of the saved model's bytes: a policy retrained under the same path is another
    policy, and results of the old one must not pass for its own."""
    digest = hashlib.sha256()
    with open_regular(model, "policy file") as handle:  # a FIFO is refused, not waited on
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


__all__ = ["ALGORITHMS", "TRAINING_SUBFOLDERS", "TRUST_PICKLE_HELP", "add_trust_pickle_argument",
           "is_policy_path", "policy_fingerprint", "policy_name", "settings_file", "training_run"]
