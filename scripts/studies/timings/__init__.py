"""The studies' timings: the trainers against SB3 (steps a second, threads, the share of the
matrix-product peak, seconds to a held-out cost, the learning check), SB3's PPO on today's
path against the vector environment, and full-size episodes with the kernel backends. Run
as ``python -m scripts.studies.timings``; ``ballad-env bench`` keeps the timings a user
runs on their own machine (episodes, the replay and the vector environments)."""
