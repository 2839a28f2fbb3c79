"""``python -m agents.experiments.training.zoo``: rl-zoo3's ``train`` with ``ppo_mask`` added."""

import sys

from agents.experiments.training.zoo import main

sys.exit(main())
