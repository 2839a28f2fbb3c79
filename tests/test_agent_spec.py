"""``AgentSpec``: an agent string read once (a registered name, a plugin's, a saved policy),
what the grid, the runner and the policy study ask instead of testing the string."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agents
from agents.experiments.grid import Grid, agent_label
from agents.registry import AGENTS, register_agent
from agents.rules import AllInLR, BalladAgent
from agents.spec import AgentSpec


@pytest.fixture
def plugin_agent() -> Iterator[str]:
    """An agent registered by code outside the package (this test module), then removed."""
    register_agent("spec-test-lr", lambda env: AllInLR())
    yield "spec-test-lr"
    AGENTS.unregister("spec-test-lr")


def test_what_each_kind_of_string_names(plugin_agent: str, tmp_path: Path) -> None:
    ballad = AgentSpec.of("ballad")
    assert (ballad.kind, ballad.origin, ballad.label) == ("registered", "built-in", "ballad")
    assert AgentSpec.of("lr-first-25").origin == "built-in"  # a registered pattern's member
    assert AgentSpec.of(plugin_agent).origin == "plugin"
    policy = AgentSpec.of(tmp_path / "run" / "eval" / "best_model.ZIP")
    assert policy.is_policy and policy.origin is None
    assert policy.label == "policy:run/best_model" == agent_label(str(policy))
    assert AgentSpec.of(policy) is policy and str(policy) == policy.text
    assert AgentSpec.of("not-yet-registered").origin is None  # reading never fails
    assert isinstance(AgentSpec.of("ballad").build(), BalladAgent)
    assert agents.AgentSpec is AgentSpec  # exported by the package


def test_check_names_the_problem(tmp_path: Path) -> None:
    AgentSpec.of("ballad").check()
    with pytest.raises(ValueError, match="unknown agent 'balad': use one of ballad"):
        AgentSpec.of("balad").check()
    with pytest.raises(FileNotFoundError, match="saved policy .* does not exist"):
        AgentSpec.of(tmp_path / "gone.zip").check()


def test_checking_a_saved_policy_without_the_rl_extra_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check loads a policy through the registry's one loader, so a missing extra is
    the same one-line error as ``make_agent``'s (the command prints it, status 2)."""
    model = tmp_path / "run.zip"
    model.write_bytes(b"")
    model.with_suffix(".json").write_text('{"algo": "ppo"}')
    monkeypatch.delitem(sys.modules, "agents.policy", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ModuleNotFoundError,
                       match=r"checking the saved policy .*run.zip needs torch.*'\.\[rl\]'"):
        AgentSpec.of(model).check()


def test_the_grid_reads_its_agents_once(tmp_path: Path) -> None:
    grid = Grid(("toy",), (0,), ("ballad", str(tmp_path / "p.zip")))
    assert [s.kind for s in grid.agent_specs] == ["registered", "policy"]
    assert grid.agent_specs[1].label == "policy:p"
    with pytest.raises(ValueError, match="repeated"):
        Grid(("toy",), (0,), (str(tmp_path / "a" / "p.zip"), str(tmp_path / "b" / "p.zip")))
