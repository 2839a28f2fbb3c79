"""The per-level decision rule of the allocation study's sixth round, on hand-made tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scripts.studies.allocation import per_level as P

LEVELS = ("default", "cfn10", "cfp10")


def _cv_table(rows: dict[str, tuple[list[float], list[float], list[float]]]) -> pd.DataFrame:
    """name -> (fold shares, standard errors, room lost) per level."""
    table = []
    for name, (means, ses, losses) in rows.items():
        row: dict[str, object] = {"candidate": name}
        for level, mean, se, loss in zip(LEVELS, means, ses, losses, strict=True):
            row |= {f"fold {level}": mean, f"se {level}": se, f"lower {level}": mean - se,
                    f"loss {level}": loss}
        row |= {"fold mean": float(np.mean(means)), "se mean": 0.01,
                "loss": float(np.mean(losses))}
        table.append(row)
    return pd.DataFrame(table)


def test_each_level_takes_the_harmless_rules_choice_from_its_own_figures() -> None:
    """default: only 'bold' is within one standard error (0.1) of the best, so 'bold';
    c_fn = 10: 'careful' is within 0.1 of 'bold' and loses less, so 'careful'; c_fp = 10:
    'bold''s bound is below 0 there, and 'meek' (0.15) leads All-in-LR by more than its
    standard error, so 'meek'. One rule for every level cannot take 'bold' at all (its
    c_fp = 10 bound), whatever it gains at the other two."""
    cv = _cv_table({"bold": ([0.5, 0.4, -0.1], [0.1, 0.1, 0.05], [0.1, 0.2, 0.3]),
                    "careful": ([0.3, 0.35, 0.0], [0.1, 0.1, 0.0], [0.0, 0.05, 0.0]),
                    "meek": ([0.2, 0.1, 0.15], [0.05, 0.05, 0.05], [0.0, 0.0, 0.0]),
                    "all-in-lr": ([0.0] * 3, [0.0] * 3, [0.0] * 3)})
    choices = {lv: row["candidate"] for lv, row in P.choose_per_level(cv).items()}
    assert choices == {"default": "bold", "cfn10": "careful", "cfp10": "meek"}
    # eligibility applies per level too: without 'meek', c_fp = 10 falls back to the
    # candidates that clear 0 there: 'careful' and All-in-LR tie at 0 with no loss, and
    # the table's order decides
    without = P.choose_per_level(cv, ["bold", "careful", "all-in-lr"])
    assert without["cfp10"]["candidate"] == "careful"
    assert P.level_table(cv, "cfp10").set_index("candidate").loc["bold", "loss"] == 0.3


def test_the_composite_plays_each_levels_choice_on_its_cells() -> None:
    real = pd.DataFrame({"level": ["default", "cfn10", "cfp10", "default"]})
    results = {"a": np.array([1.0, 2.0, 3.0, 4.0]), "b": np.array([10.0, 20.0, 30.0, 40.0])}
    costs = P.composite_costs(real, results, {"default": "a", "cfn10": "b", "cfp10": "a"})
    assert costs.tolist() == [1.0, 20.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="no choice for levels"):
        P.composite_costs(real, results, {"default": "a"})


def test_the_composite_is_preferred_only_by_more_than_one_paired_standard_error() -> None:
    """Two outer folds: the per-level rule gains 0.1 and 0.3 at default costs (mean 0.2,
    standard error 0.1: preferred), 0.0 and 0.0 at c_fn = 10 (not), and -0.2 and +0.2 at
    c_fp = 10 (mean 0, standard error 0.2: not); over the levels, fold means -0.1/3 and
    0.5/3 (mean 0.2/3, standard error 0.1: not, the default gain is undone by c_fp = 10's
    noise)."""
    gains = {"default": (0.1, 0.3), "cfn10": (0.0, 0.0), "cfp10": (-0.2, 0.2)}
    outer = pd.DataFrame([{"outer fold": k, "level": lv, "single": 0.5,
                           "per level": 0.5 + gains[lv][k]} for k in (0, 1) for lv in LEVELS])
    table = P.paired(outer).set_index("level")
    assert table.loc["default", "per level - single"] == pytest.approx(0.2)
    assert table.loc["default", "se"] == pytest.approx(0.1)
    assert table["preferred"].to_dict() == {"default": True, "cfn10": False, "cfp10": False,
                                            "mean": False}
    assert table.loc["mean", "per level - single"] == pytest.approx(0.2 / 3)
    assert table.loc["mean", "se"] == pytest.approx(0.1)


def test_the_nested_choice_never_sees_the_fold_it_is_scored_on() -> None:
    """Five data sets, one per fold, All-in-LR 1 and optimum 0 at every level. 'lucky'
    takes the whole room on d0 and 0.01 elsewhere (fold mean 0.208, standard error 0.198);
    'steady' takes 0.1 everywhere. On all folds both rules take 'lucky' (the larger fold
    mean, no loss); scoring fold 0 on the other four, 'lucky' takes only 0.01 there, so both
    take 'steady' and fold 0 scores 0.1, not the 1.0 the in-sample choice would show."""
    names = [f"d{k}" for k in range(5)]
    real = pd.DataFrame([{"level": lv, "dataset": d, "all-in-lr": 1.0, "optimal": 0.0}
                         for d in names for lv in LEVELS])
    on_d0 = (real["dataset"] == "d0").to_numpy()
    results = {"lucky": np.where(on_d0, 0.0, 0.99), "steady": np.full(len(real), 0.9),
               "all-in-lr": np.ones(len(real))}
    keys: list[tuple[str, dict[str, float]]] = [(name, {}) for name in results]
    fold_list = [[d] for d in names]
    table = P.fold_table(real, keys, results, fold_list)
    assert {row["candidate"] for row in P.choose_per_level(table).values()} == {"lucky"}
    outer = P.nested(real, keys, results, fold_list, list(results))
    first = outer[outer["outer fold"] == 0]
    assert set(first["single choice"]) == {"steady"} == set(first["per-level choice"])
    assert first["single"].tolist() == pytest.approx([0.1] * 3)
    assert first["per level"].tolist() == pytest.approx([0.1] * 3)
    assert set(outer[outer["outer fold"] == 1]["single choice"]) == {"lucky"}


def test_a_gain_on_one_outer_fold_is_never_beyond_its_standard_error() -> None:
    """A gain g on one fold of five: mean g / 5, standard error exactly g / 5 (here one bit
    above it in floating point), so not preferred; the columns take the rules' names."""
    outer = pd.DataFrame([{"outer fold": k, "level": lv, "base": 0.418,
                           "switch": 0.4412 if k == 3 and lv == "cfp10" else 0.418}
                          for k in range(5) for lv in LEVELS])
    table = P.paired(outer, new="switch", old="base").set_index("level")
    gain, se = table.loc["cfp10", "switch - base"], table.loc["cfp10", "se"]
    assert gain == pytest.approx(0.0232 / 5) and gain - se > 0  # the last bit says beyond
    assert se == pytest.approx(0.0232 / 5)
    assert not table["preferred"].any()


def test_a_studys_tables_are_printed_rounded_and_written(tmp_path, capsys) -> None:
    """``show_and_write``: each table printed under its name at the digits asked, and written
    as ``<prefix>_<name>`` (CSV and Markdown)."""
    from scripts.studies.allocation.tasks_report import show_and_write

    paths = show_and_write({"nested": pd.DataFrame({"rule": ["single"], "share": [0.28184]})},
                           tmp_path, prefix="allocation6", digits=3)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "nested" and "0.282" in out and "0.2818" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allocation6_nested.csv",
                                                          "allocation6_nested.md"]
    assert paths


def test_a_studys_tables_go_to_the_docs_only_when_asked(tmp_path) -> None:
    """``tables_folder``: ``docs/tables`` of the repository with --update-docs, else the
    study's own ``<out>/tables``."""
    from scripts.studies.allocation.tasks_report import tables_folder
    from scripts.studies.common.options import REPO

    assert tables_folder(tmp_path, False) == tmp_path / "tables"
    assert tables_folder(tmp_path, True) == REPO / "docs" / "tables"
