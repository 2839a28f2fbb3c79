"""Issue 40's tables, learning-curve figure and packaged parameters (docs/studies/ALLOCATION.md,
third round): ``docs/tables/allocation3_*``, ``docs/figures/allocation3_curve.png`` and the
``fixed-split-by-cost`` and ``safe-split`` entries of ``agents/allocation_params.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.reports.tables import write_table
from scripts.studies.common.options import REPO

LEVELS = ("default", "cfn10", "cfp10")
_NUMBERS = re.compile(r"\[\s*([-+0-9.eE]+(?:,\s*[-+0-9.eE]+)*)\s*\]")


def shares_with_se(rows: pd.DataFrame, costs: np.ndarray) -> dict[str, tuple[float, float]]:
    """Per level: (share of the room, its standard error over data sets, the room taken as
    fixed: sd of the data sets' (All-in-LR - agent) / sqrt(data sets) / room)."""
    frame = rows[["level", "dataset", "all-in-lr", "optimal"]].assign(agent=costs)
    means = frame.groupby(["level", "dataset"]).mean(numeric_only=True)
    out = {}
    for level, part in means.groupby(level="level"):
        room = float((part["all-in-lr"] - part["optimal"]).mean())
        gain = part["all-in-lr"] - part["agent"]
        out[str(level)] = (float(gain.mean() / room),
                           float(gain.std(ddof=1) / np.sqrt(len(gain)) / room))
    return out


#: The paper's 18 data sets.
PAPER_18 = frozenset({"ALOI", "Annthyroid", "Arrhythmia", "Cardiotocography", "Glass",
                      "InternetAds", "KDDCup99", "PageBlocks", "PenDigits", "Pima", "Shuttle",
                      "SpamBase", "Stamps", "WBC", "WDBC", "WPBC", "Waveform", "Wilt"})


def paper_means(rows: pd.DataFrame, costs: np.ndarray) -> pd.DataFrame:
    """Per paper data set at default costs: the agent's and All-in-LR's mean cost (seed
    means)."""
    mask = ((rows["level"] == "default") & rows["dataset"].isin(PAPER_18)).to_numpy()
    return rows[mask].assign(agent=costs[mask]).groupby("dataset")[["agent", "all-in-lr"]].mean()


def paper_check(rows: pd.DataFrame, costs: np.ndarray) -> float:
    """Mean cost over the paper's data sets at default costs, against All-in-LR's (%)."""
    part = paper_means(rows, costs)
    return float(100 * (part["agent"].mean() / part["all-in-lr"].mean() - 1))


def shares_frame(held: pd.DataFrame, columns: Mapping[str, np.ndarray],
                 paper: Mapping[str, float]) -> pd.DataFrame:
    """One row per agent: share and standard error per level, their mean and smallest, and
    the paper's-18 check."""
    rows = []
    for name, costs in columns.items():
        shares = shares_with_se(held, costs)
        row: dict[str, Any] = {"agent": name}
        for level in LEVELS:
            row[level], row[f"se {level}"] = shares[level]
        row["mean"] = float(np.mean([shares[lv][0] for lv in LEVELS]))
        row["min"] = float(min(shares[lv][0] for lv in LEVELS))
        row["paper's 18, default, vs all-in-lr %"] = paper.get(name, np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def per_dataset(held: pd.DataFrame, columns: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Per level and held-out data set (seed means): All-in-LR, the room, and each agent's
    cost minus All-in-LR's and share (where the room exceeds 0.005)."""
    frame = held[["level", "dataset", "all-in-lr", "optimal"]].copy()
    for name, costs in columns.items():
        frame[name] = costs
    means = frame.groupby(["level", "dataset"], sort=False).mean(numeric_only=True)
    out = pd.DataFrame({"all-in-lr": means["all-in-lr"],
                        "room": means["all-in-lr"] - means["optimal"]})
    for name in columns:
        out[f"{name} - lr"] = means[name] - means["all-in-lr"]
        share = (means["all-in-lr"] - means[name]) / out["room"]
        out[f"share {name}"] = share.where(out["room"] > 0.005)
    return out.reset_index()


def curve_frame(points: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The learning curve: per number of training tasks, the chosen candidate's
    cross-validated and held-out shares."""
    rows = []
    for p in points:
        best = p["best"]
        row = {"tasks per source": p["per_source"], "generated tasks": p["tasks"],
               "alpha": best["alpha"], "z": best["z"], "margin": best["margin"],
               "ood quantile": best["ood"], "task weight": best["task_weight"],
               "cv mean": best["cv mean"], "cv min": best["cv min"]}
        for level in LEVELS:
            row[f"held {level}"], row[f"se {level}"] = p["held"][level]
        row["held mean"] = float(np.mean([p["held"][lv][0] for lv in LEVELS]))
        row["cpu s"] = p["cpu_s"]
        rows.append(row)
    return pd.DataFrame(rows)


def curve_figure(curve: pd.DataFrame, fixed: Mapping[str, float], path: Path,
                 labels: Sequence[str] = ("safe-split", "fixed-split-by-cost",
                                          "generated training tasks (beside the 15 real "
                                          "training sets)")) -> Path:
    """Held-out share per level against the generated tasks, with standard errors; a
    reference agent per level dashed. ``labels``: the curve's agent, the reference, the x
    axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    x = np.arange(len(curve))
    for k, (level, colour) in enumerate(zip(LEVELS, ("C0", "C1", "C2"), strict=True)):
        ax.errorbar(x + (k - 1) * 0.06, curve[f"held {level}"], yerr=curve[f"se {level}"],
                    marker="o", color=colour, capsize=3, label=f"{labels[0]}, {level}")
        ax.axhline(fixed[level], color=colour, linestyle="--", linewidth=1,
                   label=f"{labels[1]}, {level}")
    ax.axhline(0.0, color="black", linewidth=0.8)
    counts = curve["generated tasks"] if "generated tasks" in curve else curve["real tasks"]
    ax.set_xticks(x, [f"{n}" for n in counts])
    ax.set_xlabel(labels[2])
    ax.set_ylabel("held-out share of the room")
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_all(tables: Mapping[str, pd.DataFrame], folder: Path,
              prefix: str = "allocation3") -> list[Path]:
    """Write each table as ``<prefix>_<name>`` (CSV and Markdown)."""
    return [write_table(frame, folder, f"{prefix}_{name}", index=False, digits=4)
            for name, frame in tables.items()]


def tables_folder(out: Path, update_docs: bool) -> Path:
    """Where a study's tables go: ``docs/tables`` with ``--update-docs``, else the study's
    own ``<out>/tables``."""
    return (REPO / "docs" if update_docs else Path(out)) / "tables"


def show_and_write(tables: Mapping[str, pd.DataFrame], folder: Path, prefix: str,
                   digits: int) -> list[Path]:
    """Print each table (rounded to ``digits``) under its name, then :func:`write_all` them
    into ``folder``: a study's last step, into docs/tables or its own folder."""
    for name, frame in tables.items():
        print(name)
        print(frame.round(digits).to_string(index=False))
    return write_all(tables, folder, prefix=prefix)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _compact(entry: Mapping[str, Any]) -> str:
    """``entry`` as indented JSON with every list of numbers on one line."""
    text = json.dumps(_rounded(dict(entry)), indent=1)
    previous = None
    while previous != text:
        previous = text
        text = _NUMBERS.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m[1])) + "]", text)
        text = re.sub(r"\[\s*((?:\[[^\[\]]*\],?\s*)+)\]",
                      lambda m: "[" + re.sub(r"\],\s*", "], ", m[1].strip()) + "]", text)
    return text


def write_entries(path: Path, entries: Mapping[str, Mapping[str, Any]],
                  allocator: str | None = None) -> None:
    """Put ``entries`` (family -> entry) into the packaged parameters at ``path``;
    ``allocator`` renames the allocator when given (nothing to write: the file is left as it is)."""
    if not entries and allocator is None:
        return
    params = json.loads(path.read_text())
    for family in entries:
        params["families"][family] = f"__entry_{family}__"
    if allocator is not None:
        params["allocator"] = allocator
    text = json.dumps(params, indent=1)
    for family, entry in entries.items():
        indent = "\n  "
        text = text.replace(json.dumps(f"__entry_{family}__"),
                            _compact(entry).replace("\n", indent))
    json.loads(text)
    path.write_text(text + "\n")


__all__ = ["LEVELS", "PAPER_18", "curve_figure", "curve_frame", "paper_check", "paper_means",
           "per_dataset", "shares_frame", "shares_with_se", "show_and_write", "tables_folder",
           "write_all", "write_entries"]
