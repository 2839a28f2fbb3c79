"""The torch trainers' timings, one subcommand each (the logic is in the module of its name):

* ``update-step``  the PPO minibatch step by hand against LeanRL's (``update_step``)
* ``setup``        a compiled run's setup, the first time on a machine and after (``setup``)
* ``protocol``     SB3 PPO against the compiled trainer in the speed protocol (``protocol``)
* ``seeds``        the update over stacked seeds against separate ones (``seeds``)
* ``learning``     held-out cost of SB3 and the compiled trainer per minibatch size (``learning``)

``python -m scripts.studies.training_speed update-step --rounds 7``; each subcommand's
``--help`` lists its options.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {"update-step": "update_step", "setup": "setup", "protocol": "protocol",
            "seeds": "seeds", "learning": "learning"}


def build_parser() -> argparse.ArgumentParser:
    """The study's own options: which subcommand (each parses the rest itself)."""
    parser = argparse.ArgumentParser(prog="python -m scripts.studies.training_speed",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=COMMANDS,
                        help="the timing to run; '<command> --help' lists its options")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand named first in ``argv``; ``--help`` prints the subcommands, and an
    unknown one is a usage error (argparse's exit 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv[:1])  # exits: 0 for --help, 2 otherwise
        return 2
    module = importlib.import_module(f"scripts.studies.training_speed.{COMMANDS[argv[0]]}")
    module.main(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
