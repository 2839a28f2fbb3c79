"""Every data set by name, with n, d, contamination and whether it is on this machine
(``ballad-env data``; the command line is ``python -m ballad_env.data``'s).
"""

from __future__ import annotations

from agents.experiments.cli.parsing import JobParser
from ballad_env.data.__main__ import main as list_datasets


def main(argv: list[str] | None = None) -> int:
    """``python -m ballad_env.data``, its usage errors short as every job's."""
    return list_datasets(argv, parser_class=JobParser)


__all__ = ["main"]
