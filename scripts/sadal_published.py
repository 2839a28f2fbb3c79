#!/usr/bin/env python3
"""SADAL's published code on SADAL's splits (issue 23): a shim of
``agents.experiments.cli.sadal_published`` (run it from a throw-away Python)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.sadal_published import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
