"""The parser of every ``ballad-env`` job: a usage error is two short lines, not the page.

argparse answers a mistyped option with the whole usage (dozens of lines for a job with
many options) before the error. :class:`JobParser` prints the short usage instead (what
must be given, then ``[options]`` and where the rest is listed) and the error, with a
"did you mean" when one of the job's options is close to a misspelled one.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn

#: How close (difflib's ratio) a misspelled option must be to one of the job's to be named.
SUGGESTION_CUTOFF = 0.6


class JobParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors show the short usage and a suggestion."""

    _given: tuple[str, ...] = ()  # the arguments last parsed, for the suggestion

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, remembering ``args`` so that an error can name a close option."""
        self._given = tuple(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def short_usage(self) -> str:
        """The usage line of what must be given (positionals, required options), then
        ``[options]``: the one line an error shows."""
        needed = [action for action in self._actions
                  if action.required or not action.option_strings]
        formatter = self._get_formatter()
        formatter.add_usage(None, needed, [])
        return f"{formatter.format_help().strip()} [options] (--help lists them)"

    def error(self, message: str) -> NoReturn:
        """Exit with status 2 after the short usage and ``message`` (with a suggestion)."""
        hint = suggestion(self._given, self.option_names())
        self.exit(2, f"{self.short_usage()}\n{self.prog}: error: {message}"
                     f"{f' ({hint})' if hint else ''}\n")

    def option_names(self) -> list[str]:
        """Every option string of this parser (``--datasets``, ``-h``, ...)."""
        return [name for action in self._actions for name in action.option_strings]


def suggestion(words: Sequence[str], options: Sequence[str]) -> str | None:
    """``did you mean --xyz, not --xzy?`` for the first of ``words`` that looks like an
    option, is none of ``options`` nor the start of one (argparse takes a unique start), and
    is close to one of them; ``None`` if there is no such word."""
    for word in words:
        name = word.split("=", 1)[0]
        if not name.startswith("-") or name == "--" or _is_number(name) or \
                any(option.startswith(name) for option in options):
            continue
        close = difflib.get_close_matches(name, options, n=1, cutoff=SUGGESTION_CUTOFF)
        if close:
            return f"did you mean {close[0]}, not {name}?"
    return None


def _is_number(text: str) -> bool:
    """Whether ``text`` reads as a number (``-1`` is a value, not an option)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


__all__ = ["SUGGESTION_CUTOFF", "JobParser", "suggestion"]
