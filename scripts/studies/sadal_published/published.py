"""Run SADAL's published code (``SADAL.py`` with ``ssif.py``) on SADAL's splits (issue 23).

To check that ``Settings.sadal()`` behaves like the published code, both must run on the
same splits. This module imports a user's own copies of ``SADAL.py`` (its text survives in
public code search; stralu9/SADAL holds only a README) and ``ssif.py``
(stralu9/Semi_Supervised_Isolation_Forest), by path and lazily, in a throw-away Python that
has their packages (scikit-optimize, pandas, seaborn, matplotlib): neither file nor those
packages are part of this project or a dependency of it. Nothing of theirs is edited or
copied: the published loop ``SADAL.run_allocation_loop`` runs as it is, inside a subclass that
records each round and applies the evident fixes (``FIXES``) where the published code
crashes.

The split is ``protocol.sadal_holdout`` (80/20, stratified, ``random_state`` = the seed:
SADAL's README does not say how it splits off T); ``SADAL(X_rest, y_rest, contamination,
seed=seed)`` then draws D and V itself, which must equal ``split="sadal"``'s (checked). The
published code sees the raw features (it does not scale; ours scales on D, which SSIF does
not notice). Labels are -1/1, as ``SADAL.py`` needs.

Episodes run through the harness's executor into a ``ResultStore`` (``stores.episodes``'s
tables: one per episode, a row per round: action, labels bought, thresholds,
search seed, test cost and shares, rewards, the fix applied), written as each finishes; a
rerun skips the episodes the store holds.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.executor import execute, progress_bar
from ballad_env.cost import Costs
from ballad_env.data import load_dataset
from ballad_env.data.download import file_hashes
from ballad_env.protocol import sadal_holdout, sadal_split_indices
from ballad_env.rejection.two_sided import fit_two_sided
from scripts.studies.common.episodes import (
    PublishedCodeError,
    episode_cell,
    episode_order,
    finished_episodes,
    grow_store,
    import_file,
    missing_packages,
    stored_episodes,
)

#: The strategies: SADAL's choice, or one branch forced in every round.
STRATEGIES = ("sadal", "AL", "LR")
#: Our agents' names for them.
PUBLISHED_STRATEGIES = {"sadal": "sadal", "AL": "all-in-al", "LR": "all-in-lr"}
#: Python modules the published files import, and how to install each.
DEPENDENCIES = {"skopt": "scikit-optimize", "sklearn": "scikit-learn", "pandas": "pandas",
                "seaborn": "seaborn", "matplotlib": "matplotlib", "joblib": "joblib"}
#: SADAL's rounds and budget share (its README: 10 rounds, 20% of the training part).
N_ROUNDS, BUDGET_SHARE = 10, 0.2
#: Which SSIF an episode ran: the published one, or ours (``fast_ssif``).
SSIF_SOURCES = {False: "the published ssif.SSIF, on one core",
                True: "ours on RandomState(9) in place of ssif.SSIF (the published forests)"}
#: The fixes of a forced AL round 1: the published data flow's (none bought), the earlier one.
AL_FIRST_ROUND = ("none", "rank")
#: Where the published code crashes, what the runner does instead (``docs/sadal.md``).
FIXES = {
    "al-first-round": "AL in round 1 (no ranking yet): a ranking by 2 |P - 0.5| under an "
                      "SSIF() fitted on D without labels, and round 1's empty rejected list "
                      "kept, which makes every example ineligible: the round buys none, as "
                      "the published data flow says (al_first_round='rank', the earlier fix: "
                      "none rejected, b labels by that ranking)",
    "reward-slots": "a side chosen in all rounds overruns its reward array (nrounds slots, "
                    "slot 0 the pseudo-reward): one more slot",
    "thresholds": "the threshold search crashes (a side with no validation probability, or "
                  "an inverted interval): ours, two_sided.fit_two_sided(search='authors-"
                  "bayes') with the round's seed (an empty side keeps 0.5, an inverted "
                  "interval shrinks to its lower end)",
}


# ----------------------------------------------------------------------------- loading
def check_sadal(sadal_py: str | os.PathLike, ssif_py: str | os.PathLike) -> None:
    """``PublishedCodeError`` naming whatever the published code needs and this Python
    lacks: either file, or packages they import."""
    problems = [f"the published {name} at {path} (no such file; it is the authors' code, "
                f"{where}, not part of this project)"
                for name, path, where in (("SADAL.py", sadal_py, "SADAL.py of stralu9/SADAL"),
                                          ("ssif.py", ssif_py,
                                           "stralu9/Semi_Supervised_Isolation_Forest"))
                if not Path(path).is_file()]
    missing = missing_packages(DEPENDENCIES)
    if missing:
        problems.append(f"the package(s) {', '.join(missing)} in this Python (run it from a "
                        f"throw-away environment: pip install {' '.join(missing)})")
    if problems:
        raise PublishedCodeError("running SADAL's published code needs "
                                 + "; and ".join(problems))


def load_sadal(sadal_py: str | os.PathLike, ssif_py: str | os.PathLike,
               fast_ssif: bool = False) -> ModuleType:
    """Import the published ``SADAL.py``, its ``from ssif import SSIF`` served by the
    ``ssif.py`` at ``ssif_py``; its ``SSIF`` fits on one core (the published ``fit`` uses
    every core by default; the trees do not depend on it). ``fast_ssif``: our
    ``SemiSupervisedIsolationForest`` on ``RandomState(9)`` instead, which grows the
    published forests exactly (``tests/data/ssif_published.json``) in a fraction of the
    time: the rest of ``SADAL.py`` is still the published code."""
    check_sadal(sadal_py, ssif_py)
    os.environ.setdefault("MPLBACKEND", "Agg")  # the published files import pyplot
    ssif = import_file("ssif", ssif_py)
    saved = sys.modules.get("ssif")
    sys.modules["ssif"] = ssif  # what ``from ssif import SSIF`` finds
    try:
        sadal = import_file("published_sadal", sadal_py)
    finally:
        if saved is None:
            del sys.modules["ssif"]
        else:
            sys.modules["ssif"] = saved
    for module, names in ((sadal, ("SADAL",)), (ssif, ("SSIF",))):
        absent = [name for name in names if not hasattr(module, name)]
        if absent:
            raise PublishedCodeError(f"{module.__file__} lacks {', '.join(absent)}: is it the "
                                     "published file?")
    setattr(sadal, "SSIF", _fast_ssif() if fast_ssif else _one_core(ssif.SSIF))  # noqa: B010
    return sadal


def _one_core(published: type) -> type:
    base: Any = published

    class OneCoreSSIF(base):
        def fit(self, X: np.ndarray, y: np.ndarray, n_jobs: int = 1) -> Any:
            return super().fit(X, y, n_jobs=1)
    return OneCoreSSIF


def _fast_ssif() -> type:
    from ballad_env.detectors.ssif.forest import SemiSupervisedIsolationForest

    class FastSSIF:
        """The published ``SSIF()``'s interface and defaults (contamination 0.1, seed 9)."""

        def __init__(self, contamination: float = 0.1, seed: int = 9) -> None:
            self.model = SemiSupervisedIsolationForest(
                contamination=contamination, random_state=np.random.RandomState(seed))

        def fit(self, X: np.ndarray, y: np.ndarray, n_jobs: int = 1) -> FastSSIF:
            self.model.fit(X, y)
            return self

        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            return self.model.predict_proba(X)
    return FastSSIF


