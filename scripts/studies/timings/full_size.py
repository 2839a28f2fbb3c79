"""Full-size episodes and the kernel backends: what ``timings --full-size`` and
``--compare-backends`` measure.

``measure_full`` plays All-in-AL, All-in-LR and BALLAD on one data file at full size, from
one reset per (file, seed, prior, backend) timed on its own: every agent plays its own copy
of that reset (as the harness does, ``agents.experiments.run.play_agents``), so an
episode's time is the reset's plus its own steps'. It runs in a fresh process
(``timing.in_fresh_process``), so the peak memory it reports (the process's resident set
size) is that group's. Times are wall-clock and CPU seconds: on a shared machine the CPU
time is what the episode costs a free core. ``reset_phases`` profiles one reset by phase.

``compare_backends`` plays the same episodes with the numpy and the torch kernel backend
and counts where their decisions (the labels queried, tau) part.
"""

from __future__ import annotations

import copy
import cProfile
import hashlib
import itertools
import json
import os
import pstats
import resource
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.evaluation import run_episode
from agents.experiments.bench.episodes import phase_seconds
from agents.registry import make_agent
from ballad_env.compute import set_episode_threads, set_reset_cache_size
from ballad_env.data import load_dataset
from ballad_env.detectors.ssdo.model import PointScores
from ballad_env.env import BudgetAllocationEnv
from ballad_env.settings import Settings

#: The agents of the full-size study, and its goal for every episode on two cores.
FULL_AGENTS = ("all-in-al", "all-in-lr", "ballad")
FULL_TARGET_S = 60.0
#: Phases of a reset, as (label, module path suffix, function name) for ``reset_phases``.
RESET_PHASES = (
    ("split and scale", "ballad_env/protocol.py", "split_and_scale"),
    ("prior: fit and score D", "ballad_env/detectors/ssdo/model.py", "_fit_prior"),
    ("eta", "ballad_env/detectors/ssdo/kernel.py", "kernel_width"),
    ("kernel rows (and their copy to the device)", "ballad_env/detectors/ssdo/kernel.py",
     "__init__"),
    ("prior: score V and T", "ballad_env/detectors/ssdo/model.py", "prior_probability"),
)


class _TimedCopy:
    """A copy of an environment already reset: ``reset`` hands that state back (once), and
    every step is timed by action, in wall-clock and CPU seconds."""

    def __init__(self, env: BudgetAllocationEnv, obs: np.ndarray, info: dict[str, Any]) -> None:
        self.unwrapped = env
        self._start: tuple[np.ndarray, dict[str, Any]] | None = (obs, info)
        self.wall: dict[int, list[float]] = {0: [], 1: []}
        self.cpu_steps: dict[int, list[float]] = {0: [], 1: []}
        self.cpu = 0.0
        self.decisions = hashlib.sha1()  # the labels queried, round by round

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        if self._start is None:
            raise RuntimeError("this copy was prepared for one episode")
        start, self._start = self._start, None
        return start

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        wall, cpu = time.perf_counter(), time.process_time()
        result = self.unwrapped.step(action)
        self.cpu_steps[action].append(time.process_time() - cpu)
        self.cpu += self.cpu_steps[action][-1]
        self.wall[action].append(time.perf_counter() - wall)
        queried = np.sort(self.unwrapped.snapshot().queried.astype(np.int64))  # unpadded
        self.decisions.update(bytes([action]) + queried.tobytes())
        return result



def _kernel_device(scores: Any) -> str:
    """The torch device of SSDO's kernel rows (the benchmark times SSDO)."""
    assert isinstance(scores, PointScores)
    return str(scores.rows.device)

def full_settings(prior: str, backend: str, device: str | None = None,
                  pairs: str | None = None) -> Settings:
    """The study's settings: the defaults (so the fast paths above 20,000 training points)
    with ``prior``, the kernel ``backend`` (``device`` for torch only) and ``pairs`` (None:
    by the training set's size)."""
    return Settings(prior=prior, kernel_backend=backend,  # type: ignore[arg-type]
                    kernel_device=device if backend == "torch" else None,
                    kernel_pairs=pairs)  # type: ignore[arg-type]


