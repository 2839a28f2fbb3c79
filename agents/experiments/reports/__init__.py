"""What reports show: summary tables, the generated tables inside the studies' reports, and
figures; they read stored results and never rerun an experiment."""
