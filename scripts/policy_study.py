#!/usr/bin/env python3
"""The learned-policy study: do RL allocation policies beat BALLAD on data sets they never saw?

A shim of ``ballad-env policy-study``; the command line is
``agents.experiments.cli.policy_study``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.policy_study import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
