"""How far are allocation rules from the best allocation? The lattice study (LATTICE.md).

For every data set, seed and prior, one lattice (``ballad_env.lattice``) gives the test
cost of every state (i AL, j LR rounds). Agents are replayed on it (exact for agents that
read only observations; a few cells are re-run through the real environment to show it),
and scored against the hindsight-optimal path, the fixed LR-then-AL splits and the
one-step oracle; each reward signal is scored by how often its larger side is the truly
better action.

Results are tidy and resumable: each finished cell (data set, seed, prior) leaves a
folder under ``<out>/cells``; a rerun skips finished cells. ``--report-only`` rebuilds the
tables (``docs/tables/lattice_*``) and figures (``docs/figures/lattice_*.png``) from the
files alone.

    .venv/bin/python scripts/lattice_study.py --n-jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
STUDY_AGENTS = ("ballad", "ballad-cosine", "all-in-al", "all-in-lr", "random", "discounted",
                "ucb1", "epsilon-greedy", "sliding-window", "val-cost-greedy", "half",
                "lr-first-20", "lr-first-33", "lr-first-50")
TABLES = ("states", "episodes", "signals", "cells")
PACKAGES = ("numpy", "scikit-learn", "pyod", "gymnasium", "ballad-env")


@dataclass
class Options:
    """The study's settings (one command-line option each)."""

    data_dir: Path
    out: Path = REPO / "results" / "lattice_study"
    docs: Path = REPO / "docs"
    datasets: list[str] = field(default_factory=list)
    seeds: int = 10
    priors: list[str] = field(default_factory=lambda: ["iforest", "knn"])
    agents: list[str] = field(default_factory=lambda: list(STUDY_AGENTS))
    n_jobs: int = 2
    crosscheck: int = 1
    figure_dataset: str = "Cardiotocography"
    report_only: bool = False


def parse_options(argv: list[str] | None = None) -> Options:
    """Command-line options; defaults reproduce LATTICE.md."""
    default_data = os.environ.get("BALLAD_DATA_DIR") or REPO.parent / "shared" / "benchmarks"
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, default=Path(default_data),
                   help="folder of <Name>.npz benchmark files")
    p.add_argument("--out", type=Path, default=Options.out, help="results folder (tidy files)")
    p.add_argument("--docs", type=Path, default=Options.docs, help="where tables/figures go")
    p.add_argument("--datasets", nargs="*", default=[],
                   help="data set names (default: every .npz in --data-dir)")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0 .. seeds-1 per data set")
    p.add_argument("--priors", nargs="+", default=["iforest", "knn"], help="SSDO priors")
    p.add_argument("--agents", nargs="+", default=list(STUDY_AGENTS),
                   help="registered agent names to replay on every lattice")
    p.add_argument("--n-jobs", type=int, default=2, help="worker processes")
    p.add_argument("--crosscheck", type=int, default=1,
                   help="cells per prior re-run through the real environment (smallest data)")
    p.add_argument("--figure-dataset", default="Cardiotocography",
                   help="data set whose seed-0 lattice is drawn")
    p.add_argument("--report-only", action="store_true",
                   help="skip computing; rebuild tables and figures from the results")
    args = p.parse_args(argv)
    options = Options(**{k: v for k, v in vars(args).items()})
    if not options.datasets:
        options.datasets = sorted(path.stem for path in options.data_dir.glob("*.npz"))
    return options


# ---------------------------------------------------------------------------- one cell
def cell_dir(out: Path, dataset: str, seed: int, prior: str) -> Path:
    """Folder of one finished cell."""
    return out / "cells" / prior / dataset / f"seed{seed}"


