"""The layers of docs/architecture.md, checked on the imports of every module.

ballad_env (the environment) imports no other layer; agents (the allocators) import only
ballad_env; agents.experiments (the harness) imports both; scripts are imported by nothing.
Within ballad_env the module-level imports form no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ballad_env", "agents")


def layer(module: str) -> str:
    """The layer of a dotted module name of this project ('' for other packages)."""
    if module.startswith("agents.experiments"):
        return "harness"
    if module.startswith("agents"):
        return "agents"
    if module.startswith("ballad_env"):
        return "environment"
    if module.startswith("scripts"):
        return "scripts"
    return ""


ALLOWED = {"environment": {"environment"}, "agents": {"environment", "agents"},
           "harness": {"environment", "agents", "harness"}}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[dotted.removesuffix(".__init__")] = path
    return found


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Project modules that ``path`` imports (anywhere, or at module level only)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {name for name in names if layer(name)}


@pytest.mark.parametrize("module", sorted(modules()))
def test_each_module_imports_only_the_layers_below(module: str) -> None:
    path = modules()[module]
    own = layer(module)
    wrong = sorted(name for name in imports(path) if layer(name) not in ALLOWED[own])
    assert not wrong, f"{module} ({own}) must not import {wrong}"


def test_the_environment_has_no_import_cycle() -> None:
    graph = {name: {m for m in imports(path, top_level_only=True)
                    if m.startswith("ballad_env.") and m != name}
             for name, path in modules().items()
             if name.startswith("ballad_env.")}
    done: set[str] = set()

    def visit(node: str, trail: tuple[str, ...]) -> None:
        assert node not in trail, "import cycle: " + " -> ".join((*trail, node))
        if node in done:
            return
        for child in graph.get(node, ()):
            visit(child, (*trail, node))
        done.add(node)

    for name in graph:
        visit(name, ())


def test_a_forbidden_import_would_be_caught(tmp_path: Path) -> None:
    """The checker itself: a module importing a higher layer is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\nfrom agents.experiments import run_grid\n")
    assert imports(bad) == {"agents.experiments"}
    assert layer("agents.experiments") not in ALLOWED["environment"]
