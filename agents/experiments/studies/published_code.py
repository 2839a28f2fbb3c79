"""Run the authors' published code (``BALLAD.py`` on anomatools 3.0.3) on our data files.

Issue 12. To check that ``Settings.authors_code()`` behaves like the published code, both must
run on the same splits. This module imports the user's own copy of ``BALLAD.py`` (from
Lorenzo-Perini/Ballad; never part of this project) and anomatools, both lazily, so the
project does not depend on them, and plays the published episode loop: forced to one branch
every round (``AL``, ``LR``) or choosing as BALLAD does (``ballad``). It writes one JSON line
per episode as it finishes (dataset, seed, strategy, seconds, rounds with their test cost),
the format :func:`agents.experiments.studies.authors_code.load_published` reads, and skips the
episodes a file already holds, so an interrupted run resumes.

The loop is ours, written from the published code's main loop; every step that decides a
number (label queries, detector, threshold search, rewards, rejection, cost) calls the
published functions or anomatools' classes themselves.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ballad_env.data import load_dataset
from ballad_env.protocol import AUTHORS_ASIDE, AUTHORS_TEST, Budget, Split

#: The strategies, as the published code's output names them (``PUBLISHED_STRATEGIES``).
STRATEGIES = ("AL", "LR", "ballad")
#: Python modules the published code imports, and how to install each.
DEPENDENCIES = {"anomatools": "anomatools==3.0.3", "skopt": "scikit-optimize"}
#: The functions of ``BALLAD.py`` the loop calls.
PUBLISHED_FUNCTIONS = ("initialize_loop", "add_training_labels", "add_validation_labels",
                       "set_rejection_threshold", "measure_rewards", "reject", "cost_function")
#: BALLAD's initial rewards in the published code (AL, LR): its first round is LR.
INITIAL_REWARDS = (0.99, 1.0)


class PublishedCodeError(RuntimeError):
    """The published code cannot run here: its file or a package it needs is missing."""


# ----------------------------------------------------------------------------- loading
def missing_dependencies() -> list[str]:
    """The packages of ``DEPENDENCIES`` that cannot be imported, as pip names them."""
    missing = []
    for module, package in DEPENDENCIES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    return missing


def check_published(path: str | os.PathLike) -> None:
    """``PublishedCodeError`` naming whatever the published code at ``path`` needs and this
    Python lacks: the file itself, or packages it imports."""
    path = Path(path)
    problems = []
    if not path.is_file():
        problems.append(f"the published BALLAD.py at {path} (no such file; it is the authors' "
                        "code, github.com/Lorenzo-Perini/Ballad, not part of this project)")
    missing = missing_dependencies()
    if missing:
        problems.append(f"the package(s) {', '.join(missing)} in this Python "
                        f"(pip install {' '.join(missing)})")
    if problems:
        raise PublishedCodeError("running the published code needs " + "; and ".join(problems))


def load_ballad(path: str | os.PathLike) -> ModuleType:
    """Import the published ``BALLAD.py`` at ``path``; ``PublishedCodeError`` names whatever
    is missing (the file, a package, a function the loop calls)."""
    check_published(path)
    _restore_numpy_aliases()
    spec = importlib.util.spec_from_file_location("published_ballad", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    absent = [name for name in PUBLISHED_FUNCTIONS if not hasattr(module, name)]
    if absent:
        raise PublishedCodeError(f"{path} lacks the published function(s) {', '.join(absent)}: "
                                 "is it the authors' BALLAD.py?")
    return module


def _restore_numpy_aliases() -> None:
    """The published code calls ``np.int``, which numpy 1.24 removed: put it back. This one
    change to a library module is global, as the published code needs it to be."""
    if "int" not in np.__dict__:
        np.int = int  # type: ignore[attr-defined]  # noqa: NPY001


def file_digest(path: str | os.PathLike) -> str:
    """The first 16 hex digits of a file's SHA-256: which ``BALLAD.py`` made an episode."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


# ----------------------------------------------------------------------------- split
@dataclass(frozen=True)
class PublishedSplit(Split):
    """D, V and T scaled on D, labels coded as the published code codes them (1 anomaly,
    -1 normal), and the contamination of the whole data set."""

    contamination: float