def run_cell(options: Options, dataset: str, seed: int, prior: str) -> dict[str, Any]:
    """Build one lattice, replay the agents on it, score the signals; write four tables."""
    from threadpoolctl import threadpool_limits

    import agents
    from ballad_env.data import load_dataset
    from ballad_env.episode import EpisodeConfig
    from ballad_env.lattice import SIGNAL_MODES, SIGNALS, build_lattice

    target = cell_dir(options.out, dataset, seed, prior)
    if target.exists():
        return {"dataset": dataset, "seed": seed, "prior": prior, "skipped": True}
    keys = {"dataset": dataset, "seed": seed, "prior": prior}
    start, cpu_start = time.perf_counter(), time.process_time()
    with threadpool_limits(1):  # two workers on two cores: BLAS threads only oversubscribe
        data = load_dataset(options.data_dir / f"{dataset}.npz")
        lattice = build_lattice(data, seed, EpisodeConfig(prior=prior))
        built = time.perf_counter() - start
        paths = {name: ("agent", lattice.replay(agents.make_agent(name))) for name in
                 options.agents}
    paths.update(reference_paths(lattice))
    episodes = [{**keys, **episode_row(lattice, name, kind, actions)}
                for name, (kind, actions) in paths.items()]
    signals = [{**keys, "signal": s, "mode": m, **lattice.score_signal(s, m)}
               for s in SIGNALS for m in SIGNAL_MODES]
    states = [{**keys, **row} for row in lattice.state_records()]
    cells = [{**keys, "n_rounds": lattice.n_rounds, "build_seconds": built,
              "seconds": time.perf_counter() - start,
              "cpu_seconds": time.process_time() - cpu_start, "n_samples": data.n_samples}]
    write_cell(target, {"states": states, "episodes": episodes, "signals": signals,
                        "cells": cells})
    return {**keys, "skipped": False, "seconds": cells[0]["seconds"]}


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


def write_cell(target: Path, tables: dict[str, list[dict[str, Any]]]) -> None:
    """Write a cell's tables to a temporary folder, then rename it: a cell is whole or absent."""
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, rows in tables.items():
        pd.DataFrame(rows).to_parquet(tmp / f"{name}.parquet", index=False)
    tmp.rename(target)


# ---------------------------------------------------------------------------- cross-check
def crosscheck_cell(options: Options, dataset: str, seed: int, prior: str
                    ) -> list[dict[str, Any]]:
    """Re-run every agent (and the oracle) through the real environment: same actions and
    per-round test costs as the lattice replay?"""
    from threadpoolctl import threadpool_limits

    import agents
    from ballad_env.env import BudgetAllocationEnv
    from ballad_env.lattice import build_lattice, parse_path

    with threadpool_limits(1):
        env = BudgetAllocationEnv(options.data_dir / f"{dataset}.npz", prior=prior)
        lattice = build_lattice(env.dataset, seed, env.config)
        rows = []
        for name in [*options.agents, "oracle"]:
            records = agents.run_episode(env, agents.make_agent(name, env), seed)
            actions = tuple(parse_path("".join(r["action"][0] for r in records)))
            replayed = lattice.one_step_oracle() if name == "oracle" else \
                lattice.replay(agents.make_agent(name))
            env_costs = np.array([r["test_cost"] for r in records])
            rows.append({"dataset": dataset, "seed": seed, "prior": prior, "name": name,
                         "same_actions": actions == replayed,
                         "max_cost_gap": float(np.max(np.abs(
                             env_costs - lattice.costs_along(actions))))})
    return rows


# ---------------------------------------------------------------------------- driver
def run_study(options: Options) -> None:
    """Compute every missing cell in parallel (largest data first), then cross-check."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    sizes = {name: (options.data_dir / f"{name}.npz").stat().st_size for name in options.datasets}
    cells = [(d, s, p) for d in sorted(options.datasets, key=lambda n: -sizes[n])
             for p in options.priors for s in range(options.seeds)]
    todo = [c for c in cells if not cell_dir(options.out, *c).exists()]
    print(f"{len(cells)} cells, {len(cells) - len(todo)} already done", flush=True)
    small = sorted(options.datasets, key=lambda n: sizes[n])[:options.crosscheck]
    checks = [(d, 0, p) for p in options.priors for d in small]
    check_file = options.out / "crosscheck.parquet"
    start = time.perf_counter()
    with Parallel(n_jobs=options.n_jobs, return_as="generator_unordered") as parallel:
        for _ in tqdm(parallel(delayed(run_cell)(options, *c) for c in todo), total=len(todo),
                      desc="lattices", file=sys.stdout, mininterval=10):
            pass
        if checks and not check_file.exists():
            rows = [r for part in parallel(delayed(crosscheck_cell)(options, *c) for c in checks)
                    for r in part]
            pd.DataFrame(rows).to_parquet(check_file, index=False)
    elapsed = time.perf_counter() - start
    print(f"computed in {elapsed:.0f} s", flush=True)
    meta_file = options.out / "meta.json"
    runs = json.loads(meta_file.read_text())["runs"] if meta_file.exists() else []
    runs.append({"wall_seconds": round(elapsed, 1), "cells_computed": len(todo),
                 "n_jobs": options.n_jobs})
    meta = {"runs": runs, "cells": len(cells), "agents": options.agents,
            "versions": {p: _version(p) for p in PACKAGES}}
    meta_file.write_text(json.dumps(meta, indent=1))


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def collect(out: Path) -> dict[str, pd.DataFrame]:
    """Concatenate every finished cell's tables and save them beside the cells."""
    frames = {}
    for name in TABLES:
        parts = sorted((out / "cells").glob(f"*/*/seed*/{name}.parquet"))
        frames[name] = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
        frames[name].to_parquet(out / f"{name}.parquet", index=False)
    return frames


