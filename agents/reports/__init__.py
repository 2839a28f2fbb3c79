"""What reports show: summary tables, the generated tables inside the studies' reports,
figures and the statistics of ``compare --stats`` and of learned policies.

They analyse tidy results they are handed and never rerun an experiment. The package sits
below the harness (``agents.experiments``): it imports ``ballad_env`` and the allocators'
core only, and the harness, the command line and the studies import it.
"""
