"""The learned-policy study: do RL allocation policies beat BALLAD on data sets they never saw?

Four steps, each a subcommand, each reading only what the previous one wrote:

* ``split``    12 training / 6 held-out benchmarks by a stated rule -> docs/policy_split.json
* ``train``    PPO and MaskablePPO x rewards cost, val_cost x 3 seeds on the 12 training sets
               (``scripts/train_policy.py`` as subprocesses, ``--jobs`` at a time)
* ``evaluate`` the trained policies and the baselines on the 6 held-out sets x 10 seeds,
               one tidy row per (data set, seed, agent, round) -> results/policy_study/rounds.csv
* ``report``   tables under docs/tables/policy_*, figures under docs/figures/policy_*

Example::

    python scripts/policy_study.py split
    python scripts/policy_study.py train --timesteps 3000 --jobs 2
    python scripts/policy_study.py evaluate --seeds 10 --jobs 2
    python scripts/policy_study.py report
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SPLIT_FILE = ROOT / "docs" / "policy_split.json"
STUDY_DIR = ROOT / "results" / "policy_study"
SPLIT_SEED = 2023  # the paper's year; fixed before any policy was trained
N_BLOCKS = 6
ALGOS = ("ppo", "maskable_ppo")
REWARDS = ("cost", "val_cost")
BASELINES = ("ballad", "all-in-al", "all-in-lr", "random", "oracle")
ROUND_FIELDS = ("dataset", "seed", "agent", "round", "action", "test_cost", "fpr", "fnr",
                "rejection_rate", "auc", "tau", "val_cost", "n_labeled_train", "n_labeled_val")


def data_dir(arg: str | None) -> Path:
    """The benchmark folder: the option, else $BALLAD_DATA_DIR, else ../shared/benchmarks."""
    if arg:
        return Path(arg)
    if os.environ.get("BALLAD_DATA_DIR"):
        return Path(os.environ["BALLAD_DATA_DIR"])
    return ROOT.parent / "shared" / "benchmarks"


# --------------------------------------------------------------------------- split
def make_split(manifest: dict[str, dict], seed: int = SPLIT_SEED,
               n_blocks: int = N_BLOCKS) -> dict:
    """Hold out one data set per size block: sort by rows, cut into ``n_blocks`` blocks of
    equal count, draw one per block with a seeded generator. Held-out sets thus span small
    to large data, and the rule never looks at any result.
    """
    names = sorted(manifest, key=lambda name: (manifest[name]["n"], name))
    blocks = np.array_split(np.array(names), n_blocks)
    rng = np.random.default_rng(seed)
    held_out = [str(block[rng.integers(len(block))]) for block in blocks]
    return {
        "rule": (f"sort the {len(names)} benchmarks by number of rows, cut into {n_blocks} "
                 f"consecutive blocks of {len(names) // n_blocks}, hold out one per block drawn "
                 f"with numpy.random.default_rng({seed}).integers(block size), in block order; "
                 "chosen before any policy was trained"),
        "seed": seed,
        "blocks": [[str(n) for n in block] for block in blocks],
        "train": [n for n in names if n not in held_out],
        "held_out": held_out,
        "rows": {n: manifest[n]["n"] for n in names},
    }


def cmd_split(args: argparse.Namespace) -> None:
    manifest = json.loads((data_dir(args.data_dir) / "manifest.json").read_text())
    split = make_split(manifest)
    if SPLIT_FILE.exists() and json.loads(SPLIT_FILE.read_text()) != split and not args.force:
        raise SystemExit(f"{SPLIT_FILE} exists and differs: the split is fixed; --force to "
                         "overwrite")
    SPLIT_FILE.parent.mkdir(parents=True, exist_ok=True)
    SPLIT_FILE.write_text(json.dumps(split, indent=2) + "\n")
    print(f"train    {split['train']}\nheld out {split['held_out']}\n-> {SPLIT_FILE}")


# --------------------------------------------------------------------------- train
def policy_dir(study: Path) -> Path:
    """Where the study's trained policies live (one folder per run)."""
    return study / "policies"


