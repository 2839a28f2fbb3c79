"""The policy studies' runs and the analysis both share (``policies``, ``policy_scale``).

A study's policies are training runs named ``<group>-train<n training sets>-s<seed>``
(``RUN_PATTERN``), one folder each under ``<study>/policies``, trained by :func:`train_runs`
(one run a task in the executor's workers, its output in ``<study>/logs/<run>.log``). This
module also reads what the runs and a study's evaluation wrote: the settings JSON beside each
model, the monitor CSVs (learning curves) and the tidy round table (one row per data set,
seed, agent and round, in a ``ResultStore`` of the study, one file per episode), summarised
per episode.

Nothing here imports torch or stable-baselines3 at module level: the analysis runs
without the ``rl`` extra.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from agents.experiments.executor import execute, worker_limits
from agents.experiments.stores.results import (
    FORMAT_VERSION,
    ResultStore,
    TableCell,
    concat_cells,
    normalise_dtypes,
)
from agents.experiments.training import train_and_plot
from agents.reports.plots import save_figure
from ballad_env.settings import Settings

if TYPE_CHECKING:
    from agents.experiments.training.config import TrainConfig

#: A study policy's run name: ``<group>-train<n training sets>-s<seed>``.
RUN_PATTERN = r"^(?P<group>.+)-train\d+-s(?P<train_seed>\d+)$"
#: The settings options a policy study takes (the reward is one of its axes, not an option).
STUDY_OPTIONS = tuple(f.name for f in fields(Settings) if f.name != "reward")
#: The rule agents evaluated next to the policies (drawn dashed).
RULES = ("ballad", "all-in-al", "all-in-lr", "random", "oracle")


def _train_task(task: tuple[str, TrainConfig, str], single_thread: bool
                ) -> tuple[str, str | None, float]:
    """Train one run (``train_and_plot``) with its output in its log file: (name, error or
    None, seconds). One BLAS/OpenMP thread even in this process, as every study run has
    always trained."""
    name, config, log = task
    start = time.perf_counter()
    with open(log, "w") as out, redirect_stdout(out), redirect_stderr(out), \
            worker_limits(True):
        try:
            train_and_plot(config)
        except Exception as err:  # a failed run is reported, the others go on
            traceback.print_exc()
            return name, f"{type(err).__name__}: {err}", time.perf_counter() - start
    return name, None, time.perf_counter() - start


def train_runs(configs: Mapping[str, TrainConfig], n_jobs: int, logs: Path) -> list[str]:
    """Train every run of ``configs`` (by run name), ``n_jobs`` at a time in the executor's
    worker processes (1: in this process), each one's output in ``<logs>/<name>.log``;
    prints each run's end and returns the names of those that failed."""
    logs.mkdir(parents=True, exist_ok=True)
    tasks = [(name, config, str(logs / f"{name}.log")) for name, config in configs.items()]
    failed, start = [], time.perf_counter()
    for name, error, seconds in execute(tasks, _train_task, n_jobs):
        if error:
            failed.append(name)
        status = "ok" if error is None else f"FAILED ({error})"
        print(f"{name}: {status} in {seconds:.0f} s [{time.perf_counter() - start:.0f} s total]",
              flush=True)
    return failed


class StudyError(RuntimeError):
    """A step cannot go on safely; the message says why and what to do."""


def policy_dir(study: Path) -> Path:
    """Where the study's trained policies live (one folder per run)."""
    return Path(study) / "policies"


def run_name(algo: str, reward: str, seed: int, n_train: int) -> str:
    """The run name of one study policy (``RUN_PATTERN``)."""
    return f"{algo}-{reward}-train{n_train}-s{seed}"


def model_path(study: Path, name: str) -> Path:
    """The final saved model of run ``name``."""
    return policy_dir(study) / name / f"{name}.zip"


def trained_settings(model: Path) -> Settings:
    """The settings a saved policy was trained with, from the JSON beside it (both the
    ``config.settings`` layout and the older one with ``config.reward``/``config.prior``)."""
    config = json.loads(Path(model).with_suffix(".json").read_text())["config"]
    return Settings.from_dict(config.get("settings", config))


