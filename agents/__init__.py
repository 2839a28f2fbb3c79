"""Allocation agents for the BALLAD environment, all speaking SB3's ``predict`` interface.

``make_agent(name, env)`` builds one by its command-line name (``agent_names()``).
"""

from __future__ import annotations

from typing import Any

from agents.base import Agent, RuleAgent
from agents.evaluation import RECORD_FIELDS, run_episode
from agents.oracle import OracleAgent
from agents.registry import agent_names, make_agent, register_agent
from agents.rules import AllInAL, AllInLR, BalladAgent, RandomAgent


def _oracle(env: Any) -> OracleAgent:
    if env is None:
        raise ValueError("the oracle agent needs the environment: make_agent('oracle', env)")
    return OracleAgent(env)


register_agent("ballad", lambda env: BalladAgent("entropy"))
register_agent("ballad-cosine", lambda env: BalladAgent("cosine"))
register_agent("all-in-al", lambda env: AllInAL())
register_agent("all-in-lr", lambda env: AllInLR())
register_agent("random", lambda env: RandomAgent())
register_agent("oracle", _oracle)

import agents.allocators  # noqa: E402, F401  (registers its agents)
import agents.bandits  # noqa: E402, F401  (registers its agents)
import agents.sadal  # noqa: E402, F401  (registers its agent)

__all__ = ["RECORD_FIELDS", "Agent", "AllInAL", "AllInLR", "BalladAgent", "OracleAgent",
           "RandomAgent", "RuleAgent", "agent_names", "make_agent", "register_agent",
           "run_episode"]
