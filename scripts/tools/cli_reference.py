"""The command line's reference, drawn from the parsers themselves: every ``ballad-env <job>``
(and each of its subcommands) with the help its parser prints.

The documentation site's "Command line" page is this module's :func:`cli_reference`, built
at every site build (``docs/hooks/reference.py``), so the page can never drift from the
code the way a hand-copied ``--help`` would.

A job's parser is caught where its ``main`` asks it to parse: :func:`job_parser` runs
``main([])`` with ``ArgumentParser.parse_known_args`` replaced, for that one call, by a
function that hands the parser back and stops the job before it does anything. So every job
is covered the same way, whether it builds its parser in a function of its own or inline.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from unittest import mock

from agents.experiments.cli import COMMANDS, usage


class _Caught(Exception):
    """Raised in place of parsing: carries the parser that was asked to parse."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser caught")
        self.parser = parser


def _catch(parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
    raise _Caught(parser)


def job_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``ballad-env <name>``, its ``prog`` set to that command line.

    Raises ``KeyError`` naming the known jobs for an unknown ``name``, and ``RuntimeError``
    when the job's ``main`` returns without parsing (it would then have no reference)."""
    if name not in COMMANDS:
        raise KeyError(f"unknown job {name!r}: one of {', '.join(COMMANDS)}")
    module = importlib.import_module(f"agents.experiments.cli.{COMMANDS[name][0]}")
    with mock.patch.object(argparse.ArgumentParser, "parse_known_args", _catch):
        try:
            module.main([])
        except _Caught as caught:
            parser = caught.parser
        else:
            raise RuntimeError(f"ballad-env {name}: main([]) returned without parsing its "
                               "arguments, so its parser cannot be shown")
    parser.prog = f"ballad-env {name}"
    return parser


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of each subcommand of ``parser``, nested ones after their parent,
    with ``prog`` naming the whole command line (``python -m scripts.studies.policies train``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                sub.prog = f"{parser.prog} {sub_name}"
                yield sub_name, sub
                yield from subcommands(sub)


def job_help(name: str) -> list[tuple[str, str]]:
    """``(command line, help text)`` of ``ballad-env <name>`` and of each of its subcommands,
    as ``--help`` prints them (at a fixed width of 100 columns, so builds agree)."""
    with mock.patch.dict("os.environ", {"COLUMNS": "100"}):
        parser = job_parser(name)
        pages = [(parser.prog, parser.format_help())]
        pages += [(sub.prog, sub.format_help()) for _, sub in subcommands(parser)]
    return pages


def cli_reference() -> str:
    """The Markdown page of every job's help, in the order of ``ballad-env --help``."""
    lines = ["# Command line", "",
             "Every job of the `ballad-env` command (also `python -m ballad_env <job>` and the",
             "shims in `scripts/`), with the help its parser prints. This page is generated from",
             "the parsers at every build of the site (`scripts.tools.cli_reference`).",
             "", "```text", usage(), "```", ""]
    for name, (_, summary) in COMMANDS.items():
        lines += [f"## `ballad-env {name}`", "", summary[0].upper() + summary[1:] + ".", ""]
        for prog, text in job_help(name):
            if prog != f"ballad-env {name}":
                lines += [f"### `{prog}`", ""]
            lines += ["```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


__all__ = ["cli_reference", "job_help", "job_parser", "subcommands"]
