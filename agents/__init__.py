"""Allocation agents for the BALLAD environment, all speaking SB3's ``predict`` interface.

``make_agent(name, env)`` builds one by its command-line name (``agent_names()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ballad_env.registry import lazy_dir, lazy_exports

#: Each public name -> the module defining it, imported on first use (``lazy_exports``).
_SOURCES = {
    **dict.fromkeys(("Agent", "RuleAgent"), "agents.base"),
    **dict.fromkeys(("RECORD_FIELDS", "run_episode"), "agents.evaluation"),
    "OracleAgent": "agents.oracle",
    **dict.fromkeys(("agent_names", "make_agent", "register_agent"), "agents.registry"),
    **dict.fromkeys(("AllInAL", "AllInLR", "BalladAgent", "RandomAgent"), "agents.rules"),
    "AgentSpec": "agents.spec",
}

if TYPE_CHECKING:
    from agents.base import Agent, RuleAgent
    from agents.evaluation import RECORD_FIELDS, run_episode
    from agents.oracle import OracleAgent
    from agents.registry import agent_names, make_agent, register_agent
    from agents.rules import AllInAL, AllInLR, BalladAgent, RandomAgent
    from agents.spec import AgentSpec

__getattr__ = lazy_exports(__name__, _SOURCES)
__dir__ = lazy_dir(__name__, _SOURCES)

__all__ = ["RECORD_FIELDS", "Agent", "AgentSpec", "AllInAL", "AllInLR", "BalladAgent",
           "OracleAgent", "RandomAgent", "RuleAgent", "agent_names", "make_agent",
           "register_agent", "run_episode"]
