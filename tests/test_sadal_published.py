"""The runner of SADAL's published code (``agents.experiments.studies.sadal.published``),
without the published code: its refusals, its provenance and the split it hands over.
(Running the published code itself is not part of the suite.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agents.experiments.cli.sadal_published import main
from agents.experiments.episode_store import PublishedCodeError
from agents.experiments.studies.sadal.published import (
    check_sadal,
    fixture_data,
    git_blob_id,
    published_rest,
)
from ballad_env.protocol import sadal_holdout, sadal_split_indices


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
