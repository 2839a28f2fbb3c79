"""The studies' headline claims with intervals and tests (scripts/studies/claims): the
tables in docs/tables are current, and they read the studies' tables right."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("scikit_posthocs")

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "docs" / "tables"


@pytest.mark.slow
def test_the_claims_tables_are_current() -> None:
    done = subprocess.run([sys.executable, "-m", "scripts.studies.claims", "--check"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, ("stale claims tables (run python -m scripts.studies.claims "
                                   "and fill the reports):\n" + done.stdout + done.stderr)
    assert done.stdout.strip() == "all current"


def test_the_shares_are_the_allocation_studys_own() -> None:
    shares = pd.read_csv(TABLES / "claims_room.csv").set_index(["costs", "agent"])["share"]
    room = pd.read_csv(TABLES / "allocation_room.csv").set_index("costs")
    for (costs, agent), share in shares.items():
        assert share == pytest.approx(room.loc[costs, f"share {agent}"], abs=1e-12)


def test_the_paper18_means_are_the_reproductions() -> None:
    datasets = pd.read_csv(TABLES / "claims_paper18_datasets.csv").set_index(["setting",
                                                                              "agent"])
    for prior in ("iforest", "knn"):
        means = pd.read_csv(TABLES / f"q1_mean_cost_{prior}.csv").set_index("dataset")
        for agent in ("ballad", "all-in-al", "all-in-lr"):
            assert datasets.loc[(prior, agent), "mean"] == pytest.approx(
                means.drop(index="mean", errors="ignore")[agent].mean())
            assert datasets.loc[(prior, agent), "datasets"] == 18