def _warm_up(settings: Settings) -> None:
    """One small episode with ``settings``: lazy imports (pyod, torch) are no episode's cost."""
    from agents.experiments.bench.timing import synthetic_dataset

    env = BudgetAllocationEnv(synthetic_dataset(600, 3), settings=settings)
    run_episode(env, make_agent("all-in-al", env), 0)


def measure_full(source: str, prior: str, backend: str, seed: int,
                 agents: Sequence[str] = FULL_AGENTS, threads: int = 1,
                 device: str | None = None, pairs: str | None = None) -> list[dict[str, Any]]:
    """One row per agent: the shared reset, the median AL and LR step, the episode (reset +
    the agent's steps), in wall-clock and CPU seconds, the process's peak memory, the
    final test cost and a digest of the labels queried round by round (``decisions``).
    Meant for a fresh process (``timing.in_fresh_process``)."""
    set_episode_threads(threads)
    set_reset_cache_size(0)
    settings = full_settings(prior, backend, device, pairs)
    _warm_up(settings)
    dataset = load_dataset(source)
    env = BudgetAllocationEnv(dataset, settings=settings)
    wall, cpu = time.perf_counter(), time.process_time()
    obs, info = env.reset(seed=seed)
    reset_s, reset_cpu_s = time.perf_counter() - wall, time.process_time() - cpu
    episode = env.episode
    assert episode is not None
    rows = []
    for spec in agents:
        own = copy.deepcopy(env)
        timed = _TimedCopy(own, obs.copy(), copy.deepcopy(info))
        records = run_episode(timed, make_agent(spec, own), seed)
        al, lr = timed.wall[0], timed.wall[1]
        al_cpu, lr_cpu = timed.cpu_steps[0], timed.cpu_steps[1]
        rows.append({
            "dataset": dataset.name, "n": dataset.n_samples, "d": dataset.n_features,
            "prior": prior, "backend": backend if backend == "numpy" else
            f"torch ({_kernel_device(episode.scores)})", "agent": spec, "seed": seed,
            "reset_s": reset_s, "reset_cpu_s": reset_cpu_s,
            "al_step_s": statistics.median(al) if al else float("nan"),
            "lr_step_s": statistics.median(lr) if lr else float("nan"),
            "al_step_cpu_s": statistics.median(al_cpu) if al_cpu else float("nan"),
            "lr_step_cpu_s": statistics.median(lr_cpu) if lr_cpu else float("nan"),
            "episode_s": reset_s + sum(al) + sum(lr), "episode_cpu_s": reset_cpu_s + timed.cpu,
            "cost": float(records[-1]["test_cost"]), "eta_sample": episode.eta_sample,
            "kernel_dtype": episode.kernel_dtype, "threads": threads,
            "pairs": settings.kernel_pairs_for(len(episode.split.y_train)),
            "decisions": timed.decisions.hexdigest()[:12]})
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return [{**row, "peak_mb": peak_mb} for row in rows]


def reset_phases(source: str, prior: str, backend: str, seed: int = 0,
                 device: str | None = None) -> dict[str, float]:
    """Seconds of one reset (after a warm-up) by phase of ``RESET_PHASES``, under cProfile,
    and the whole reset ("reset"). Meant for a fresh process."""
    set_reset_cache_size(0)
    settings = full_settings(prior, backend, device)
    _warm_up(settings)
    env = BudgetAllocationEnv(load_dataset(source), settings=settings)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    env.reset(seed=seed)
    profiler.disable()
    return {"reset": time.perf_counter() - start,
            **phase_seconds(pstats.Stats(profiler), RESET_PHASES)}


