"""Tools run from a clone: the reports' table filler and the landing figure (``reports``), the
command-line reference page (``cli_reference``), and ADBench's registry builder
(``adbench_registry``)."""
