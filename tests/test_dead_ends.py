"""A newcomer's dead ends at the command line and in Python: a closed pipe, a misspelled
option, names that tab completion cannot see.

Each test runs what a new user typed and checks what they get back: a quiet end, one short
error with a suggestion, the lazily exported names listed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agents.experiments.cli import COMMANDS
from agents.experiments.cli import main as cli
from agents.experiments.cli.parsing import suggestion
from agents.reports.tables import setting_label
from ballad_env.__main__ import BROKEN_PIPE_STATUS
from scripts.tools.cli_reference import job_parser

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- closed pipe
@pytest.mark.parametrize(("args", "status"), [
    (["--help"], BROKEN_PIPE_STATUS), (["--version"], BROKEN_PIPE_STATUS),
    pytest.param(["data"], BROKEN_PIPE_STATUS, marks=pytest.mark.slow),
    # argparse drops its own write errors, and exits with 0
    pytest.param(["compare", "--help"], 0, marks=pytest.mark.slow)])
def test_a_closed_pipe_ends_quietly(args: list[str], status: int) -> None:
    """``ballad-env data | head -2`` printed a ``BrokenPipeError`` traceback. The reader here
    is gone before the command writes anything, so every write meets a closed pipe."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "ballad_env", *args], stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    finally:
        os.close(writer)
    assert done.stderr == "", done.stderr
    assert done.returncode == status


# ------------------------------------------------------------------------ misspelled option
def _misspelled(option: str) -> str:
    """``option`` with two letters of its middle swapped (``--datasets`` -> ``--datsaets``):
    neither an option nor the start of one."""
    middle = len(option) // 2 + 1
    return option[:middle - 1] + option[middle] + option[middle - 1] + option[middle + 1:]


