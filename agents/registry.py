"""Agents by command-line name, so runners and scripts build them from strings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.base import Agent

#: name -> factory taking the environment (only the oracle and learned policies use it).
_FACTORIES: dict[str, Callable[[Any], Agent]] = {}


def register_agent(name: str, factory: Callable[[Any], Agent]) -> None:
    """Make ``make_agent(name, env)`` return ``factory(env)``; names are unique."""
    if name in _FACTORIES:
        raise ValueError(f"agent name {name!r} is already registered")
    _FACTORIES[name] = factory


def agent_names() -> tuple[str, ...]:
    """Registered agent names, in registration order."""
    return tuple(_FACTORIES)


def make_agent(name: str, env: Any = None) -> Agent:
    """The agent called ``name``; ``env`` is the environment it will act in."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown agent {name!r}: use one of {', '.join(agent_names())}")
    return _FACTORIES[name](env)
