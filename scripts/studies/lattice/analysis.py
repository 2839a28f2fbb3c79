"""The lattice study's analysis over its stored tables: the finished cells collected, regrets
and path scores, the report's tables (written by ``tables.write_table``) and figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.stores.results import ResultStore, RunError
from agents.reports.tables import write_table
from scripts.studies.common.lattice_paths import best_fixed_per_cell
from scripts.studies.lattice.cells import (
    CELL_KEYS,
    CROSSCHECK,
    TABLES,
    CellKey,
    StudyOptions,
    stored_agents,
    table_cell,
)


# ---------------------------------------------------------------------------- collect
def finished_cells(store: ResultStore) -> list[CellKey]:
    """Every finished cell of the store, by prior, data set and seed (as the seed's name,
    ``seed10`` before ``seed2``: the order the study's tables have always had)."""
    grid = (store.read_manifest() or {}).get("grid", {})
    cells = [(d, s, p) for p in grid.get("priors", []) for d in grid.get("datasets", [])
             for s in grid.get("seeds", [])]
    done = [c for c in cells if store.path(table_cell("cells", c)).exists()]
    return sorted(done, key=lambda c: (c[2], c[0], f"seed{c[1]}"))


def collect(out: Path, agent_names: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Every finished cell's tables, concatenated (after checking that each holds every
    agent to report), and saved beside the store."""
    store = ResultStore(out)
    cells = finished_cells(store)
    if not cells:
        raise RunError("no finished cells to report: run the study without --report-only")
    for cell in cells:
        missing = [n for n in agent_names if n not in (stored_agents(store, cell) or [])]
        if missing:
            raise RunError(f"cell {cell} of {out} lacks agents {', '.join(missing)}: run the "
                           "study without --report-only (with these --datasets, --seeds and "
                           "--prior) to recompute it, or report only the agents it holds "
                           "(--agents).")
    frames = {}
    for name in TABLES:
        frames[name] = pd.concat([store.read(table_cell(name, c)) for c in cells],
                                 ignore_index=True)
        frames[name].to_parquet(out / f"{name}.parquet", index=False)
    return frames


def stored_crosscheck(out: Path) -> pd.DataFrame | None:
    """The cross-checked cells' rows in the store, or ``None`` if there are none."""
    store = ResultStore(out)
    grid = (store.read_manifest() or {}).get("grid", {})
    found = [store.read(table_cell(CROSSCHECK, (d, 0, p))) for p in grid.get("priors", [])
             for d in grid.get("datasets", [])
             if store.path(table_cell(CROSSCHECK, (d, 0, p))).exists()]
    return pd.concat(found, ignore_index=True) if found else None


def select_agents(episodes: pd.DataFrame, agent_names: Sequence[str]) -> pd.DataFrame:
    """The reference and fixed paths, and the agents asked for (a cell may hold more)."""
    keep = (episodes.kind != "agent") | episodes.name.isin(list(agent_names))
    return episodes[keep].reset_index(drop=True)


# ---------------------------------------------------------------------------- analysis
def add_regrets(episodes: pd.DataFrame) -> pd.DataFrame:
    """Regret of each path: its mean cost minus the optimal path's in the same cell (and its
    final cost minus the best final cost); adds the per-cell best fixed split (chosen in
    hindsight) as a reference row."""
    episodes = pd.concat([episodes, best_fixed_per_cell(episodes, CELL_KEYS)],
                         ignore_index=True)
    optimal = episodes[episodes.name == "optimal"].set_index(CELL_KEYS)
    best_final = episodes[episodes.name == "optimal-final"].set_index(CELL_KEYS)
    idx = episodes.set_index(CELL_KEYS).index
    episodes["regret"] = episodes.mean_cost.to_numpy() - optimal.mean_cost.reindex(idx).to_numpy()
    episodes["final_regret"] = (episodes.final_cost.to_numpy()
                                - best_final.final_cost.reindex(idx).to_numpy())
    return episodes


def best_fixed_overall(episodes: pd.DataFrame, prior: str) -> str:
    """The fixed split with the lowest mean cost over all cells of a prior (in hindsight)."""
    fixed = episodes[(episodes.kind == "fixed") & (episodes.prior == prior)]
    return str(fixed.groupby("name").mean_cost.mean().idxmin())


def agents_table(episodes: pd.DataFrame, priors: Sequence[str],
                 agent_names: Sequence[str] | None = None) -> pd.DataFrame:
    """Per prior and path: mean cost, regret (mean, median), zero-regret share, right moves,
    and the agents' mean rank among themselves within a cell (1 = cheapest). Agents come in
    ``agent_names`` order (default: as they appear)."""
    ranks = episodes[episodes.kind == "agent"].groupby(CELL_KEYS).mean_cost.rank()
    episodes = episodes.assign(rank=ranks)
    rows = []
    for prior in priors:
        ep = episodes[episodes.prior == prior]
        present = list(ep[ep.kind == "agent"].name.unique())
        agents = present if agent_names is None else [n for n in agent_names if n in present]
        fixed_name = best_fixed_overall(episodes, prior)
        for name in ["optimal", "optimal-final", "best-fixed-per-cell", fixed_name, "oracle",
                     *agents]:
            label = f"best fixed overall ({fixed_name})" if name == fixed_name else name
            rows.append({"prior": prior, "path": label, **path_scores(ep[ep.name == name])})
    return pd.DataFrame(rows)


def path_scores(sel: pd.DataFrame) -> dict[str, float]:
    """One path's row of the agents table, over the cells in ``sel``."""
    return {"mean_cost": sel.mean_cost.mean(), "final_cost": sel.final_cost.mean(),
            "regret": sel.regret.mean(), "median_regret": sel.regret.median(),
            "zero_regret": (sel.regret <= 1e-12).mean(),
            "final_regret": sel.final_regret.mean(), "mean_rank": sel["rank"].mean(),
            "right_moves": sel.right_moves.sum() / max(1, sel.decided_moves.sum()),
            "al_share": sel.n_al.sum() / max(1, sel.path.str.len().sum())}


def summary_table(agents: pd.DataFrame) -> pd.DataFrame:
    """The agents table with the priors side by side: the headline table of LATTICE.md."""
    parts = []
    for prior, part in agents.groupby("prior", sort=False):
        part = part.assign(path=part.path.str.replace(r"best fixed overall.*",
                                                      "best fixed overall", regex=True))
        cols = {"mean_cost": f"cost {prior}", "regret": f"regret {prior}",
                "mean_rank": f"rank {prior}", "al_share": f"AL share {prior}"}
        parts.append(part.set_index("path")[list(cols)].rename(columns=cols))
    out = pd.concat(parts, axis=1)
    names = list(dict.fromkeys(c for c in agents.path if c.startswith("best fixed overall")))
    out.index = [f"{i} ({', '.join(n[20:-1] for n in names)})" if i == "best fixed overall"
                 else i for i in out.index]
    return out.reset_index(names="path")


def signals_table(signals: pd.DataFrame) -> pd.DataFrame:
    """Per prior, signal and mode: accuracy of the larger side, coverage, AL-better share."""
    g = signals.groupby(["prior", "signal", "mode"], sort=False)[
        ["states", "voted", "correct", "al_better"]].sum().reset_index()
    g["accuracy"] = g.correct / g.voted
    g["coverage"] = g.voted / g.states
    g["al_better_share"] = g.al_better / g.states
    return g


def per_dataset_table(episodes: pd.DataFrame, priors: Sequence[str]) -> pd.DataFrame:
    """Mean cost per data set and prior of the main paths, BALLAD's regret and its rank."""
    names = ["optimal", "best-fixed-per-cell", "oracle", "ballad", "all-in-al", "all-in-lr"]
    sel = episodes[episodes.name.isin(names) & episodes.prior.isin(list(priors))]
    wide = sel.pivot_table(index=["prior", "dataset"], columns="name", values="mean_cost")
    wide = wide[[n for n in names if n in wide.columns]]
    if "ballad" in wide.columns:
        wide["ballad_regret"] = wide.ballad - wide.optimal
    return wide.reset_index()


def crosscheck_table(checks: pd.DataFrame) -> pd.DataFrame:
    """Per re-run cell: agents run through the environment, how many matched the replay."""
    return checks.groupby(CELL_KEYS).agg(
        agents=("name", "size"), same_actions=("same_actions", "sum"),
        max_cost_gap=("max_cost_gap", "max")).reset_index()


def fixed_curve(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean cost of "m LR rounds then AL" for every m, per prior."""
    fixed = episodes[episodes.kind == "fixed"].copy()
    fixed["lr_rounds"] = fixed.name.str.slice(len("fixed-lr")).astype(int)
    return fixed.groupby(["prior", "lr_rounds"]).mean_cost.agg(["mean", "count"]).reset_index()


def report_tables(frames: dict[str, pd.DataFrame], priors: Sequence[str],
                  agent_names: Sequence[str]) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """The report's tables (by file stem) and the episodes with regrets they came from."""
    episodes = add_regrets(select_agents(frames["episodes"], agent_names))
    agents = agents_table(episodes, priors, agent_names)
    tables = {
        "lattice_summary": summary_table(agents),
        "lattice_agents": agents,
        "lattice_signals": signals_table(frames["signals"]),
        "lattice_per_dataset": per_dataset_table(episodes, priors),
        "lattice_fixed": fixed_curve(episodes),
    }
    return tables, episodes


def write_report(options: StudyOptions) -> dict[str, pd.DataFrame]:
    """Tables (csv + markdown, ``<docs>/tables``) and figures from the stored cells only."""
    frames = collect(options.out, options.agents)
    tables, episodes = report_tables(frames, options.priors, options.agents)
    checks = stored_crosscheck(options.out)
    if checks is not None:
        tables["lattice_crosscheck"] = crosscheck_table(checks)
    for name, table in tables.items():
        write_table(table, options.docs / "tables", name, index=False, missing="–",
                    csv_float_format="%.5g")
    cells = frames["cells"]
    print(f"{len(cells)} cells; lattice builds {cells.build_seconds.sum():.0f} s, cells "
          f"{cells.seconds.sum():.0f} s (summed wall times), {cells.cpu_seconds.sum():.0f} s CPU")
    print(tables["lattice_summary"].to_string(index=False, float_format="%.4f"))
    print(tables["lattice_signals"].to_string(index=False, float_format="%.3f"))
    draw_figures(options, frames["states"], episodes, tables["lattice_fixed"])
    return tables


# ---------------------------------------------------------------------------- figures
def draw_figures(options: StudyOptions, states: pd.DataFrame, episodes: pd.DataFrame,
                 curve: pd.DataFrame) -> None:
    """The lattice heat map (with optimal, BALLAD and oracle paths) and the fixed-split curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = options.docs / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    drawn = states[(states.dataset == options.figure_dataset) & (states.seed == 0)]
    if set(options.priors) <= set(drawn.prior):
        draw_heatmap(options, states, episodes, folder / "lattice_heatmap.png")
    else:
        print(f"no heat map: seed 0 of {options.figure_dataset} is not in the results for every "
              "prior (choose another --figure-dataset)")
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for prior, part in curve.groupby("prior"):
        line = ax.plot(part.lr_rounds, part["mean"], marker="o", ms=3,
                       label=f"m LR rounds, then AL ({prior})")[0]
        for name, style in (("optimal", ":"), ("ballad", "--")):
            value = episodes[(episodes.prior == prior) & (episodes.name == name)].mean_cost.mean()
            ax.axhline(value, ls=style, color=line.get_color(), lw=1,
                       label=f"{name} ({prior})")
    ax.set_xlabel("LR rounds spent first (m of 15)")
    ax.set_ylabel("mean test cost over rounds")
    cells = episodes[episodes.name == "optimal"]
    ax.set_title(f"Fixed splits vs the hindsight optimum ({cells.dataset.nunique()} data sets x "
                 f"{cells.seed.nunique()} seeds)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(folder / "lattice_fixed.png", dpi=130)
    plt.close(fig)


def draw_heatmap(options: StudyOptions, states: pd.DataFrame, episodes: pd.DataFrame,
                 path: Path) -> None:
    """The seed-0 lattice of ``figure_dataset``, one panel per prior."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(options.priors), figsize=(5.2 * len(options.priors), 4.6),
                             squeeze=False)
    for ax, prior in zip(axes[0], options.priors, strict=True):
        draw_lattice(ax, states, episodes, options.figure_dataset, prior)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def lattice_grid(states: pd.DataFrame) -> np.ndarray:
    """One cell's test costs as a [i, j] array (NaN where unreachable)."""
    k = int((states.i + states.j).max())
    grid = np.full((k + 1, k + 1), np.nan)
    grid[states.i.to_numpy(), states.j.to_numpy()] = states.test_cost.to_numpy()
    return grid


def draw_lattice(ax: Any, states: pd.DataFrame, episodes: pd.DataFrame, dataset: str,
                 prior: str, seed: int = 0) -> None:
    """One lattice's test costs (j across, i up) with three paths drawn from (0, 0)."""
    from matplotlib import patheffects

    from ballad_env.replay.lattice import parse_path

    cell = states[(states.dataset == dataset) & (states.prior == prior) & (states.seed == seed)]
    image = ax.imshow(lattice_grid(cell), origin="lower", cmap="viridis")
    ax.figure.colorbar(image, ax=ax, label="test cost", shrink=0.85)
    paths = episodes[(episodes.dataset == dataset) & (episodes.prior == prior)
                     & (episodes.seed == seed)].set_index("name")
    styles = {"optimal": ("white", "-", 3.0), "ballad": ("red", "-", 1.8),
              "oracle": ("orange", "--", 1.4)}
    for name, (color, style, width) in styles.items():
        if name not in paths.index:
            continue
        actions = parse_path(paths.loc[name, "path"])
        i, j = [0], [0]
        for a in actions:
            i.append(i[-1] + (a == 0))
            j.append(j[-1] + (a == 1))
        jitter = {"optimal": 0.0, "ballad": 0.12, "oracle": -0.12}[name]
        ax.plot(np.array(j) + jitter, np.array(i) + jitter, style, color=color, lw=width,
                label=f"{name}: {paths.loc[name, 'mean_cost']:.4f}",
                path_effects=[patheffects.withStroke(linewidth=width + 1.2, foreground="black")])
    ax.set_xlabel("LR rounds j")
    ax.set_ylabel("AL rounds i")
    ax.set_title(f"{dataset}, {prior} prior, seed {seed}")
    ax.legend(fontsize=7, loc="upper right", title="path: mean cost", title_fontsize=7)
