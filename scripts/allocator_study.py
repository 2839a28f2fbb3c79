#!/usr/bin/env python3
"""Can a deployable allocator beat All-in-LR? The allocator study (docs/studies/ALLOCATORS.md).

A shim of ``ballad-env allocator-study``; the command line is
``agents.experiments.cli.allocator_study``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.allocator_study import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
