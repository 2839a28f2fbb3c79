"""The floors of docs/architecture.md, checked on the imports of every module.

ballad_env (the environment) imports no other floor; agents (the allocators) import only
ballad_env; agents.experiments (the harness) imports both; the studies
(agents.experiments.studies) import those three and never one another (a study split into a
subpackage by job imports its own parts); the command line
(agents.experiments.cli, and ``python -m ballad_env``) sits on top; scripts are shims of it,
imported by nothing. Within ballad_env the module-level imports form no cycle. No module
imports another module's private name, and no module starts a script as a process.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ballad_env", "agents")


#: The command line's entry in the environment's package: it imports the command lazily.
ENTRY_POINTS = {"ballad_env.__main__"}


def layer(module: str) -> str:
    """The layer of a dotted module name of this project ('' for other packages)."""
    if module.startswith("agents.experiments.cli") or module in ENTRY_POINTS:
        return "commands"
    if module.startswith("agents.experiments.studies"):
        return "studies"
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
           "harness": {"environment", "agents", "harness"},
           "studies": {"environment", "agents", "harness"},
           "commands": {"environment", "agents", "harness", "studies", "commands"}}


@functools.cache
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
            # ``from package import module`` imports that module too
            names.update(f"{node.module}.{alias.name}" for alias in node.names
                         if f"{node.module}.{alias.name}" in modules())
    return {name for name in names if layer(name)}


def study(module: str) -> str | None:
    """The study a module belongs to (``agents.experiments.studies.<name>``, also for the
    parts of a study split into a subpackage), or None."""
    parts = module.split(".")
    if parts[:3] == ["agents", "experiments", "studies"] and len(parts) > 3:
        return ".".join(parts[:4])
    return None


def allowed(module: str, name: str) -> bool:
    """Whether ``module`` may import ``name``: a floor below it, or (for a study split into
    a subpackage by job) a part of its own study; never another study."""
    own_study = study(module)
    return layer(name) in ALLOWED[layer(module)] or (
        own_study is not None and study(name) == own_study)


@pytest.mark.parametrize("module", sorted(modules()))
def test_each_module_imports_only_the_layers_below(module: str) -> None:
    path = modules()[module]
    own = layer(module)
    wrong = sorted(name for name in imports(path) if not allowed(module, name))
    assert not wrong, f"{module} ({own}) must not import {wrong}"


def private_imports(path: Path, own: str) -> list[str]:
    """``from module import _name`` in ``path`` where ``module`` is another project module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and layer(node.module) \
                and node.module != own:
            found += [f"{node.module}.{alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


@pytest.mark.parametrize("module", sorted(modules()))
def test_no_module_imports_a_private_name_of_another(module: str) -> None:
    wrong = private_imports(modules()[module], module)
    assert not wrong, f"{module} imports private names {wrong}: make them public API"


PROCESS_CALLS = {("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "call"),
                 ("subprocess", "check_call"), ("subprocess", "check_output"),
                 ("os", "system"), ("os", "execv"), ("os", "execvp"), ("os", "spawnv")}


def starts_a_script(path: Path) -> list[int]:
    """Lines of ``path`` that start a process whose arguments name a Python file or a path
    into ``scripts/`` (directly, or through a name the module binds to such a value)."""
    tree = ast.parse(path.read_text())

    def names_a_script(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and (
                    sub.value.endswith(".py") or sub.value == "scripts"
                    or "scripts/" in sub.value):
                return True
        return False

    tainted = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and names_a_script(node.value) for target in node.targets
               if isinstance(target, ast.Name)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) \
                and (node.func.value.id, node.func.attr) in PROCESS_CALLS:
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if any(names_a_script(a) or any(isinstance(n, ast.Name) and n.id in tainted
                                             for n in ast.walk(a)) for a in arguments):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("module", sorted(modules()))
def test_no_module_starts_a_script_as_a_process(module: str) -> None:
    lines = starts_a_script(modules()[module])
    assert not lines, (f"{module} starts a script as a process (lines {lines}): call its "
                       "main, or the function it runs, in the executor's workers instead")


#: Maintainers' tools in scripts/ (not jobs of the command): they may import below it.
MAINTAINER_TOOLS = {"adbench_registry.py"}


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "scripts").glob("*.py")))
def test_each_script_is_an_executable_shim_of_a_command(script: str) -> None:
    path = ROOT / "scripts" / script
    assert path.read_text().startswith("#!/usr/bin/env python3\n"), "no shebang"
    assert os.access(path, os.X_OK), f"scripts/{script} is not executable (chmod +x)"
    if script in MAINTAINER_TOOLS:
        return
    project = imports(path)
    assert project and all(layer(name) == "commands" for name in project), project


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


def test_study_to_study_and_private_imports_would_be_caught(tmp_path: Path) -> None:
    """The checkers themselves: a study importing another study (either spelling), a private
    name from another module, and a process started on a script are all reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from agents.experiments.studies import lattice\n"
                   "from agents.experiments.studies.policies import load_rounds\n"
                   "from agents.experiments.run import _run_task\n")
    found = imports(bad)
    assert {"agents.experiments.studies.lattice", "agents.experiments.studies.policies"} <= found
    assert not any(allowed("agents.experiments.studies.x", name) for name in found
                   if name.startswith("agents.experiments.studies"))
    # A study split into a subpackage by job imports its own parts, and still no other study.
    part = "agents.experiments.studies.allocators.analysis"
    assert allowed(part, "agents.experiments.studies.allocators.cells")
    assert not allowed(part, "agents.experiments.studies.lattice")
    assert not allowed(part, "agents.experiments.studies.lattice.analysis")
    assert private_imports(bad, "agents.experiments.studies.x") == [
        "agents.experiments.run._run_task"]
    bad.write_text("import subprocess, sys\nSCRIPT = ROOT / 'scripts' / 'train_policy.py'\n"
                   "subprocess.Popen([sys.executable, str(SCRIPT)])\n"
                   "subprocess.run(['git', 'status'])\n")
    assert starts_a_script(bad) == [3]


def test_the_source_hash_exclusions_name_existing_modules() -> None:
    """The modules left out of the lattices' and the results' source hashes exist: a move
    that forgot them would silently put them back into the hash."""
    from agents.experiments.stores.provenance import PRESENTATION_MODULES
    from ballad_env.replay.store import NOT_IN_LATTICES

    missing = sorted(p for p in NOT_IN_LATTICES | PRESENTATION_MODULES if not (ROOT / p).is_file())
    assert not missing, f"excluded from a source hash but not found: {missing}"


def test_the_environment_has_few_top_level_modules() -> None:
    """ballad_env is grouped by concept: the episode core at the top, the rest in subpackages."""
    top = sorted(p.name for p in (ROOT / "ballad_env").glob("*.py"))
    assert len(top) <= 16, top
