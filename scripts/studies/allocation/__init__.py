"""The allocation study (docs/studies/ALLOCATION.md): allocators fitted across data sets and
cost levels on the lattices of docs/allocation_split.json's pool, scored on its held-out part.

``cells`` builds and reads the lattices, ``fit`` fits the families (numpy), ``analysis``
chooses their settings by cross validation on the training data sets and scores them,
``report`` runs the study and writes its tables and figure.
"""
