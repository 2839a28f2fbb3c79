"""The environments with other RL and data libraries: rl-zoo3's training on both
environments (``zoo``, ``python -m agents.interop.zoo``) and replay episodes recorded as
Minari datasets (``minari_datasets``, ``ballad-env minari``).

The package sits above the harness: the Minari export reads the harness's lattice stores
and writes through its results folders; the harness never imports it. Each library comes
with its extra (``zoo``, ``minari``) and is imported only here.
"""
