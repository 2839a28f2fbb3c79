"""Generated tables inside the studies' reports, kept equal to their files in ``docs/tables``.

A study's table writer (``tables.write_table``) puts every table it computes in
``docs/tables/<stem>.md``. A report does not copy those numbers: it marks where a table
goes, and :func:`fill` writes the generated table there::

    <!-- table: docs/tables/lattice_summary.md -->

    | path | cost iforest | ... |
    |---|---|...|

    <!-- /table -->

The marker names the generated file relative to the repository root, so a report can move
between folders without changing its markers. A marker may keep some of the rows:
``<!-- table: docs/tables/allocators_cv.md where costs=default prior=knn -->`` includes
the header and the rows whose ``costs`` cell is ``default`` and ``prior`` cell ``knn``
(every condition must hold). A marker may keep some of the columns, in their order:
``<!-- table: docs/tables/compare_stats_paired.md columns setting,dataset,agent -->``
(``columns`` before ``where`` when both are given), so that a table too wide for the page's
column is shown as two, each with the columns that name a row. A marker indented (inside a
list item) indents its table the same way. Only the table itself is included: a
generated file's title and note are the report's prose to write (and the note's relative
links point from ``docs/tables``, which would break inside a report elsewhere).
:func:`stale` lists the blocks that differ from their files; the test suite runs it over
every report, so a table regenerated without refilling the reports fails the suite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

START = re.compile(r"^(?P<indent> *)<!-- table: (?P<table>\S+)(?: columns (?P<columns>[^=]+?))?"
                   r"(?: where (?P<where>[^=\s]+=\S+(?: [^=\s]+=\S+)*))? -->$")
"""The line that opens a block: the generated file's path from the repository root, and
optionally ``columns a,b,...``, the columns to keep (commas between them; a column's name
may hold spaces), and ``where column=value ...``, the rows to keep."""
END = "<!-- /table -->"
"""The line that closes a block."""
TABLES = Path("docs") / "tables"
"""Where the study writers put the generated tables, relative to the repository root."""


@dataclass(frozen=True)
class Block:
    """One marked block of a report: lines ``start`` (the opening marker) to ``end`` (the
    closing one), 0-based, the generated table it includes and the ``(column, value)``
    conditions its rows must meet (none: every row) and the marker's indentation."""

    table: str
    start: int
    end: int
    where: tuple[tuple[str, str], ...] = ()
    indent: str = ""
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Difference:
    """A marked block whose content is not its generated table (or whose file is missing)."""

    report: Path
    table: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.report}:{self.line}: table {self.table}: {self.problem}"


