"""Hostile conditions of a whole run, for the robustness sweep
(``python -m scripts.studies.robustness --files``), by class:

* **environment**: every environment variable that sets a bound or a folder, at a value
  that overflows (``1e308``, ``inf``), is no number (``abc``, ``nan``), is out of range, or
  names a file where a folder goes: each refused at its first use, naming the variable;
* **interrupts**: Ctrl-C during every job: one line, exit status 130;
* **unwritable folders**: every folder a job writes into, refused for writing (read-only)
  or full: one line naming the folder, exit status 2, before any work.

Writes are refused by wrapping ``os.open`` for the paths under the folder (the sweep and
the suite run as root, whom ``chmod`` does not stop), which is how every job's first probe
of its folder (``ballad_env.files.probe_writable``) writes.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from scripts.studies.robustness.damaged_files import Outcome, sample_data, write_npz
from scripts.studies.robustness.hostile_inputs import Case, outcome

#: Values of a numeric variable that must be refused: overflowing, not numbers, negative.
BAD_NUMBERS = ("1e308", "inf", "-inf", "nan", "abc", "-1")
#: The numeric variables that set a bound -> the call that reads each at its first use.
NUMERIC_VARIABLES: dict[str, tuple[str, str]] = {
    "BALLAD_MAX_ARRAY_BYTES": ("ballad_env.files", "array_ceiling"),
    "BALLAD_DOWNLOAD_DEADLINE": ("ballad_env.data.download", "_configured_deadline"),
    "BALLAD_RESET_CACHE_MB": ("ballad_env.compute", "configured_cache_bytes"),
}


class JobEnded(Exception):
    """What a job printed on stderr, when it ended with the status asked for in one line."""


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` set, restored after."""
    with mock.patch.dict(os.environ, values):
        yield


def _first_use(name: str, value: str, module: str, function: str, *args: Any) -> None:
    """Call ``module.function(*args)``, where ``$name`` is read, with ``$name=value``."""
    import importlib

    with environment(**{name: value}):
        getattr(importlib.import_module(module), function)(*args)


def run_command(argv: list[str], status: int) -> None:
    """``ballad-env ARGV`` in this process: a :class:`JobEnded` holding its one line of
    stderr if it exits with ``status``, else an ``AssertionError`` saying what it did."""
    from agents.experiments.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    if code != status or len(lines) != 1:
        raise AssertionError(f"exit {code} (wanted {status}), stderr: {err.getvalue()[-600:]!r}")
    raise JobEnded(lines[0])


def environment_cases(folder: Path) -> list[Case]:
    """Every variable that sets a bound or a folder, at each bad value: refused at its first
    use naming it; and a whole job under one, ending in one line."""
    folder.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = [
        (f"${name}={value}", functools.partial(_first_use, name, value, *where), (f"${name}",))
        for name, where in NUMERIC_VARIABLES.items() for value in BAD_NUMBERS]
    a_file = folder / "a-file"
    a_file.write_text("not a folder")
    folders: dict[str, tuple[Any, ...]] = {
        "BALLAD_DATA_HOME": ("ballad_env.data.adbench", "data_home"),
        "BALLAD_DATA_DIR": ("ballad_env.data.folder", "resolve_data_dir", None)}
    with contextlib.suppress(ModuleNotFoundError):  # the minari extra
        import agents.interop.minari_datasets  # noqa: F401

        folders["MINARI_DATASETS_PATH"] = ("agents.interop.minari_datasets",
                                           "minari_folder")
    cases += [(f"${name} a file", functools.partial(_first_use, name, str(a_file), *where),
               (f"${name}", "not a folder")) for name, where in folders.items()]
    cases.append(("$BALLAD_NO_COMPILE=abc", functools.partial(
        _first_use, "BALLAD_NO_COMPILE", "abc", "agents.ppo.updates",
        "compile_wanted"), ("$BALLAD_NO_COMPILE",)))
    data = folder / "data"
    data.mkdir(exist_ok=True)
    write_npz(data / "small.npz", sample_data().X, sample_data().y)
    for name, value, argv in (
            ("BALLAD_MAX_ARRAY_BYTES", "inf", ["compare", "--datasets", "small", "--data-dir",
                                               str(data), "--seeds", "1", "--agents",
                                               "all-in-al", "--n-jobs", "1", "--no-progress",
                                               "--output", str(folder / "run")]),
            ("BALLAD_MAX_ARRAY_BYTES", "1e308", ["lattices", "--out", str(folder / "store"),
                                                 "--datasets", "small", "--data-dir",
                                                 str(data), "--seeds", "1", "--n-jobs", "1",
                                                 "--no-progress"]),
            ("BALLAD_DATA_DIR", str(a_file), ["lattices", "--out", str(folder / "store2"),
                                              "--datasets", "small", "--seeds", "1",
                                              "--n-jobs", "1", "--no-progress"])):
        cases.append((f"ballad-env {argv[0]} with ${name}={value}", functools.partial(
            _with_environment, {name: value}, run_command, argv, 2), (f"${name}",)))
    return [case for case in cases if _available(case[0])]


