#!/usr/bin/env python3
"""Is All-in-LR's win a property of SSDO? (docs/studies/CROSSED.md)

A shim of ``ballad-env crossed-study``; the command line is
``agents.experiments.cli.crossed_study``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.crossed_study import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
