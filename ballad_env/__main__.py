"""``python -m ballad_env``: the ``ballad-env`` command (``agents.experiments.cli``).

The environment does not depend on the harness, so the command is imported only when run.
On a base install ``--help`` and ``data`` work; a job that needs an extra names it once.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Run ``ballad-env`` with this process's arguments."""
    try:
        from agents.experiments.cli import main as command
    except ModuleNotFoundError as err:  # the agents package itself is missing
        print(f"error: the ballad-env command needs the project's agents package ({err}): "
              "install the project (pip install 'ballad-env[experiments]')", file=sys.stderr)
        return 2
    return command(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
