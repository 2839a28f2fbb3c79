"""The checks of the built site that ``mkdocs build --strict`` misses (issue 38, items 12-14):
``scripts.tools.site_check`` finds each problem in a small site made by hand and passes a
clean one; the build's hook drops the Sphinx roles it would find; ``mkdocs.yml`` renders
NumPy docstrings and carries the offline search."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_docs_site import load_hook

from scripts.tools.site_check import (
    continued_rows,
    html_problems,
    main,
    remote_loads,
    source_problems,
)

ROOT = Path(__file__).resolve().parents[1]
CLEAN_PAGE = ("<html><p>See <code>Settings</code>.</p><pre><code>:func:`shown on purpose`"
              "</code></pre><table><tr><td>a</td><td>b</td></tr>"
              "<tr><td>c</td><td></td></tr></table></html>")
WRAP_CSS = ".md-typeset pre > code {\n  white-space: pre-wrap;\n}\n"


def make_site(root: Path, page: str = CLEAN_PAGE, css: str = WRAP_CSS,
              search_js: bool = True) -> Path:
    (root / "search").mkdir(parents=True)
    (root / "stylesheets").mkdir()
    (root / "index.html").write_text(page)
    (root / "stylesheets" / "code.css").write_text(css)
    (root / "search" / "search_index.json").write_text('{"docs": []}')
    if search_js:
        (root / "search" / "search_index.js").write_text("var __index = {}")
    return root


def test_a_clean_site_passes(tmp_path: Path) -> None:
    assert list(html_problems(make_site(tmp_path / "site"))) == []


@pytest.mark.parametrize(("page", "found"), [
    ("<p>Built from :class:<code>Settings</code>.</p>", "literal Sphinx role"),
    ('<h5 id="agents.experiments.run_grid--parameters">Parameters</h5><p>The cells.</p>',
     "rendered as a heading"),
    ("<p>grid : Grid\n    The cells to run.\noutput : path\n    Results.</p>",
     "run-on parameter list"),
    ("<table><tr><td>fpr</td><td>on T: false positive</td></tr>"
     "<tr><td></td><td>rates among the accepted</td></tr></table>", "continuing the row above"),
])
def test_each_rendering_problem_is_found(tmp_path: Path, page: str, found: str) -> None:
    problems = list(html_problems(make_site(tmp_path / "site", page)))
    assert len(problems) == 1 and found in problems[0], problems


def test_unwrapped_code_and_server_only_search_are_found(tmp_path: Path) -> None:
    problems = list(html_problems(make_site(tmp_path / "site", css="a {}", search_js=False)))
    assert len(problems) == 2
    assert "search needs a server" in problems[0] and "cut off" in problems[1]


@pytest.mark.parametrize("page", [
    '<script src="https://unpkg.com/iframe-worker/shim"></script>',
    '<link rel="stylesheet" href="//cdn.example.org/theme.css">',
    "<link rel=preload as=font href=http://fonts.example.org/a.woff2>",
])
def test_a_page_loading_from_the_internet_is_found(tmp_path: Path, page: str) -> None:
    """What Material's offline plugin added to every page (its web-worker shim from
    unpkg.com): a site opened from disk with no internet loses what it loads."""
    problems = list(html_problems(make_site(tmp_path / "site", page)))
    assert len(problems) == 1 and "1 page(s) load" in problems[0], problems
    assert "from the internet" in problems[0]


def test_a_stylesheet_loading_a_font_from_the_internet_is_found(tmp_path: Path) -> None:
    css = WRAP_CSS + '@import "https://fonts.example.org/css";\n' \
        '@font-face { src: url(https://fonts.example.org/a.woff2); }\n'
    problems = list(html_problems(make_site(tmp_path / "site", css=css)))
    assert len(problems) == 2 and all("code.css: loads https://fonts" in p for p in problems)


def test_local_loads_and_navigation_links_are_no_internet_loads() -> None:
    page = ('<script src="assets/javascripts/bundle.min.js"></script>'
            '<script src="javascripts/iframe-worker.js"></script>'
            '<link rel="stylesheet" href="../stylesheets/code.css">'
            '<link rel="next" href="https://example.org/next.html">'
            '<a href="https://example.org">a link to read</a>')
    assert remote_loads(page) == []


def test_a_table_without_rows_is_no_split_sentence() -> None:
    assert continued_rows("<table><tr><td></td><td></td></tr></table>") == []


def test_a_nested_list_indented_by_two_is_found(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("- top\n  - nested, renders flat\n    - deeper\n"
                                      "- next\n    - nested by four: fine\n\n```text\n"
                                      "- a\n  - code is not a list\n```\n")
    assert [p.split(": ")[0] for p in source_problems(tmp_path)] == [f"{tmp_path}/page.md:2"]


def test_main_exits_1_on_a_problem(tmp_path: Path, capsys) -> None:
    site = make_site(tmp_path / "site")
    assert main([str(site)]) == 0
    (site / "index.html").write_text("<p>:func:<code>x</code></p>")
    assert main([str(site)]) == 1
    assert "index.html: 1 literal Sphinx role" in capsys.readouterr().out


def test_the_hook_drops_roles_before_code_and_leaves_code_alone() -> None:
    hook = load_hook()
    html = ("<p>:class:<code>Settings</code> and :py:func:<code>run_grid</code></p>"
            "<pre><code>x = ':data:'</code></pre>")
    assert hook.on_page_content(html) == ("<p><code>Settings</code> and <code>run_grid</code>"
                                          "</p><pre><code>x = ':data:'</code></pre>")


def test_the_site_config_renders_numpy_docstrings_and_searches_offline() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]
    assert "offline" in plugins
    mkdocstrings = next(p for p in config["plugins"] if isinstance(p, dict)
                        and "mkdocstrings" in p)["mkdocstrings"]
    assert mkdocstrings["handlers"]["python"]["options"]["docstring_style"] == "numpy"
    assert "stylesheets/code.css" in config["extra_css"]
    assert "white-space: pre-wrap" in (ROOT / "docs" / "stylesheets" / "code.css").read_text()
    # the offline plugin's web-worker stand-in ships with the site, not from unpkg.com
    (shim,) = config["extra"]["polyfills"]
    assert "iframe-worker" in shim and (ROOT / "docs" / shim).is_file()


def test_the_sources_have_no_flat_nested_lists() -> None:
    assert list(source_problems(ROOT / "docs")) == []