def git_blob_id(path: str | os.PathLike) -> str:
    """The file's git blob id (``git hash-object``): which version of a published file ran."""
    return str(file_hashes(Path(path))["git_blob_sha1"])


# ----------------------------------------------------------------------------- one episode
def _recording(code: ModuleType) -> type:
    """The published ``SADAL`` of ``code``, recording each round, with the fixes applied."""

    base: Any = code.SADAL

    class Recorded(base):
        forced: str | None = None
        #: Round 1's fix for a forced AL: "none" (faithful: no label) or "rank" (b labels).
        al_first_round: str = "none"
        rounds: list[dict[str, Any]]
        ALrewards: np.ndarray
        LRrewards: np.ndarray

        def check_reward(self) -> str:
            choice = super().check_reward() if self.forced is None else self.forced
            self.rounds.append({"action": choice, "fix": ""})
            return choice

        def initialize_loop(self, X: np.ndarray) -> None:
            super().initialize_loop(X)
            # fix "reward-slots": the arrays were made just before, with nrounds slots
            self.ALrewards = np.append(self.ALrewards, -1.0)
            self.LRrewards = np.append(self.LRrewards, -1.0)

        def run_allocation_round(self, Xtrain: np.ndarray, ytrain: np.ndarray,
                                 Xval: np.ndarray, yval: np.ndarray, budget: int,
                                 rejected: Any = ()) -> Any:
            first = not hasattr(self, "indicesRanked")
            if first and self.forced == "AL":  # fix "al-first-round"
                detector = code.SSIF()
                detector.fit(Xtrain, np.zeros(len(Xtrain)))
                self.train_probs = detector.predict_proba(Xtrain)[:, 1]
                self.indicesRanked = np.argsort(2 * np.abs(self.train_probs - 0.5))
                if self.al_first_round == "rank":
                    rejected = np.int64(0)
            before_train, before_val = ytrain.copy(), yval.copy()
            detector, thresholds = super().run_allocation_round(Xtrain, ytrain, Xval, yval,
                                                                budget, rejected)
            record = self.rounds[-1]
            if first and self.forced == "AL":
                fix = "al-first-round" + ("-rank" if self.al_first_round == "rank" else "")
                record["fix"] = ",".join(filter(None, (record["fix"], fix)))
            record["new_train"] = np.flatnonzero(before_train != ytrain).tolist()
            record["new_val"] = np.flatnonzero(before_val != yval).tolist()
            record["left"], record["right"] = float(thresholds[0]), float(thresholds[1])
            record["rejected_flag"] = repr(rejected)
            record["reward_al"] = float(self.ALrewards[self.nroundAL])
            record["reward_lr"] = float(self.LRrewards[self.nroundLR])
            return detector, thresholds

        def set_rejection_thresholds(self, val_probs: np.ndarray, yval: np.ndarray,
                                     seed: int = 9, n_jobs: int = 1) -> tuple[float, float]:
            self.rounds[-1]["search_seed"] = int(seed)
            try:
                return super().set_rejection_thresholds(val_probs, yval, seed, n_jobs)
            except (ZeroDivisionError, ValueError) as err:  # fix "thresholds"
                self.rounds[-1]["fix"] = f"thresholds ({type(err).__name__})"
                found = fit_two_sided(val_probs, yval != 0, (yval == 1).astype(int),
                                      Costs(self.c_fp, self.c_fn, self.c_r), "authors-bayes",
                                      seed)
                return found.left, found.right

        def evaluate_model(self, Xtest: np.ndarray, ytest: np.ndarray, detector: Any,
                           thresholds: Any) -> Any:
            result = super().evaluate_model(Xtest, ytest, detector, thresholds)
            self.rounds[-1].update(zip(("test_cost", "fp_share", "fn_share", "rejection_rate"),
                                       map(float, result[:4]), strict=True))
            return result

    return Recorded