@pytest.mark.parametrize("job", list(COMMANDS))
def test_a_misspelled_option_is_two_lines_naming_the_close_one(
        job: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelled option printed the whole usage (46 lines for ``compare``) before the
    error; now the short usage line, then the error with the option meant."""
    option = max((name for action in job_parser(job)._actions
                  for name in action.option_strings), key=len)
    with pytest.raises(SystemExit) as done:
        cli([job, _misspelled(option)])
    lines = capsys.readouterr().err.splitlines()
    assert done.value.code == 2
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"usage: ballad-env {job} ") and "[options]" in lines[0]
    assert lines[1].startswith(f"ballad-env {job}: error: ")
    assert f"did you mean {option}, not {_misspelled(option)}?" in lines[1]


@pytest.mark.parametrize(("words", "hint"), [
    (["--datasets", "toy", "--seds", "3"], "did you mean --seeds, not --seds?"),
    (["--n-jobs", "-1", "--agnts=x"], "did you mean --agents, not --agnts?"),
    (["--n-jobs", "-1"], None),  # a negative number is a value
    (["--see", "3"], None),  # the start of one option: argparse takes it
    (["--zzzzzz"], None)])  # nothing close: no guess
def test_the_suggestion_names_only_a_close_option(words: list[str], hint: str | None) -> None:
    assert suggestion(words, ["-h", "--help", "--datasets", "--seeds", "--agents",
                              "--n-jobs"]) == hint


# -------------------------------------------------------------------------- tab completion
def test_dir_lists_the_lazily_exported_names() -> None:
    """``dir(agents)`` lacked ``BalladAgent`` and ``dir(ballad_env)`` ``Settings`` until first
    used, so tab completion showed almost nothing. A fresh interpreter, as a user's is."""
    code = ("import json, agents, agents.experiments, ballad_env\n"
            "print(json.dumps({m.__name__: [sorted(m._SOURCES), sorted(m.__all__), dir(m)] "
            "for m in (agents, agents.experiments, ballad_env)}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=True)
    for package, (lazy, public, listed) in json.loads(done.stdout).items():
        assert set(lazy) <= set(listed), (package, sorted(set(lazy) - set(listed)))
        assert set(public) <= set(listed), (package, sorted(set(public) - set(listed)))
        assert listed == sorted(listed)
    assert "BalladAgent" in json.loads(done.stdout)["agents"][2]
    assert {"Settings", "ENV_ID", "__version__"} <= set(json.loads(done.stdout)["ballad_env"][2])


# ---------------------------------------------------------------------------- install advice
#: Advice that fails: the package is not on PyPI, so pip cannot find ``ballad-env[extra]``.
_FROM_THE_INDEX = re.compile(r"""pip install ['"]?ballad-env\[""")


def _shipped_text() -> dict[str, str]:
    """The README, every docs page and every module of the project, by path."""
    paths = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"),
             *(path for package in ("ballad_env", "agents", "scripts")
               for path in (ROOT / package).rglob("*.py"))]
    return {str(path.relative_to(ROOT)): path.read_text() for path in paths}


def test_no_page_or_message_installs_from_the_index() -> None:
    """``pip install 'ballad-env[torch]'`` was offered by three pages and three messages;
    pip finds no such package. Each now says ``pip install -e '.[extra]'`` in the clone."""
    wrong = sorted(path for path, text in _shipped_text().items()
                   if _FROM_THE_INDEX.search(" ".join(text.split())))
    assert not wrong, f"install from the clone instead (pip install -e '.[extra]'): {wrong}"


def test_a_page_that_builds_a_wheel_says_build_needs_installing() -> None:
    """``python -m build`` fails with "No module named build" until ``pip install build``."""
    pages = {path: text for path, text in _shipped_text().items()
             if path.endswith(".md") and "python -m build" in text}
    assert pages
    for path, text in pages.items():
        assert "pip install build" in text, path


# ---------------------------------------------------------------------------- setting labels
@pytest.mark.parametrize(("name", "label"), [
    ("iforest", "SSDO, IForest prior"), ("knn_cfn10", "SSDO, kNN prior, cfn10"),
    ("iforest_det-ssif", "iforest_det-ssif"), ("sadal", "sadal"), ("cfn10", "cfn10")])
def test_a_settings_label_names_ssdo_and_its_prior(name: str, label: str) -> None:
    """``iforest`` alone read as the detector where the text says SSDO on an IForest prior;
    another detector, a preset or a study's own name stays as stored."""
    assert setting_label(name) == label


def test_figures_title_a_setting_by_its_label(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison's figure titles each panel with the label; the results keep the key."""
    import pandas as pd

    from agents.reports import plots

    titles: list[str] = []

    def keep_titles(fig, path, **_):  # noqa: ANN001, ANN202 - save_figure's stand-in
        titles.extend(ax.get_title() for ax in fig.axes)
        return Path(path)

    monkeypatch.setattr(plots, "save_figure", keep_titles)
    rows = [{"dataset": "toy", "seed": seed, "agent": "ballad", "setting": "iforest",
             "round": r, "spent_fraction": 0.02 * r, "test_cost": 0.1 / r}
            for seed in (0, 1) for r in (1, 2, 3)]
    table = pd.DataFrame(rows)
    plots.cost_by_round_with_errors(table, tmp_path / "f.png")
    assert "SSDO, IForest prior" in titles and set(table.setting) == {"iforest"}


# --------------------------------------------------------------------------- search snippets
def test_the_search_index_reads_a_table_row_by_row() -> None:
    """The search index read a table's cells as one run of words ("setting datasets
    friedman ... iforest 5 5.2000"). The docs hook leaves the table out of the index and
    gives it a hidden list instead, one item a row, each cell after its column's name."""
    from test_docs_site import load_hook

    table = ('<table>\n<thead>\n<tr>\n<th>setting</th>\n<th style="text-align: right;">'
             'datasets</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td><code>iforest</code></td>\n'
             '<td style="text-align: right;">5</td>\n</tr>\n<tr>\n<td>knn</td>\n<td>7</td>\n'
             '</tr>\n</tbody>\n</table>')
    html = load_hook().on_page_content(f"<p>Before.</p>\n{table}\n<p>After.</p>")
    shown, hidden = html.split("<ul hidden>")
    assert "<table data-search-exclude>" in shown and "<td>knn</td>" in shown
    assert hidden.startswith("<li>setting: <code>iforest</code>; datasets: 5</li>"
                             "<li>setting: knn; datasets: 7</li></ul>")
    assert html.startswith("<p>Before.</p>") and html.endswith("<p>After.</p>")
