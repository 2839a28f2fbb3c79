"""Does rejection without labels make the LR labels worthless? (CROSSED.md, issue 29)

With RejEx (``rejector="rejex"``, ``ballad_env.rejection.rejex``) the detector rejects without any
label, so every label can go to AL; with BALLAD's rejector (``"confidence"``) the rejection
threshold needs labels. This table sets the two side by side per cost level and per slice
of the data sets (where they come from, their contamination gamma, their size n), on means
in which data sets weigh equally (seeds averaged first):

* ``LR, confidence``, ``ballad, confidence``, ``optimal, confidence``: All-in-LR, BALLAD
  and the hindsight optimum with BALLAD's rejector;
* ``AL, rejex``: All-in-AL with RejEx (T = 32); ``LR, rejex``: All-in-LR with RejEx (the
  LR labels set nothing: the detector without labels, with RejEx); ``optimal, rejex``;
* ``AL, rejex-tuned``, ``ballad, rejex-tuned``, ``optimal, rejex-tuned``: RejEx with T
  chosen on the labels (LR labels buy a better T);
* ``rejex wins``: on how many of the slice's data sets All-in-AL with RejEx costs less
  than All-in-LR with BALLAD's rejector;
* ``verdict`` on the slice's means: ``worthless`` (All-in-AL with RejEx costs at most the
  hindsight optimum with BALLAD's rejector: no allocation of LR labels does better),
  ``worth less`` (it beats All-in-LR with BALLAD's rejector, not that optimum) or
  ``necessary`` (All-in-LR with BALLAD's rejector costs less than All-in-AL with RejEx).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from agents.reports.plots import save_figure
from agents.reports.tables import write_table
from ballad_env.data import load_dataset
from scripts.studies.crossed.factors import POSED, dataset_group

#: (strategy, rejector) -> the table's column.
COLUMNS = {("all-in-lr", "confidence"): "LR, confidence",
           ("ballad", "confidence"): "ballad, confidence",
           ("optimal", "confidence"): "optimal, confidence",
           ("all-in-al", "rejex"): "AL, rejex", ("all-in-lr", "rejex"): "LR, rejex",
           ("optimal", "rejex"): "optimal, rejex",
           ("all-in-al", "rejex-tuned"): "AL, rejex-tuned",
           ("ballad", "rejex-tuned"): "ballad, rejex-tuned",
           ("optimal", "rejex-tuned"): "optimal, rejex-tuned"}
#: The factors a row of the table keeps apart (the rejector is in the columns).
BY = ["detector", "queries", "costs", "protocol"]
#: Data set properties -> slices: name and test on (group, gamma, n).
Slice = Callable[[str, float, int], bool]
SLICES: dict[str, Slice] = {
    "all": lambda g, c, n: True,
    "paper": lambda g, c, n: g == "paper",
    "adbench": lambda g, c, n: g == "adbench",
    "gamma < 0.05": lambda g, c, n: c < 0.05,
    "0.05 <= gamma < 0.15": lambda g, c, n: 0.05 <= c < 0.15,
    "gamma >= 0.15": lambda g, c, n: c >= 0.15,
    "n < 500": lambda g, c, n: n < 500,
    "500 <= n < 3000": lambda g, c, n: 500 <= n < 3000,
    "n >= 3000": lambda g, c, n: n >= 3000,
}


def applies(rejectors: list[str]) -> bool:
    """Whether the study crossed both rejectors the table compares."""
    return {"confidence", "rejex"} <= set(rejectors)


def per_dataset(tidy: pd.DataFrame) -> pd.DataFrame:
    """The posed rows' mean costs (seeds averaged), one row per ``BY`` and data set, one
    column per entry of :data:`COLUMNS` (NaN where its rejector was not run)."""
    posed = tidy[(tidy.status == POSED) & tidy.rejector.isin(
        {rejector for _, rejector in COLUMNS})]
    means = posed.groupby([*BY, "dataset", "rejector", "strategy"], sort=False
                          ).mean_cost.mean()
    wide = means.unstack(["strategy", "rejector"])
    out = pd.DataFrame(index=wide.index)
    for key, column in COLUMNS.items():
        out[column] = wide[key] if key in wide.columns else np.nan
    return out.reset_index()


def properties(names: list[str], data_dir: str | None) -> dict[str, tuple[str, float, int]]:
    """Each data set's group (``dataset_group``), contamination and size."""
    out = {}
    for name in names:
        data = load_dataset(name, data_dir)
        out[name] = (dataset_group(name), float(data.contamination), int(len(data.y)))
    return out


def verdict(row: Mapping[str, float]) -> str:
    """``worthless``, ``worth less`` or ``necessary`` (the module's docstring)."""
    free, lr, best = row["AL, rejex"], row["LR, confidence"], row["optimal, confidence"]
    if not (np.isfinite(free) and np.isfinite(lr)):
        return "–"
    if np.isfinite(best) and free <= best:
        return "worthless"
    return "worth less" if free < lr else "necessary"


