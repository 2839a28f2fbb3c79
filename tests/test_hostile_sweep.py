"""The robustness sweep's hostile cases (issue 30) end as they must: every manifest shape,
policy size and download trick is read identically or refused by name, in time, leaving
nothing behind (``scripts.studies.robustness.hostile_files``;
``python -m scripts.studies.robustness --files``
runs them all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


class TorchRead(BaseException):
    """torch.load was reached: a forged archive got past the headers' checks."""


def test_every_nesting_level_is_refused_before_torch_reads(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy zip forged at each level (an inner record declaring 3.2 GB, directories of
    64 MB, 20,000 members, torch's legacy stream) is refused naming the file, from headers
    alone: torch.load is a tripwire, so no case inflates anything."""
    pytest.importorskip("torch")
    from agents import policy_zip
    from scripts.studies.robustness.damaged_files import policy_kind
    from scripts.studies.robustness.hostile_nested import nested_policy_rewrites

    kind = policy_kind(tmp_path)
    genuine, load = kind.path.read_bytes(), policy_zip.torch.load

    def tripwire(*args: Any, **kwargs: Any) -> Any:
        if kind.path.read_bytes() != genuine:
            raise TorchRead
        return load(*args, **kwargs)  # the genuine file loads, torch.load included

    monkeypatch.setattr(policy_zip.torch, "load", tripwire)
    outcome = check_damages(kind, nested_policy_rewrites())
    assert outcome.failures == []
    assert outcome.counts["refused, naming the file"] == len(nested_policy_rewrites())


def test_every_zoo_yaml_case_is_refused_before_rl_zoo3_reads_it(tmp_path: Path) -> None:
    pytest.importorskip("rl_zoo3")
    from scripts.studies.robustness.hostile_nested import YAML_CASES, yaml_outcome

    outcome = yaml_outcome(tmp_path)
    assert outcome.failures == []
    assert outcome.counts["refused, naming the file"] == 2 * len(YAML_CASES)


class DirectoryParsed(BaseException):
    """zipfile parsed the directory of a forged archive: no bound came first."""


def test_an_archives_directory_is_bounded_before_it_is_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zipfile keeps an object per directory entry before reading a member: a data ``.npz``
    or a lattice file whose directory passes 1 MB is refused naming the file before any
    zip reader parses it (zipfile's parsing of a forged copy is a tripwire)."""
    import io
    import zipfile

    from scripts.studies.robustness.hostile_nested import archive_kinds, directory_rewrites

    kinds = archive_kinds(tmp_path)
    genuine = {kind.path: kind.path.read_bytes() for kind in kinds}
    parse = zipfile.ZipFile._RealGetContents  # type: ignore[attr-defined]

    def tripwire(self: zipfile.ZipFile) -> None:
        forged = [path for path, data in genuine.items() if path.read_bytes() != data]
        if forged and not isinstance(self.fp, io.BytesIO):  # a file, not the forging itself
            raise DirectoryParsed(forged[0])
        parse(self)

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", tripwire)
    for kind in kinds:
        outcome = check_damages(kind, directory_rewrites())
        assert outcome.failures == []
        assert outcome.counts["refused, naming the file"] == len(directory_rewrites())
