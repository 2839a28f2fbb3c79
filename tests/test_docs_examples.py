"""Every fenced Python block of the README and the documentation site runs.

Blocks run page by page, in order, in one namespace per page (a later block may use what
an earlier one made, as a reader would), in a fresh working folder, so what they write
(``results/...``) stays out of the repository. A failing block's traceback names the page
and the line in it: each block is compiled under the page's path, at its own line numbers.

Info strings and markers, one line above the fence (blank lines between are allowed):

- a ```` ```python ```` block runs;
- ``<!-- no-run -->`` marks a block meant only to be read (a placeholder path, a store
  built elsewhere): it is counted, never run;
- ``<!-- slow -->`` marks a block that takes more than a couple of seconds: the page's test
  is then marked ``slow`` (``make test-fast`` skips it).

Other languages (``bash``, ``text``) are not run; ``py``/``pycon``/``python3`` fences are
refused, so that no Python block is left out by its spelling.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
MARKER = re.compile(r"^\s*<!--\s*(no-run|slow)\s*-->\s*$")
PYTHON = "python"
OTHER_PYTHON_SPELLINGS = {"py", "pycon", "python3", "ipython"}


@dataclass(frozen=True)
class Block:
    page: str       # relative to the repository
    line: int       # the first code line's number in the page (1-based)
    code: str
    marker: str | None  # "no-run", "slow" or None


def pages() -> list[Path]:
    """The README and every page of the site (generated tables aside: they hold no code)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md")
                  if "tables" not in p.relative_to(ROOT / "docs").parts)
    return [ROOT / "README.md", *docs]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` whose language is Python, with their markers."""
    lines = path.read_text().splitlines()
    page = str(path.relative_to(ROOT))
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.group(1), match.group(2), match.group(3).lower()
        end = next((k for k in range(i + 1, len(lines))
                    if lines[k].strip().startswith(fence[0] * len(fence))
                    and not lines[k].strip().strip(fence[0])), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a fence that is never closed")
        if language in OTHER_PYTHON_SPELLINGS:
            raise ValueError(f"{page}:{i + 1}: write ```python (not ```{language}) so the "
                             "block is run, or mark it <!-- no-run -->")
        if language == PYTHON:
            above = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = MARKER.match(above)
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip()
                    for line in lines[i + 1:end]]
            found.append(Block(page, i + 2, "\n".join(body) + "\n",
                               marker.group(1) if marker else None))
        i = end + 1
    return found


def page_params() -> list[object]:
    params = []
    for path in pages():
        runnable = [b for b in blocks(path) if b.marker != "no-run"]
        if not runnable:
            continue
        marks = [pytest.mark.slow] if any(b.marker == "slow" for b in runnable) else []
        params.append(pytest.param(path, marks=marks, id=str(path.relative_to(ROOT))))
    return params


def run_page(path: Path) -> int:
    """Run the page's blocks in order in one namespace; the number run. A failure raises
    ``AssertionError`` naming ``page:line`` with the block's traceback."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    runnable = [b for b in blocks(path) if b.marker != "no-run"]
    for block in runnable:
        # Padded to its own line numbers, so a traceback points into the page itself.
        source = "\n" * (block.line - 1) + block.code
        try:
            exec(compile(source, block.page, "exec"), namespace)  # noqa: S102
        except Exception as err:
            raise AssertionError(f"{block.page}:{block.line}: the block starting here "
                                 f"failed:\n{traceback.format_exc()}") from err
    return len(runnable)


@pytest.mark.parametrize("path", page_params())
def test_page_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert run_page(path) > 0


def test_blocks_are_found_counted_and_marked(capsys: pytest.CaptureFixture[str]) -> None:
    """The runner sees the README's blocks and every page's; blocks not run are counted
    by page, each with its explicit marker."""
    every = [b for path in pages() for b in blocks(path)]
    readme = [b for b in every if b.page == "README.md"]
    assert len(readme) >= 2 and all(b.marker is None for b in readme)
    not_run = [b for b in every if b.marker == "no-run"]
    with capsys.disabled():
        print(f"\ndocs examples: {len(every) - len(not_run)} Python blocks run, "
              f"{len(not_run)} marked no-run: "
              + (", ".join(f"{b.page}:{b.line}" for b in not_run) or "none"))
    assert len(every) - len(not_run) >= 10


def test_runner_names_page_and_line_and_honours_markers(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nx = 1\n```\n\n<!-- no-run -->\n```python\n"
                    "open('nowhere/at/all')\n```\n\n<!-- slow -->\n\n```python\n"
                    "y = x + 1\n```\n\n- a list:\n\n  ```python\n  assert y == 3, y\n  ```\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    found = blocks(page)
    assert [(b.line, b.marker) for b in found] == [(4, None), (9, "no-run"), (15, "slow"),
                                                   (21, None)]
    with pytest.raises(AssertionError, match=r"page\.md:21: the block") as caught:
        run_page(page)
    assert 'File "page.md", line 21' in str(caught.value)  # the traceback points at the page
    page.write_text("```py\nx = 1\n```\n")
    with pytest.raises(ValueError, match="page.md:1: write ```python"):
        blocks(page)
