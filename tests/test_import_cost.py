"""What a training run's processes import: the trainer's main process and its rollout worker
replay lattices, so they import neither the detectors' libraries (scikit-learn, SciPy's
statistics and optimisers) nor the tables' (pandas, matplotlib). Each costs seconds of a
run's setup; a module-level import of one of them in the replay path fails here."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("sklearn", "scipy.stats", "scipy.optimize", "scipy.special", "pandas", "matplotlib")
TRAINING_PATH = ("ballad_env.replay.vector", "agents.experiments.cli.train",
                 "agents.experiments.training.pipelined")


@pytest.mark.parametrize("module", TRAINING_PATH)
def test_the_training_path_imports_no_heavy_library(module: str) -> None:
    code = (f"import json, sys; import {module}; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


def test_the_heavy_libraries_still_load_where_they_are_used() -> None:
    """The lazy imports run: ranking, scaling, RejEx's tails and the split's divergence."""
    import numpy as np

    from ballad_env.cost import roc_auc
    from ballad_env.rejection.rejex import rejected_counts

    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == 0.75
    low, high = rejected_counts(10, 0.1, 32.0)
    assert 0 <= low and high <= 10


def test_a_run_imports_no_plotting_library_before_it_trains() -> None:
    """``train_and_plot`` (what ``ballad-env train`` calls) draws its curve after training:
    matplotlib and pandas are not imported while the run sets up."""
    code = ("import json, sys\n"
            "import agents.experiments.training as training\n"
            "def train(config):\n"
            "    print(json.dumps([m for m in ('matplotlib', 'pandas') if m in sys.modules]))\n"
            "    raise SystemExit(0)\n"
            "training.train = train\n"
            "training.train_and_plot(None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
