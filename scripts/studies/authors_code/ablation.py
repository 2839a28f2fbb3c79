"""The published code's variant: which of its differences move the paper's numbers.

Issue 12. The authors' public code (``BALLAD.py`` on anomatools 3.0.3) reproduces the paper's
All-in-LR cost (about 0.054) where this environment's defaults give about 0.03. Each of its
differences is an option of ``Settings`` (``AUTHORS_CODE``, plus ``threshold_search`` and
``tau_position``); this module measures them:

* :func:`ablation_settings` / :func:`ablation_grid`: the defaults, each option alone and the
  preset (``Settings.authors_code``), for each prior, played by BALLAD, All-in-AL and
  All-in-LR through ``run_grid`` (resumable);
* :func:`ablation_table`: mean cost per setting and strategy, its change from the defaults,
  and who wins how many data sets;
* :func:`published_grids` / :func:`agreement_table`: the published code's costs, recorded
  by running it (``scripts.studies.authors_code.published``, whose ``load_published``
  gives its mean cost per episode), against ours on the same episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from agents.experiments.grid import Grid
from agents.reports.tables import common_episodes, summary_table
from ballad_env.settings import AUTHORS_ARITHMETIC, AUTHORS_CODE, AUTHORS_QUERY_SEED, Settings

AGENTS = ("ballad", "all-in-al", "all-in-lr")
#: Each difference alone, as settings changes (the cost metric, whose scale differs, too).
SINGLE_OPTIONS: tuple[dict[str, Any], ...] = (
    *({name: value} for name, value in AUTHORS_CODE.items()),
    {"tau_position": "bottom"}, {"tau_position": "middle"},
    {"cost_metric": "class_conditional"},
)
#: The preset, run with the exact search and tau placed in its interval three ways (the
#: published gp_minimize search lands anywhere in it and costs 30-90 s an episode).
PRESET_POSITIONS = ("as-found", "bottom", "middle")


def seeds_text(results: pd.DataFrame) -> str:
    """Seeds per data set in ``results``: ``"10"`` when every data set has as many, else the
    range (``"3-4"``), so a table never claims more seeds than some of its means hold."""
    per_dataset = results.groupby("dataset", sort=False)["seed"].nunique()
    if per_dataset.empty:
        return "0"
    low, high = int(per_dataset.min()), int(per_dataset.max())
    return str(low) if low == high else f"{low}-{high}"


def ablation_settings(priors: Sequence[str] = ("iforest", "knn")) -> tuple[Settings, ...]:
    """Per prior: the defaults, each option alone, the preset with the exact search (tau
    placed three ways), and the preset without ``initial_fit``."""
    settings: list[Settings] = []
    for prior in priors:
        base = Settings(prior=prior)
        settings.append(base)
        settings.extend(base.replace(**change) for change in SINGLE_OPTIONS)
        settings.extend(Settings.authors_code(prior=prior, threshold_search="exact",
                                              tau_position=position)
                        for position in PRESET_POSITIONS)
        # the preset as it was before its last option (what that option adds to it)
        settings.append(Settings.authors_code(prior=prior, threshold_search="exact",
                                              initial_fit="train"))
    return tuple(settings)


def ablation_grid(datasets: Sequence[str], seeds: Sequence[int],
                  priors: Sequence[str] = ("iforest", "knn")) -> Grid:
    """The ablation: data sets x seeds x (BALLAD, All-in-AL, All-in-LR) x settings."""
    return Grid(tuple(datasets), tuple(seeds), AGENTS, ablation_settings(priors))


def change_label(setting: Settings) -> str:
    """What a setting changes from the defaults of its prior, in words for the table."""
    default = Settings(prior=setting.prior)
    changed = [f"{name}={value}" for name, value in setting.to_dict().items()
               if name not in ("name", "bayes_calls") and value != getattr(default, name)]
    # the preset's options, its query stream's seed and its arithmetic with them
    # (Settings.authors_code)
    preset = {**AUTHORS_CODE, "query_seed": AUTHORS_QUERY_SEED, **AUTHORS_ARITHMETIC}
    rest = [c for c in changed if c.split("=")[0] not in preset]
    off = [name for name, value in preset.items() if getattr(setting, name) != value]
    if len(off) <= 1:
        return ("preset" + (f" without {off[0]}" if off else "")
                + (f" ({', '.join(rest)})" if rest else ""))
    return ", ".join(changed) or "defaults"


def ablation_episodes(results: pd.DataFrame, settings: Sequence[Settings]
                      ) -> tuple[pd.DataFrame, int]:
    """The rows of ``settings`` on the (data set, seed) pairs every one of them played with
    every strategy, and how many pairs a partial run leaves out for that: the table then
    compares settings on the same episodes only."""
    names = {setting.name for setting in settings}
    return common_episodes(results[results["setting"].isin(names)])


def ablation_table(results: pd.DataFrame, settings: Sequence[Settings],
                   metric: str = "test_cost") -> pd.DataFrame:
    """Per setting of ``settings`` in the results: mean ``metric`` (over data sets, seeds and
    rounds) of each strategy, the change from the same prior's defaults, BALLAD's gain over
    each baseline, and the data sets each strategy wins. Only the episodes every setting and
    strategy played count (``ablation_episodes``); ``datasets`` and ``seeds`` (per data set)
    say how many that is."""
    results, _ = ablation_episodes(results, settings)
    summary = summary_table(results, metric)
    present = set(results["setting"])
    rows = []
    for setting in settings:
        name = setting.name
        if name not in present:
            continue
        block = summary.loc[name]
        mean = block.loc["mean"]
        per_dataset = block.drop(index="mean")
        wins = per_dataset["winner"].value_counts()
        played = results[results["setting"] == name]
        row: dict[str, Any] = {"setting": name, "prior": setting.prior,
                               "change": change_label(setting),
                               "datasets": played["dataset"].nunique(),
                               "seeds": seeds_text(played)}
        for agent in AGENTS:
            row[agent] = float(mean[agent])
        for agent in AGENTS:
            row[f"wins_{agent}"] = int(wins.get(agent, 0))
        row["ballad_vs_al"] = 1 - row["ballad"] / row["all-in-al"]
        row["ballad_vs_lr"] = 1 - row["ballad"] / row["all-in-lr"]
        rows.append(row)
    table = pd.DataFrame(rows).set_index("setting")
    for agent in AGENTS:
        base = table.groupby("prior")[agent].transform(
            lambda column: column[table.loc[column.index, "change"] == "defaults"].iloc[0])
        table[f"d_{agent}"] = table[agent] - base
    return table


def published_grids(published: pd.DataFrame, setting: Settings) -> dict[str, Grid]:
    """One grid per (strategy, seed) the published code played, over the data sets it
    finished for them, named ``<agent>_seed<k>``: ours then plays exactly those episodes
    (worth it when ours costs minutes too) and each grid grows as the published run does."""
    grids = {}
    for (agent, seed), block in published.groupby(["agent", "seed"], sort=True):
        grids[f"{agent}_seed{seed}"] = Grid(tuple(sorted(block["dataset"].unique())),
                                            (int(seed),), (str(agent),), (setting,))
    return grids


def _paired(ours: pd.DataFrame, published: pd.DataFrame, setting: str) -> pd.DataFrame:
    """The episodes both codes played: dataset, seed, agent, ours, published (mean cost)."""
    mine = (ours[ours["setting"] == setting].groupby(["dataset", "seed", "agent"])["test_cost"]
            .mean().rename("ours"))
    theirs = published.set_index(["dataset", "seed", "agent"])["test_cost"].rename("published")
    return pd.concat([mine, theirs], axis=1, join="inner").reset_index()


def agreement_per_dataset(ours: pd.DataFrame, published: pd.DataFrame, setting: str
                          ) -> pd.DataFrame:
    """Per strategy and data set: the seeds both ran, the mean cost over them of ours under
    ``setting`` and of the published code, and their relative difference."""
    both = _paired(ours, published, setting)
    table = both.groupby(["agent", "dataset"]).agg(
        episodes=("seed", "size"),
        seeds=("seed", lambda seeds: ",".join(str(s) for s in sorted(seeds))),
        ours=("ours", "mean"), published=("published", "mean"))
    table["relative_difference"] = table["ours"] / table["published"] - 1
    return table


def agreement_table(ours: pd.DataFrame, published: pd.DataFrame, setting: str,
                    tolerance: float = 0.10) -> pd.DataFrame:
    """Per strategy, mean cost over the (data set, seed) pairs both ran: ours under
    ``setting`` and the published code's, their relative difference, whether it is within
    ``tolerance``, and the smallest and largest difference of one data set's means."""
    per_dataset = agreement_per_dataset(ours, published, setting)
    rows = []
    for agent, block in per_dataset.groupby(level="agent", sort=False):
        # Data sets weigh equally: seeds first (agreement_per_dataset).
        rows.append({"agent": agent, "datasets": len(block),
                     "episodes": int(block["episodes"].sum()),
                     "ours": block["ours"].mean(), "published": block["published"].mean(),
                     "dataset_difference_min": block["relative_difference"].min(),
                     "dataset_difference_max": block["relative_difference"].max()})
    table = pd.DataFrame(rows).set_index("agent")
    table.insert(4, "relative_difference", table["ours"] / table["published"] - 1)
    table.insert(5, "within", table["relative_difference"].abs() <= tolerance)
    return table


__all__ = ["AGENTS", "PRESET_POSITIONS", "SINGLE_OPTIONS", "ablation_episodes", "ablation_grid",
           "ablation_settings", "ablation_table", "agreement_per_dataset", "agreement_table",
           "change_label", "published_grids", "seeds_text"]
