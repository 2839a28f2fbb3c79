"""The reports include their generated tables through markers, and no report's table may
differ from its file in docs/tables (scripts.tools.reports.generated)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from agents.reports.tables import write_table
from scripts.tools.reports.__main__ import main
from scripts.tools.reports.generated import (
    blocks,
    fill,
    generated_table,
    reports,
    stale,
)

REPO = Path(__file__).resolve().parents[1]
STUDIES = ["POLICIES.md", "REPRODUCTION.md", "ALLOCATORS.md", "LATTICE.md"]


def test_every_report_matches_its_generated_tables():
    found = list(reports(REPO))
    assert REPO / "docs" / "REPLAY.md" in found
    assert {p.name for p in found} >= set(STUDIES)
    marked = sum(len(blocks(p.read_text().splitlines(), p)) for p in found)
    assert marked > 0, "no report includes a generated table: the check would check nothing"
    differences = [str(d) for p in found for d in stale(p, REPO)]
    assert not differences, ("reports whose tables differ from docs/tables (run "
                             "python -m scripts.tools.reports):\n" + "\n".join(differences))


def test_reports_live_under_docs_and_old_root_names_are_gone():
    for name in [*STUDIES, "REPLAY.md"]:
        assert not (REPO / name).exists(), f"{name} moved under docs/"
    for name in STUDIES:
        assert (REPO / "docs" / "studies" / name).is_file()


@pytest.fixture()
def tiny(tmp_path):
    """A repository with one generated table (written by the real writer) and a report
    that includes it."""
    frame = pd.DataFrame({"agent": ["ballad", "all-in-lr"], "cost": [0.04, 0.03125]})
    write_table(frame.set_index("agent"), tmp_path / "docs" / "tables", "tiny",
                title="A tiny table", note="A note that stays in the generated file.")
    report = tmp_path / "docs" / "studies" / "TINY.md"
    report.parent.mkdir(parents=True)
    report.write_text("# Tiny\n\nProse.\n\n<!-- table: docs/tables/tiny.md -->\n\n"
                      "| agent | cost |\n|---|---|\n| ballad | 0.0400 |\n| all-in-lr | 0.0312 |\n"
                      "\n<!-- /table -->\n\nMore prose.\n")
    return tmp_path, report


def test_generated_table_is_the_table_without_title_or_note(tiny):
    root, _ = tiny
    assert generated_table(root / "docs" / "tables" / "tiny.md") == [
        "| agent | cost |", "|---|---|", "| ballad | 0.0400 |", "| all-in-lr | 0.0312 |"]


def test_stale_is_empty_for_an_up_to_date_report(tiny):
    root, report = tiny
    assert stale(report, root) == []
    assert fill(report, root) == []


def test_a_changed_number_is_caught_and_fill_repairs_it(tiny):
    root, report = tiny
    good = report.read_text()
    report.write_text(good.replace("| all-in-lr | 0.0312 |", "| all-in-lr | 0.0313 |"))
    differences = stale(report, root)
    assert len(differences) == 1
    assert differences[0].table == "docs/tables/tiny.md"
    assert differences[0].line == 5
    assert differences[0].problem == ("line 10 is '| all-in-lr | 0.0313 |', the generated "
                                      "file has '| all-in-lr | 0.0312 |'")
    assert str(report) in str(differences[0])
    assert fill(report, root) == ["docs/tables/tiny.md"]
    assert report.read_text() == good
    assert stale(report, root) == []


def test_a_regenerated_table_makes_the_report_stale(tiny):
    root, report = tiny
    frame = pd.DataFrame({"agent": ["ballad", "all-in-lr", "random"],
                          "cost": [0.04, 0.03125, 0.05]})
    write_table(frame.set_index("agent"), root / "docs" / "tables", "tiny")
    [difference] = stale(report, root)
    assert "line 11 is '', the generated file has '| random | 0.0500 |'" in difference.problem
    fill(report, root)
    text = report.read_text()
    assert "| random | 0.0500 |" in text
    assert text.startswith("# Tiny\n\nProse.\n") and text.endswith("\nMore prose.\n")


def test_an_empty_block_is_filled(tiny):
    root, report = tiny
    report.write_text("<!-- table: docs/tables/tiny.md -->\n<!-- /table -->\n")
    assert len(stale(report, root)) == 1
    fill(report, root)
    assert report.read_text() == ("<!-- table: docs/tables/tiny.md -->\n\n| agent | cost |\n"
                                  "|---|---|\n| ballad | 0.0400 |\n| all-in-lr | 0.0312 |\n"
                                  "\n<!-- /table -->\n")


def test_a_missing_generated_file_is_named(tiny):
    root, report = tiny
    report.write_text("<!-- table: docs/tables/gone.md -->\n<!-- /table -->\n")
    [difference] = stale(report, root)
    assert "gone.md does not exist" in difference.problem
    with pytest.raises(FileNotFoundError, match="gone.md"):
        fill(report, root)
    assert report.read_text() == "<!-- table: docs/tables/gone.md -->\n<!-- /table -->\n"


@pytest.mark.parametrize("text, message", [
    ("<!-- table: docs/tables/tiny.md -->\n| a |\n", "never closed"),
    ("| a |\n<!-- /table -->\n", "without an opening"),
    ("<!-- table: docs/tables/tiny.md -->\n<!-- table: docs/tables/tiny.md -->\n", "inside"),
])
def test_malformed_markers_are_errors(tiny, text, message):
    root, report = tiny
    report.write_text(text)
    with pytest.raises(ValueError, match=message):
        stale(report, root)


def test_a_file_with_no_table_is_refused(tiny):
    root, report = tiny
    (root / "docs" / "tables" / "prose.md").write_text("# Only prose\n")
    report.write_text("<!-- table: docs/tables/prose.md -->\n<!-- /table -->\n")
    with pytest.raises(ValueError, match="0 tables"):
        stale(report, root)


def test_reports_skip_the_generated_tables(tiny):
    root, report = tiny
    assert list(reports(root)) == [report]


def test_main_checks_then_fills(tiny, capsys):
    root, report = tiny
    report.write_text(report.read_text().replace("0.0400", "0.0401"))
    assert main(["--check", "--root", str(root)]) == 1
    assert "TINY.md:5: table docs/tables/tiny.md" in capsys.readouterr().out
    assert main(["--root", str(root)]) == 0
    assert main(["--check", "--root", str(root)]) == 0


def test_where_keeps_the_matching_rows_and_checks_them(tiny):
    root, report = tiny
    frame = pd.DataFrame({"costs": ["default", "default", "cfn10"], "prior": ["knn", "iforest",
                          "knn"], "cost": [0.0371, 0.0309, 0.1542]})
    write_table(frame, root / "docs" / "tables", "costs", index=False)
    report.write_text("<!-- table: docs/tables/costs.md where costs=default prior=knn -->\n"
                      "<!-- /table -->\n")
    [block] = blocks(report.read_text().splitlines(), report)
    assert block.where == (("costs", "default"), ("prior", "knn"))
    fill(report, root)
    assert report.read_text() == ("<!-- table: docs/tables/costs.md where costs=default "
                                  "prior=knn -->\n\n| costs | prior | cost |\n|---|---|---|\n"
                                  "| default | knn | 0.0371 |\n\n<!-- /table -->\n")
    report.write_text(report.read_text().replace("0.0371", "0.0370"))
    assert len(stale(report, root)) == 1


@pytest.mark.parametrize("where, message", [
    ("costs=default price=knn", "no column 'price'"),
    ("costs=cfp10", "no row of .* meets 'where costs=cfp10'"),
])
def test_where_errors_name_the_problem(tiny, where, message):
    root, report = tiny
    frame = pd.DataFrame({"costs": ["default"], "cost": [0.0371]})
    write_table(frame, root / "docs" / "tables", "costs", index=False)
    report.write_text(f"<!-- table: docs/tables/costs.md where {where} -->\n<!-- /table -->\n")
    with pytest.raises(ValueError, match=message):
        stale(report, root)


def test_an_indented_marker_indents_its_table(tiny):
    root, report = tiny
    report.write_text("- a list item:\n\n  <!-- table: docs/tables/tiny.md -->\n"
                      "  <!-- /table -->\n\n  more of the item.\n")
    fill(report, root)
    assert report.read_text() == ("- a list item:\n\n  <!-- table: docs/tables/tiny.md -->\n\n"
                                  "  | agent | cost |\n  |---|---|\n  | ballad | 0.0400 |\n"
                                  "  | all-in-lr | 0.0312 |\n\n  <!-- /table -->\n\n"
                                  "  more of the item.\n")
    assert stale(report, root) == []


def test_a_csv_only_table_is_the_frames_own_csv(tmp_path):
    """``markdown=False`` (the paper's per-data-set tables, read back, not reported) writes
    the CSV ``DataFrame.to_csv`` writes, byte for byte, and no Markdown file."""
    frame = pd.DataFrame({"dataset": ["WBC", "Glass"], "ballad": [0.04, 1 / 3],
                          "all-in-lr": [0.03125, float("nan")]}).set_index("dataset")
    path = write_table(frame, tmp_path, "per_dataset", markdown=False)
    assert path == tmp_path / "per_dataset.csv"
    assert [p.name for p in tmp_path.iterdir()] == ["per_dataset.csv"]
    assert path.read_bytes() == frame.to_csv().encode()


def test_columns_keep_some_columns_in_their_order(tiny):
    """A table too wide for the page is shown as two, each with the columns it names (a
    name may hold spaces), the rows' selection applied as well."""
    root, report = tiny
    frame = pd.DataFrame({"costs": ["default", "cfn10"], "rank all-in-lr": [1.5, 2.0],
                          "cost": [0.0371, 0.1542]})
    write_table(frame, root / "docs" / "tables", "costs", index=False)
    report.write_text("<!-- table: docs/tables/costs.md columns cost,rank all-in-lr where "
                      "costs=cfn10 -->\n<!-- /table -->\n")
    [block] = blocks(report.read_text().splitlines(), report)
    assert block.columns == ("cost", "rank all-in-lr") and block.where == (("costs", "cfn10"),)
    fill(report, root)
    assert report.read_text().splitlines()[2:5] == ["| cost | rank all-in-lr |", "|---|---|",
                                                    "| 0.1542 | 2.0000 |"]
    assert stale(report, root) == []
    report.write_text("<!-- table: docs/tables/costs.md columns cost,price -->\n"
                      "<!-- /table -->\n")
    with pytest.raises(ValueError, match="no column.*'price'"):
        stale(report, root)


def test_the_experiments_pages_tables_fit_its_column():
    """Its statistics tables had 10 and 12 columns, wider than the page's column (a scroll
    bar at the foot of a long table that a reader may never see): now each is two."""
    lines = (REPO / "docs" / "experiments.md").read_text().splitlines()
    widths = [len(line.strip().strip("|").split("|")) for line in lines
              if line.lstrip().startswith("|")]
    assert widths and max(widths) <= 9, max(widths)
