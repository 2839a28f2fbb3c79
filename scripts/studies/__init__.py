"""The project's studies, each a client of the library's harness (``agents.experiments``).

One package per study, one shape each: a grid of cells, a cell function returning tidy rows
(or lattices), run by the harness's executor into a store (``ResultStore`` or
``LatticeStore``), analysis functions over the stored tables, and the one table writer
(``tables.write_table``). Each study's ``__main__`` is its one entry point
(``python -m scripts.studies.<study> --help``, from the repository's root). A study imports
the library and ``scripts.studies.common``, never another study.
"""
