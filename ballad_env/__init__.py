"""BALLAD's label-budget allocation problem (Active Learning vs Learning to Reject) for Gymnasium.

``gymnasium.make("ballad_env/BudgetAllocation-v0", dataset="toy")`` builds the environment.
"""

from gymnasium.envs.registration import register

from ballad_env.data import Dataset, available_datasets, load_dataset
from ballad_env.env import FEATURE_INDEX, OBSERVATION_FEATURES, BudgetAllocationEnv
from ballad_env.episode import AL, LR, Episode, EpisodeConfig

ENV_ID = "ballad_env/BudgetAllocation-v0"

register(id=ENV_ID, entry_point="ballad_env.env:BudgetAllocationEnv")

__all__ = [
    "AL",
    "ENV_ID",
    "FEATURE_INDEX",
    "LR",
    "OBSERVATION_FEATURES",
    "BudgetAllocationEnv",
    "Dataset",
    "Episode",
    "EpisodeConfig",
    "available_datasets",
    "load_dataset",
]
__version__ = "0.1.0"
