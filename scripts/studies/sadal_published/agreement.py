"""``Settings.sadal()`` against the published SADAL code's episodes (issue 23).

The published episodes come from ``sadal.published`` (a results folder). This module plays
the preset on the same data sets, seeds and strategies (SADAL's choice with the ``sadal``
rule, or a side forced in every round), writes each of our episodes into the same folder
(table ``preset``, a row per round, as it finishes; a rerun skips those held), and
compares: per episode the mean test cost of both and the rounds that agree (the same
action and labels, thresholds within ``ROUND_TOLERANCE``), per strategy the mean test
cost over the episodes both ran and whether it lies within 10%.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.stores.results import ResultStore, TableCell
from agents.sadal import sadal_choice
from ballad_env.data import Dataset, load_dataset
from ballad_env.episode import AL, LR, Episode
from ballad_env.settings import Settings
from scripts.studies.common.episodes import episode_cell, stored_episodes
from scripts.studies.sadal_published.published import PUBLISHED_STRATEGIES

#: Thresholds of a round agree when they differ by no more than this.
ROUND_TOLERANCE = 1e-9
#: Our episodes' table in the results folder.
PRESET_TABLE = "preset"


def play_preset(data: Dataset, seed: int, strategy: str, settings: Settings | None = None
                ) -> list[dict[str, Any]]:
    """One episode of ``settings`` (default ``Settings.sadal()``) for its 10 rounds,
    choosing as SADAL (``"sadal"``) or forced (``"AL"``, ``"LR"``); a record per round with
    the published runner's keys."""
    settings = settings or Settings.sadal()
    episode = Episode(data, seed, settings)
    history: dict[int, list[float]] = {AL: [], LR: []}
    rounds = []
    for number in range(1, episode.budget.n_rounds + 1):
        action = (sadal_choice(history[AL], history[LR]) if strategy == "sadal"
                  else {"AL": AL, "LR": LR}[strategy])
        result = episode.step(action)
        reward = result.rewards["entropy"]
        history[action].append(reward)
        bought = " ".join(map(str, sorted(result.queried.tolist())))
        left, right = episode.rejection.thresholds
        rounds.append({"round": number, "action": "AL" if action == AL else "LR",
                       "new_train": bought if action == AL else "",
                       "new_val": bought if action == LR else "",
                       "left": float(left), "right": float(right),
                       "test_cost": float(result.evaluation.cost),
                       "rejection_rate": float(result.evaluation.rejection_rate),
                       "reward": float(reward)})
    return rounds


def _cell(dataset: str, seed: int, strategy: str, table: str = PRESET_TABLE) -> TableCell:
    return episode_cell(dataset, seed, strategy, table=table)


def run_preset(output: str | os.PathLike, settings: Settings | None = None,
               data_dir: str | os.PathLike | None = None, table: str = PRESET_TABLE) -> int:
    """Play the preset (or ``settings``) on every published episode in ``output`` that has
    no counterpart in ``table`` there yet, each written as it finishes; the number played."""
    store = ResultStore(output)
    played = 0
    for published in stored_episodes(output):
        dataset, seed, strategy = (str(published["dataset"].iloc[0]),
                                   int(published["seed"].iloc[0]),
                                   str(published["strategy"].iloc[0]))
        cell = _cell(dataset, seed, strategy, table)
        if store.path(cell).exists():
            continue
        data = load_dataset(dataset, data_dir=data_dir)
        rows = pd.DataFrame(play_preset(data, seed, strategy, settings))
        rows.insert(0, "strategy", strategy)
        rows.insert(0, "seed", seed)
        rows.insert(0, "dataset", dataset)
        store.write(cell, rows)
        played += 1
    return played


def rounds_agreeing(ours: pd.DataFrame, published: pd.DataFrame) -> int:
    """How many rounds, from the first, agree: the same action and labels bought, both
    thresholds within ``ROUND_TOLERANCE``."""
    count = 0
    for (_, mine), (_, theirs) in zip(ours.iterrows(), published.iterrows(), strict=False):
        column = "new_train" if theirs["action"] == "AL" else "new_val"
        bought = sorted(str(theirs[column] or "").split(), key=int)
        same = (mine["action"] == theirs["action"]
                and str(mine[column] or "").split() == bought
                and abs(mine["left"] - theirs["left"]) <= ROUND_TOLERANCE
                and abs(mine["right"] - theirs["right"]) <= ROUND_TOLERANCE)
        if not same:
            break
        count += 1
    return count


def agreement_episodes(output: str | os.PathLike) -> pd.DataFrame:
    """Per episode both ran: the mean test cost of each, and the rounds agreeing."""
    store = ResultStore(output)
    rows = []
    for published in stored_episodes(output):
        key = (str(published["dataset"].iloc[0]), int(published["seed"].iloc[0]),
               str(published["strategy"].iloc[0]))
        if not store.path(_cell(*key)).exists():
            continue
        ours = store.read(_cell(*key))
        rows.append({"dataset": key[0], "seed": key[1],
                     "agent": PUBLISHED_STRATEGIES[key[2]],
                     "published": float(np.mean(published["test_cost"])),
                     "ours": float(np.mean(ours["test_cost"])),
                     "rounds_agreeing": rounds_agreeing(ours, published),
                     "rounds": len(published),
                     "fixes": ",".join(sorted({part for fix in published["fix"] if fix
                                               for part in str(fix).split(",")}))})
    return pd.DataFrame(rows, columns=["dataset", "seed", "agent", "published", "ours",
                                       "rounds_agreeing", "rounds", "fixes"])


def agreement_summary(episodes: pd.DataFrame, tolerance: float = 0.10) -> pd.DataFrame:
    """Per strategy: episodes, mean test cost of each, their relative difference and
    whether it is within ``tolerance``, episodes agreeing in every round."""
    table = episodes.groupby("agent", sort=False).agg(
        episodes=("seed", "size"), published=("published", "mean"), ours=("ours", "mean"),
        all_rounds_agree=("rounds_agreeing", lambda r: int(np.sum(
            r.to_numpy() == episodes.loc[r.index, "rounds"].to_numpy()))))
    table["relative_difference"] = table["ours"] / table["published"] - 1
    table["within"] = table["relative_difference"].abs() <= tolerance
    return table


__all__ = ["PRESET_TABLE", "ROUND_TOLERANCE", "agreement_episodes", "agreement_summary",
           "play_preset", "rounds_agreeing", "run_preset"]
