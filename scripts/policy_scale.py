#!/usr/bin/env python3
"""The policy study at scale: PPO, DQN and MaskablePPO trained on 10^5 replayed episodes.

A shim of ``ballad-env policy-scale``; the command line is
``agents.experiments.cli.policy_scale``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's packages
from agents.experiments.cli.policy_scale import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