def train_commands(args: argparse.Namespace) -> dict[str, list[str]]:
    """One ``train_policy.py`` command per (algorithm, reward, seed), keyed by run name."""
    commands = {}
    for algo in ALGOS:
        for reward in REWARDS:
            for seed in range(args.train_seeds):
                name = f"{algo}-{reward}-train12-s{seed}"
                commands[name] = [
                    sys.executable, str(ROOT / "scripts" / "train_policy.py"),
                    "--algo", algo, "--reward", reward, "--seed", str(seed),
                    "--datasets-from", str(SPLIT_FILE), "--data-dir", str(data_dir(args.data_dir)),
                    "--total-timesteps", str(args.timesteps), "--n-envs", str(args.n_envs),
                    "--vec-env", args.vec_env, "--n-steps", str(args.n_steps),
                    "--batch-size", str(args.n_steps), "--learning-rate", str(args.learning_rate),
                    "--checkpoint-freq", str(args.timesteps // 2), "--eval-freq", "0",
                    "--output-dir", str(policy_dir(args.study_dir)), "--run-name", name,
                    "--no-progress"]
    return commands


def cmd_train(args: argparse.Namespace) -> None:
    """Run the training commands ``--jobs`` at a time; runs with a saved model are skipped."""
    todo = {name: cmd for name, cmd in train_commands(args).items()
            if not (policy_dir(args.study_dir) / name / f"{name}.zip").exists()}
    logs = args.study_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    queue = list(todo.items())
    start = time.perf_counter()
    while queue or running:
        while queue and len(running) < args.jobs:
            name, cmd = queue.pop(0)
            log = (logs / f"{name}.log").open("w")
            running[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                              env=env), time.perf_counter())
        time.sleep(2)
        for name, (proc, began) in list(running.items()):
            if proc.poll() is not None:
                del running[name]
                status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode})"
                print(f"{name}: {status} in {time.perf_counter() - began:.0f} s "
                      f"[{time.perf_counter() - start:.0f} s total]", flush=True)


# --------------------------------------------------------------------------- evaluate
def trained_policies(study: Path) -> list[Path]:
    """The study's saved models (final ones, not checkpoints), sorted by run name."""
    return sorted(d / f"{d.name}.zip" for d in policy_dir(study).iterdir()
                  if (d / f"{d.name}.zip").is_file())


def build_agent(spec: str, env: Any):
    """A baseline by registry name, or a learned policy by its ``.zip`` path."""
    from agents import make_agent
    from agents.policy import is_policy_path, load_policy

    return load_policy(spec, env) if is_policy_path(spec) else make_agent(spec, env)


def play(env: Any, obs: np.ndarray, info: dict, agent: Any, seed: int) -> list[dict]:
    """Play ``agent`` from an environment already reset with ``seed``; round 0 is the start."""
    agent.reset(seed)
    records = [info]
    done = False
    while not done:
        action, _ = agent.predict(obs, deterministic=True)
        obs, _, terminated, truncated, info = env.step(int(np.asarray(action).item()))
        records.append(info)
        done = terminated or truncated
    return records


def evaluate_cell(dataset: str, seed: int, specs: list[str], data: str) -> list[dict]:
    """Every agent on one (data set, seed): reset once, each agent on its own deep copy."""
    import torch

    from ballad_env import BudgetAllocationEnv

    torch.set_num_threads(1)
    fresh = BudgetAllocationEnv(dataset, data_dir=data)
    obs, info = fresh.reset(seed=seed)
    rows = []
    for spec in specs:
        env = copy.deepcopy(fresh)
        agent = build_agent(spec, env)
        name = getattr(agent, "name", spec)
        for record in play(env, obs, info, agent, seed):
            rows.append({"dataset": dataset, "seed": seed, "agent": name,
                         **{k: record[k] for k in ROUND_FIELDS[3:]}})
    return rows


