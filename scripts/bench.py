#!/usr/bin/env python3
"""Time BALLAD episodes per data set (exact and bayes threshold search) and find where time goes.

A shim of ``ballad-env bench``; the command line is
``agents.experiments.cli.bench``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