def label_free_table(tidy: pd.DataFrame, props: Mapping[str, tuple[str, float, int]]
                     ) -> pd.DataFrame:
    """Per ``BY`` and slice (:data:`SLICES`): the data sets, each column's mean (data sets
    weigh equally), ``rejex wins`` and the ``verdict``."""
    sets = per_dataset(tidy)
    rows = []
    for keys, group in sets.groupby(BY, sort=False):
        for name, test in SLICES.items():
            chosen = group[[test(*props[d]) for d in group.dataset]]
            if chosen.empty:
                continue
            means = chosen[list(COLUMNS.values())].mean()
            wins = int(np.sum(chosen["AL, rejex"] < chosen["LR, confidence"]))
            rows.append({**dict(zip(BY, keys, strict=True)), "slice": name,
                         "datasets": len(chosen), **means.to_dict(), "rejex wins": wins,
                         "verdict": verdict(means)})
    return pd.DataFrame(rows, columns=[*BY, "slice", "datasets", *COLUMNS.values(),
                                       "rejex wins", "verdict"])


#: The rejectors :func:`tuned_table` compares, and the strategies it compares them on.
TUNED_REJECTORS = ("confidence", "rejex", "rejex-tuned")
TUNED_STRATEGIES = ("all-in-al", "all-in-lr", "ballad", "sadal", "optimal")


def tuned_table(tidy: pd.DataFrame) -> pd.DataFrame:
    """Does tuning T on the labels pay? Per ``BY`` and strategy: the mean cost (data sets
    weigh equally, seeds averaged first) with each of :data:`TUNED_REJECTORS`, and, over
    the data sets, how often RejEx-tuned costs less than RejEx with T = 32 and than BALLAD's
    rejector (``tuned < rejex``, ``tuned < confidence``: won / compared) with the median of
    the paired differences (tuned minus the other; below 0, tuned is cheaper)."""
    posed = tidy[(tidy.status == POSED) & tidy.rejector.isin(TUNED_REJECTORS)
                 & tidy.strategy.isin(TUNED_STRATEGIES)]
    means = posed.groupby([*BY, "strategy", "dataset", "rejector"], sort=False
                          ).mean_cost.mean().unstack("rejector")
    rows = []
    for keys, group in means.groupby(level=[*BY, "strategy"], sort=False):
        row = dict(zip([*BY, "strategy"], keys, strict=True))
        row.update({r: group[r].mean() if r in group else np.nan for r in TUNED_REJECTORS})
        for other in ("rejex", "confidence"):
            if {"rejex-tuned", other} <= set(group.columns):
                diff = (group["rejex-tuned"] - group[other]).dropna()
                row[f"tuned < {other}"] = f"{int(np.sum(diff < 0))}/{diff.size}"
                row[f"median tuned - {other}"] = float(diff.median())
        rows.append(row)
    return pd.DataFrame(rows)


def draw(tidy: pd.DataFrame, props: Mapping[str, tuple[str, float, int]], path: Path
         ) -> Path:
    """Per cost level, each data set's gain of label-free rejection: All-in-LR with BALLAD's
    rejector minus All-in-AL with RejEx (filled), and BALLAD's rejector's hindsight optimum
    minus RejEx's (hollow), against the contamination; above 0, RejEx wins."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    sets = per_dataset(tidy)
    levels = list(dict.fromkeys(sets.costs))
    fig, axes = plt.subplots(1, len(levels), figsize=(4.2 * len(levels), 3.6), sharey=False,
                             squeeze=False)
    for ax, level in zip(axes[0], levels, strict=True):
        rows = sets[sets.costs == level]
        gamma = np.array([props[d][1] for d in rows.dataset])
        size = np.array([12 + 10 * np.log10(props[d][2]) for d in rows.dataset])
        colour = ["tab:blue" if props[d][0] == "paper" else "tab:orange" for d in rows.dataset]
        ax.scatter(gamma, rows["LR, confidence"] - rows["AL, rejex"], s=size, c=colour,
                   label="All-in-LR (confidence) - All-in-AL (rejex)")
        ax.scatter(gamma, rows["optimal, confidence"] - rows["optimal, rejex"], s=size,
                   facecolors="none", edgecolors=colour,
                   label="optimum (confidence) - optimum (rejex)")
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("gamma (blue: paper, orange: ADBench)")
        ax.set_title(f"costs: {level}", fontsize=9)
    axes[0][0].set_ylabel("mean test cost gained by label-free rejection")
    axes[0][0].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return save_figure(fig, path, bbox_inches=None)


def write_label_free(tidy: pd.DataFrame, names: list[str], data_dir: str | None,
                     docs: Path, prefix: str) -> pd.DataFrame:
    """The tables (``<docs>/tables/<prefix>_label_free``, ``<prefix>_tuned``) and the figure
    (``<docs>/figures/<prefix>_label_free.png``)."""
    props = properties(names, data_dir)
    table = label_free_table(tidy, props)
    write_table(table, Path(docs) / "tables", f"{prefix}_label_free", index=False,
                missing="–", csv_float_format="%.6g")
    write_table(tuned_table(tidy), Path(docs) / "tables", f"{prefix}_tuned", index=False,
                missing="–", csv_float_format="%.6g")
    if not table.empty:
        draw(tidy, props, Path(docs) / "figures" / f"{prefix}_label_free.png")
    return table


__all__ = ["BY", "COLUMNS", "SLICES", "TUNED_REJECTORS", "TUNED_STRATEGIES", "applies", "draw",
           "label_free_table", "per_dataset", "properties", "tuned_table", "verdict",
           "write_label_free"]