def check_replay(dataset: str, seed: int, data: str) -> None:
    """Playing from a deep copy of a reset env must equal ``run_episode`` from a fresh reset."""
    from agents import make_agent, run_episode
    from ballad_env import BudgetAllocationEnv

    rows = evaluate_cell(dataset, seed, ["ballad"], data)[1:]
    env = BudgetAllocationEnv(dataset, data_dir=data)
    reference = run_episode(env, make_agent("ballad", env), seed)
    got = [(r["action"], r["test_cost"]) for r in rows]
    want = [(r["action"], r["test_cost"]) for r in reference]
    if got != want:
        raise RuntimeError(f"replaying from a copied env differs from a fresh reset: {got} "
                           f"!= {want}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Baselines and trained policies on held-out data x seeds, appended per cell to a CSV."""
    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    split = json.loads(SPLIT_FILE.read_text())
    data = str(data_dir(args.data_dir))
    specs = list(BASELINES) + [str(p) for p in trained_policies(args.study_dir)]
    out = args.study_dir / "rounds.csv"
    done = set()
    if out.exists():
        with out.open() as f:
            done = {(r["dataset"], int(r["seed"])) for r in csv.DictReader(f)}
    cells = [(d, s) for d in split["held_out"] for s in range(args.seeds) if (d, s) not in done]
    check_replay(split["held_out"][0], 0, data)
    print(f"{len(specs)} agents x {len(cells)} cells ({len(done)} done before)", flush=True)
    new_file = not out.exists()
    start = time.perf_counter()
    with out.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ROUND_FIELDS)
        if new_file:
            writer.writeheader()
        jobs = Parallel(n_jobs=args.jobs, return_as="generator_unordered")(
            delayed(evaluate_cell)(d, s, specs, data) for d, s in cells)
        for rows in tqdm(jobs, total=len(cells), unit="cell"):
            writer.writerows(rows)
            f.flush()
    meta = {"agents": specs, "held_out": split["held_out"], "seeds": args.seeds,
            "evaluate_seconds": round(time.perf_counter() - start, 1)}
    (args.study_dir / "evaluate.json").write_text(json.dumps(meta, indent=2) + "\n")


# --------------------------------------------------------------------------- report
TABLES = ROOT / "docs" / "tables"
FIGURES = ROOT / "docs" / "figures"
GROUP_ORDER = ("oracle", "ballad", "all-in-al", "all-in-lr", "random",
               *(f"{a}-{r}" for a in ALGOS for r in REWARDS))


def load_rounds(study: Path):
    """The tidy round table, with each agent's group (policy run without its seed) and seed."""
    import pandas as pd

    df = pd.read_csv(study / "rounds.csv")
    parts = df["agent"].str.extract(r"^(?P<group>.+)-train12-s(?P<train_seed>\d+)$")
    df["group"] = parts["group"].fillna(df["agent"])
    df["train_seed"] = pd.to_numeric(parts["train_seed"])
    df["action"] = df["action"].fillna("")
    return df


def episode_table(df):
    """One row per (data set, seed, agent): final and mean-over-rounds cost, AL share, switches."""
    played = df[df["round"] > 0].sort_values("round")
    keys = ["dataset", "seed", "agent", "group", "train_seed"]

    def summary(g):
        actions = g["action"].to_numpy()
        changes = np.flatnonzero(actions[1:] != actions[:-1])
        return {"final_cost": g["test_cost"].iloc[-1], "mean_cost": g["test_cost"].mean(),
                "al_share": float(np.mean(actions == "AL")), "switches": len(changes),
                "first_switch": float(changes[0] + 2) if len(changes) else np.nan}

    import pandas as pd

    rows = [{**dict(zip(keys, k, strict=True)), **summary(g)}
            for k, g in played.groupby(keys, dropna=False, sort=False)]
    return pd.DataFrame(rows)


