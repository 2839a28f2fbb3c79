#!/usr/bin/env python3
"""Reproduce the paper's four questions (docs/studies/REPRODUCTION.md): figures and tables.

A shim of ``ballad-env paper``; the command line is
``agents.experiments.cli.paper``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.paper import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
