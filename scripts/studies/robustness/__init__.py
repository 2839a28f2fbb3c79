"""The robustness study (docs/trust.md): awkward generated data sets played or refused
(``datasets``), and the fuzzers of the files the project reads: damaged copies
(``damaged_files``) and hostile files and servers (``hostile_files``);
``python -m scripts.studies.robustness``."""
