#!/usr/bin/env python3
"""The allocator that takes the room: the allocation study (docs/studies/ALLOCATION.md).

A shim of ``ballad-env allocation-study``; the command line is
``agents.experiments.cli.allocation_study``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.allocation_study import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
