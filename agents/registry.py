"""Agents by command-line name, so runners and scripts build them from strings.

A name is either registered as it is (``register_agent("ballad", factory)``) or matches a
registered pattern (``register_agent_pattern(r"lr-first-(\\d+)", factory)``), so a family of
agents with a parameter in the name (``lr-first-25``, any percent) needs one entry.

One style of registration: each agent module declares its agents in a table of names and
factories (``RULE_AGENTS``, ``ORACLE_AGENTS``, ``ALLOCATOR_AGENTS``, ``ALLOCATION_AGENTS``,
``BANDIT_AGENTS``, ``SADAL_AGENTS``, and ``BANDIT_PATTERNS``), and this module registers those
tables; any other agent is registered with ``register_agent`` or ``register_agent_pattern``. A saved
policy is loaded by ``agents.policy``, imported only when a ``.zip`` is asked for (it needs
torch); ``agents.policy`` does not import this module.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable
from typing import Any

from agents.allocation import ALLOCATION_AGENTS
from agents.allocators import ALLOCATOR_AGENTS
from agents.bandits import BANDIT_AGENTS, BANDIT_PATTERNS
from agents.base import Agent, AgentFactory
from agents.extras import missing_extra
from agents.oracle import ORACLE_AGENTS
from agents.policy_files import is_policy_path
from agents.rules import RULE_AGENTS
from agents.sadal import SADAL_AGENTS
from ballad_env.registry import Registry

#: name -> factory taking the environment (only the oracle and learned policies use it).
AGENTS: Registry[AgentFactory] = Registry("agent")
#: (pattern, example name, factory taking the match and the environment).
_PATTERNS: list[tuple[re.Pattern[str], str, Callable[[re.Match[str], Any], Agent]]] = []


def register_agent(name: str, factory: AgentFactory) -> None:
    """Make ``make_agent(name, env)`` return ``factory(env)``; names are unique."""
    AGENTS.register(name, factory)


def register_agent_pattern(pattern: str, example: str,
                           factory: Callable[[re.Match[str], Any], Agent]) -> None:
    """Make every name that fully matches ``pattern`` an agent: ``factory(match, env)``."""
    _PATTERNS.append((re.compile(pattern), example, factory))


def agent_names() -> tuple[str, ...]:
    """Registered agent names, in registration order (pattern families by their examples)."""
    return AGENTS.names()


def is_agent_name(name: str) -> bool:
    """Whether ``make_agent(name)`` knows ``name`` (registered, or matching a pattern)."""
    return name in AGENTS or any(p.fullmatch(name) for p, _, _ in _PATTERNS)


def defined_in(name: str) -> str | None:
    """The module of the code that builds the agent called ``name`` (``"__main__"`` for an
    agent registered in a script or a notebook, which worker processes never run), or
    ``None`` for a name that is not registered."""
    factory = agent_factory(name)
    inner = getattr(factory, "func", factory)  # a functools.partial's function
    return None if factory is None else getattr(inner, "__module__", None)


def agent_factory(name: str) -> Any:
    """What builds the agent called ``name``: its registered factory, or the factory of the
    pattern it matches; ``None`` for a name that is not registered."""
    if name in AGENTS:
        return AGENTS[name]
    return next((f for p, _, f in _PATTERNS if p.fullmatch(name)), None)


def make_agent(name: str, env: Any = None, *, trust_pickle: bool = False) -> Agent:
    """The agent called ``name`` (or the saved policy at a ``.zip`` path); ``env`` is the
    environment it will act in. ``trust_pickle`` applies to a saved policy only: ``True``
    loads it with stable-baselines3's full loader, which runs any code stored in the file
    (``agents.policy.load_policy``); by default no code from the file runs."""
    if is_policy_path(name):
        return policy_loader(f"loading the saved policy {name}")(name, env,
                                                                 trust_pickle=trust_pickle)
    if name in AGENTS:
        return AGENTS[name](env)
    for pattern, _, factory in _PATTERNS:
        match = pattern.fullmatch(name)
        if match is not None:
            return factory(match, env)
    families = [example for _, example, _ in _PATTERNS]
    raise ValueError(f"unknown agent {name!r}: use one of {', '.join(agent_names())}"
                     + (f" or a name like {', '.join(families)}" if families else ""))


def policy_loader(what: str) -> Callable[..., Agent]:
    """``agents.policy.load_policy``, imported now: the one way to a saved policy's loader.
    It needs the ``rl`` extra (stable-baselines3, torch); without it, an error naming the
    extra and ``what`` needed it."""
    try:
        from agents.policy import load_policy
    except ModuleNotFoundError as err:
        raise missing_extra(err, what) from err
    return load_policy


def agent_source(name: str) -> str:
    """Where the agent called ``name`` is implemented: its factory's module and qualified
    name (``agents.bandits:_lr_first_agent``), what a run records so that a resume under
    another implementation of the name (a plugin's, or none) is refused; ``""`` for a saved
    policy (its file's hash is recorded instead). Names that do not tell one factory from
    another (a lambda, a function defined inside another, a ``functools.partial``) carry a
    hash of the registration (:func:`registration_hash`): ``agents.rules:<lambda>@1f0c...``,
    so two lambdas of one module swapped between names are told apart."""
    factory = agent_factory(name)
    if factory is None:
        return ""
    inner = getattr(factory, "func", factory)  # a functools.partial's function
    qualname = getattr(inner, "__qualname__", type(inner).__name__)
    source = f"{getattr(inner, '__module__', '?')}:{qualname}"
    if "<" in qualname or inner is not factory:
        source += f"@{registration_hash(factory)}"
    return source


def registration_hash(factory: Any) -> str:
    """A hash of what a factory runs, stable across processes and line shifts: its source
    text (the lines of a lambda; its bytecode where there is no source file), the names and
    plain constants its code uses, and a partial's bound arguments; 16 hex digits."""
    inner = getattr(factory, "func", factory)
    parts = [repr(getattr(factory, "args", ())),
             repr(sorted((getattr(factory, "keywords", None) or {}).items()))]
    code = getattr(inner, "__code__", None)
    try:
        parts.append(inspect.getsource(inner))
    except (OSError, TypeError):  # defined in a REPL or by exec: its bytecode instead
        parts.append(code.co_code.hex() if code is not None else "")
    if code is not None:
        parts.append(repr(code.co_names))
        parts.append(repr([c for c in code.co_consts if not inspect.iscode(c)]))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _register_built_in() -> None:
    """Register the agents of this package, in the order ``agent_names`` lists them."""
    for table in (RULE_AGENTS, ORACLE_AGENTS, ALLOCATOR_AGENTS, ALLOCATION_AGENTS, BANDIT_AGENTS,
                  SADAL_AGENTS):
        for name, factory in table.items():
            register_agent(name, factory)
    for pattern, example, family in BANDIT_PATTERNS:
        register_agent_pattern(pattern, example, family)


_register_built_in()

__all__ = ["AGENTS", "agent_factory", "agent_names", "agent_source", "defined_in",
           "is_agent_name", "is_policy_path", "make_agent", "policy_loader", "register_agent",
           "register_agent_pattern", "registration_hash"]
