"""The lattice study (LATTICE.md): how far are allocation rules from the best allocation?

For every data set, seed and prior, one lattice (``ballad_env.lattice``) gives the test
cost of every state (i AL, j LR rounds). Agents are replayed on it (exact for agents that
read only observations; a few cells are re-run through the real environment to show it),
and scored against the hindsight-optimal path, the fixed LR-then-AL splits and the
one-step oracle; each reward signal is scored by how often its larger side is the truly
better action.

Results are tidy and resumable: each cell (data set, seed, prior) runs through the
harness's executor and writes its four tables into the study's ``ResultStore`` (``<out>``:
``run.json`` and one Parquet file per table and cell, the cell's ``cells`` table last). A
rerun skips a finished cell only if it holds every requested agent (else it is recomputed
with them), and the store refuses to mix results of other source code or package versions,
so results of two code versions or agent lists never mix silently.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.experiments.executor import execute, worker_limits
from agents.experiments.provenance import package_versions, source_fingerprint
from agents.experiments.store import FORMAT_VERSION, ResultStore, RunError, TableCell
from agents.experiments.tables import write_table

STUDY_AGENTS = ("ballad", "ballad-cosine", "all-in-al", "all-in-lr", "random", "discounted",
                "ucb1", "epsilon-greedy", "sliding-window", "val-cost-greedy", "half",
                "lr-first-20", "lr-first-33", "lr-first-50")
#: The tidy tables every cell writes, one file each; ``cells`` (last) marks it finished.
TABLES = ("states", "episodes", "signals", "cells")
#: The table of a cell re-run through the real environment.
CROSSCHECK = "crosscheck"
CELL_KEYS = ["dataset", "seed", "prior"]
#: The data set whose lattice LATTICE.md draws.
FIGURE_DATASET = "Cardiotocography"

#: One cell of the study: (data set, seed, prior).
CellKey = tuple[str, int, str]


@dataclass
class StudyOptions:
    """The study's options (one command-line option each)."""

    data_dir: Path
    out: Path
    docs: Path
    datasets: list[str] = field(default_factory=list)
    seeds: int = 10
    priors: list[str] = field(default_factory=lambda: ["iforest", "knn"])
    agents: list[str] = field(default_factory=lambda: list(STUDY_AGENTS))
    n_jobs: int = 2
    crosscheck: int = 1
    figure_dataset: str = FIGURE_DATASET
    report_only: bool = False


# ---------------------------------------------------------------------------- the store
def table_cell(table: str, cell: CellKey) -> TableCell:
    """The stored file of one table of one cell."""
    return TableCell(table, tuple(zip(CELL_KEYS, cell, strict=True)))