def published_split(X: np.ndarray, y: np.ndarray, seed: int) -> PublishedSplit:
    """The published code's split and scaling, written from its ``load_dataset``: per class,
    ``train_test_split`` sets 60% of the rows aside, then 0.333 of those for T, both with
    ``random_state`` = seed; D, V and T hold the normal rows, then the anomalies; a standard
    then a min-max scaler are fitted on D. ``split="authors"`` must give the same sets."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    labels = np.where(y == 1, 1, -1)
    parts: list[list[np.ndarray]] = [[], [], [], [], [], []]
    for label in (-1, 1):
        X_kept, X_aside, y_kept, y_aside = train_test_split(
            X[labels == label], labels[labels == label], test_size=AUTHORS_ASIDE,
            random_state=seed)
        X_val, X_test, y_val, y_test = train_test_split(X_aside, y_aside, test_size=AUTHORS_TEST,
                                                        random_state=seed)
        for part, chunk in zip(parts, (X_kept, y_kept, X_val, y_val, X_test, y_test),
                               strict=True):
            part.append(chunk)
    X_train, y_train, X_val, y_val, X_test, y_test = (np.concatenate(p) for p in parts)
    standard = StandardScaler().fit(X_train)
    minmax = MinMaxScaler().fit(standard.transform(X_train))

    def scale(A: np.ndarray) -> np.ndarray:
        return minmax.transform(standard.transform(A))

    return PublishedSplit(scale(X_train), y_train, scale(X_val), y_val, scale(X_test), y_test,
                          float(np.mean(labels == 1)))


# ----------------------------------------------------------------------------- one episode
def new_detector(contamination: float) -> Any:
    """The published code's detector: anomatools' SSDO on a kNNO prior, both squashed."""
    from anomatools.models import SSDO
    from anomatools.models._knno import kNNO
    from anomatools.models.scalers import SquashScaler

    return SSDO(base_detector=kNNO(scaler=SquashScaler(contamination=contamination)),
                scaler=SquashScaler(contamination=contamination))


@dataclass
class _Loop:
    """What the published loop carries from round to round."""

    y_train_known: np.ndarray  # 0 unlabeled, else the label bought
    y_val_known: np.ndarray
    ranking: np.ndarray  # D's examples, most uncertain first (empty: the first AL is random)
    old_outputs: dict[str, Any]  # each side's last output, which its reward compares with
    rewards: dict[str, float]


def _buy(code: ModuleType, action: str, loop: _Loop, split: PublishedSplit,
         per_round: int) -> np.ndarray:
    """Buy one round of labels on ``action``'s side (the published queries); their indices."""
    if action == "AL":
        before = loop.y_train_known.copy()
        loop.y_train_known = code.add_training_labels(loop.y_train_known, split.y_train,
                                                      loop.ranking, per_round)
        return np.flatnonzero((before == 0) & (loop.y_train_known != 0))
    before = loop.y_val_known.copy()
    loop.y_val_known = code.add_validation_labels(loop.y_val_known, split.y_val, per_round)
    return np.flatnonzero((before == 0) & (loop.y_val_known != 0))


def _threshold(code: ModuleType, detector: Any, loop: _Loop, split: PublishedSplit) -> float:
    """The published threshold search on V's labels; 0 (reject nothing) while V has none."""
    labeled = np.flatnonzero(loop.y_val_known != 0)
    if labeled.size == 0:
        return 0.0
    c_r, c_fp, c_fn = split.contamination, 1.0, 1.0
    p_val = detector.predict_proba(split.X_val[labeled])[:, 1]
    return float(code.set_rejection_threshold(p_val, split.y_val[labeled], c_r, c_fp, c_fn, 1))


def _test_record(code: ModuleType, detector: Any, tau: float, split: PublishedSplit
                 ) -> dict[str, float]:
    """The published cost function on T, with its rejections marked 2."""
    predictions = detector.predict(split.X_test)
    probabilities = detector.predict_proba(split.X_test)[:, 1]
    predictions[code.reject(predictions, probabilities, tau)] = 2
    cost, fp, fn, rejected = code.cost_function(split.y_test, predictions,
                                                split.contamination, 1.0, 1.0)
    return {"test_cost": float(cost), "fp_rate": float(fp), "fn_rate": float(fn),
            "rejection_rate": float(rejected)}


