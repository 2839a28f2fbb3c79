"""Hostile inputs of the commands, for the robustness sweep
(``python -m scripts.studies.robustness --files``), by class (issue 39):

* **hangs**: a FIFO at every path a command reads (``--datasets-from``, a data file, a
  mirror folder's file, a saved policy, ``run.json``, an rl-zoo3 ``--conf-file``) or writes
  (``summary.csv``, ``per_round.csv``, ``cost_by_round.png``), a folder at a lock's path,
  and a Dask scheduler that accepts the connection and never answers;
* **sizes**: every size option at an absurd value (settings, training, seeds, workers);
* **names**: run names that are not one path component, reserved data sets in other
  spellings, the two names whose 40-bit safe names collided, malformed Minari ids.

Each case must end within its time limit with an error that names the input (or, for an
output path, replace the FIFO with the file): :func:`input_outcomes` yields one ``Outcome``
per class. A case runs in a daemon thread (``hostile_files.within``), so a hang is counted
as a failure and the sweep goes on.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import io
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scripts.studies.robustness.damaged_files import Outcome, sample_data, write_npz
from scripts.studies.robustness.hostile_files import within

#: A case: what it is, what to run, the words its error must hold (None: it must succeed).
Case = tuple[str, Callable[[], Any], tuple[str, ...] | None]
#: Seconds a case may take (a silent scheduler's case: its timeout, set to 1 s, plus this).
LIMIT_S = 20.0
#: Run names that are not one path component.
NOT_NAMES = ("..", ".", "", "a/b", "../x", "/tmp/x", "a\\b", "C:", "x\0y")
#: Reserved data sets in other spellings (the allocation studies refuse each).
RESERVED_SPELLINGS = ("45_wine.npz", "wine.CSV", "ADBENCH/Wine@100", "ｗｉｎｅ", "12_fault.mat")


def outcome(kind: str, cases: list[Case], limit: float = LIMIT_S) -> Outcome:
    """Run ``cases``: each must raise an error holding its words within ``limit`` seconds
    (or return, when it has none)."""
    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    for label, call, words in cases:
        ended = within(limit, call)
        if words is None:
            if ended is None:
                counts["played as asked"] += 1
            else:
                failures.append(f"{label}: {ended}")
        elif isinstance(ended, BaseException) and all(w in str(ended) for w in words):
            counts["refused, naming the input"] += 1
        else:
            failures.append(f"{label}: {ended!r} (wanted an error saying {words})")
    return Outcome(kind, counts, failures)


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _compare_into(folder: Path, data: Path) -> None:
    """``ballad-env compare`` with FIFOs at its three outputs: they must become files."""
    from agents.experiments.cli.compare import main

    outputs = [_fifo(folder / name) for name in ("summary.csv", "per_round.csv",
                                                 "cost_by_round.png")]
    with contextlib.redirect_stdout(io.StringIO()):  # the tables it prints
            code = main(["--datasets", str(data), "--seeds", "1", "--agents", "all-in-al",
                     "--prior", "knn", "--budget-fraction", "0.1", "--output", str(folder),
                     "--per-round", "--plot", "--no-progress", "--n-jobs", "1"])
    bad = [p.name for p in outputs if not p.is_file()]
    if code != 0 or bad:
        raise AssertionError(f"exit status {code}, still not files: {bad}")


def _silent_scheduler() -> str:
    """A server on 127.0.0.1 that accepts connections and never answers; its address."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}"


def _connect_briefly(address: str) -> None:
    from agents.experiments import executor

    before = executor.SCHEDULER_TIMEOUT
    executor.SCHEDULER_TIMEOUT = 1.0
    try:
        executor.connect(address)
    finally:
        executor.SCHEDULER_TIMEOUT = before


def _refuse_lock_folder(folder: Path, data: Path) -> None:
    from agents.experiments.grid import Grid
    from agents.experiments.run import run_grid
    from ballad_env.settings import Settings

    (folder / ".run.json.lock").mkdir(parents=True)
    run_grid(Grid((str(data),), (0,), ("all-in-al",), (Settings(prior="knn"),)), folder,
             n_jobs=1, progress=False)


def hang_cases(folder: Path) -> list[Case]:
    """FIFOs where paths are read or written, a folder at a lock's path, a silent
    scheduler."""
    from agents.experiments.cli import datasets_from
    from agents.experiments.stores.results import ResultStore
    from agents.policy_files import policy_fingerprint
    from ballad_env.data import load_dataset
    from ballad_env.data.download import download

    data = folder / "sample.npz"
    sample = sample_data()
    write_npz(data, sample.X, sample.y)
    expected = {"size": 10, "sha256": hashlib.sha256(b"x").hexdigest()}
    fifo = _fifo(folder / "fifo" / "list.json")
    mirror = _fifo(folder / "mirror" / "x.npz")
    return [
        ("--datasets-from a FIFO", functools.partial(datasets_from, fifo), ("list.json", "FIFO")),
        ("a data file that is a FIFO",
         functools.partial(load_dataset, _fifo(folder / "data" / "d.npz")), ("d.npz", "FIFO")),
        ("a mirror folder's file that is a FIFO",
         functools.partial(download, mirror.as_uri(), folder / "cache" / "x.npz", expected,
                           "hostile/x", progress=False), ("hostile/x", "FIFO")),
        ("a saved policy that is a FIFO",
         functools.partial(policy_fingerprint, _fifo(folder / "policy" / "p.zip")),
         ("p.zip", "FIFO")),
        ("run.json a FIFO", ResultStore(_fifo(folder / "run" / "run.json").parent).read_manifest,
         ("run.json", "FIFO")),
        ("summary.csv, per_round.csv and cost_by_round.png FIFOs",
         functools.partial(_compare_into, folder / "outputs", data), None),
        ("a folder at run.json's lock",
         functools.partial(_refuse_lock_folder, folder / "locked", data),
         (".run.json.lock is not a lock file",)),
        ("a scheduler that never answers",
         functools.partial(_connect_briefly, _silent_scheduler()),
         ("cannot reach the Dask scheduler",)),
    ]


