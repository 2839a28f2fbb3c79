"""The robustness sweep's hostile cases (issue 30) end as they must: every manifest shape,
policy size and download trick is read identically or refused by name, in time, leaving
nothing behind (``scripts.studies.robustness.hostile_files``;
``python -m scripts.studies.robustness --files``
runs them all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.studies.robustness.damaged_files import (
    check_damages,
    lattice_kinds,
    result_kinds,
    sample_data,
    write_npz,
)
from scripts.studies.robustness.hostile_files import (
    DOWNLOAD_TRICKS,
    download_outcome,
    hostile_outcomes,
    manifest_rewrites,
    policy_rewrites,
    rerun_kind,
)


def test_every_manifest_shape_is_read_or_refused_by_name(tmp_path: Path) -> None:
    store_json = lattice_kinds(tmp_path)[1]
    run_json = result_kinds(tmp_path)[1]
    for kind in (store_json, run_json, rerun_kind(run_json)):
        rewrites = manifest_rewrites(kind.path.read_bytes())[::4]  # a quarter, every shape
        outcome = check_damages(kind, rewrites)
        assert outcome.failures == [], outcome.failures[:5]
        assert outcome.counts["refused, naming the file"] > 0


def test_every_download_trick_is_refused_in_time(tmp_path: Path) -> None:
    data = sample_data()
    write_npz(tmp_path / "sample.npz", data.X, data.y)
    (tmp_path / "downloads").mkdir()
    outcome = download_outcome(tmp_path / "downloads", (tmp_path / "sample.npz").read_bytes(),
                               deadline=0.3)
    assert outcome.failures == []
    assert outcome.counts["refused, naming the data set and why"] == len(DOWNLOAD_TRICKS) + 1


def test_every_policy_size_is_refused_by_name(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from scripts.studies.robustness.damaged_files import policy_kind

    outcome = check_damages(policy_kind(tmp_path), policy_rewrites())
    assert outcome.failures == []
    assert outcome.counts["refused, naming the file"] == len(policy_rewrites())


@pytest.mark.slow
def test_the_whole_hostile_sweep(tmp_path: Path) -> None:
    failures = [f for outcome in hostile_outcomes(tmp_path) for f in outcome.failures]
    assert failures == []
