"""The paper study's runs: what the paper states, and the three grids (``main``, ``costs``,
``bayes``) run into their ``ResultStore`` folders by the harness's ``run_grid``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from agents.experiments.grid import PAPER_AGENTS, Grid, seed_range
from agents.experiments.run import run_grid
from agents.experiments.stores.results import load_results
from ballad_env.settings import Settings

Q1_AGENTS = PAPER_AGENTS
MAIN_AGENTS = ("ballad", "ballad-cosine", "all-in-al", "all-in-lr")
BALLADS = ("ballad", "ballad-cosine")
QUESTIONS = ("q1", "q2", "q3", "q4", "bayes")
#: The paper's statements (REPRODUCTION.md), to print beside ours.
PAPER: dict[str, Any] = {
    "q1_mean_cost": {"ballad": 0.043, "all-in-al": 0.055, "all-in-lr": 0.054},
    "q1_winners": {
        "ballad": ["Arrhythmia", "Glass", "KDDCup99", "Pima", "SpamBase", "WBC", "WDBC", "WPBC"],
        "all-in-al": ["Cardiotocography", "InternetAds", "PageBlocks", "Stamps", "Waveform"],
        "all-in-lr": ["ALOI", "Annthyroid", "Wilt"],
    },
    "q1_auc_by_winner": {"ballad": 0.86, "all-in-al": 0.88, "all-in-lr": 0.57},
    "q2_table2": [  # budget %, entropy mean, std, cosine mean, std
        (2, 0.0536, 0.0401, 0.0399, 0.0303), (4, 0.0465, 0.0330, 0.0411, 0.0334),
        (6, 0.0443, 0.0284, 0.0398, 0.0321), (8, 0.0436, 0.0303, 0.0399, 0.0306),
        (10, 0.0420, 0.0299, 0.0411, 0.0325), (12, 0.0416, 0.0303, 0.0433, 0.0347),
        (14, 0.0413, 0.0306, 0.0448, 0.0367), (16, 0.0408, 0.0288, 0.0456, 0.0372),
        (18, 0.0403, 0.0290, 0.0457, 0.0355), (20, 0.0412, 0.0297, 0.0451, 0.0363),
        (22, 0.0407, 0.0301, 0.0451, 0.0359), (24, 0.0421, 0.0325, 0.0438, 0.0361),
        (26, 0.0417, 0.0345, 0.0438, 0.0363), (28, 0.0416, 0.0332, 0.0438, 0.0380),
        (30, 0.0418, 0.0345, 0.0427, 0.0354)],
    "q2_al_share": {"ballad": 0.63, "ballad-cosine": 0.93},
    "q3": {"median": 0.0, "std_al": 0.03, "std_lr": 0.07},
}
DEFAULT_BAYES_DATASETS = ("WBC", "Glass", "WPBC")
#: Q4's cost settings: c_fp = 10, then c_fn = 10 (the others at the paper's defaults).
Q4_COSTS = ({"c_fp": 10.0}, {"c_fn": 10.0})

Key = dict[str, Any]


# ---------------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class Experiment:
    """One resumable run: a grid in its own results folder."""

    name: str
    grid: Grid


def experiments(datasets: Sequence[str], seeds: int, priors: Sequence[str],
                questions: Sequence[str], *,
                bayes_datasets: Sequence[str] = DEFAULT_BAYES_DATASETS, bayes_seeds: int = 2,
                bayes_calls: int = 20) -> list[Experiment]:
    """The runs the chosen questions need (the bayes run: the first prior only)."""
    names, wanted = tuple(datasets), set(questions)
    runs = []
    if wanted & {"q1", "q2", "q3", "bayes"}:
        settings = tuple(Settings(prior=p) for p in priors)
        runs.append(Experiment("main", Grid(names, seed_range(seeds), MAIN_AGENTS, settings)))
    if "q4" in wanted:
        settings = tuple(Settings(prior=p).replace(**cost) for p in priors
                         for cost in Q4_COSTS)
        runs.append(Experiment("costs", Grid(names, seed_range(seeds), Q1_AGENTS, settings)))
    if "bayes" in wanted:
        bayes_names = tuple(n for n in bayes_datasets if n in names)
        if not bayes_names:
            raise ValueError(f"--bayes-datasets {' '.join(bayes_datasets)}: none of them is "
                             f"among --datasets ({' '.join(names)}); give some of those, or "
                             "leave bayes out of --questions")
        setting = Settings(prior=priors[0], threshold_search="bayes", bayes_calls=bayes_calls)
        runs.append(Experiment("bayes", Grid(bayes_names, seed_range(min(bayes_seeds, seeds)),
                                             Q1_AGENTS, (setting,))))
    return runs


def run_experiments(runs: Sequence[Experiment], output: str | os.PathLike, *,
                    data_dir: str | os.PathLike | None = None, n_jobs: int = -1,
                    scheduler: str | None = None, progress: bool = True,
                    report_only: bool = False, log: TextIO | None = None
                    ) -> dict[str, pd.DataFrame]:
    """Run (or resume, or with ``report_only`` just load) each experiment; results by name.
    Each run's size and duration go to ``log`` (default: stderr)."""
    log = log or sys.stderr
    results = {}
    for experiment in runs:
        folder = Path(output) / experiment.name
        if report_only:
            results[experiment.name] = load_results(folder)
            continue
        start = time.perf_counter()
        print(f"{experiment.name}: {len(experiment.grid.cells())} cells -> {folder}", file=log)
        results[experiment.name] = run_grid(experiment.grid, folder, data_dir=data_dir,
                                            n_jobs=n_jobs, scheduler=scheduler,
                                            progress=progress)
        print(f"{experiment.name}: done in {time.perf_counter() - start:.1f} s", file=log)
    return results
