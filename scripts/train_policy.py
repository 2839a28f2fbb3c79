#!/usr/bin/env python3
"""Train a stable-baselines3 allocation policy on BALLAD data sets (PPO, A2C, DQN, MaskablePPO).

A shim of ``ballad-env train``; the command line is
``agents.experiments.cli.train``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.train import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
