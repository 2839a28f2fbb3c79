#!/usr/bin/env python3
"""Compare allocation agents over data sets x seeds x settings; write tidy results and a summary.

A shim of ``ballad-env compare``; the command line is
``agents.experiments.cli.compare``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.compare import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