def repo_root(start: str | Path) -> Path:
    """The nearest folder at or above ``start`` holding ``pyproject.toml`` (the repository
    root, where the markers' paths start)."""
    path = Path(start).resolve()
    for folder in (path, *path.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    raise FileNotFoundError(f"no pyproject.toml at or above {start}: pass root= (the folder "
                            "the markers' paths start from)")


def blocks(lines: Sequence[str], report: str | Path = "report") -> list[Block]:
    """The marked blocks of a report's lines, in order. A block left open, a closing marker
    without an opening one or a block inside another is an error naming the line."""
    found: list[Block] = []
    open_at: int | None = None
    table = ""
    where: tuple[tuple[str, str], ...] = ()
    indent = ""
    columns: tuple[str, ...] = ()
    for number, line in enumerate(lines):
        match = START.match(line.rstrip())
        if match:
            if open_at is not None:
                raise ValueError(f"{report}:{number + 1}: a table marker inside the block "
                                 f"opened on line {open_at + 1}: close it with '{END}' first")
            open_at, table, indent = number, match["table"], match["indent"]
            where = tuple(_condition(term) for term in (match["where"] or "").split())
            columns = tuple(filter(None, (match["columns"] or "").split(",")))
        elif line.strip() == END:
            if open_at is None:
                raise ValueError(f"{report}:{number + 1}: '{END}' without an opening "
                                 "'<!-- table: docs/tables/<file>.md -->'")
            found.append(Block(table, open_at, number, where, indent, columns))
            open_at = None
    if open_at is not None:
        raise ValueError(f"{report}:{open_at + 1}: the block for {table} is never closed: "
                         f"add '{END}' after its table")
    return found


def _condition(term: str) -> tuple[str, str]:
    column, _, value = term.partition("=")
    return column, value


def generated_table(path: Path) -> list[str]:
    """The table lines of a generated Markdown file (what ``write_table`` wrote after its
    optional title and note). A file with no table or with more than one is an error."""
    lines = path.read_text().splitlines()
    runs = [i for i, line in enumerate(lines)
            if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))]
    if len(runs) != 1:
        raise ValueError(f"{path} holds {len(runs)} tables, not one: a marker includes a "
                         "file written by tables.write_table")
    table = []
    for line in lines[runs[0]:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return table


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def select_rows(table_lines: Sequence[str], where: Sequence[tuple[str, str]],
                source: str | Path = "table") -> list[str]:
    """The header, the separator and the rows whose cells equal every ``(column, value)``
    of ``where``. A column the table lacks, or a condition no row meets, is an error."""
    if not where:
        return list(table_lines)
    header = _cells(table_lines[0])
    for column, _ in where:
        if column not in header:
            raise ValueError(f"{source} has no column {column!r} (its columns: "
                             f"{', '.join(header)})")
    rows = [line for line in table_lines[2:]
            if all(_cells(line)[header.index(column)] == value for column, value in where)]
    if not rows:
        terms = " ".join(f"{column}={value}" for column, value in where)
        raise ValueError(f"no row of {source} meets 'where {terms}'")
    return [*table_lines[:2], *rows]


def select_columns(table_lines: Sequence[str], columns: Sequence[str],
                   source: str | Path = "table") -> list[str]:
    """The table with only ``columns``, in that order (every column when none is given). A
    column the table lacks is an error naming the ones it has."""
    if not columns:
        return list(table_lines)
    header = _cells(table_lines[0])
    missing = [column for column in columns if column not in header]
    if missing:
        raise ValueError(f"{source} has no column(s) {', '.join(map(repr, missing))} (its "
                         f"columns: {', '.join(header)})")
    keep = [header.index(column) for column in columns]
    kept = [[_cells(line)[k] for k in keep] for line in table_lines]
    return ["| " + " | ".join(cells) + " |" if row != 1 else "|" + "|".join(cells) + "|"
            for row, cells in enumerate(kept)]  # row 1: the separator, as write_table's


def block_text(table_lines: Sequence[str], indent: str = "") -> list[str]:
    """The lines between the markers: the table (each line indented by ``indent``) with a
    blank line on each side, so that every Markdown renderer sees a table apart from the
    comments."""
    return ["", *(indent + line for line in table_lines), ""]


def _marked(report: Path, root: Path | None) -> tuple[list[str], Path, list[Block]]:
    lines = report.read_text().splitlines()
    return lines, root if root is not None else repo_root(report), blocks(lines, report)


def _expected(root: Path, block: Block) -> list[str] | str:
    """The block's lines as they should be, or why they cannot be known."""
    path = root / block.table
    if not path.is_file():
        return f"{path} does not exist (regenerate it, or correct the marker's path)"
    rows = select_rows(generated_table(path), block.where, path)
    return block_text(select_columns(rows, block.columns, path), block.indent)


def stale(report: str | Path, root: str | Path | None = None) -> list[Difference]:
    """The marked blocks of ``report`` that differ from their generated tables, each with
    the first line that differs; empty when the report is up to date. ``root`` is where
    the markers' paths start (default: the repository holding the report)."""
    report = Path(report)
    lines, base, found = _marked(report, Path(root) if root is not None else None)
    differences = []
    for block in found:
        expected = _expected(base, block)
        if isinstance(expected, str):
            differences.append(Difference(report, block.table, block.start + 1, expected))
            continue
        current = lines[block.start + 1:block.end]
        if current != expected:
            differences.append(Difference(report, block.table, block.start + 1,
                                          _first_difference(current, expected, block.start)))
    return differences


def _first_difference(current: Sequence[str], expected: Sequence[str], start: int) -> str:
    for row, (have, want) in enumerate(zip(current, expected, strict=False)):
        if have != want:
            return f"line {start + 2 + row} is {have!r}, the generated file has {want!r}"
    return (f"the block has {len(current)} lines, the generated table {len(expected)} "
            "(with a blank line on each side)")


def fill(report: str | Path, root: str | Path | None = None) -> list[str]:
    """Rewrite every marked block of ``report`` from its generated table; returns the
    tables that changed (the file is written only if one did). A missing generated file
    is an error, and leaves the report untouched."""
    report = Path(report)
    lines, base, found = _marked(report, Path(root) if root is not None else None)
    changed = []
    for block in reversed(found):  # from the end, so earlier blocks' line numbers hold
        expected = _expected(base, block)
        if isinstance(expected, str):
            raise FileNotFoundError(f"{report}:{block.start + 1}: {expected}")
        if lines[block.start + 1:block.end] != expected:
            lines[block.start + 1:block.end] = expected
            changed.append(block.table)
    if changed:
        report.write_text("\n".join(lines) + "\n")
    return changed[::-1]


def reports(root: str | Path) -> Iterator[Path]:
    """Every Markdown report under ``root/docs`` (the generated tables excepted)."""
    docs = Path(root) / "docs"
    tables = (Path(root) / TABLES).resolve()
    for path in sorted(docs.rglob("*.md")):
        if tables not in path.resolve().parents:
            yield path


__all__ = ["END", "START", "TABLES", "Block", "Difference", "block_text", "blocks", "fill",
           "generated_table", "repo_root", "reports", "select_columns", "select_rows", "stale"]
