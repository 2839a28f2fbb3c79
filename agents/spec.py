"""``AgentSpec``: an agent string (a registered name, a plugin's name, or a saved policy's
path) read once, so that the grid, the runner and the studies ask it what it is instead of
each testing the string again."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agents.policy_files import is_policy_path, policy_name, settings_file
from agents.registry import (
    agent_names,
    defined_in,
    is_agent_name,
    make_agent,
    policy_loader,
)

#: What an agent string names: a registered agent (of this package, or of other code: a
#: plugin, a script, a notebook; ``AgentSpec.origin`` tells which), or a saved policy file.
AGENT_KINDS = ("registered", "policy")


@dataclass(frozen=True)
class AgentSpec:
    """An agent string and what it names (``AGENT_KINDS``).

    ``AgentSpec.of(text)`` reads it once: a path ending in ``.zip`` is a saved policy, any
    other string a registered name (or a member of a registered pattern, ``lr-first-25``).
    Reading never fails, so a grid can name a plugin's agents before the plugin is
    imported; :meth:`check` says, before anything runs, whether the agent can be built
    (the name registered, the policy's files there and loadable).
    """

    text: str
    kind: str

    @classmethod
    def of(cls, spec: str | os.PathLike | AgentSpec) -> AgentSpec:
        """``spec`` read once (an ``AgentSpec`` is returned as it is)."""
        if isinstance(spec, AgentSpec):
            return spec
        text = os.fspath(spec) if isinstance(spec, os.PathLike) else str(spec)
        return cls(text, "policy" if is_policy_path(text) else "registered")

    @property
    def is_policy(self) -> bool:
        """Whether it names a saved policy file."""
        return self.kind == "policy"

    @property
    def label(self) -> str:
        """Its name in results: a registered name as given, ``policy:<name>`` for a saved
        policy (its file stem; ``<run>/best_model`` for a run's best model)."""
        return f"policy:{policy_name(self.text)}" if self.is_policy else self.text

    @property
    def module(self) -> str | None:
        """The module a registered agent's factory is defined in (``"__main__"`` for the
        running script), or ``None`` (a policy, or a name not registered now)."""
        return None if self.is_policy else defined_in(self.text)

    @property
    def origin(self) -> str | None:
        """Where a registered agent comes from: ``"built-in"`` (this package), ``"plugin"``
        (other code; ``"__main__"``'s included), or ``None`` (a policy, or a name not
        registered now)."""
        module = self.module
        if module is None:
            return None
        return "built-in" if module.split(".")[0] == "agents" else "plugin"

    @property
    def in_script(self) -> bool:
        """Whether it is registered in the running script (``__main__``), which worker
        processes never run."""
        return self.module == "__main__"

    def check(self, *, trust_pickle: bool = False) -> None:
        """Raise a clear error now, before any episode runs, if the agent cannot be built: a
        name not registered (the error lists those that are), or a saved policy whose files
        are missing or that the safe loader refuses (loaded once, without running code from
        it unless ``trust_pickle``)."""
        if not self.is_policy:
            if not is_agent_name(self.text):
                raise ValueError(f"unknown agent {self.text!r}: use one of "
                                 f"{', '.join(agent_names())} or the path of a saved policy "
                                 "(.zip)")
            return
        if not os.path.isfile(self.text):
            raise FileNotFoundError(f"saved policy {self.text!r} does not exist")
        settings_file(self.text)
        policy_loader(f"checking the saved policy {self.text}")(self.text,
                                                                trust_pickle=trust_pickle)

    def build(self, env: Any = None, *, trust_pickle: bool = False) -> Any:
        """The agent (``agents.registry.make_agent``); ``env`` as there."""
        return make_agent(self.text, env, trust_pickle=trust_pickle)

    def __str__(self) -> str:
        return self.text


__all__ = ["AGENT_KINDS", "AgentSpec"]
