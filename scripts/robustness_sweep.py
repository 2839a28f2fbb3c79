#!/usr/bin/env python3
"""Robustness sweep: play whole episodes on hundreds of generated awkward data sets.

A shim of ``ballad-env robustness``; the command line is
``agents.experiments.cli.robustness``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.robustness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
