"""``python -m ballad_env``: the ``ballad-env`` command (``agents.experiments.cli``).

The environment does not depend on the harness, so the command is imported only when run.
On a base install ``--help`` and ``data`` work; a job that needs an extra names it once.
Output piped into a reader that stops early (``ballad-env data | head -2``) ends quietly, as
Unix tools do, whatever the job.
"""

from __future__ import annotations

import os
import sys

#: The exit status of a command whose output pipe closed: a shell's for a process that
#: SIGPIPE ended (128 + 13).
BROKEN_PIPE_STATUS = 141


def main() -> int:
    """Run ``ballad-env`` with this process's arguments."""
    try:
        from agents.experiments.cli import main as command
    except ModuleNotFoundError as err:  # the agents package itself is missing
        print(f"error: the ballad-env command needs the project's agents package ({err}): "
              "install the project: pip install -e '.[experiments]' in the clone", file=sys.stderr)
        return 2
    try:
        try:
            return command(sys.argv[1:])
        finally:  # also after --help's SystemExit: a closed pipe is caught here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        return _closed_pipe()


def _closed_pipe() -> int:
    """End quietly after the reader of standard output went away: what is left unwritten
    goes to the null device (Python's flush at exit would fail again otherwise)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return BROKEN_PIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
