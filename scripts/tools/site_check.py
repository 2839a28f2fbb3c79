"""Checks of the built documentation site that ``mkdocs build --strict`` does not make: what
a reader sees rendered wrong though every link resolves.

- a literal Sphinx role (``:class:``, ``:func:``, ...) in a page or in the search index;
- a NumPy docstring section (``Parameters``, ``Returns``, ...) rendered as a heading over a
  run-on paragraph instead of a table (the docstring style set wrong);
- a table row whose first cell is empty: one sentence split over several rows;
- code blocks that hide what is wider than the column (the site's stylesheet must wrap
  them);
- search that needs a server: the site must carry its search index as a script, so
  ``site/index.html`` opened from disk searches too;
- a script, stylesheet or font loaded from the internet (a page's ``<script src>`` or
  ``<link href>``, a stylesheet's ``url(...)`` or ``@import``): the site must work offline,
  opened from disk;
- in the Markdown sources, a nested list item indented by fewer than four spaces, which
  Python-Markdown renders flat.

``python -m scripts.tools.site_check site docs`` prints one line per problem and exits 1 if
there is any; ``make docs`` runs it after the build.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|mod|attr|exc|obj|const):")
#: a docstring section that became a heading (mkdocstrings renders NumPy sections as tables)
SECTION_HEADING = re.compile(r'id="[^"]*--(parameters|returns|raises|yields|attributes|'
                             r'other-parameters|warns|receives)"')
#: a paragraph holding a NumPy parameter list: "name : type" then an indented description
RUN_ON = re.compile(r"<p>[^<]*?\b\w+ : [^\n<]+\n {4}\S")
ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
PRE = re.compile(r"<pre\b.*?</pre>", re.S)
WRAPS = re.compile(r"pre\s*>\s*code\s*\{[^}]*white-space:\s*pre-wrap", re.S)
#: a page's script or linked stylesheet, font or icon (its address in group 1)
PAGE_LOAD = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)=[\"']?([^\"'\s>]+)", re.I)
#: what a stylesheet loads: url(...) and @import "..."
CSS_LOAD = re.compile(r"""(?:url\(\s*|@import\s+)[\"']?([^\"')\s;]+)""", re.I)
#: an address on another machine: a scheme with a host, or protocol-relative
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)
#: <link rel=...> values that load nothing (navigation)
NAVIGATION = re.compile(r"""\brel=[\"']?(?:next|prev|canonical|alternate)\b""", re.I)
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+\.)\s")


def continued_rows(html: str) -> list[str]:
    """The table rows whose first cell is empty and another is not: the rest of the row
    above, a sentence split over rows (a table with no rows at all is not one)."""
    rows = [CELL.findall(row) for row in ROW.findall(html)]
    return [" ".join(cells) for cells in rows
            if cells and not cells[0].strip() and any(c.strip() for c in cells[1:])]


def remote_loads(html: str) -> list[str]:
    """The addresses on other machines a page loads a script, stylesheet, font or icon from
    (links that only navigate, such as rel="next", load nothing)."""
    tags = re.findall(r"<(?:script|link)\b[^>]*>", html, re.I)
    return [url for tag in tags if not NAVIGATION.search(tag)
            for url in PAGE_LOAD.findall(tag) if REMOTE.match(url)]


def internet_problems(site: Path) -> Iterator[str]:
    """One line per address on the internet that the site's pages or stylesheets load."""
    pages: dict[str, int] = {}
    for page in sorted(site.rglob("*.html")):
        for url in set(remote_loads(page.read_text(errors="replace"))):
            pages[url] = pages.get(url, 0) + 1
    for url, count in sorted(pages.items()):
        yield (f"{count} page(s) load {url} from the internet: ship it with the site, which "
               "must work offline")
    for sheet in sorted(site.rglob("*.css")):
        for url in sorted(set(CSS_LOAD.findall(sheet.read_text(errors="replace")))):
            if REMOTE.match(url):
                yield (f"{sheet.relative_to(site)}: loads {url} from the internet: ship it "
                       "with the site, which must work offline")


def html_problems(site: Path) -> Iterator[str]:
    """One line per problem in the site's pages, their search index and stylesheets."""
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site)
        html = page.read_text(errors="replace")
        text = PRE.sub("", html)  # code may show a role on purpose
        for found, what in ((ROLE.findall(text), "literal Sphinx role(s)"),
                            (SECTION_HEADING.findall(text), "docstring section(s) rendered as "
                             "a heading and a run-on paragraph (docstring_style)"),
                            (RUN_ON.findall(text), "run-on parameter list(s)"),
                            (continued_rows(text), "table row(s) continuing the row above "
                             "(an empty first cell)")):
            if found:
                yield f"{name}: {len(found)} {what}"
    index = [p for p in (site / "search").glob("search_index.*")] if (site / "search").is_dir() \
        else []
    for path in index:
        roles = ROLE.findall(path.read_text(errors="replace"))
        if roles:
            yield f"{path.relative_to(site)}: {len(roles)} literal Sphinx role(s)"
    if not any(path.suffix == ".js" for path in index):
        yield ("search/: no search_index.js, so search needs a server: add the offline "
               "plugin (mkdocs.yml) or tell readers to serve the site")
    css = " ".join(path.read_text(errors="replace") for path in site.rglob("*.css")
                   if "assets" not in path.relative_to(site).parts)
    if not WRAPS.search(css):
        yield ("no stylesheet wraps code blocks (pre > code { white-space: pre-wrap }): "
               "lines wider than the column are cut off")
    yield from internet_problems(site)


def source_problems(docs: Path) -> Iterator[str]:
    """One line per nested list item indented by 1 to 3 spaces in the Markdown sources."""
    for page in sorted(docs.rglob("*.md")):
        in_code, in_list = False, False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if FENCE.match(line):
                in_code = not in_code
                continue
            if in_code:
                continue
            item = LIST_ITEM.match(line)
            if item and in_list and 0 < len(item.group(1)) < 4:
                yield (f"{page}:{number}: a nested list item indented by "
                       f"{len(item.group(1))} spaces renders flat: indent it by 4")
            if item:
                in_list = True
            elif line.strip() and not line.startswith(" "):
                in_list = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs build --site-dir)")
    parser.add_argument("docs", type=Path, nargs="?", default=None,
                        help="the Markdown sources (docs/); also checks README.md beside it")
    args = parser.parse_args(argv)
    problems = list(html_problems(args.site))
    if args.docs is not None:
        problems += source_problems(args.docs)
        readme = args.docs.parent / "README.md"
        if readme.is_file():
            problems += source_problems_of([readme])
    for problem in problems:
        print(problem)
    print(f"site check: {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


def source_problems_of(pages: list[Path]) -> list[str]:
    """:func:`source_problems` for single files."""
    found: list[str] = []
    for page in pages:
        found += [p for p in source_problems(page.parent) if p.startswith(f"{page}:")]
    return found


if __name__ == "__main__":
    sys.exit(main())