def published_rest(X: np.ndarray, y01: np.ndarray, seed: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The training part and T of SADAL's split (``protocol.sadal_holdout``), labels -1/1."""
    rest, test = sadal_holdout(y01, seed)
    labels = np.where(np.asarray(y01) == 1, 1, -1)
    return X[rest], labels[rest], X[test], labels[test]


def play_sadal(code: ModuleType, X: np.ndarray, y01: np.ndarray, contamination: float,
               seed: int, strategy: str, n_rounds: int = N_ROUNDS,
               al_first_round: str = "none") -> list[dict[str, Any]]:
    """One episode of the published ``run_allocation_loop`` (choosing as SADAL, or forced to
    ``AL`` or ``LR``) on SADAL's split of (X, y01) with ``seed``; a record per round.
    ``al_first_round``: the fix of a forced AL round 1 (``FIXES``), ``"none"`` or ``"rank"``."""
    if al_first_round not in AL_FIRST_ROUND:
        raise ValueError(f"unknown al_first_round {al_first_round!r}: use one of "
                         f"{', '.join(AL_FIRST_ROUND)}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    X_rest, y_rest, X_test, y_test = published_rest(np.asarray(X, dtype=np.float64), y01, seed)
    model = _recording(code)(X_rest, y_rest, contamination, seed=seed)
    train, val, _ = sadal_split_indices(np.asarray(y01), seed)
    X = np.asarray(X, dtype=np.float64)
    if not (np.array_equal(model.Xtrain, X[train]) and np.array_equal(model.Xval, X[val])):
        raise PublishedCodeError("the published code's D and V differ from split='sadal''s: "
                                 "is its train_test_split call the published one?")
    model.forced = None if strategy == "sadal" else strategy
    model.al_first_round = al_first_round
    model.rounds = []
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        # the published rewards take log2(0), and gp_minimize warns on repeated points
        warnings.filterwarnings("ignore", category=UserWarning, module=r"skopt\.")
        model.run_allocation_loop(n_rounds, int(BUDGET_SHARE * len(X_rest)), X_test, y_test)
    for number, record in enumerate(model.rounds, 1):
        record["round"] = number
        record["reward"] = record["reward_al" if record["action"] == "AL" else "reward_lr"]
    return model.rounds


# ----------------------------------------------------------------------------- a run
@functools.lru_cache(maxsize=2)
def _code(sadal_py: str, ssif_py: str, fast_ssif: bool) -> ModuleType:
    return load_sadal(sadal_py, ssif_py, fast_ssif)


def play_episode(task: tuple[Any, ...],
                 single_thread: bool = False) -> tuple[tuple[str, int, str], pd.DataFrame]:
    """One episode (``task``: the files and whether SSIF is ours, their blob ids, the data
    folder, (data set, seed, strategy), rounds, and optionally the round-1 AL fix): its key
    and its rows, one per round."""
    files, blobs, data_dir, (dataset, seed, strategy), n_rounds, *fix = task
    data = load_dataset(dataset, data_dir=data_dir)
    start = time.perf_counter()
    rounds = play_sadal(_code(*files), data.X, data.y, data.contamination, seed, strategy,
                        n_rounds, *fix)
    seconds = time.perf_counter() - start
    rows = [{"dataset": dataset, "seed": seed, "strategy": strategy, "seconds": seconds,
             "fast_ssif": files[2], **blobs, **record,
             "new_train": " ".join(map(str, record["new_train"])),
             "new_val": " ".join(map(str, record["new_val"]))} for record in rounds]
    return (dataset, seed, strategy), pd.DataFrame(rows)


def run_sadal_published(sadal_py: str | os.PathLike, ssif_py: str | os.PathLike,
                        output: str | os.PathLike, datasets: Sequence[str],
                        seeds: Sequence[int], strategies: Sequence[str] = STRATEGIES, *,
                        data_dir: str | os.PathLike | None = None, n_rounds: int = N_ROUNDS,
                        fast_ssif: bool = False, n_jobs: int = 1,
                        progress: bool = True, al_first_round: str = "none") -> int:
    """Play every episode (data set x seed x strategy) of the published code not yet in the
    store at ``output``, each written as it finishes; the number played. ``al_first_round``
    is the fix of a forced AL round 1 (``FIXES``; each row's ``fix`` says which ran)."""
    unknown = sorted(set(strategies) - set(STRATEGIES))
    if unknown:
        raise ValueError(f"unknown strategies {unknown}: use {', '.join(STRATEGIES)}")
    files = (str(sadal_py), str(ssif_py), bool(fast_ssif))
    _code(*files)  # a missing file or package is named before anything is written
    blobs = {"sadal_py": git_blob_id(sadal_py), "ssif_py": git_blob_id(ssif_py)}
    # SADAL seeds its one RandomState with the split seed
    store = grow_store(output, datasets, seeds, strategies, "sadal_published",
                       stream_seed="split")
    done = finished_episodes(output, n_rounds)
    todo = [key for key in episode_order(datasets, seeds, strategies) if key not in done]
    directory = None if data_dir is None else str(data_dir)
    tasks = [(files, blobs, directory, key, n_rounds, al_first_round) for key in todo]
    bar = progress_bar(len(done) + len(todo), len(done), progress, unit="episode",
                       desc="episodes")
    try:
        for key, rows in execute(tasks, play_episode, n_jobs=n_jobs):
            store.write(episode_cell(*key), rows)
            bar.update(1)
    finally:
        bar.close()
    return len(todo)


def fixture_data(n_normal: int = 74, n_anomaly: int = 6, seed: int = 2024
                 ) -> tuple[np.ndarray, np.ndarray]:
    """A small data set for a recorded trajectory: normals N(0, 1) and anomalies N(2.5, 0.7)
    in three features, rounded to 3 decimals (exact in JSON), rows shuffled. Contamination
    0.075, not SSIF's default 0.1, so that the published ``SSIF()``'s quirk shows."""
    rng = np.random.default_rng(seed)
    X = np.round(np.vstack([rng.normal(size=(n_normal, 3)),
                            rng.normal(2.5, 0.7, size=(n_anomaly, 3))]), 3)
    y = np.r_[np.zeros(n_normal, dtype=int), np.ones(n_anomaly, dtype=int)]
    order = rng.permutation(y.size)
    return X[order], y[order]


def record_trajectory(sadal_py: str | os.PathLike, ssif_py: str | os.PathLike,
                      strategies: Sequence[str] = STRATEGIES, seed: int = 0,
                      command: str = "", fast_ssif: bool = False) -> dict[str, Any]:
    """The published code's episodes on ``fixture_data()`` with ``seed``, one per strategy,
    with their provenance (the files' git blob ids, the library versions, ``command``): the
    test fixture the preset must reproduce. The published SSIF runs, unless ``fast_ssif``
    (ours on ``RandomState(9)``; the provenance says which)."""
    code = load_sadal(sadal_py, ssif_py, fast_ssif)
    X, y = fixture_data()
    versions = {name: importlib.import_module(name).__version__
                for name in ("numpy", "scipy", "sklearn", "skopt", "joblib")}
    record: dict[str, Any] = {
        "provenance": {
            "sadal_py": git_blob_id(sadal_py), "ssif_py": git_blob_id(ssif_py),
            "python": sys.version.split()[0], "libraries": versions, "command": command,
            "how": "the published SADAL.run_allocation_loop(10, int(0.2 |rest|), X_test, "
                   "y_test) on sadal_holdout's split of X, y (labels -1/1) with "
                   f"SADAL(X_rest, y_rest, contamination, seed={seed}); "
                   + "; ssif_<strategy> says which SSIF; fixes: " + "; ".join(FIXES)},
        "X": X.tolist(), "y": y.tolist(), "seed": seed, "contamination": float(np.mean(y))}
    for strategy in strategies:
        start = time.perf_counter()
        record[strategy] = play_sadal(code, X, y, float(np.mean(y)), seed, strategy)
        record["provenance"][f"seconds_{strategy}"] = round(time.perf_counter() - start, 1)
        record["provenance"][f"ssif_{strategy}"] = SSIF_SOURCES[fast_ssif]
    return record


def merge_trajectories(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` with the strategies of ``old`` it lacks (recorded by another run on the same
    data, seed and files; each run's command and timings are kept in the provenance)."""
    if old is None:
        return new
    same = ("X", "y", "seed")
    files = ("sadal_py", "ssif_py", "libraries")
    if any(old[k] != new[k] for k in same) or any(
            old["provenance"][k] != new["provenance"][k] for k in files):
        raise PublishedCodeError("the fixture on file was recorded on other data or with "
                                 "other files or libraries: write to another file")
    merged = {**old, **{s: new[s] for s in STRATEGIES if s in new}}
    commands = [c for c in (old["provenance"]["command"], new["provenance"]["command"]) if c]
    merged["provenance"] = {**old["provenance"], **new["provenance"],
                            "command": " ; ".join(dict.fromkeys(" ; ".join(commands)
                                                                .split(" ; ")))}
    return merged


def load_sadal_published(output: str | os.PathLike) -> pd.DataFrame:
    """The published episodes in the store at ``output``: dataset, seed, agent (ours for its
    strategy), mean test cost over rounds, final test cost."""
    rows = [{"dataset": str(e["dataset"].iloc[0]), "seed": int(e["seed"].iloc[0]),
             "agent": PUBLISHED_STRATEGIES[str(e["strategy"].iloc[0])],
             "test_cost": float(np.mean(e["test_cost"])),
             "final_cost": float(e["test_cost"].iloc[-1])}
            for e in stored_episodes(output)]
    return pd.DataFrame(rows, columns=["dataset", "seed", "agent", "test_cost", "final_cost"])


__all__ = ["AL_FIRST_ROUND", "DEPENDENCIES", "FIXES", "N_ROUNDS", "PUBLISHED_STRATEGIES",
           "SSIF_SOURCES", "STRATEGIES",
           "check_sadal", "fixture_data", "git_blob_id", "load_sadal", "load_sadal_published",
           "merge_trajectories", "play_episode", "play_sadal", "published_rest",
           "record_trajectory",
           "run_sadal_published"]
