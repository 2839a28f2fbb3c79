"""The policy study (docs/studies/POLICIES.md): learned allocation policies trained on some
data sets and scored on held-out ones (``study``); ``python -m scripts.studies.policies``."""
