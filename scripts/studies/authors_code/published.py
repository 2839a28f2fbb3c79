"""Run the authors' published code (``BALLAD.py`` on anomatools 3.0.3) on our data files.

Issue 12. To check that ``Settings.authors_code()`` behaves like the published code, both must
run on the same splits. This module imports the user's own copy of ``BALLAD.py`` (from
Lorenzo-Perini/Ballad; never part of this project) and anomatools, both lazily, so the
project does not depend on them, and plays the published episode loop: forced to one branch
every round (``AL``, ``LR``) or choosing as BALLAD does (``ballad``). Its episodes run
through the harness's executor into a ``ResultStore``: one table per episode (dataset,
seed, strategy), a row per round (action, labels bought, tau, test cost and rates, reward),
written as the episode finishes; a rerun skips the episodes the store holds, so an
interrupted run resumes. :func:`load_published` gives each episode's mean test cost.

The loop is ours, written from the published code's main loop; every step that decides a
number (label queries, detector, threshold search, rewards, rejection, cost) calls the
published functions or anomatools' classes themselves. The split is ours too (written from
the published ``load_dataset``, which it does not call), and numpy's global stream, which
the published label queries draw from, is seeded with the split seed: the published
``load_dataset`` seeds it with 331 whatever the seed. So these episodes pair with
``Settings.authors_code(query_seed="split")``, not with the preset's 331.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.executor import execute, progress_bar
from agents.experiments.stores.results import ResultStore
from ballad_env.data import load_dataset
from ballad_env.protocol import AUTHORS_ASIDE, AUTHORS_TEST, Budget, Split
from scripts.studies.common.episodes import (
    TABLE,
    PublishedCodeError,
    episode_cell,
    episode_order,
    finished_episodes,
    grow_store,
    import_file,
    missing_packages,
    stored_episodes,
)

#: The strategies, as the published code's output names them.
STRATEGIES = ("AL", "LR", "ballad")
#: The published strategies' names in a comparison driver's output, and ours.
PUBLISHED_STRATEGIES = {"ballad": "ballad", "AL": "all-in-al", "LR": "all-in-lr"}
#: Python modules the published code imports, and how to install each.
DEPENDENCIES = {"anomatools": "anomatools==3.0.3", "skopt": "scikit-optimize"}
#: The functions of ``BALLAD.py`` the loop calls.
PUBLISHED_FUNCTIONS = ("initialize_loop", "add_training_labels", "add_validation_labels",
                       "set_rejection_threshold", "measure_rewards", "reject", "cost_function")
#: BALLAD's initial rewards in the published code (AL, LR): its first round is LR.
INITIAL_REWARDS = (0.99, 1.0)
#: The seed the published ``load_dataset`` gives numpy's global stream (BALLAD.py line 105).
PUBLISHED_STREAM_SEED = 331


# ----------------------------------------------------------------------------- loading
def missing_dependencies() -> list[str]:
    """The packages of ``DEPENDENCIES`` that cannot be imported, as pip names them."""
    return missing_packages(DEPENDENCIES)


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
    module = import_file("published_ballad", path)
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
                   n_rounds: int = 15, reward: str = "entropy",
                   stream_seed: int | None = PUBLISHED_STREAM_SEED) -> list[dict[str, Any]]:
    """One episode of the published loop, forced to ``AL`` or ``LR`` or choosing as BALLAD
    (the larger stored reward, AL on ties): per round the action, the labels bought, tau,
    the test cost and rates, and the reward measured. numpy's global stream is seeded with
    ``stream_seed`` (None: the split seed) before the loop starts."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    gamma = split.contamination
    per_round = Budget.from_fractions(len(split.y_train)).per_round
    pool = np.concatenate((split.X_train, split.X_val))  # D and V: what the rewards compare
    # The published code draws its random labels from numpy's global generator, seeded so.
    np.random.seed(seed if stream_seed is None else stream_seed)  # noqa: NPY002
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
def prepare_store(output: str | os.PathLike, datasets: Sequence[str], seeds: Sequence[int],
                  strategies: Sequence[str],
                  stream_seed: int | None = PUBLISHED_STREAM_SEED) -> ResultStore:
    """The store at ``output``, its ``run.json`` grown to these data sets, seeds and
    strategies; ``PublishedCodeError`` if its episodes drew from another stream seed."""
    manifest = ResultStore(output).read_manifest() if Path(output).is_dir() else None
    stored_seed = stored_stream_seed(output)
    if manifest is not None and stored_seed != stream_seed:
        raise PublishedCodeError(
            f"{output} holds episodes whose stream was seeded with {_stream_text(stored_seed)}, "
            f"not {_stream_text(stream_seed)}: write these to another --published folder, or "
            f"pass --stream-seed {_stream_flag(stored_seed)} to grow this one")
    return grow_store(output, datasets, seeds, strategies, "published_code",
                      stream_seed="split" if stream_seed is None else stream_seed)


