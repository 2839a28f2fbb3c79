"""The floors of docs/architecture.md, checked on the imports of every module.

ballad_env (the environment) imports no other floor; agents (the allocators) import only
ballad_env; agents.ppo (the PPO algorithm) imports only ballad_env; agents.reports (tables,
figures and statistics of results) imports ballad_env and the allocators; agents.experiments
(the harness) imports those four; agents.interop (rl-zoo3 and Minari)
sits on the harness; the command line
(agents.experiments.cli, and ``python -m ballad_env``) sits on top of the library. The
research lives in scripts/, never installed: the studies (scripts.studies.<study>) import the
library and what they share (scripts.studies.common), never one another; the tools
(scripts.tools) import the library and the studies' common part. Nothing in the library imports
scripts/. No import circle runs among the project's modules (imports inside functions
included; ``if TYPE_CHECKING:`` blocks, which never run, aside). No module imports another
module's private name, and no module starts a script as a process.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ballad_env", "agents", "scripts")


#: The command line's entry in the environment's package: it imports the command lazily.
ENTRY_POINTS = {"ballad_env.__main__"}


def layer(module: str) -> str:
    """The layer of a dotted module name of this project ('' for other packages)."""
    if module.startswith("agents.experiments.cli") or module in ENTRY_POINTS:
        return "commands"
    if module.startswith("agents.experiments"):
        return "harness"
    if module.startswith("agents.reports"):
        return "reports"
    if module.startswith("agents.interop"):
        return "interop"
    if module.startswith("agents.ppo"):
        return "ppo"
    if module.startswith("agents"):
        return "agents"
    if module.startswith("ballad_env"):
        return "environment"
    if module.startswith("scripts.studies.common"):
        return "common"
    if module.startswith("scripts.studies"):
        return "studies"
    if module.startswith("scripts"):
        return "tools"
    return ""


LIBRARY = {"environment", "agents", "ppo", "reports", "harness", "interop", "commands"}
ALLOWED = {"environment": {"environment"}, "agents": {"environment", "agents"},
           "ppo": {"environment", "ppo"},
           "reports": {"environment", "agents", "reports"},
           "harness": {"environment", "agents", "ppo", "reports", "harness"},
           "interop": {"environment", "agents", "ppo", "reports", "harness", "interop"},
           "commands": LIBRARY,
           "common": LIBRARY | {"common"},
           "studies": LIBRARY | {"common"},
           "tools": LIBRARY | {"common", "tools"}}


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
    nodes = tree.body if top_level_only else [
        node for node in ast.walk(strip_type_checking(tree))]
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from package import module`` imports that module; any other name, the package
            submodules = {f"{node.module}.{alias.name}" for alias in node.names
                          if f"{node.module}.{alias.name}" in modules()}
            names.update(submodules)
            if len(submodules) < len(node.names):
                names.add(node.module)
    return {name for name in names if layer(name)}


def strip_type_checking(tree: ast.Module) -> ast.Module:
    """``tree`` without its ``if TYPE_CHECKING:`` blocks (their imports never run)."""
    class Strip(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> ast.AST | None:
            test = node.test
            name = test.id if isinstance(test, ast.Name) else (
                test.attr if isinstance(test, ast.Attribute) else "")
            if name == "TYPE_CHECKING":
                return None if not node.orelse else node.orelse  # type: ignore[return-value]
            self.generic_visit(node)
            return node
    return Strip().visit(tree)


def study(module: str) -> str | None:
    """The study a module belongs to (``scripts.studies.<name>``, for every part of it), or
    None (``scripts.studies.common`` is shared, not a study)."""
    parts = module.split(".")
    if parts[:2] == ["scripts", "studies"] and len(parts) > 2 and parts[2] != "common":
        return ".".join(parts[:3])
    return None


def allowed(module: str, name: str) -> bool:
    """Whether ``module`` may import ``name``: a floor below it, or a part of its own study;
    never another study."""
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


STUDIES = sorted(p.name for p in (ROOT / "scripts" / "studies").iterdir()
                 if (p / "__init__.py").is_file() and p.name != "common")


@pytest.mark.parametrize("name", STUDIES)
def test_each_study_has_one_entry_point(name: str) -> None:
    """``python -m scripts.studies.<name>``: a ``__main__`` with a ``main(argv)``, run only
    as a program (importing it runs nothing)."""
    main = ROOT / "scripts" / "studies" / name / "__main__.py"
    assert main.is_file(), f"scripts/studies/{name} has no __main__.py"
    tree = ast.parse(main.read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
    assert 'if __name__ == "__main__":' in main.read_text()


def test_nothing_in_the_library_imports_the_research() -> None:
    wrong = {name: sorted(m for m in imports(path) if m.startswith("scripts"))
             for name, path in modules().items() if layer(name) in LIBRARY}
    assert not {k: v for k, v in wrong.items() if v}


def import_graph() -> dict[str, set[str]]:
    """Each project module -> the project modules it imports anywhere (in functions too)."""
    found = modules()
    return {name: {m for m in imports(path) if m in found and m != name}
                for name, path in found.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                connect(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            connect(name)
    return cycles


def test_no_import_cycle_among_the_project_modules() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles (imports inside functions count): " + "; ".join(
        " <-> ".join(group) for group in cycles)


def test_an_import_cycle_inside_a_function_would_be_caught(tmp_path: Path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text("from agents.experiments import run\n")
    second.write_text("def late():\n    from agents import base\n")
    graph = {"a": {"b"}, "b": set(), "agents.base": {"agents.x"}, "agents.x": {"agents.base"}}
    assert import_cycles(graph) == [["agents.base", "agents.x"]]
    assert imports(second) == {"agents.base"} or imports(second) == {"agents"}
    typed = tmp_path / "c.py"
    typed.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from agents import base\n")
    assert imports(typed) == set()


def test_a_forbidden_import_would_be_caught(tmp_path: Path) -> None:
    """The checker itself: a module importing a higher layer is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\nfrom agents.experiments import run_grid\n")
    assert imports(bad) == {"agents.experiments"}
    assert layer("agents.experiments") not in ALLOWED["environment"]
    # The reports sit below the harness: they read tables, never the harness's stores.
    assert not allowed("agents.reports.plots", "agents.experiments.stores.results")
    assert allowed("agents.experiments.training.curves", "agents.reports.plots")
    assert not allowed("agents.rules", "agents.reports.tables")
    # The interop with other libraries sits on the harness, which never imports it.
    assert allowed("agents.interop.minari_datasets", "agents.experiments.lattice_build")
    assert not allowed("agents.experiments.training.sb3", "agents.interop.zoo")
    assert allowed("agents.experiments.cli.minari_data", "agents.interop.minari_datasets")
    # PPO sits below the harness: the trainers import it; it imports none of them, nor the
    # allocators, and the allocators and the reports do not import it.
    assert layer("agents.ppo.updates") == "ppo"
    assert allowed("agents.experiments.training.torch_trainer", "agents.ppo.updates")
    assert allowed("agents.ppo.updates", "ballad_env.files")
    assert not allowed("agents.ppo.core", "agents.experiments.training.config")
    assert not allowed("agents.ppo.core", "agents.policy")
    assert not allowed("agents.policy", "agents.ppo.core")
    assert not allowed("agents.reports.tables", "agents.ppo.core")


