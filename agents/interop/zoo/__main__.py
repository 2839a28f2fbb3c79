"""``python -m agents.interop.zoo``: rl-zoo3's ``train`` with ``ppo_mask`` added."""

import sys

from agents.interop.zoo import main

sys.exit(main())
