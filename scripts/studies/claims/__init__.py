"""Intervals and tests for the studies' headline claims (``python -m scripts.studies.claims``)."""
