"""Allocation agents for the BALLAD environment, all speaking SB3's ``predict`` interface.

``make_agent(name, env)`` builds one by its command-line name (``agent_names()``).
"""

from __future__ import annotations

from agents.base import Agent, RuleAgent
from agents.evaluation import RECORD_FIELDS, run_episode
from agents.oracle import OracleAgent
from agents.registry import agent_names, make_agent, register_agent
from agents.rules import AllInAL, AllInLR, BalladAgent, RandomAgent

__all__ = ["RECORD_FIELDS", "Agent", "AllInAL", "AllInLR", "BalladAgent", "OracleAgent",
           "RandomAgent", "RuleAgent", "agent_names", "make_agent", "register_agent",
           "run_episode"]