def full_table(rows: Sequence[dict[str, Any]]) -> str:
    """``measure_full``'s rows as a markdown table, CPU seconds (the median step's) with
    the wall-clock ones in brackets, then the verdict against ``FULL_TARGET_S`` (on CPU
    seconds: what a free core would take)."""
    head = ("| data set | n x d | prior | backend | pairs | agent | seed | reset CPU s (wall) | "
            "AL step CPU s | LR step CPU s | episode CPU s (wall) | peak MB | cost |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['n']:,} x {r['d']} | {r['prior']} | {r['backend']} | "
            f"{r.get('pairs', 'all')} | {r['agent']} | {r['seed']} | "
            f"{r['reset_cpu_s']:.1f} ({r['reset_s']:.1f}) | "
            f"{_seconds(r.get('al_step_cpu_s', r['al_step_s']))} | "
            f"{_seconds(r.get('lr_step_cpu_s', r['lr_step_s']))} | "
            f"{r['episode_cpu_s']:.1f} ({r['episode_s']:.1f}) | {r['peak_mb']:,.0f} | "
            f"{r['cost']:.4f} |")
    if rows:
        worst = max(rows, key=lambda r: r["episode_cpu_s"])
        verdict = "met" if worst["episode_cpu_s"] <= FULL_TARGET_S else "missed"
        lines.append(f"\nslowest episode: {worst['episode_cpu_s']:.1f} CPU s ({worst['agent']}, "
                     f"{worst['dataset']}, {worst['prior']}, {worst['backend']}); goal "
                     f"{FULL_TARGET_S:.0f} s: {verdict}")
    return "\n".join(lines)


