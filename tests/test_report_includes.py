"""The README and the landing page show one text of the findings (``docs/findings.md``),
copied between include markers by ``python -m scripts.tools.reports``
(``scripts.tools.reports.included``): written twice, the two had drifted apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.tools.reports.generated import reports
from scripts.tools.reports.included import (
    copies,
    fill_includes,
    repointed,
    source_text,
    stale_includes,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "docs/findings.md"


def test_the_readme_and_the_landing_page_copy_the_findings_as_written() -> None:
    pages = [ROOT / "README.md", *reports(ROOT)]
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        assert [c[0] for c in copies(page.read_text().splitlines(), page)] == [SOURCE], page
    differences = [str(d) for page in pages for d in stale_includes(page, ROOT)]
    assert not differences, "\n".join(differences)
    readme, index = ((ROOT / p).read_text() for p in ("README.md", "docs/index.md"))
    assert "](docs/studies/CLAIMS.md)" in readme and "](studies/CLAIMS.md)" in index


@pytest.mark.parametrize(("page_folder", "expected"), [
    ("", "[a](docs/studies/X.md#part) ![f](docs/figures/f.png)"),
    ("docs", "[a](studies/X.md#part) ![f](figures/f.png)"),
    ("docs/studies", "[a](X.md#part) ![f](../figures/f.png)")])
def test_links_are_repointed_from_the_pages_folder(page_folder: str, expected: str) -> None:
    text = "[a](studies/X.md#part) ![f](figures/f.png)"
    assert repointed(text, "docs", page_folder) == expected
    kept = "[w](https://example.org/a.md) [h](#here) [r](/root.md)"
    assert repointed(kept, "docs", page_folder) == kept


def test_a_changed_source_is_stale_until_filled(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "docs").mkdir()
    source = tmp_path / "docs" / "shared.md"
    source.write_text("<!-- what this is,\non two lines -->\n\n- one, see [x](x.md)\n")
    page = tmp_path / "README.md"
    page.write_text("# t\n\n<!-- include: docs/shared.md -->\n<!-- /include -->\n\nend\n")
    assert len(stale_includes(page)) == 1
    assert fill_includes(page) == ["docs/shared.md"]
    assert stale_includes(page) == [] and fill_includes(page) == []
    assert page.read_text() == ("# t\n\n<!-- include: docs/shared.md -->\n\n- one, see "
                                "[x](docs/x.md)\n\n<!-- /include -->\n\nend\n")
    source.write_text(source.read_text() + "- two\n")
    assert len(stale_includes(page)) == 1
    assert source_text(source) == ["- one, see [x](x.md)", "- two"]


def test_unbalanced_markers_name_the_line(tmp_path: Path) -> None:
    lines = ["<!-- include: docs/a.md -->", "text"]
    with pytest.raises(ValueError, match="never closed"):
        copies(lines, "page.md")
    with pytest.raises(ValueError, match="page.md:1: unbalanced"):
        copies(["<!-- /include -->"], "page.md")