def trained_policies(study: Path) -> list[Path]:
    """The study's saved models (final ones, not checkpoints), sorted by run name."""
    folder = policy_dir(study)
    if not folder.is_dir():
        return []
    return sorted(d / f"{d.name}.zip" for d in folder.iterdir() if (d / f"{d.name}.zip").is_file())


def group_order(groups: Iterable[str], order: Sequence[str] = ()) -> list[str]:
    """Groups in report order: those named in ``order`` first (in its order), then any
    others as found."""
    present = list(dict.fromkeys(groups))
    return [g for g in order if g in present] + [g for g in present if g not in order]


# --------------------------------------------------------------------------- round store
#: A policy study's evaluated episodes: a ``ResultStore`` under ``<study>/rounds``, one
#: table per (data set, seed, agent), one row per round.
ROUNDS = "rounds"


def rounds_store(study: Path) -> ResultStore:
    """The store of a policy study's evaluated episodes."""
    return ResultStore(Path(study) / ROUNDS)


def rounds_cell(dataset: str, seed: int, agent: str) -> TableCell:
    """The stored file of one evaluated episode."""
    return TableCell(ROUNDS, (("dataset", dataset), ("seed", seed), ("agent", agent)))


def stored_episodes(study: Path) -> list[tuple[str, int, str]]:
    """The (data set, seed, agent) episodes the study's store holds, data set by data set,
    then seed, then agent, each in the order it was first evaluated."""
    store = rounds_store(study)
    grid = (store.read_manifest() or {}).get("grid", {})
    keys = [(d, s, a) for d in grid.get("datasets", []) for s in grid.get("seeds", [])
            for a in grid.get("agents", [])]
    return [key for key in keys if store.path(rounds_cell(*key)).exists()]


def prepare_rounds(study: Path, datasets: Sequence[str], seeds: Sequence[int],
                   agents: Sequence[str], **record: Any) -> ResultStore:
    """Open the study's store for these episodes: ``run.json`` grows to them and records
    ``record`` (the settings, the policies' hashes: the store refuses a changed policy).
    A study evaluated before the store (a ``rounds.csv``) is refused: evaluate into a new
    ``--study-dir`` (its report still reads the file)."""
    if (Path(study) / "rounds.csv").exists():
        raise StudyError(f"{study} holds a rounds.csv written before the round store: its "
                         "report still reads it, but new evaluations go into a new "
                         "--study-dir")
    store = rounds_store(study)
    stored = (store.read_manifest() or {}).get("grid", {})
    grid = {axis: list(dict.fromkeys([*stored.get(axis, []), *values]))
            for axis, values in (("datasets", datasets), ("seeds", seeds), ("agents", agents))}
    store.prepare({"format": FORMAT_VERSION, "study": "policy rounds", "grid": grid, **record,
                   "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")})
    return store


def write_episode(store: ResultStore, rows: Sequence[dict[str, Any]]) -> None:
    """Store one episode's rows (all of one data set, seed and agent)."""
    first = rows[0]
    frame = normalise_dtypes(pd.DataFrame(list(rows)))
    store.write(rounds_cell(first["dataset"], int(first["seed"]), first["agent"]), frame)


def load_rounds(study: Path) -> pd.DataFrame:
    """The tidy round table of a study (its store, or the ``rounds.csv`` of a study evaluated
    before it), with each agent's group (policy run without its seed) and seed."""
    store = rounds_store(study)
    if store.run_file.exists():
        df = concat_cells(store.read(rounds_cell(*key)) for key in stored_episodes(study))
    else:
        df = pd.read_csv(Path(study) / "rounds.csv")
    parts = df["agent"].str.extract(RUN_PATTERN)
    df["group"] = parts["group"].fillna(df["agent"])
    df["train_seed"] = pd.to_numeric(parts["train_seed"])
    df["action"] = df["action"].fillna("")
    return df