def _available(label: str) -> bool:
    """Whether the case's code is installed (the compiled trainer needs the rl extra)."""
    if "NO_COMPILE" not in label:
        return True
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def _with_environment(values: dict[str, str], call: Callable[..., Any], *args: Any) -> Any:
    with environment(**values):
        return call(*args)


#: Every job -> (what runs its work, its arguments): Ctrl-C arrives there.
def _jobs(folder: Path) -> dict[str, tuple[str, list[str]]]:
    jobs = {
        "compare": ("agents.experiments.cli.compare.run_grid",
                    ["--datasets", "toy", "--seeds", "1", "--agents", "all-in-al",
                     "--no-progress", "--n-jobs", "1", "--output", str(folder / "compare")]),
        "lattices": ("agents.experiments.cli.lattices.build_cells",
                     ["--out", str(folder / "store"), "--datasets", "toy", "--seeds", "1",
                      "--no-progress", "--n-jobs", "1"]),
        "data": ("agents.experiments.cli.data.main", []),
        "bench": ("agents.experiments.cli.bench.main", []),
    }
    with contextlib.suppress(ModuleNotFoundError):  # the rl extra
        import agents.experiments.cli.train  # noqa: F401

        jobs["train"] = ("agents.experiments.cli.train.train_and_plot",
                         ["--datasets", "toy", "--output-dir", str(folder / "policies")])
    with contextlib.suppress(ModuleNotFoundError):  # the minari extra
        import agents.interop.minari_datasets  # noqa: F401

        jobs["minari"] = ("agents.interop.minari_datasets.record_dataset",
                          ["--store", str(folder), "--policy", "optimal", "--dataset-id",
                           "ballad/interrupted-v0", "--minari-path", str(folder / "minari")])
    return jobs


def _interrupted(target: str, argv: list[str]) -> None:
    with mock.patch(target, side_effect=KeyboardInterrupt):
        run_command(argv, 130)


def interrupt_cases(folder: Path) -> list[Case]:
    """Ctrl-C during every job: one line ``interrupted: ...``, exit status 130."""
    return [(f"Ctrl-C during ballad-env {job}",
             functools.partial(_interrupted, target, [job, *argv]), ("interrupted",))
            for job, (target, argv) in _jobs(folder).items()]


@contextlib.contextmanager
def refused_writes(folder: Path, code: int) -> Iterator[None]:
    """``os.open`` for writing under ``folder`` fails with ``code`` (``EACCES``: read-only,
    ``ENOSPC``: full), as it would for a user the folder's permissions stop, or on a full
    disk."""
    real_open = os.open
    inside = str(folder.absolute())
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def guarded_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & writing and os.path.abspath(os.fspath(path)).startswith(inside):
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    with mock.patch("os.open", guarded_open):
        yield


def _unwritable(folder: Path, code: int, call: Callable[[], Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with refused_writes(folder, code):
        call()


def _download_into(home: Path) -> None:
    from ballad_env.data import load_dataset

    with environment(BALLAD_DATA_HOME=str(home), BALLAD_DATA_MIRROR=str(home / "mirror")):
        load_dataset("adbench/Glass")


def unwritable_cases(folder: Path) -> list[Case]:
    """Every folder a job writes into, read-only and full: one line naming the folder."""
    outputs = {"compare --output": ["compare", "--datasets", "toy", "--seeds", "1",
                                    "--agents", "all-in-al", "--no-progress", "--n-jobs", "1",
                                    "--output"],
               "lattices --out": ["lattices", "--datasets", "toy", "--seeds", "1",
                                  "--no-progress", "--n-jobs", "1", "--out"]}
    jobs = _jobs(folder)
    if "train" in jobs:
        outputs["train --output-dir"] = ["train", "--datasets", "toy", "--output-dir"]
    if "minari" in jobs:
        outputs["minari --minari-path"] = ["minari", *jobs["minari"][1][:-1]]
    cases: list[Case] = []
    for code, said in ((errno.EACCES, "read-only"), (errno.ENOSPC, "full")):
        for label, argv in outputs.items():
            target = folder / f"{said}-{label.split()[0]}"
            cases.append((f"{label} {said}", functools.partial(
                _unwritable, target, code, functools.partial(
                    run_command, [*argv, str(target)], 2)), (str(target),)))
        home = folder / f"{said}-data-home"
        cases.append((f"$BALLAD_DATA_HOME {said}", functools.partial(
            _unwritable, home, code, functools.partial(_download_into, home)),
            (str(home), "$BALLAD_DATA_HOME")))
    return cases


def run_outcomes(folder: Path) -> Iterator[Outcome]:
    """One :class:`Outcome` per class: environment, interrupts, unwritable folders."""
    folder.mkdir(parents=True, exist_ok=True)
    yield outcome("environment variables", environment_cases(folder / "environment"))
    yield outcome("interrupts (Ctrl-C)", interrupt_cases(folder / "interrupts"), limit=60.0)
    yield outcome("read-only and full folders", unwritable_cases(folder / "folders"),
                  limit=60.0)


__all__ = ["BAD_NUMBERS", "NUMERIC_VARIABLES", "JobEnded", "environment", "environment_cases",
           "interrupt_cases", "refused_writes", "run_command", "run_outcomes",
           "unwritable_cases"]
