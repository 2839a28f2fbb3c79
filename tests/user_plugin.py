"""A user's plugin module for ``test_plugins``: importing it registers the agent
``user-lr`` (always LR) and the prior ``user-knn`` (pyod's kNN under another name).

It is imported by name (``--import user_plugin``, ``run_grid(plugins=[...])``), never by
the tests themselves, so a worker process knows these names only if the plugin reaches it.
"""

from __future__ import annotations

import numpy as np

from agents.base import RuleAgent
from agents.registry import is_agent_name, register_agent
from ballad_env.detectors.priors import PRIORS


class AlwaysLR(RuleAgent):
    """Every round to LR (the pool permitting)."""

    name = "user-lr"

    def act(self, observation: np.ndarray) -> int:
        return 1


def _knn(seed: int, n_training_points: int):  # noqa: ANN202 - pyod's detector
    from pyod.models.knn import KNN

    return KNN(n_neighbors=min(10, max(1, n_training_points - 1)))


if not is_agent_name("user-lr"):
    register_agent("user-lr", lambda env: AlwaysLR())
if "user-knn" not in PRIORS:
    PRIORS.register("user-knn", _knn)
