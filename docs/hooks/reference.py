"""MkDocs hook: the reference pages, generated from the code at every build.

- ``reference/cli.md``: every ``ballad-env <job>``'s help, from its parser
  (``scripts.tools.cli_reference.cli_reference``);
- ``reference/api/<package>.md``: one page per package of ``ballad_env`` and ``agents``
  (the harness.s command line aside), each module's docstrings through
  mkdocstrings, listed in the nav where ``mkdocs.yml`` names ``reference/api.md``;
- ``extending.md``: the section "Where to add things" of ``docs/architecture.md``, cut out
  of that page at every build (one text, two places to find it);
- every table also as a hidden list for the search index, one item a row (``column:
  value; ...``): the index reads a table's cells as one run of words, so its snippets
  were rows run together.

A new module appears in the reference without any edit here or in ``mkdocs.yml``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # mkdocs is imported where the build calls in, so tests need not have it
    from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[2]
#: Packages documented, and subpackages left out (the command line has its own page; the
#: studies run from a source checkout and are documented by their reports).
PACKAGES = ("ballad_env", "agents")
LEFT_OUT = ("agents.experiments.cli", "ballad_env.__main__")
API_INDEX = "reference/api.md"
EXTENDING = "extending.md"
WHERE = "## Where to add things"


def _left_out(name: str) -> bool:
    return any(name == skip or name.startswith(skip + ".") for skip in LEFT_OUT)


def api_packages() -> dict[str, list[str]]:
    """Each package (``ballad_env.detectors.ssdo``) -> its modules, the package first."""
    found: dict[str, list[str]] = {}
    for top in PACKAGES:
        for init in sorted((ROOT / top).rglob("__init__.py")):
            package = ".".join(init.parent.relative_to(ROOT).parts)
            if _left_out(package):
                continue
            modules = [f"{package}.{path.stem}" for path in sorted(init.parent.glob("*.py"))
                       if path.name != "__init__.py"]
            found[package] = [package] + [m for m in modules if not _left_out(m)]
    return found


def api_page(package: str, modules: list[str]) -> str:
    lines = [f"# `{package}`", ""]
    for module in modules:
        lines += [f"::: {module}", "    options:", "      show_submodules: false", ""]
    return "\n".join(lines)


def api_index(packages: dict[str, list[str]]) -> str:
    lines = ["# API reference", "",
             "Generated from the docstrings at every build of the site: one page per package of",
             "`ballad_env` (the environment) and `agents` (the agents and the experiment",
             "harness). The command line has its own page, [Command line](cli.md).", ""]
    lines += [f"- [`{package}`](api/{package}.md): the package and {len(modules) - 1} "
              "module(s)" for package, modules in packages.items()]
    return "\n".join(lines) + "\n"


def extending_page(architecture: str) -> str:
    """The page "Extending": the section ``WHERE`` of the architecture page, to the next
    section of the same level (or the end)."""
    if WHERE not in architecture:
        raise ValueError(f"docs/architecture.md has no section {WHERE!r}: the Extending page "
                         "is cut from it (docs/hooks/reference.py)")
    section = architecture[architecture.index(WHERE) + len(WHERE):]
    end = section.find("\n## ")
    body = section if end < 0 else section[:end]
    return ("# Extending\n\nEvery family of parts is a registry: adding one is a registration, "
            "not an edit across files. This is the section \"Where to add things\" of "
            "[Architecture](architecture.md#where-to-add-things), which also says what each "
            "layer may import.\n" + body.rstrip() + "\n")


def _replace_index(nav: Any, entries: list[Any]) -> Any:
    """``nav`` with the entry ``reference/api.md`` replaced by the index and the pages."""
    if isinstance(nav, list):
        return [_replace_index(item, entries) for item in nav]
    if isinstance(nav, dict):
        return {key: (entries if value == API_INDEX else _replace_index(value, entries))
                for key, value in nav.items()}
    return nav


def on_config(config: Any) -> Any:
    entries: list[Any] = [{"Overview": API_INDEX}]
    entries += [{package: f"reference/api/{package}.md"} for package in api_packages()]
    config["nav"] = _replace_index(config["nav"], entries)
    return config


def on_files(files: Files, config: Any) -> Files:
    from mkdocs.structure.files import File

    if str(ROOT) not in sys.path:  # the docs' tools (scripts/) run from the clone, uninstalled
        sys.path.insert(0, str(ROOT))
    from scripts.tools.cli_reference import cli_reference

    packages = api_packages()
    files.append(File.generated(config, "reference/cli.md", content=cli_reference()))
    files.append(File.generated(config, API_INDEX, content=api_index(packages)))
    architecture = (Path(config["docs_dir"]) / "architecture.md").read_text()
    files.append(File.generated(config, EXTENDING, content=extending_page(architecture)))
    for package, modules in packages.items():
        files.append(File.generated(config, f"reference/api/{package}.md",
                                    content=api_page(package, modules)))
    return files


#: A Sphinx role before a code span (``:class:`Settings` `` renders as ":class:" and a code
#: span): docstrings keep the roles for ``help()`` and Sphinx readers, the site shows code.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const):(?=<code>)")


#: A table of the rendered page, a row of it, and a cell (``th`` or ``td``) with its content.
TABLE = re.compile(r"<table(?P<attributes>[^>]*)>(?P<body>.*?)</table>", re.S)
ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
CELL = re.compile(r"<t([hd])[^>]*>(.*?)</t\1>", re.S)


def searchable_tables(html: str) -> str:
    """``html`` with each table left out of the search index (Material's
    ``data-search-exclude``) and followed by a hidden list that the index reads instead:
    one item a row, each cell after its column's name (``setting: iforest; datasets: 5``).
    Readers see the table as before; a search snippet reads as the row it came from."""
    def rewrite(table: re.Match[str]) -> str:
        rows = [CELL.findall(row) for row in ROW.findall(table["body"])]
        head = [text.strip() for _, text in rows[0]] if rows and all(
            kind == "h" for kind, _ in rows[0]) else []
        items = []
        for cells in rows[1:] if head else rows:
            names = head + [""] * max(0, len(cells) - len(head))  # a row longer than its head
            named = [f"{name}: {text.strip()}" if name else text.strip()
                     for name, (_, text) in zip(names, cells, strict=False)]
            items.append(f"<li>{'; '.join(named)}</li>")
        return (f'<table{table["attributes"]} data-search-exclude>{table["body"]}</table>\n'
                f'<ul hidden>{"".join(items)}</ul>')

    return TABLE.sub(rewrite, html)


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML with every Sphinx role before a code span dropped, in the API pages'
    rendered docstrings and everywhere else (the search index reads this HTML), and each
    table given a searchable form (:func:`searchable_tables`)."""
    return searchable_tables(ROLE.sub("", html))
