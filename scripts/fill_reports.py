#!/usr/bin/env python3
"""Fill the reports' table blocks from the generated tables (``--check``: list stale ones).

A shim of ``ballad-env reports``; the command line is
``agents.experiments.cli.reports``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.reports import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