def size_cases() -> list[Case]:
    """Every size option at an absurd value: settings, seeds, workers, training."""
    from agents.experiments.cli import n_jobs_value
    from agents.experiments.grid import seed_range
    from ballad_env.settings import Settings

    def settings(**values: Any) -> Callable[[], Any]:
        return functools.partial(Settings, **values)

    cases: list[Case] = [
        ("--bayes-calls 10^9", settings(threshold_search="bayes", bayes_calls=10**9),
         ("bayes_calls", "1,000")),
        ("--ssif-trees 10^9", settings(detector="ssif", ssif_trees=10**9), ("ssif_trees",)),
        ("--k 10^9", settings(k=10**9), ("k must be",)),
        ("--eta 10^12", settings(eta_sample=10**12), ("eta_sample",)),
        ("--c-fn 1e308", settings(c_fn=1e308), ("c_fn", "1e+06")),
        ("--c-fp 1e-300", settings(c_fp=1e-300), ("c_fp",)),
        ("--seeds 10^9", functools.partial(seed_range, 10**9), ("--seeds", "100,000")),
        ("--n-jobs 10^9", functools.partial(n_jobs_value, "1000000000"), ("worker processes",)),
    ]
    cases += _bench_cases()
    try:
        from agents.experiments.training.config import Hyperparameters, TrainConfig
    except ModuleNotFoundError:  # the rl extra: training is not installed
        return cases

    def train(**values: Any) -> Callable[[], Any]:
        names = {f.name for f in dataclasses.fields(Hyperparameters)}
        given = {k: v for k, v in values.items() if k in names}
        options = {k: v for k, v in values.items() if k not in names}
        return functools.partial(TrainConfig, **{"vec_env": "dummy", **options},
                                 hyperparameters=given)

    return cases + [
        ("train --n-envs 10^9", train(n_envs=10**9), ("n_envs", "10,000")),
        ("train --n-envs 1000 --vec-env subproc", train(n_envs=1000, vec_env="subproc"),
         ("subproc",)),
        ("train --net-arch 100000 100000", train(net_arch=(100_000, 100_000)), ("net_arch",)),
        ("train --n-steps 10^7 --n-envs 10^4", train(n_steps=10**7, n_envs=10**4),
         ("n_steps x n_envs",)),
        ("train --total-timesteps 10^12", train(total_timesteps=10**12), ("total_timesteps",)),
        ("train --n-epochs 10^9", train(n_epochs=10**9), ("n_epochs",)),
        ("train --batch-size 10^9", train(batch_size=10**9), ("batch_size",)),
    ]


def _bench_cases() -> list[Case]:
    """``ballad-env bench``'s counts and sizes, each at 10^12 (its parser's type refuses)."""
    from agents.experiments.cli.bench import build_parser

    types: dict[str, Callable[[str], Any]] = {
        action.option_strings[0]: action.type for action in build_parser()._actions
        if action.option_strings and callable(action.type)
        and getattr(action.type, "__name__", "").startswith("whole number from")}
    return [(f"bench {option} 10^12", functools.partial(check, str(10**12)), ("must be from",))
            for option, check in types.items()]


def name_cases(folder: Path) -> list[Case]:
    """Names that are not names: run names, reserved spellings, Minari ids."""
    from agents.experiments.training.run_folder import check_run_name
    from ballad_env.files import safe_name
    from scripts.studies.common.split import refuse_reserved

    cases: list[Case] = [(f"run name {name!r}", functools.partial(check_run_name, name),
                          ("is not a name",)) for name in NOT_NAMES]
    cases += [(f"reserved set as {name!r}",
               functools.partial(refuse_reserved, [name], "the allocation study"),
               ("refuses the reserved data set",)) for name in RESERVED_SPELLINGS]
    cases.append(("the 40-bit collision 'a )!;^b' / 'a$[[#;b'",
                  functools.partial(_distinct, safe_name("a )!;^b"), safe_name("a$[[#;b")), None))
    try:
        from agents.interop.minari_datasets import check_dataset_id
    except ModuleNotFoundError:  # the minari extra
        return cases
    os.environ.setdefault("MINARI_DATASETS_PATH", str(folder / "minari"))
    existing = Path(os.environ["MINARI_DATASETS_PATH"]) / "ballad" / "kept-v0"
    existing.mkdir(parents=True, exist_ok=True)
    for dataset_id, words in (("ballad/replay", ("not of the form",)),
                              ("bad id!-v0", ("not of the form",)),
                              ("ballad/kept-v0", ("exists already",))):
        cases.append((f"Minari id {dataset_id!r}", functools.partial(check_dataset_id,
                                                                     dataset_id), words))
    return cases


def _distinct(a: str, b: str) -> None:
    if a == b:
        raise AssertionError(f"both names are {a}")


def input_outcomes(folder: Path) -> Iterator[Outcome]:
    """One :class:`Outcome` per class: hangs, sizes, names (made in ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    yield outcome("hangs (FIFOs, a lock's path, a silent scheduler)", hang_cases(folder))
    yield outcome("size options", size_cases())
    yield outcome("names", name_cases(folder))


__all__ = ["LIMIT_S", "NOT_NAMES", "RESERVED_SPELLINGS", "hang_cases", "input_outcomes",
           "name_cases", "outcome", "size_cases"]
