#!/usr/bin/env python3
"""How far are allocation rules from the best allocation? (docs/studies/LATTICE.md)

A shim of ``ballad-env lattice-study``; the command line is
``agents.experiments.cli.lattice_study``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.lattice_study import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
