#!/usr/bin/env python3
"""Fill the reports' ``<!-- table: docs/tables/<file>.md -->`` blocks from the generated
tables (``agents.experiments.report_tables``); ``--check`` lists stale blocks instead.

    python scripts/fill_reports.py            # every report under docs/
    python scripts/fill_reports.py --check    # exit 1 if a report's table is stale
"""

import sys

from agents.experiments.report_tables import main

if __name__ == "__main__":
    sys.exit(main())
