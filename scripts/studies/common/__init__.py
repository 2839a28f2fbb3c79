"""What several studies share: the repository and report-folder options (``options``), the
allocation split and its reserved sets (``split``), the yardstick paths through a lattice
(``lattice_paths``) and published-code episodes in a store (``episodes``)."""