def prepare_store(options: StudyOptions) -> ResultStore:
    """The study's store at ``options.out``, its ``run.json`` grown to this run's data sets,
    seeds, priors and agents; ``RunError`` if it holds results of other source code or
    package versions."""
    store = ResultStore(options.out)
    stored = (store.read_manifest() or {}).get("grid", {})

    def grown(axis: str, values: Sequence[Any]) -> list[Any]:
        return list(dict.fromkeys([*stored.get(axis, []), *values]))

    grid = {"datasets": grown("datasets", options.datasets),
            "seeds": grown("seeds", range(options.seeds)),
            "agents": grown("agents", options.agents),
            "priors": grown("priors", options.priors)}
    store.prepare({"format": FORMAT_VERSION, "study": "lattice", "grid": grid,
                   "versions": package_versions(),
                   "created": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds")})
    return store


def stored_agents(store: ResultStore, cell: CellKey) -> list[str] | None:
    """The agents a finished cell was computed with (in its order), ``None`` if unfinished."""
    if not store.path(table_cell("cells", cell)).exists():
        return None
    episodes = store.read(table_cell("episodes", cell))
    return list(episodes[episodes.kind == "agent"].name)


def agents_to_compute(store: ResultStore, cell: CellKey, agents: Sequence[str]
                      ) -> tuple[str, ...]:
    """The agents to (re)compute a cell with: none if it is finished with every requested
    agent; else the requested ones, then any others the finished cell already held."""
    stored = stored_agents(store, cell)
    if stored is None:
        return tuple(agents)
    if all(name in stored for name in agents):
        return ()
    return (*agents, *(name for name in stored if name not in agents))


# ---------------------------------------------------------------------------- one cell
def run_cell(task: tuple[Path, CellKey, tuple[str, ...]], single_thread: bool = True
             ) -> tuple[CellKey, dict[str, pd.DataFrame]]:
    """Build one lattice, replay the agents on it, score the signals: the cell's tables.
    ``task`` is (data folder, cell, agents); one BLAS thread, in a worker or not."""
    from agents.registry import make_agent
    from ballad_env.data import load_dataset
    from ballad_env.lattice import SIGNAL_MODES, SIGNALS, build_lattice
    from ballad_env.settings import Settings

    data_dir, cell, agent_names = task
    dataset, seed, prior = cell
    keys = {"dataset": dataset, "seed": seed, "prior": prior}
    start, cpu_start = time.perf_counter(), time.process_time()
    with worker_limits(True):  # two workers on two cores: BLAS threads only oversubscribe
        data = load_dataset(dataset, data_dir=data_dir)
        lattice = build_lattice(data, seed, Settings(prior=prior))
        built = time.perf_counter() - start
        paths = {name: ("agent", lattice.replay(make_agent(name))) for name in agent_names}
    paths.update(reference_paths(lattice))
    episodes = [{**keys, **episode_row(lattice, name, kind, actions)}
                for name, (kind, actions) in paths.items()]
    signals = [{**keys, "signal": s, "mode": m, **lattice.score_signal(s, m)}
               for s in SIGNALS for m in SIGNAL_MODES]
    states = [{**keys, **row} for row in lattice.state_records()]
    cells = [{**keys, "n_rounds": lattice.n_rounds, "build_seconds": built,
              "seconds": time.perf_counter() - start,
              "cpu_seconds": time.process_time() - cpu_start, "n_samples": data.n_samples}]
    tables = {"states": states, "episodes": episodes, "signals": signals, "cells": cells}
    return cell, {name: pd.DataFrame(rows) for name, rows in tables.items()}


def reference_paths(lattice: Any) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Hindsight optima, the one-step oracle and every fixed "m LR rounds, then AL" split."""
    from ballad_env.episode import AL, LR

    k = lattice.n_rounds
    refs = {"optimal": ("reference", lattice.optimal_path("mean")),
            "optimal-final": ("reference", lattice.optimal_path("final")),
            "oracle": ("reference", lattice.one_step_oracle())}
    for m in range(k + 1):
        actions = (LR,) * m + (AL,) * (k - m)
        try:
            lattice.states_along(actions)
        except ValueError:
            continue  # a pool too small for this split
        refs[f"fixed-lr{m:02d}"] = ("fixed", actions)
    return refs


def episode_row(lattice: Any, name: str, kind: str, actions: tuple[int, ...]
                ) -> dict[str, Any]:
    """One path's scores: mean and final cost, the moves it got right, its action counts."""
    from ballad_env.lattice import path_string

    costs = lattice.costs_along(actions)
    right, decided = lattice.right_moves(actions)
    return {"name": name, "kind": kind, "path": path_string(actions),
            "mean_cost": float(costs.mean()), "final_cost": float(costs[-1]),
            "n_al": int(len(actions) - sum(actions)), "right_moves": right,
            "decided_moves": decided}


# ---------------------------------------------------------------------------- cross-check
def crosscheck_cell(task: tuple[Path, CellKey, tuple[str, ...]], single_thread: bool = True
                    ) -> tuple[CellKey, pd.DataFrame]:
    """Re-run every agent (and the oracle) through the real environment: same actions and
    per-round test costs as the lattice replay? ``task`` is (data folder, cell, agents)."""
    from agents.evaluation import run_episode
    from agents.registry import make_agent
    from ballad_env.data import load_dataset
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.lattice import build_lattice, parse_path
    from ballad_env.settings import Settings

    data_dir, cell, agent_names = task
    dataset, seed, prior = cell
    with worker_limits(True):
        data = load_dataset(dataset, data_dir=data_dir)
        lattice = build_lattice(data, seed, Settings(prior=prior))
        env = BudgetAllocationEnv(data, settings=lattice.settings)
        rows = []
        for name in [*agent_names, "oracle"]:
            records = run_episode(env, make_agent(name, env), seed)
            actions = tuple(parse_path("".join(r["action"][0] for r in records)))
            replayed = lattice.one_step_oracle() if name == "oracle" else \
                lattice.replay(make_agent(name))
            env_costs = np.array([r["test_cost"] for r in records])
            rows.append({"dataset": dataset, "seed": seed, "prior": prior, "name": name,
                         "same_actions": actions == replayed,
                         "max_cost_gap": float(np.max(np.abs(
                             env_costs - lattice.costs_along(actions))))})
    return cell, pd.DataFrame(rows)


def crosscheck_is_current(store: ResultStore, check: CellKey, agent_names: Sequence[str]
                          ) -> bool:
    """Whether the store holds this cell's cross-check with every one of these agents."""
    path = store.path(table_cell(CROSSCHECK, check))
    return path.exists() and set(agent_names) <= set(store.read(table_cell(CROSSCHECK, check))
                                                       .name)


# ---------------------------------------------------------------------------- driver
def study_cells(options: StudyOptions) -> list[CellKey]:
    """Every cell of the study, largest data first (so the slowest start early)."""
    sizes = dataset_sizes(options)
    return [(d, s, p) for d in sorted(options.datasets, key=lambda n: -sizes[n])
            for p in options.priors for s in range(options.seeds)]


def dataset_sizes(options: StudyOptions) -> dict[str, int]:
    """Size of each data set's file, or a built-in's array bytes (a proxy for its lattice's
    cost)."""
    from ballad_env.data import BUILTIN_DATASETS, data_file, load_dataset

    return {name: (load_dataset(name).X.nbytes if name in BUILTIN_DATASETS
                   else data_file(name, options.data_dir).stat().st_size)
            for name in options.datasets}


def figure_dataset(datasets: Sequence[str]) -> str:
    """The data set whose lattice the heat map draws: Cardiotocography (LATTICE.md's) when it
    is studied, else the first one."""
    return FIGURE_DATASET if FIGURE_DATASET in datasets else datasets[0]


def plan_cells(options: StudyOptions, store: ResultStore
               ) -> list[tuple[CellKey, tuple[str, ...]]]:
    """The cells to compute and the agents for each: missing cells, and finished ones that
    lack a requested agent. A stored file that cannot be read is a ``RunError`` naming it."""
    plan = []
    for cell in study_cells(options):
        agent_names = agents_to_compute(store, cell, options.agents)
        if agent_names:
            plan.append((cell, agent_names))
    return plan


def crosscheck_cells(options: StudyOptions) -> list[CellKey]:
    """Seed 0 of the ``crosscheck`` smallest data sets, per prior."""
    sizes = dataset_sizes(options)
    small = sorted(options.datasets, key=lambda n: sizes[n])[:options.crosscheck]
    return [(d, 0, p) for p in options.priors for d in small]


def run_study(options: StudyOptions) -> None:
    """Compute every missing or incomplete cell through the executor, each written to the
    store as it finishes, then cross-check; record the run."""
    from tqdm import tqdm

    store = prepare_store(options)
    n_cells = len(study_cells(options))
    todo = plan_cells(options, store)
    redo = sum(stored_agents(store, cell) is not None for cell, _ in todo)
    print(f"{n_cells} cells, {n_cells - len(todo)} already done"
          + (f", {redo} to recompute for new agents" if redo else ""), flush=True)
    start = time.perf_counter()
    tasks = [(options.data_dir, cell, names) for cell, names in todo]
    for cell, tables in tqdm(execute(tasks, run_cell, options.n_jobs), total=len(todo),
                             desc="lattices", file=sys.stdout, mininterval=10):
        for name in TABLES:  # "cells" last: a cell is finished once it is there
            store.write(table_cell(name, cell), tables[name])
    agents = tuple(options.agents)
    checks = [(options.data_dir, c, agents) for c in crosscheck_cells(options)
              if not crosscheck_is_current(store, c, agents)]
    for cell, rows in execute(checks, crosscheck_cell, options.n_jobs):
        store.write(table_cell(CROSSCHECK, cell), rows)
    elapsed = time.perf_counter() - start
    print(f"computed in {elapsed:.0f} s", flush=True)
    record_run(options, n_cells, len(todo), elapsed, source_fingerprint())


def record_run(options: StudyOptions, n_cells: int, computed: int, elapsed: float,
               source: str) -> None:
    """Append this run to ``meta.json`` with the package versions and source fingerprint."""
    meta_file = options.out / "meta.json"
    runs = json.loads(meta_file.read_text())["runs"] if meta_file.exists() else []
    runs.append({"wall_seconds": round(elapsed, 1), "cells_computed": computed,
                 "n_jobs": options.n_jobs})
    meta = {"runs": runs, "cells": n_cells, "agents": list(options.agents), "source": source,
            "versions": package_versions()}
    meta_file.write_text(json.dumps(meta, indent=1))


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
    fixed = episodes[episodes.kind == "fixed"]
    best = fixed.loc[fixed.groupby(CELL_KEYS).mean_cost.idxmin()].assign(
        name="best-fixed-per-cell", kind="reference")
    episodes = pd.concat([episodes, best], ignore_index=True)
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

    from ballad_env.lattice import parse_path

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


__all__ = ["CROSSCHECK", "STUDY_AGENTS", "TABLES", "StudyOptions", "add_regrets",
           "agents_table", "agents_to_compute", "best_fixed_overall", "collect",
           "crosscheck_cell", "crosscheck_table", "figure_dataset", "finished_cells",
           "fixed_curve", "per_dataset_table", "prepare_store", "report_tables", "run_cell",
           "run_study", "signals_table", "stored_agents", "summary_table", "table_cell",
           "write_report"]