def test_study_to_study_and_private_imports_would_be_caught(tmp_path: Path) -> None:
    """The checkers themselves: a study importing another study (either spelling), a private
    name from another module, and a process started on a script are all reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from scripts.studies import lattice\n"
                   "from scripts.studies.policies.study import load_rounds\n"
                   "from agents.experiments.run import _run_task\n")
    found = imports(bad)
    assert {"scripts.studies.lattice", "scripts.studies.policies.study"} <= found
    assert not any(allowed("scripts.studies.crossed.cells", name) for name in found
                   if name.startswith("scripts.studies"))
    assert not allowed("agents.experiments.grid", "scripts.studies.common.split")
    # A study split into a subpackage by job imports its own parts, and still no other study.
    part = "scripts.studies.allocators.analysis"
    assert allowed(part, "scripts.studies.allocators.cells")
    assert not allowed(part, "scripts.studies.lattice")
    assert not allowed(part, "scripts.studies.lattice.analysis")
    assert private_imports(bad, "scripts.studies.x") == [
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
    assert len(top) <= 17, top


#: Lines a module may hold: past it, split it by job.
MAX_LINES = 450


def test_no_module_is_longer_than_it_reads_well() -> None:
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"


#: Positional parameters a training function may take (``self`` and ``cls`` aside): past
#: it, a call is a row of values to line up by position; take keywords or the config.
MAX_POSITIONAL = 8


def wide_functions(path: Path) -> list[str]:
    """The functions of ``path`` with more than :data:`MAX_POSITIONAL` positional
    parameters, as ``name (count)``."""
    wide = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            count = len(names) - (names[:1] in (["self"], ["cls"]))
            if count > MAX_POSITIONAL:
                wide.append(f"{node.name} ({count})")
    return wide


def test_no_training_function_takes_more_than_8_positional_parameters() -> None:
    folders = (ROOT / "agents" / "experiments" / "training", ROOT / "agents" / "ppo")
    wide = {str(p.relative_to(ROOT)): w for folder in folders for p in sorted(folder.rglob("*.py"))
            if (w := wide_functions(p))}
    assert not wide, f"more than {MAX_POSITIONAL} positional parameters: {wide}"


def repeated_aliases(paths: list[Path]) -> dict[str, list[str]]:
    """Type aliases (a module-level name given a subscripted type, ``Record = Callable[...]``)
    whose type is written out in more than one place, by that type's text: where each is."""
    places: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Subscript)):
                places.setdefault(ast.unparse(node.value), []).append(
                    f"{path.name}:{node.targets[0].id}")
    return {text: where for text, where in places.items() if len(where) > 1}