def episode_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (data set, seed, agent): final and mean-over-rounds cost, AL share,
    switches, and the round of the first switch."""
    played = df[df["round"] > 0].sort_values("round")
    keys = ["dataset", "seed", "agent", "group", "train_seed"]

    def summary(g: pd.DataFrame) -> dict[str, float]:
        actions = g["action"].to_numpy()
        changes = np.flatnonzero(actions[1:] != actions[:-1])
        return {"final_cost": g["test_cost"].iloc[-1], "mean_cost": g["test_cost"].mean(),
                "al_share": float(np.mean(actions == "AL")), "switches": len(changes),
                "first_switch": float(changes[0] + 2) if len(changes) else np.nan}

    rows = [{**dict(zip(keys, k, strict=True)), **summary(g)}
            for k, g in played.groupby(keys, dropna=False, sort=False)]
    return pd.DataFrame(rows)


def by_training_seed(df: pd.DataFrame, episodes: pd.DataFrame) -> pd.DataFrame:
    """What each learned policy does: cost, AL share, switches and its most common sequence of
    actions (A = AL, L = LR) with the share of held-out episodes that follow it exactly.
    """
    played = df[df["round"] > 0].sort_values("round")
    letters = played.groupby(["group", "train_seed", "dataset", "seed"])["action"].agg(
        lambda a: "".join(x[0] for x in a))
    rows = []
    policies = episodes.dropna(subset=["train_seed"])
    for (group, seed), e in policies.groupby(["group", "train_seed"]):
        counts = letters.loc[(group, seed)].value_counts()
        rows.append({"agent": group, "train_seed": int(seed),
                     "final_cost": e["final_cost"].mean(), "mean_cost": e["mean_cost"].mean(),
                     "al_share": e["al_share"].mean(), "switches": e["switches"].mean(),
                     "modal_sequence": counts.index[0],
                     "modal_share": counts.iloc[0] / counts.sum()})
    return pd.DataFrame(rows)


def training_times(models: Sequence[Path]) -> pd.DataFrame:
    """Wall time, steps and episodes of every run, from the settings JSON beside its model."""
    rows = []
    for path in models:
        s = json.loads(Path(path).with_suffix(".json").read_text())
        settings = trained_settings(path)
        rows.append({"run": s["run_name"], "algo": s["algo"], "reward": settings.reward,
                     "seed": s["config"]["seed"], "timesteps": s["num_timesteps"],
                     "episodes": s["num_timesteps"] // settings.n_rounds,
                     "train_seconds": s["train_seconds"]})
    return pd.DataFrame(rows)


def plot_by_round(df: pd.DataFrame, column: str, ylabel: str, path: Path,
                  groups: Sequence[str], dashed: Sequence[str] = RULES) -> None:
    """``column`` against the round, one panel per held-out data set, one line per group
    (``dashed`` groups, the rules by default, dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(df["dataset"]))
    fig, axes = plt.subplots(2, (len(datasets) + 1) // 2, figsize=(13, 6.5), sharex=True,
                             constrained_layout=True, squeeze=False)
    for ax, name in zip(axes.flat, datasets, strict=False):
        d = df[df["dataset"] == name]
        for group in groups:
            curve = d[d["group"] == group].groupby("round")[column].mean()
            style = "--" if group in dashed else "-"
            ax.plot(curve.index, curve.to_numpy(), style, label=group, lw=1.4)
        ax.set_title(name)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
    axes.flat[0].legend(fontsize=7)
    save_figure(fig, path, dpi=110, bbox_inches=None)


def run_folders(models: Sequence[Path], order: Sequence[str] = ()) -> dict[str, list[Path]]:
    """Run folders of the saved policies per group (run name without its seed), the groups
    in ``order`` first."""
    runs: dict[str, list[Path]] = {}
    for model in models:
        match = re.fullmatch(RUN_PATTERN, model.stem)
        if match:
            runs.setdefault(match["group"], []).append(model.parent)
    return {g: runs[g] for g in group_order(runs, order)}


__all__ = ["ROUNDS", "RULES", "RUN_PATTERN", "STUDY_OPTIONS", "StudyError", "by_training_seed",
           "episode_table", "group_order", "load_rounds", "model_path", "plot_by_round",
           "policy_dir", "prepare_rounds", "rounds_cell", "rounds_store", "run_folders",
           "run_name", "stored_episodes", "trained_policies", "trained_settings",
           "training_times", "write_episode",
           "train_runs"]
