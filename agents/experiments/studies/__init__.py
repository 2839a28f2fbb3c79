"""The project's studies, each a client of the harness (``agents.experiments``).

One module per study (or a subpackage split by job, its parts importing one another and
no other study), one shape each: a grid of cells, a cell function returning tidy rows
(or lattices), run by the harness's executor into a store (``ResultStore`` or
``LatticeStore``), analysis functions over the stored tables, and the one table writer
(``tables.write_table``). A study imports the harness, never another study; what two
studies share lives in the harness. Studies do not ship in the wheel: they run from a
source checkout (``ballad-env <study> ...`` or ``scripts/<study>.py``).
"""