def headline(episodes, n_boot: int = 2000):
    """Per agent group: cost (spread over training seeds), paired difference to BALLAD with a
    bootstrap interval over (data set, seed) cells, wins, and what the agent does.
    """
    import pandas as pd

    rng = np.random.default_rng(0)
    cells = ["dataset", "seed"]
    ballad = episodes[episodes["group"] == "ballad"].set_index(cells)["final_cost"]
    rows = []
    for group in [g for g in GROUP_ORDER if g in set(episodes["group"])]:
        e = episodes[episodes["group"] == group]
        per_seed = e.groupby("train_seed", dropna=False)[["final_cost", "mean_cost"]].mean()
        per_cell = e.groupby(cells)["final_cost"].mean()
        diff = (per_cell - ballad.reindex(per_cell.index)).to_numpy()
        boot = rng.choice(diff, size=(n_boot, len(diff))).mean(axis=1)
        paired = e.set_index(cells)["final_cost"] - ballad.reindex(e.set_index(cells).index)
        rows.append({
            "agent": group, "runs": len(per_seed),
            "final_cost": per_seed["final_cost"].mean(),
            "final_cost_sd_seeds": per_seed["final_cost"].std() if len(per_seed) > 1 else np.nan,
            "mean_cost": per_seed["mean_cost"].mean(),
            "mean_cost_sd_seeds": per_seed["mean_cost"].std() if len(per_seed) > 1 else np.nan,
            "vs_ballad_pct": 100 * (per_seed["final_cost"].mean() / ballad.mean() - 1),
            "diff_vs_ballad": diff.mean(), "diff_ci_low": np.quantile(boot, 0.025),
            "diff_ci_high": np.quantile(boot, 0.975),
            "win": float(np.mean(paired < -1e-12)), "tie": float(np.mean(np.abs(paired) <= 1e-12)),
            "al_share": e["al_share"].mean(), "switches": e["switches"].mean(),
            "first_switch": e["first_switch"].mean(),
            "never_switch": e["first_switch"].isna().mean(),
        })
    return pd.DataFrame(rows)


def per_dataset(episodes):
    """Final test cost per held-out data set (rows) and agent group (columns)."""
    table = episodes.groupby(["dataset", "group"])["final_cost"].mean().unstack()
    return table[[g for g in GROUP_ORDER if g in table.columns]]


def by_training_seed(df, episodes):
    """What each learned policy does: cost, AL share, switches and its most common sequence of
    actions (A = AL, L = LR) with the share of held-out episodes that follow it exactly.
    """
    played = df[df["round"] > 0].sort_values("round")
    letters = played.groupby(["group", "train_seed", "dataset", "seed"])["action"].agg(
        lambda a: "".join(x[0] for x in a))
    rows = []
    for (group, seed), e in episodes.dropna(subset=["train_seed"]).groupby(["group",
                                                                           "train_seed"]):
        counts = letters.loc[(group, seed)].value_counts()
        rows.append({"agent": group, "train_seed": int(seed),
                     "final_cost": e["final_cost"].mean(), "mean_cost": e["mean_cost"].mean(),
                     "al_share": e["al_share"].mean(), "switches": e["switches"].mean(),
                     "modal_sequence": counts.index[0],
                     "modal_share": counts.iloc[0] / counts.sum()})
    return pd_frame(rows)


def val_cost_bias(df):
    """Estimated cost (on the labels that set tau) next to the test cost, for the fixed rules."""
    rules = df[df["group"].isin(["all-in-al", "all-in-lr", "ballad"]) & (df["round"] > 0)]
    table = rules.groupby(["group", "round"])[["val_cost", "test_cost"]].mean().reset_index()
    return table[table["round"].isin([1, 2, 5, 10, 15])]


def pd_frame(rows: list[dict]):
    """A DataFrame from records (pandas imported lazily)."""
    import pandas as pd

    return pd.DataFrame(rows)