def _stream_flag(stream_seed: int | None) -> str:
    return "split" if stream_seed is None else str(stream_seed)


def _stream_text(stream_seed: int | None) -> str:
    return "the split seed" if stream_seed is None else str(stream_seed)


def stored_stream_seed(output: str | os.PathLike) -> int | None:
    """The seed of numpy's stream the store's episodes drew from: a number, or None for the
    split seed (also for stores written before the runner recorded it, which all did so)."""
    manifest = ResultStore(output).read_manifest() if Path(output).is_dir() else None
    value = (manifest or {}).get("stream_seed", "split")
    return None if value == "split" else int(value)


def load_published(output: str | os.PathLike) -> pd.DataFrame:
    """The published code's episodes in the store at ``output`` as a table: dataset, seed,
    agent (our name for its strategy), mean test cost over rounds."""
    rows = [{"dataset": str(episode["dataset"].iloc[0]), "seed": int(episode["seed"].iloc[0]),
             "agent": PUBLISHED_STRATEGIES[str(episode["strategy"].iloc[0])],
             "test_cost": sum(episode["test_cost"].tolist()) / len(episode)}
            for episode in stored_episodes(output)]
    return pd.DataFrame(rows, columns=["dataset", "seed", "agent", "test_cost"])


@functools.lru_cache(maxsize=2)
def _code(ballad_py: str) -> ModuleType:
    return load_ballad(ballad_py)


@functools.lru_cache(maxsize=1)
def _split(dataset: str, seed: int, data_dir: str | None) -> PublishedSplit:
    data = load_dataset(dataset, data_dir=data_dir)
    return published_split(data.X, data.y, seed)


def play_episode(task: tuple[str, str, str | None, tuple[str, int, str], int, int | None],
                 single_thread: bool = False) -> tuple[tuple[str, int, str], pd.DataFrame]:
    """One episode of the published code (``task``: BALLAD.py, its digest, the data folder,
    (data set, seed, strategy), rounds, the stream seed): its key and its rows, one per
    round."""
    ballad_py, digest, data_dir, (dataset, seed, strategy), n_rounds, stream_seed = task
    start = time.perf_counter()
    rounds = play_published(_code(ballad_py), _split(dataset, seed, data_dir), seed, strategy,
                            n_rounds, stream_seed=stream_seed)
    seconds = time.perf_counter() - start
    rows = [{"dataset": dataset, "seed": seed, "strategy": strategy, "round": number,
             "seconds": seconds, "ballad_py": digest, **record}
            for number, record in enumerate(rounds, 1)]
    return (dataset, seed, strategy), pd.DataFrame(rows)


def run_published(ballad_py: str | os.PathLike, output: str | os.PathLike,
                  datasets: Sequence[str], seeds: Sequence[int],
                  strategies: Sequence[str] = STRATEGIES, *,
                  data_dir: str | os.PathLike | None = None, n_rounds: int = 15,
                  progress: bool = True,
                  stream_seed: int | None = PUBLISHED_STREAM_SEED) -> int:
    """Play every episode (data set x seed x strategy) of the published code not yet in the
    store at ``output``, in this process (the published code draws from numpy's global
    generator, seeded with ``stream_seed``; None: the split seed), each written as it
    finishes; the number played."""
    unknown = sorted(set(strategies) - set(STRATEGIES))
    if unknown:
        raise ValueError(f"unknown strategies {unknown}: use {', '.join(STRATEGIES)}")
    _code(str(ballad_py))  # a missing published function is named before anything is written
    digest = file_digest(ballad_py)
    store = prepare_store(output, datasets, seeds, strategies, stream_seed)
    done = finished_episodes(output, n_rounds)
    todo = [key for key in episode_order(datasets, seeds, strategies) if key not in done]
    directory = None if data_dir is None else str(data_dir)
    tasks = [(str(ballad_py), digest, directory, key, n_rounds, stream_seed) for key in todo]
    bar = progress_bar(len(done) + len(todo), len(done), progress, unit="episode",
                       desc="episodes")
    try:
        for key, rows in execute(tasks, play_episode):
            store.write(episode_cell(*key), rows)
            bar.update(1)
    finally:
        bar.close()
    return len(todo)


__all__ = ["DEPENDENCIES", "INITIAL_REWARDS", "PUBLISHED_FUNCTIONS", "PUBLISHED_STREAM_SEED",
           "STRATEGIES",
           "PublishedCodeError", "PublishedSplit", "TABLE", "check_published", "episode_cell",
           "PUBLISHED_STRATEGIES", "episode_order", "file_digest", "finished_episodes",
           "load_ballad", "load_published",
           "missing_dependencies", "new_detector", "play_episode", "play_published",
           "prepare_store", "published_split", "run_published", "stored_episodes",
           "stored_stream_seed"]
