"""Every data set by name, with n, d, contamination and whether it is on this machine
(``ballad-env data``; the command line is ``python -m ballad_env.data``'s).
"""

from __future__ import annotations

from ballad_env.data.__main__ import main

__all__ = ["main"]
