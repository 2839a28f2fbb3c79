"""The runner of SADAL's published code (``scripts.studies.sadal_published.published``),
without the published code: its refusals, its provenance and the split it hands over.
(Running the published code itself is not part of the suite.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ballad_env.protocol import sadal_holdout, sadal_split_indices
from scripts.studies.common.episodes import PublishedCodeError
from scripts.studies.sadal_published.__main__ import main
from scripts.studies.sadal_published.published import (
    check_sadal,
    fixture_data,
    git_blob_id,
    published_rest,
)


def test_absent_files_are_refused_by_name(tmp_path: Path) -> None:
    ssif = tmp_path / "ssif.py"
    ssif.write_text("")
    with pytest.raises(PublishedCodeError, match=r"SADAL\.py at .*nowhere.*not part of this "
                                                 "project"):
        check_sadal(tmp_path / "nowhere" / "SADAL.py", ssif)


def test_the_command_line_says_what_is_missing(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["episodes", "--sadal-py", str(tmp_path / "SADAL.py"),
                 "--ssif-py", str(tmp_path / "ssif.py"), "--output", str(tmp_path / "out")])
    assert code == 2
    error = capsys.readouterr().err
    assert "SADAL.py" in error and "ssif.py" in error
    assert not (tmp_path / "out").exists()  # nothing written before the check


def test_git_blob_id_is_gits(tmp_path: Path) -> None:
    """``git hash-object`` of "hello\\n" (sha1 of "blob 6\\0hello\\n")."""
    path = tmp_path / "f.txt"
    path.write_bytes(b"hello\n")
    assert git_blob_id(path) == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_the_published_code_gets_sadals_training_part() -> None:
    """The rows handed to ``SADAL(X_rest, ...)`` are split='sadal''s D and V together, in
    the 80/20 split's order, labels -1/1; T is the rest."""
    X, y = fixture_data()
    X_rest, y_rest, X_test, y_test = published_rest(X, y, 3)
    rest, test = sadal_holdout(y, 3)
    train, val, _ = sadal_split_indices(y, 3)
    np.testing.assert_array_equal(X_rest, X[rest])
    np.testing.assert_array_equal(X_test, X[test])
    assert set(rest.tolist()) == set(train.tolist()) | set(val.tolist())
    assert set(np.unique(y_rest)) == {-1, 1} and np.array_equal(y_test == 1, y[test] == 1)
    # the fixture data: 80 examples, 6 anomalies (contamination 0.075, not SSIF's 0.1)
    assert (y.size, int(y.sum())) == (80, 6)


def test_rounds_agree_from_the_first_until_one_differs() -> None:
    import pandas as pd

    from scripts.studies.sadal_published.agreement import agreement_summary, rounds_agreeing

    published = pd.DataFrame({"action": ["LR", "AL", "AL"], "new_train": ["", "4 1", ""],
                              "new_val": ["7", "", ""], "left": [0.4, 0.3, 0.3],
                              "right": [0.6, 0.7, 0.7]})
    ours = published.assign(new_train=["", "1 4", "2"])  # ours sorted; round 3 bought more
    assert rounds_agreeing(ours, published) == 2
    assert rounds_agreeing(ours.assign(right=[0.6, 0.7 + 1e-6, 0.7]), published) == 1
    assert rounds_agreeing(ours.assign(action=["AL", "AL", "AL"]), published) == 0
    episodes = pd.DataFrame({"dataset": ["a", "b"], "seed": [0, 0], "agent": ["sadal"] * 2,
                             "published": [0.1, 0.3], "ours": [0.1, 0.33],
                             "rounds_agreeing": [10, 4], "rounds": [10, 10], "fixes": ""})
    summary = agreement_summary(episodes).loc["sadal"]
    assert summary["episodes"] == 2 and summary["all_rounds_agree"] == 1
    assert summary["relative_difference"] == pytest.approx(0.215 / 0.2 - 1)  # 0.075
    assert bool(summary["within"])


class _FakeSADAL:
    """The published ``SADAL``'s surface the runner's recording subclass overrides: it
    records the ``rejected`` argument each round receives."""

    def __init__(self) -> None:
        self.ALrewards, self.LRrewards = np.zeros(3), np.zeros(3)
        self.nroundAL = self.nroundLR = 0
        self.seen: list[object] = []

    def check_reward(self) -> str:
        return "AL"

    def run_allocation_round(self, Xtrain, ytrain, Xval, yval, budget, rejected=()):
        self.seen.append(rejected)
        return None, (0.4, 0.6)


class _FakeSSIF:
    def fit(self, X, y):
        return self

    def predict_proba(self, X):
        return np.column_stack([np.full(len(X), 0.7), np.full(len(X), 0.3)])


@pytest.mark.parametrize(("fix", "passed", "label"), [
    ("none", [], "al-first-round"), ("rank", np.int64(0), "al-first-round-rank")])
def test_the_runners_round_1_fix_keeps_the_empty_rejected_list(fix, passed, label) -> None:
    """A forced AL round 1: the faithful fix keeps the published ``rejected=[]`` (no example
    eligible: no label); ``--al-first-round rank`` passes "none rejected" instead."""
    import types

    from scripts.studies.sadal_published import published

    recorded = published._recording(types.SimpleNamespace(SADAL=_FakeSADAL, SSIF=_FakeSSIF))
    model = recorded()
    model.forced, model.rounds, model.al_first_round = "AL", [], fix
    model.check_reward()
    X, y = np.zeros((4, 2)), np.array([-1, -1, 1, -1])
    model.run_allocation_round(X, y.copy(), X, y.copy(), 1, [])
    assert type(model.seen[0]) is type(passed) and np.array_equal(model.seen[0], passed)
    assert model.rounds[0]["fix"] == label
    with pytest.raises(ValueError, match="unknown al_first_round"):
        published.play_sadal(types.SimpleNamespace(), X, y, 0.1, 0, "AL", al_first_round="x")