def seeds_table(rows: Sequence[dict[str, Any]]) -> str:
    """``measure_full``'s rows of several seeds, one line per (data set, prior, backend,
    pairs, agent): the seeds, then the mean over them of the reset's, the median step's
    and the episode's CPU seconds (the slowest episode beside it), the largest peak memory
    and the mean cost; then the verdict on the slowest episode."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        key = (r["dataset"], r["n"], r["d"], r["prior"], r["backend"], r.get("pairs", "all"),
               r["agent"])
        groups.setdefault(key, []).append(r)
    head = ("| data set | n x d | prior | backend | pairs | agent | seeds | reset CPU s | "
            "AL step CPU s | LR step CPU s | episode CPU s (slowest) | peak MB | cost |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (name, n, d, prior, backend, pairs, agent), group in groups.items():
        def mean(field: str, group: list[dict[str, Any]] = group) -> float:
            return float(np.mean([r[field] for r in group]))

        lines.append(
            f"| {name} | {n:,} x {d} | {prior} | {backend} | {pairs} | {agent} | "
            f"{len(group)} | {mean('reset_cpu_s'):.1f} | {_seconds(mean('al_step_cpu_s'))} | "
            f"{_seconds(mean('lr_step_cpu_s'))} | {mean('episode_cpu_s'):.1f} "
            f"({max(r['episode_cpu_s'] for r in group):.1f}) | "
            f"{max(r['peak_mb'] for r in group):,.0f} | {mean('cost'):.4f} |")
    return "\n".join(lines + (full_table(rows).splitlines()[-1:] if rows else []))


def _seconds(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


# --------------------------------------------------------------------------- equivalence
def decisions(source: Any, settings: Settings, seed: int, agent: str,
              data_dir: str | None = None) -> list[tuple[Any, ...]]:
    """Per round of one episode: the action, the indices queried, tau, and what tau does on
    the test set (its rejection rate and cost)."""
    env = BudgetAllocationEnv(source, data_dir=data_dir, settings=settings)
    rounds: list[tuple[Any, ...]] = []

    def note(obs: np.ndarray, action: int, reward: float, info: dict[str, Any]) -> None:
        rounds.append((action, tuple(int(i) for i in np.sort(env.snapshot().queried)),
                       float(info["tau"]), float(info["rejection_rate"]),
                       float(info["test_cost"])))

    run_episode(env, make_agent(agent, env), seed, on_step=note)
    return rounds


def compare_backends(source: Any, settings: Settings, seeds: Sequence[int],
                     agents: Sequence[str], data_dir: str | None = None,
                     device: str | None = None) -> dict[str, Any]:
    """The episodes of ``settings`` with the numpy and the torch backend side by side:
    episodes and rounds compared, rounds whose queried labels differ, rounds whose tau
    rejects otherwise on the test set (another rejection rate or test cost), the largest
    difference of tau (it moves by rounding even when it rejects the same points), and per
    episode that parts, (seed, agent, first round that differs)."""
    numpy_settings = settings.replace(kernel_backend="numpy", kernel_device=None)
    torch_settings = settings.replace(kernel_backend="torch", kernel_device=device)
    found: dict[str, Any] = {"episodes": 0, "rounds": 0, "labels_differ": 0,
                             "outcome_differs": 0, "max_tau_diff": 0.0, "episodes_differ": 0,
                             "first_differences": []}
    for seed in seeds:
        for agent in agents:
            pairs = list(zip(decisions(source, numpy_settings, seed, agent, data_dir),
                             decisions(source, torch_settings, seed, agent, data_dir),
                             strict=True))
            found["episodes"] += 1
            found["rounds"] += len(pairs)
            labels = [a[:2] != b[:2] for a, b in pairs]
            outcome = [a[3:] != b[3:] for a, b in pairs]
            found["labels_differ"] += sum(labels)
            found["outcome_differs"] += sum(outcome)
            found["max_tau_diff"] = max([found["max_tau_diff"],
                                         *(abs(a[2] - b[2]) for a, b in pairs)])
            parted = [i for i, (x, y) in enumerate(zip(labels, outcome, strict=True)) if x or y]
            if parted:
                found["episodes_differ"] += 1
                found["first_differences"].append((seed, agent, parted[0] + 1))
    return found


#: The configurations ``run_compare_backends`` plays: the defaults (on the benchmarks the
#: exact eta and float64 sums) and the fast paths forced (sampled eta, float32 sums).
BACKEND_CONFIGS = {"default": {}, "fast paths": {"eta_sample": 2000, "kernel_dtype": "float32"}}


def run_compare_backends(names: Sequence[str], data_dir: str | None, settings: Settings,
                         seeds: Sequence[int], agents: Sequence[str],
                         device: str | None = None) -> str:
    """``compare_backends`` per data set and ``BACKEND_CONFIGS`` entry, as a markdown table."""
    import sys

    from agents.experiments.bench.timing import bench_dataset

    lines = ["| data set | paths | episodes | rounds | rounds with other labels | rounds whose "
             "tau rejects otherwise | largest tau difference | episodes that part (seed, "
             "agent, round) |",
             "|" + "---|" * 8]
    for name in names:
        source = bench_dataset(name, data_dir)
        for label, changes in BACKEND_CONFIGS.items():
            found = compare_backends(source, settings.replace(**changes), seeds, agents,
                                     data_dir, device)
            parted = ", ".join(f"({s}, {a}, {r})" for s, a, r in found["first_differences"])
            lines.append(f"| {name} | {label} | {found['episodes']} | {found['rounds']} | "
                         f"{found['labels_differ']} | {found['outcome_differs']} | "
                         f"{found['max_tau_diff']:.1e} | {found['episodes_differ']}"
                         f"{' ' + parted if parted else ''} |")
        print(f"  compared {name}", file=sys.stderr)
    return "\n".join(lines)


def machine_line() -> str:
    """The machine and its load now: CPU cores, load average, torch and its devices."""
    import os

    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    text = f"{os.cpu_count()} CPU cores, load average {load} (1, 5, 15 min)"
    try:
        import torch
    except ImportError:
        return text + "; torch not installed"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return text + f"; torch {torch.__version__}, {gpu}"


def run_full_size(files: Sequence[str], seeds: Sequence[int], priors: Sequence[str],
                  backends: Sequence[str], agents: Sequence[str], threads: int = 1,
                  device: str | None = None, phases: bool = False,
                  pairs: Sequence[str | None] = (None,), rows_out: str | None = None) -> str:
    """``measure_full`` for every file, prior, backend, kernel pairs and seed, each in a
    fresh process (progress on stderr); the table, the decisions compared across ``pairs``
    (``pairs_agreement``), and with ``phases`` each reset's phases. ``rows_out``: a JSON
    lines file the rows are appended to as each process ends; groups already in it are
    read back, not run again (a long study resumes)."""
    import sys

    from agents.experiments.bench.timing import in_fresh_process

    text = [f"Full-size episodes, {threads} thread(s); machine: {machine_line()}\n"]
    done = _stored_rows(rows_out)
    rows: list[dict[str, Any]] = []
    split: list[str] = []
    for source, prior, backend in itertools.product(files, priors, backends):
        for kernel_pairs, seed in itertools.product(pairs, seeds):
            key = (source, prior, backend, kernel_pairs, seed)
            if key in done:
                rows += done[key]
                continue
            found = in_fresh_process(measure_full, source, prior, backend, seed,
                                     tuple(agents), threads, device, kernel_pairs)
            found = [{**row, "source": source, "asked_pairs": kernel_pairs} for row in found]
            rows += found
            if rows_out:
                with open(rows_out, "a", encoding="utf-8") as out:
                    out.writelines(json.dumps(row) + "\n" for row in found)
            print(f"  {source}, {prior}, {backend}, pairs {found[0]['pairs']}, seed {seed}: "
                  f"reset {found[0]['reset_cpu_s']:.1f} CPU s, episodes "
                  + ", ".join(f"{r['episode_cpu_s']:.1f}" for r in found) + " CPU s",
                  file=sys.stderr, flush=True)
        if phases:
            times = in_fresh_process(reset_phases, source, prior, backend, seeds[0], device)
            split.append(f"{source}, {prior}, {backend}: " + ", ".join(
                f"{label} {seconds:.1f} s" for label, seconds in times.items()))
    text.append(full_table(rows))
    if len(seeds) > 1:
        text.append("\nMeans over the seeds:\n\n" + seeds_table(rows))
    if len(pairs) > 1:
        text.append("\n" + pairs_agreement(rows))
    if split:
        text += ["\nReset by phase (wall-clock seconds under cProfile):", *split]
    text.append(f"(machine at the end: {machine_line()})")
    return "\n".join(text)


def _stored_rows(path: str | None) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """``run_full_size``'s rows already in ``path``, by (source, prior, backend, asked
    pairs, seed)."""
    stored: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    if not path or not os.path.exists(path):
        return stored
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                key = (row["source"], row["prior"], row["backend"], row["asked_pairs"],
                       row["seed"])
                stored.setdefault(key, []).append(row)
    return stored


def pairs_agreement(rows: Sequence[dict[str, Any]]) -> str:
    """Episodes played with all and with near kernel pairs (same file, prior, backend,
    agent and seed): how many queried the same labels every round and ended with the same
    cost, and which did not."""
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        key = (r["dataset"], r["prior"], r["backend"], r["agent"], r["seed"])
        groups.setdefault(key, {})[r.get("pairs", "all")] = r
    pairs = [(key, g["all"], g["near"]) for key, g in groups.items() if len(g) == 2]
    same = [key for key, a, b in pairs if a["decisions"] == b["decisions"]]
    costs = [key for key, a, b in pairs if a["cost"] == b["cost"]]
    parted = [f"{k[0]} {k[1]} {k[3]} seed {k[4]}" for k, a, b in pairs
              if a["decisions"] != b["decisions"] or a["cost"] != b["cost"]]
    return (f"kernel pairs all vs near: {len(pairs)} episodes compared, {len(same)} queried "
            f"the same labels every round, {len(costs)} ended with the same cost"
            + (f"; differ: {', '.join(parted)}" if parted else ""))


__all__ = ["BACKEND_CONFIGS", "FULL_AGENTS", "FULL_TARGET_S", "RESET_PHASES", "compare_backends",
           "decisions", "full_settings", "full_table", "machine_line", "measure_full",
           "pairs_agreement", "seeds_table",
           "reset_phases", "run_compare_backends", "run_full_size"]