def play_published(code: ModuleType, split: PublishedSplit, seed: int, strategy: str,
                   n_rounds: int = 15, reward: str = "entropy") -> list[dict[str, Any]]:
    """One episode of the published loop, forced to ``AL`` or ``LR`` or choosing as BALLAD
    (the larger stored reward, AL on ties): per round the action, the labels bought, tau,
    the test cost and rates, and the reward measured."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    gamma = split.contamination
    per_round = Budget.from_fractions(len(split.y_train)).per_round
    pool = np.concatenate((split.X_train, split.X_val))  # D and V: what the rewards compare
    # The published code draws its random labels from numpy's global generator, seeded so.
    np.random.seed(seed)  # noqa: NPY002
    old_al, old_lr = code.initialize_loop(pool, seed, gamma, 1.0, 1.0, reward, gamma)
    loop = _Loop(np.zeros(len(split.y_train), int), np.zeros(len(split.y_val), int),
                 np.array([]), {"AL": old_al, "LR": old_lr},
                 dict(zip(("AL", "LR"), INITIAL_REWARDS, strict=True)))
    rounds = []
    for _ in range(n_rounds):
        # The published rewards divide by tau = 0 while V has no label, and gp_minimize warns
        # when it draws a point twice: quietly, as there.
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"skopt\.")
            rounds.append(_play_round(code, split, pool, loop, strategy, per_round, reward))
    return rounds


def _play_round(code: ModuleType, split: PublishedSplit, pool: np.ndarray, loop: _Loop,
                strategy: str, per_round: int, reward: str) -> dict[str, Any]:
    """One round of the published loop: choose, buy, refit, set tau, measure, evaluate
    (``pool``: D and V stacked, what the rewards compare)."""
    action = strategy if strategy != "ballad" else (
        "AL" if loop.rewards["AL"] >= loop.rewards["LR"] else "LR")
    new = _buy(code, action, loop, split, per_round)
    detector = new_detector(split.contamination)
    detector.fit(split.X_train, loop.y_train_known)
    tau = _threshold(code, detector, loop, split)
    al_reward, lr_reward, new_al, new_lr = code.measure_rewards(
        detector.predict(pool), detector.predict_proba(pool)[:, 1], tau,
        loop.old_outputs["AL"], loop.old_outputs["LR"], metric=reward)
    # Only the side played keeps its new output and reward (the published loop).
    loop.rewards[action] = al_reward if action == "AL" else lr_reward
    loop.old_outputs[action] = new_al if action == "AL" else new_lr
    if action == "AL":
        loop.ranking = np.argsort(2 * np.abs(detector.predict_proba(split.X_train)[:, 1]
                                             - 0.5))
    return {"action": action, "new": new.tolist(), "tau": tau,
            **_test_record(code, detector, tau, split), "reward": float(loop.rewards[action])}


# ----------------------------------------------------------------------------- a run
def episode_key(record: dict[str, Any]) -> tuple[str, int, str]:
    """(data set, seed, strategy) of a recorded episode."""
    return record["dataset"], int(record["seed"]), record["strategy"]


def finished_episodes(path: str | os.PathLike, n_rounds: int) -> set[tuple[str, int, str]]:
    """The episodes a JSON-lines file already holds; ``PublishedCodeError`` if one of them
    has another number of rounds (its mean cost would not compare)."""
    path = Path(path)
    if not path.exists():
        return set()
    done = set()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if len(record["rounds"]) != n_rounds:
            raise PublishedCodeError(
                f"{path}, line {number}: {episode_key(record)} has {len(record['rounds'])} "
                f"rounds, not {n_rounds}; write episodes of another length to another file")
        done.add(episode_key(record))
    return done


def episode_order(datasets: Sequence[str], seeds: Sequence[int], strategies: Sequence[str]
                  ) -> Iterator[tuple[str, int, str]]:
    """Seed after seed (a partial run then holds whole seeds), data sets in the order given,
    then strategies."""
    for seed in seeds:
        for dataset in datasets:
            for strategy in strategies:
                yield dataset, seed, strategy


def run_published(ballad_py: str | os.PathLike, output: str | os.PathLike,
                  datasets: Sequence[str], seeds: Sequence[int],
                  strategies: Sequence[str] = STRATEGIES, *,
                  data_dir: str | os.PathLike | None = None, n_rounds: int = 15,
                  progress: bool = True) -> int:
    """Play every episode (data set x seed x strategy) of the published code not yet in
    ``output``, appending one JSON line as each finishes; the number played."""
    unknown = sorted(set(strategies) - set(STRATEGIES))
    if unknown:
        raise ValueError(f"unknown strategies {unknown}: use {', '.join(STRATEGIES)}")
    code = load_ballad(ballad_py)
    digest = file_digest(ballad_py)
    done = finished_episodes(output, n_rounds)
    todo = [key for key in episode_order(datasets, seeds, strategies) if key not in done]
    from tqdm.auto import tqdm

    bar = tqdm(total=len(done) + len(todo), initial=len(done), unit="episode",
               disable=not progress, dynamic_ncols=True)
    splits: dict[tuple[str, int], PublishedSplit] = {}  # one per (data set, seed)
    try:
        for dataset, seed, strategy in todo:
            bar.set_description(f"{dataset} {seed} {strategy}")
            if (dataset, seed) not in splits:
                data = load_dataset(dataset, data_dir=data_dir)
                splits = {(dataset, seed): published_split(data.X, data.y, seed)}
            split = splits[(dataset, seed)]
            start = time.perf_counter()
            rounds = play_published(code, split, seed, strategy, n_rounds)
            record = {"dataset": dataset, "seed": seed, "strategy": strategy,
                      "seconds": time.perf_counter() - start, "ballad_py": digest,
                      "rounds": rounds}
            with open(output, "a") as file:
                file.write(json.dumps(record) + "\n")
            bar.update(1)
    finally:
        bar.close()
    return len(todo)


__all__ = ["DEPENDENCIES", "INITIAL_REWARDS", "PUBLISHED_FUNCTIONS", "STRATEGIES",
           "PublishedCodeError", "PublishedSplit", "check_published", "episode_order",
           "file_digest", "finished_episodes", "load_ballad", "missing_dependencies",
           "new_detector", "play_published", "published_split", "run_published"]
