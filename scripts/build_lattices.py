#!/usr/bin/env python3
"""Build a lattice store for the replay environment (``ballad_env/BudgetAllocationReplay-v0``).

A shim of ``ballad-env lattices``; the command line is
``agents.experiments.cli.lattices``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.lattices import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
