"""Timings of the torch trainers' pieces, kept out of the library: the minibatch step's
variants (``update_step``), the setup of a compiled run (``setup``) and the seed sweep's
steps a second (``seeds``); ``python -m scripts.studies.training_speed <subcommand>``."""
