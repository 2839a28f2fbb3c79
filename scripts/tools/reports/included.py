"""Prose shared by several pages, written once and copied into each between markers.

The README and the site's landing page state the same findings; written twice, they drifted
apart. The shared text lives in one file (``docs/findings.md``) and every page that shows it
marks where it goes::

    <!-- include: docs/findings.md -->
    ...the file's text, written here by ``python -m scripts.tools.reports``...
    <!-- /include -->

The marker names the source from the repository root. The source's relative links point
from its own folder; each copy re-points them from the page's folder (``studies/X.md`` in
``docs/findings.md`` is ``docs/studies/X.md`` in the README), so the copies differ in their
links only. A comment that opens the source (what it is, where it goes) stays out of the
copies. :func:`stale_includes` lists the copies that differ from their source; the test
suite runs it over the README and every docs page.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from pathlib import Path

from scripts.tools.reports.generated import Difference, repo_root

START = re.compile(r"^<!-- include: (?P<source>\S+) -->$")
"""The line that opens a copy: the source's path from the repository root."""
END = "<!-- /include -->"
"""The line that closes a copy."""
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
"""A Markdown link's or image's target: ``](target)``."""
_ABSOLUTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|/|#)", re.I)
"""Targets left as they are: a URL, a path from the site's root, an anchor on the page."""


def copies(lines: Sequence[str], page: str | Path = "page") -> list[tuple[str, int, int]]:
    """``(source, start, end)`` of each marked copy of ``lines`` (0-based lines of the two
    markers). A copy left open, or a closing marker without an opening one, is an error."""
    found = []
    open_at: int | None = None
    source = ""
    for number, line in enumerate(lines):
        match = START.match(line.rstrip())
        if match and open_at is None:
            open_at, source = number, match["source"]
        elif match or (line.strip() == END and open_at is None):
            raise ValueError(f"{page}:{number + 1}: unbalanced include markers: each "
                             f"'<!-- include: FILE -->' needs its own '{END}'")
        elif line.strip() == END and open_at is not None:
            found.append((source, open_at, number))
            open_at = None
    if open_at is not None:
        raise ValueError(f"{page}:{open_at + 1}: the copy of {source} is never closed: add "
                         f"'{END}' after it")
    return found


def repointed(text: str, source_folder: str, page_folder: str) -> str:
    """``text`` with each relative link target re-pointed from ``source_folder`` to
    ``page_folder`` (both relative to the repository root)."""
    def move(match: re.Match[str]) -> str:
        target = match[2]
        if _ABSOLUTE.match(target):
            return match[0]
        path, hash_, anchor = target.partition("#")
        moved = posixpath.relpath(posixpath.normpath(posixpath.join(source_folder, path)),
                                  page_folder or ".")
        return f"{match[1]}{moved}{hash_}{anchor}{match[3]}"

    return _LINK.sub(move, text)


def source_text(source: Path) -> list[str]:
    """The source's lines, less a comment that opens it and the blank lines around it."""
    lines = source.read_text().splitlines()
    if lines and lines[0].startswith("<!--"):
        closing = next((i for i, line in enumerate(lines) if line.rstrip().endswith("-->")),
                       len(lines) - 1)
        lines = lines[closing + 1:]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def expected_copy(root: Path, source: str, page: Path) -> list[str]:
    """The lines between a page's markers: the source re-pointed for the page's folder,
    with a blank line on each side."""
    path = root / source
    if not path.is_file():
        raise FileNotFoundError(f"{page}: the include marker names {source}, which does not "
                                "exist (correct the marker's path)")
    page_folder = page.resolve().parent.relative_to(root.resolve()).as_posix()
    text = "\n".join(source_text(path))
    return ["", *repointed(text, posixpath.dirname(source), page_folder).splitlines(), ""]


def stale_includes(page: str | Path, root: str | Path | None = None) -> list[Difference]:
    """The marked copies of ``page`` that differ from their source; empty when current."""
    page = Path(page)
    base = Path(root) if root is not None else repo_root(page)
    lines = page.read_text().splitlines()
    differences = []
    for source, start, end in copies(lines, page):
        if lines[start + 1:end] != expected_copy(base, source, page):
            differences.append(Difference(page, source, start + 1, "differs from its source: "
                                          "run python -m scripts.tools.reports"))
    return differences


def fill_includes(page: str | Path, root: str | Path | None = None) -> list[str]:
    """Rewrite every marked copy of ``page`` from its source; returns the sources whose
    copies changed (the page is written only if one did)."""
    page = Path(page)
    base = Path(root) if root is not None else repo_root(page)
    lines = page.read_text().splitlines()
    changed = []
    for source, start, end in reversed(copies(lines, page)):  # from the end: lines hold
        expected = expected_copy(base, source, page)
        if lines[start + 1:end] != expected:
            lines[start + 1:end] = expected
            changed.append(source)
    if changed:
        page.write_text("\n".join(lines) + "\n")
    return changed[::-1]


__all__ = ["END", "START", "copies", "expected_copy", "fill_includes", "repointed",
           "source_text", "stale_includes"]
