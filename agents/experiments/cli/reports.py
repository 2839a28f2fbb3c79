"""Fill the reports' ``<!-- table: docs/tables/<file>.md -->`` blocks from the generated
tables; ``--check`` lists the stale blocks instead (``agents.experiments.report_tables``).
"""

from __future__ import annotations

from agents.experiments.report_tables import main

__all__ = ["main"]
