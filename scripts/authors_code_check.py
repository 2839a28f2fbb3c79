#!/usr/bin/env python3
"""The published code's variant: ablate its differences, and compare with the code itself.

A shim of ``ballad-env authors-code``; the command line is
``agents.experiments.cli.authors_code``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.authors_code import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