def test_the_trainers_write_each_type_alias_once(tmp_path: Path) -> None:
    """One definition of each type the training modules share (the loops' ``Record`` was
    written out in two modules); a second copy is caught."""
    paths = sorted((ROOT / "agents" / "experiments" / "training").rglob("*.py"))
    assert not repeated_aliases(paths)
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text("Pairs = list[tuple[int, int]]\n")
    assert repeated_aliases(sorted(tmp_path.glob("*.py"))) == {
        "list[tuple[int, int]]": ["a.py:Pairs", "b.py:Pairs"]}


#: What a docstring of the library must not hold (figures live in the docs, with their
#: machine): an issue's number, and a machine's timings (micro- or milliseconds, a speed-up,
#: steps a second, a load).
DOCSTRING_FIGURES = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\bissues? #?\d+", r"(?<![\w/])#\d{2,}\b", r"\d[\d,.]*\s?(µs|us|ms)\b",
    r"\d[\d,.]*\s?(x|times)\s(faster|slower|sb3)", r"\d[\d,]*\s?steps/s",
    r"\bload (average )?\d"))


def docstring_figures(path: Path) -> list[str]:
    """``name: figure`` for each issue number or machine timing in ``path``'s docstrings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node) or ""
            found += [f"{getattr(node, 'name', path.stem)}: {m.group(0)}"
                      for pattern in DOCSTRING_FIGURES for m in pattern.finditer(doc)]
    return found


def test_the_librarys_docstrings_hold_no_issue_numbers_or_timings(tmp_path: Path) -> None:
    """The library's docstrings say what and why; an issue's number or one machine's timings
    there go stale unseen (``docs/`` holds the figures with their machine)."""
    found = {str(p.relative_to(ROOT)): f for p in sorted((ROOT / "agents").rglob("*.py"))
             if (f := docstring_figures(p))}
    assert not found, f"issue numbers or machine timings in docstrings: {found}"
    sample = tmp_path / "sample.py"
    sample.write_text('"""Fixed in issue 48: a step in 1.2 ms, 7.8x SB3 at load 7."""\n')
    assert docstring_figures(sample) == [
        "sample: issue 48", "sample: 1.2 ms", "sample: 7.8x SB3", "sample: load 7"]


def test_a_wide_function_would_be_caught(tmp_path: Path) -> None:
    path = tmp_path / "wide.py"
    path.write_text("def run(a, b, c, d, e, f, g, h, i): ...\n"
                    "def ok(self, a, b, c, d, e, f, g, h, *, i): ...\n")
    assert wide_functions(path) == ["run (9)"]

