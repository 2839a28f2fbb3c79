"""Allocation agents for the BALLAD environment, all speaking SB3's ``predict`` interface."""

from __future__ import annotations

from typing import Any

from agents.base import Agent, RuleAgent
from agents.evaluation import RECORD_FIELDS, run_episode
from agents.oracle import OracleAgent
from agents.rules import AllInAL, AllInLR, BalladAgent, RandomAgent

AGENT_NAMES = ("ballad", "ballad-cosine", "all-in-al", "all-in-lr", "random", "oracle")


def make_agent(name: str, env: Any = None) -> Agent:
    """An agent by its command-line name; ``oracle`` needs the environment it looks ahead in."""
    factories = {
        "ballad": lambda: BalladAgent("entropy"),
        "ballad-cosine": lambda: BalladAgent("cosine"),
        "all-in-al": AllInAL,
        "all-in-lr": AllInLR,
        "random": RandomAgent,
    }
    if name == "oracle":
        if env is None:
            raise ValueError("the oracle agent needs the environment: make_agent('oracle', env)")
        return OracleAgent(env)
    if name not in factories:
        raise ValueError(f"unknown agent {name!r}: use one of {AGENT_NAMES}")
    return factories[name]()


__all__ = ["AGENT_NAMES", "RECORD_FIELDS", "Agent", "AllInAL", "AllInLR", "BalladAgent",
           "OracleAgent", "RandomAgent", "RuleAgent", "make_agent", "run_episode"]
