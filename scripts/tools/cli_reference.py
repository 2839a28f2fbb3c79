"""The command line's reference, drawn from the parsers themselves: every ``ballad-env <job>``
(and each of its subcommands) as a section, with a short usage line and a table of its
options (their help and defaults, as ``--help`` words them).

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


def _cell(text: str) -> str:
    """``text`` as one cell of a Markdown table: one line, ``|`` escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def short_usage(parser: argparse.ArgumentParser) -> str:
    """``prog``, its required options and positionals, then ``[options]``: the usage line
    without the optional ones, which the table lists (argparse's own runs to many lines)."""
    formatter = parser._get_formatter()
    needed = [formatter._format_action_invocation(a).split(", ")[-1] if a.option_strings
              else formatter._metavar_formatter(a, a.dest)(1)[0]
              for a in parser._actions
              if (a.required or not a.option_strings)
              and not isinstance(a, argparse._SubParsersAction)]
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        needed.append("<subcommand> ...")
    return " ".join([parser.prog, *needed, "[options]"])


def options_tables(parser: argparse.ArgumentParser) -> list[str]:
    """One Markdown table per argument group of ``parser`` (option, what it does with its
    default, as ``--help`` words it), groups without options left out."""
    formatter = parser._get_formatter()
    lines: list[str] = []
    for group in parser._action_groups:
        rows = [f"| `{_cell(formatter._format_action_invocation(action))}` | "
                f"{_cell(formatter._expand_help(action) if action.help else '')}"
                f"{' (required)' if action.required else ''} |"
                for action in group._group_actions
                if action.help != argparse.SUPPRESS
                and not isinstance(action, argparse._SubParsersAction)]
        if rows:
            title = (group.title or "options")
            lines += [f"**{title[0].upper() + title[1:]}**", "", "| Option | Description |",
                      "|---|---|", *rows, ""]
    return lines


def parser_section(parser: argparse.ArgumentParser, level: str) -> list[str]:
    """A job's (or a subcommand's) section: its description, usage line and options."""
    lines = [f"{level} `{parser.prog}`", ""]
    if parser.description:
        lines += [" ".join(parser.description.split()), ""]
    lines += ["```text", short_usage(parser), "```", "", *options_tables(parser)]
    return lines


def cli_reference() -> str:
    """The Markdown page of every job: a section each, in the order of ``ballad-env --help``,
    with its usage line and a table of its options (their help and defaults)."""
    lines = ["# Command line", "",
             "Every job of the `ballad-env` command (also `python -m ballad_env <job>`), with",
             "its options as its parser describes them (`ballad-env <job> --help` prints the",
             "same). This page is generated from the parsers at every build of the site",
             "(`scripts.tools.cli_reference`).", "", "```text", usage(), "```", ""]
    with mock.patch.dict("os.environ", {"COLUMNS": "100"}):
        for name in COMMANDS:
            parser = job_parser(name)
            lines += parser_section(parser, "##")
            lines += [line for _, sub in subcommands(parser)
                      for line in parser_section(sub, "###")]
    return "\n".join(lines)


__all__ = ["cli_reference", "job_help", "job_parser", "options_tables", "parser_section",
           "short_usage", "subcommands"]