# ---------------------------------------------------------------------------- report
def add_regrets(episodes: pd.DataFrame) -> pd.DataFrame:
    """Regret of each path: its mean cost minus the optimal path's in the same cell; and
    the per-cell best fixed split (chosen in hindsight) as a reference row."""
    keys = ["dataset", "seed", "prior"]
    fixed = episodes[episodes.kind == "fixed"]
    best = fixed.loc[fixed.groupby(keys).mean_cost.idxmin()].assign(
        name="best-fixed-per-cell", kind="reference")
    episodes = pd.concat([episodes, best], ignore_index=True)
    optimal = episodes[episodes.name == "optimal"].set_index(keys)
    best_final = episodes[episodes.name == "optimal-final"].set_index(keys)
    idx = episodes.set_index(keys).index
    episodes["regret"] = episodes.mean_cost.to_numpy() - optimal.mean_cost.reindex(idx).to_numpy()
    episodes["final_regret"] = (episodes.final_cost.to_numpy()
                                - best_final.final_cost.reindex(idx).to_numpy())
    return episodes


def best_fixed_overall(episodes: pd.DataFrame, prior: str) -> str:
    """The fixed split with the lowest mean cost over all cells of a prior (in hindsight)."""
    fixed = episodes[(episodes.kind == "fixed") & (episodes.prior == prior)]
    return str(fixed.groupby("name").mean_cost.mean().idxmin())


def agents_table(episodes: pd.DataFrame, priors: list[str]) -> pd.DataFrame:
    """Per prior and path: mean cost, regret (mean, median), zero-regret share, right moves,
    and the agents' mean rank among themselves within a cell (1 = cheapest)."""
    keys = ["dataset", "seed", "prior"]
    ranks = episodes[episodes.kind == "agent"].groupby(keys).mean_cost.rank()
    episodes = episodes.assign(rank=ranks)
    rows = []
    for prior in priors:
        ep = episodes[episodes.prior == prior]
        fixed_name = best_fixed_overall(episodes, prior)
        order = ["optimal", "optimal-final", "best-fixed-per-cell", fixed_name, "oracle",
                 *[n for n in ep[ep.kind == "agent"].name.unique()]]
        for name in order:
            sel = ep[ep.name == name]
            label = f"best fixed overall ({fixed_name})" if name == fixed_name else name
            rows.append({"prior": prior, "path": label,
                         "mean_cost": sel.mean_cost.mean(),
                         "final_cost": sel.final_cost.mean(),
                         "regret": sel.regret.mean(), "median_regret": sel.regret.median(),
                         "zero_regret": (sel.regret <= 1e-12).mean(),
                         "final_regret": sel.final_regret.mean(),
                         "mean_rank": sel["rank"].mean(),
                         "right_moves": sel.right_moves.sum() / max(1, sel.decided_moves.sum()),
                         "al_share": sel.n_al.sum() / max(1, sel.path.str.len().sum())})
    return pd.DataFrame(rows)


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


def per_dataset_table(episodes: pd.DataFrame, priors: list[str]) -> pd.DataFrame:
    """Mean cost per data set and prior of the main paths, BALLAD's regret and its rank."""
    names = ["optimal", "best-fixed-per-cell", "oracle", "ballad", "all-in-al", "all-in-lr"]
    sel = episodes[episodes.name.isin(names) & episodes.prior.isin(priors)]
    wide = sel.pivot_table(index=["prior", "dataset"], columns="name", values="mean_cost")
    wide = wide[names]
    wide["ballad_regret"] = wide.ballad - wide.optimal
    return wide.reset_index()


