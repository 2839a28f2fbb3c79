"""BALLAD's label-budget allocation problem (Active Learning vs Learning to Reject) for Gymnasium.

``gymnasium.make("ballad_env/BudgetAllocation-v0", dataset="toy")`` builds the environment
(``"ballad_env/BudgetAllocationReplay-v0"``, ``store=...``: the same from stored lattices);
:class:`Settings` holds every option of an episode.
"""

from importlib import metadata
from typing import TYPE_CHECKING

from gymnasium.envs.registration import register

from ballad_env.registry import lazy_dir, lazy_exports

#: Each public name -> the module defining it, imported on first use (``lazy_exports``).
_SOURCES = {
    **dict.fromkeys(("Dataset", "DataWarning", "available_datasets", "dataset_name",
                     "load_dataset"), "ballad_env.data"),
    "BudgetAllocationEnv": "ballad_env.env",
    **dict.fromkeys(("AL", "LR", "Episode", "Snapshot"), "ballad_env.episode"),
    **dict.fromkeys(("FEATURE_INDEX", "OBSERVATION_FEATURES"), "ballad_env.observation"),
    "BudgetWarning": "ballad_env.protocol",
    "Settings": "ballad_env.settings",
}

if TYPE_CHECKING:
    from ballad_env.data import (
        Dataset,
        DataWarning,
        available_datasets,
        dataset_name,
        load_dataset,
    )
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.episode import AL, LR, Episode, Snapshot
    from ballad_env.observation import FEATURE_INDEX, OBSERVATION_FEATURES
    from ballad_env.protocol import BudgetWarning
    from ballad_env.settings import Settings

__getattr__ = lazy_exports(__name__, _SOURCES)
__dir__ = lazy_dir(__name__, _SOURCES)

ENV_ID = "ballad_env/BudgetAllocation-v0"
#: The same problem replayed from stored lattices (``ballad_env.replay.env``), for fast training.
REPLAY_ENV_ID = "ballad_env/BudgetAllocationReplay-v0"

# One id: gymnasium would call v0 deprecated if a "-v1" id existed. The observation's version
# is an argument instead: gymnasium.make(ENV_ID, observation="v1").
register(id=ENV_ID, entry_point="ballad_env.env:BudgetAllocationEnv")
register(id=REPLAY_ENV_ID, entry_point="ballad_env.replay.env:BudgetAllocationReplayEnv",
         vector_entry_point="ballad_env.replay.vector:ReplayVectorEnv")

try:
    __version__ = metadata.version("ballad-env")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "AL",
    "ENV_ID",
    "FEATURE_INDEX",
    "LR",
    "OBSERVATION_FEATURES",
    "REPLAY_ENV_ID",
    "BudgetAllocationEnv",
    "BudgetWarning",
    "DataWarning",
    "Dataset",
    "Episode",
    "Settings",
    "Snapshot",
    "available_datasets",
    "dataset_name",
    "load_dataset",
]
