"""A variant of ``Settings.sadal()`` on the published SADAL episodes (issue 23).

Published behaviours are options with ours the default, each measured. The preset repeats
the published code round by round (``agreement``); a variant changes some of its options
(``threshold_search="exact"``: our exact two-sided search in place of the published
``gp_minimize``) and plays the same episodes (data sets, seeds, strategies) into its own
table beside the preset's, named for the changes (``preset_threshold_search=exact``), a
row per round, each episode written as it finishes (a rerun skips those held).

It is compared with the published episodes themselves, which the preset repeats (the
agreement measures that) and which record the published test rejection rate, so a variant
needs no preset episode (at about 13 s a round for the published search): per episode and
strategy the mean test cost of both, the share of rounds with the same action (SADAL's
choice may differ; a forced side never does), the mean test rejection rates, and the mean
|left - left'| and |right - right'| over the rounds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.stores.results import ResultStore
from ballad_env.settings import Settings
from ballad_env.settings.cli import option_text
from scripts.studies.common.episodes import episode_cell, stored_episodes
from scripts.studies.sadal_published.agreement import PRESET_TABLE, run_preset
from scripts.studies.sadal_published.published import PUBLISHED_STRATEGIES

#: Columns of ``variant_episodes``.
EPISODE_COLUMNS = ["dataset", "seed", "agent", "rounds", "published", "variant",
                   "same_action", "rejection_published", "rejection_variant",
                   "left_difference", "right_difference"]


def variant_settings(changes: Mapping[str, Any]) -> Settings:
    """``Settings.sadal()`` with ``changes`` (validated as any settings); ``ValueError`` if
    there is none, or if they leave the preset as it is (its own value, or an option the
    preset's rejector ignores)."""
    preset = Settings.sadal()
    if not changes:
        raise ValueError("a variant changes at least one option of Settings.sadal(): give "
                         "option=value, e.g. threshold_search=exact")
    variant = preset.replace(**changes)
    if variant == preset:
        raise ValueError(f"{variant_name(changes)} leaves Settings.sadal() as it is (its "
                         "own values, or options it ignores): change another option")
    return variant


def variant_name(changes: Mapping[str, Any]) -> str:
    """The changes as text, options in alphabetical order: ``a=1+b=x``."""
    return "+".join(f"{name}={option_text(name, value)}"
                    for name, value in sorted(changes.items()))


def variant_table(changes: Mapping[str, Any]) -> str:
    """The variant's table in the results folder: ``preset_`` and its name."""
    return f"{PRESET_TABLE}_{variant_name(changes)}"


def run_variant(output: str | os.PathLike, changes: Mapping[str, Any],
                data_dir: str | os.PathLike | None = None) -> int:
    """Play ``Settings.sadal()`` with ``changes`` on every published episode in ``output``
    that its table lacks, each written as it finishes; the number played."""
    return run_preset(output, variant_settings(changes), data_dir,
                      table=variant_table(changes))


def compare_rounds(published: pd.DataFrame, variant: pd.DataFrame) -> dict[str, float]:
    """One episode's rounds, paired by number: mean test cost of each, the share with the
    same action, mean rejection rates, mean absolute differences of the thresholds."""
    both = published.merge(variant, on="round", suffixes=("", "_variant"))
    if both.empty:
        raise ValueError("the published and the variant episode share no round")
    return {"rounds": len(both),
            "published": float(np.mean(published["test_cost"])),
            "variant": float(np.mean(variant["test_cost"])),
            "same_action": float(np.mean(both["action"] == both["action_variant"])),
            "rejection_published": float(np.mean(published["rejection_rate"])),
            "rejection_variant": float(np.mean(variant["rejection_rate"])),
            "left_difference": float(np.mean(np.abs(both["left"] - both["left_variant"]))),
            "right_difference": float(np.mean(np.abs(both["right"]
                                                      - both["right_variant"])))}


def variant_episodes(output: str | os.PathLike, table: str) -> pd.DataFrame:
    """Per published episode that ``table`` holds too: ``compare_rounds``."""
    store = ResultStore(output)
    rows = []
    for published in stored_episodes(output):
        dataset, seed, strategy = (str(published["dataset"].iloc[0]),
                                   int(published["seed"].iloc[0]),
                                   str(published["strategy"].iloc[0]))
        cell = episode_cell(dataset, seed, strategy, table=table)
        if store.path(cell).exists():
            rows.append({"dataset": dataset, "seed": seed,
                         "agent": PUBLISHED_STRATEGIES[strategy],
                         **compare_rounds(published, store.read(cell))})
    return pd.DataFrame(rows, columns=EPISODE_COLUMNS)


def variant_summary(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per strategy: episodes, and the mean over them of ``variant_episodes``' figures
    (test costs, share of rounds with the same action, rejection rates, threshold
    differences), with the variant's cost relative to the published."""
    figures = EPISODE_COLUMNS[EPISODE_COLUMNS.index("published"):]
    table = episodes.groupby("agent", sort=False).agg(
        episodes=("seed", "size"), **{name: (name, "mean") for name in figures})
    table.insert(3, "relative_difference", table["variant"] / table["published"] - 1)
    return table


__all__ = ["EPISODE_COLUMNS", "compare_rounds", "run_variant", "variant_episodes",
           "variant_name", "variant_settings", "variant_summary", "variant_table"]