def crosscheck_table(checks: pd.DataFrame) -> pd.DataFrame:
    """Per re-run cell: agents run through the environment, how many matched the replay."""
    return checks.groupby(["dataset", "seed", "prior"]).agg(
        agents=("name", "size"), same_actions=("same_actions", "sum"),
        max_cost_gap=("max_cost_gap", "max")).reset_index()


def fixed_curve(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean cost of "m LR rounds then AL" for every m, per prior."""
    fixed = episodes[episodes.kind == "fixed"].copy()
    fixed["lr_rounds"] = fixed.name.str.slice(8).astype(int)
    return fixed.groupby(["prior", "lr_rounds"]).mean_cost.agg(["mean", "count"]).reset_index()


def write_report(options: Options) -> None:
    """Tables (csv + markdown) and figures from the tidy files only."""
    frames = collect(options.out)
    episodes = add_regrets(frames["episodes"])
    agents = agents_table(episodes, options.priors)
    tables = {
        "lattice_summary": summary_table(agents),
        "lattice_agents": agents,
        "lattice_signals": signals_table(frames["signals"]),
        "lattice_per_dataset": per_dataset_table(episodes, options.priors),
        "lattice_fixed": fixed_curve(episodes),
    }
    check_file = options.out / "crosscheck.parquet"
    if check_file.exists():
        tables["lattice_crosscheck"] = crosscheck_table(pd.read_parquet(check_file))
    folder = options.docs / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(folder / f"{name}.csv", index=False, float_format="%.5g")
        (folder / f"{name}.md").write_text(markdown(table))
    cells = frames["cells"]
    print(f"{len(cells)} cells; lattice builds {cells.build_seconds.sum():.0f} s, cells "
          f"{cells.seconds.sum():.0f} s (summed wall times), {cells.cpu_seconds.sum():.0f} s CPU")
    print(tables["lattice_summary"].to_string(index=False, float_format="%.4f"))
    print(tables["lattice_signals"].to_string(index=False, float_format="%.3f"))
    draw_figures(options, frames["states"], episodes, tables["lattice_fixed"])


def markdown(table: pd.DataFrame) -> str:
    """A pipe table (floats to 4 decimals), without the optional tabulate dependency."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "–" if np.isnan(value) else f"{value:.4f}"
        return str(value)

    lines = ["| " + " | ".join(map(str, table.columns)) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |"
              for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def draw_figures(options: Options, states: pd.DataFrame, episodes: pd.DataFrame,
                 curve: pd.DataFrame) -> None:
    """The lattice heat map (with optimal, BALLAD and oracle paths) and the fixed-split curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = options.docs / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(options.priors), figsize=(5.2 * len(options.priors), 4.6),
                             squeeze=False)
    for ax, prior in zip(axes[0], options.priors, strict=True):
        draw_lattice(ax, states, episodes, options.figure_dataset, prior)
    fig.tight_layout()
    fig.savefig(folder / "lattice_heatmap.png", dpi=130)
    plt.close(fig)

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


def draw_lattice(ax: Any, states: pd.DataFrame, episodes: pd.DataFrame, dataset: str,
                 prior: str, seed: int = 0) -> None:
    """One lattice's test costs (j across, i up) with three paths drawn from (0, 0)."""
    from matplotlib import patheffects

    from ballad_env.lattice import parse_path

    cell = states[(states.dataset == dataset) & (states.prior == prior) & (states.seed == seed)]
    k = int((cell.i + cell.j).max())
    grid = np.full((k + 1, k + 1), np.nan)
    grid[cell.i.to_numpy(), cell.j.to_numpy()] = cell.cost.to_numpy()
    image = ax.imshow(grid, origin="lower", cmap="viridis")
    ax.figure.colorbar(image, ax=ax, label="test cost", shrink=0.85)
    paths = episodes[(episodes.dataset == dataset) & (episodes.prior == prior)
                     & (episodes.seed == seed)].set_index("name")
    styles = {"optimal": ("white", "-", 3.0), "ballad": ("red", "-", 1.8),
              "oracle": ("orange", "--", 1.4)}
    for name, (color, style, width) in styles.items():
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


def main(argv: list[str] | None = None) -> None:
    options = parse_options(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    if not options.report_only:
        run_study(options)
    write_report(options)


if __name__ == "__main__":
    main()
