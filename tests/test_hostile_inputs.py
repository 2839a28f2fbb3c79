"""The robustness sweep's classes of hostile input (issue 39): a FIFO wherever a path is
read or written, a silent scheduler, every size option at an absurd value, names that are
not names (``scripts.studies.robustness.hostile_inputs``); and the smaller items that are
one case each: a plugin calling ``sys.exit``, a ``--datasets-from`` of the wrong shape, a
malformed Minari id, a mirror's password in messages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ballad_env.plugins import PluginError, load_plugins
from scripts.studies.robustness.hostile_inputs import (
    hang_cases,
    name_cases,
    outcome,
    size_cases,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX's")


def test_every_fifo_and_silent_server_ends_in_time(tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    cases = hang_cases(tmp_path)
    result = outcome("hangs", cases, limit=30.0)
    assert result.failures == []
    assert sum(result.counts.values()) == len(cases)


def test_every_size_option_has_a_bound() -> None:
    cases = size_cases()
    result = outcome("sizes", cases, limit=10.0)
    assert result.failures == []
    assert result.counts["refused, naming the input"] == len(cases) >= 8


def test_every_name_that_is_not_one_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    cases = name_cases(tmp_path)
    result = outcome("names", cases, limit=10.0)
    assert result.failures == []
    assert sum(result.counts.values()) == len(cases)


def test_a_plugin_that_calls_sys_exit_is_an_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "exiting_plugin.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"'exiting_plugin' \(SystemExit: 0\)"):
        load_plugins(["exiting_plugin"])


@pytest.mark.parametrize("content, said", [
    ('{"test": ["Glass"]}', "needs a 'train' list"), ('{"train": "toy"}', '"toy"'),
    ('{"train": []}', "needs a 'train' list"), ("[1, 2]", "needs a 'train' list"),
    ("{", "not a readable JSON file")])
def test_datasets_from_of_the_wrong_shape_is_named(tmp_path: Path, content: str,
                                                   said: str) -> None:
    from agents.experiments.cli import datasets_from

    path = tmp_path / "split.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=rf"--datasets-from {path}") as caught:
        datasets_from(path)
    assert said in str(caught.value)
    path.write_text('{"train": ["Glass", "WBC"]}')
    assert datasets_from(path) == ("Glass", "WBC")


def test_a_malformed_minari_id_is_refused_before_any_episode(tmp_path: Path,
                                                            monkeypatch) -> None:
    pytest.importorskip("minari")
    from agents.interop import minari_datasets

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    played: list[str] = []
    monkeypatch.setattr(minari_datasets, "env_kwargs", lambda *a, **k: played.append("x"))
    for dataset_id in ("ballad/replay", "no version"):
        with pytest.raises(ValueError, match="is not of the form"):
            minari_datasets.record_dataset("store", "optimal", dataset_id)
    assert played == []


def test_a_mirror_password_never_reaches_a_message() -> None:
    from ballad_env.data.download import redact

    assert redact("https://me:s3cret@host/x") == "https://me:***@host/x"
    assert redact("https://host/x") == "https://host/x"
    assert "s3cret" not in redact("https://me:s3cret@host:99999999/x")
