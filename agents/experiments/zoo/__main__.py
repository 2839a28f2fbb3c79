"""``python -m agents.experiments.zoo ...``: rl-zoo3's ``train`` with ``ppo_mask`` added."""

import sys

from agents.experiments.zoo import main

sys.exit(main())
