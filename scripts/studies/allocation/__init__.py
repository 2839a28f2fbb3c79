"""The allocation study (docs/studies/ALLOCATION.md): allocators fitted across data sets and
cost levels on the lattices of docs/allocation_split.json's pool, scored on its held-out part.

``cells`` builds and reads the lattices, ``fit`` fits the families (numpy), ``analysis``
chooses their settings by cross validation on the training data sets and scores them,
``report`` runs the study and writes its tables and figure. The third round (issue 40:
generated tasks, ``fixed-split-by-cost`` and ``safe-split``) is ``tasks_cells``,
``tasks_fit``, ``tasks_report`` and ``tasks_study`` (``python -m
scripts.studies.allocation.tasks_study``). Issue 44's rounds: ``safe_study`` (the fourth and
fifth), ``per_level`` (the sixth), ``late_switch`` (the seventh: a late switch back to LR)
and ``store_check`` (whether an older store holds today's lattices).
"""