def training_times(study: Path) -> Any:
    """Wall time and steps of every study run, from the settings JSON beside its model."""
    import pandas as pd

    rows = []
    for path in trained_policies(study):
        s = json.loads(path.with_suffix(".json").read_text())
        rows.append({"run": s["run_name"], "algo": s["algo"], "reward": s["config"]["reward"],
                     "seed": s["config"]["seed"], "timesteps": s["num_timesteps"],
                     "episodes": s["num_timesteps"] // 15, "train_seconds": s["train_seconds"]})
    return pd.DataFrame(rows)


def markdown(frame, floats: str = "{:.4f}") -> str:
    """A DataFrame as a GitHub table (no extra dependency)."""
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [("" if np.isnan(v) else floats.format(v)) if isinstance(v, float) else str(v)
                 for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(frame, stem: str, floats: str = "{:.4f}") -> None:
    """``docs/tables/<stem>.csv`` and ``.md``."""
    TABLES.mkdir(parents=True, exist_ok=True)
    frame.to_csv(TABLES / f"{stem}.csv", index=False, float_format="%.6g")
    (TABLES / f"{stem}.md").write_text(markdown(frame, floats))


def plot_by_round(df, column: str, ylabel: str, path: Path, groups: tuple[str, ...]) -> None:
    """``column`` against the round, one panel per held-out data set, one line per group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(df["dataset"]))
    fig, axes = plt.subplots(2, (len(datasets) + 1) // 2, figsize=(13, 6.5), sharex=True,
                             constrained_layout=True)
    for ax, name in zip(axes.flat, datasets, strict=False):
        d = df[df["dataset"] == name]
        for group in groups:
            curve = d[d["group"] == group].groupby("round")[column].mean()
            style = "--" if group in BASELINES else "-"
            ax.plot(curve.index, curve.to_numpy(), style, label=group, lw=1.4)
        ax.set_title(name)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
    axes.flat[0].legend(fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_report(args: argparse.Namespace) -> None:
    """Tables and figures of the study, from its saved files only, named ``<prefix>_*``."""
    from agents.training import plot_training_curves

    FIGURES.mkdir(parents=True, exist_ok=True)
    pre, study = args.prefix, args.study_dir
    df = load_rounds(study)
    episodes = episode_table(df)
    head = headline(episodes)
    write_table(head, f"{pre}_heldout_summary")
    write_table(per_dataset(episodes).reset_index(), f"{pre}_heldout_by_dataset")
    seeds = by_training_seed(df, episodes)
    write_table(seeds, f"{pre}_by_training_seed")
    write_table(val_cost_bias(df), f"{pre}_val_cost_bias")
    times = training_times(study)
    write_table(times, f"{pre}_training_time", floats="{:.1f}")
    groups = [g for g in GROUP_ORDER if g in set(df["group"])]
    plot_by_round(df, "test_cost", "test cost", FIGURES / f"{pre}_cost_by_round.png",
                  tuple(groups))
    df["is_al"] = (df["action"] == "AL").astype(float)
    plot_by_round(df[df["round"] > 0], "is_al", "share of AL", FIGURES / f"{pre}_al_share.png",
                  tuple(g for g in groups if g not in ("all-in-al", "all-in-lr")))
    runs = {g: [policy_dir(study) / p.stem for p in trained_policies(study)
                if p.stem.startswith(g + "-")]
            for g in groups if g not in BASELINES}
    plot_training_curves(runs, FIGURES / f"{pre}_learning_curves.png", window=args.window,
                         title="training on the 12 training data sets (3 seeds: mean, min-max)")
    print(markdown(head[["agent", "runs", "final_cost", "final_cost_sd_seeds", "mean_cost",
                         "vs_ballad_pct", "diff_ci_low", "diff_ci_high", "win", "al_share",
                         "switches"]]))
    print(markdown(per_dataset(episodes).reset_index()))
    print(markdown(seeds))
    print(times.to_string(index=False))


# --------------------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Subcommands and their options, each with a one-line help."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="benchmark folder ($BALLAD_DATA_DIR)")
    p.add_argument("--study-dir", type=Path, default=STUDY_DIR,
                   help="folder of the study's models, logs and round table")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split", help="write docs/policy_split.json")
    s.add_argument("--force", action="store_true", help="overwrite a different split")
    t = sub.add_parser("train", help="train the study's policies")
    t.add_argument("--timesteps", type=int, default=1200, help="environment steps per run")
    t.add_argument("--train-seeds", type=int, default=3, help="training seeds per setting")
    t.add_argument("--jobs", type=int, default=2, help="training runs at a time")
    t.add_argument("--n-envs", type=int, default=2, help="environments per run")
    t.add_argument("--vec-env", default="dummy", help="dummy or subproc (see POLICIES.md)")
    t.add_argument("--n-steps", type=int, default=30, help="PPO rollout per env (= minibatch)")
    t.add_argument("--learning-rate", type=float, default=1e-3, help="PPO step size")
    e = sub.add_parser("evaluate", help="evaluate policies and baselines on held-out data")
    e.add_argument("--seeds", type=int, default=10, help="evaluation seeds per data set")
    e.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    r = sub.add_parser("report", help="tables and figures under docs/")
    r.add_argument("--window", type=int, default=10, help="episodes in the curves' rolling mean")
    r.add_argument("--prefix", default="policy", help="name prefix of tables and figures")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    commands = {"split": cmd_split, "train": cmd_train, "evaluate": cmd_evaluate,
                "report": cmd_report}
    commands[args.command](args)


if __name__ == "__main__":
    main()
