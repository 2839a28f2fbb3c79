"""The benchmark a user runs on their own machine (``ballad-env bench``): episodes per data
set and grids (``episodes``), full-size episodes and the kernel backends (``full_size``), the
vector replay environment (``vector``), the trainers against SB3's PPO (``training``), and
what they share (``timing``)."""
