"""The ``ballad-env`` command: one subcommand per job, each an importable ``main(argv)``.

``ballad-env compare ...`` (also ``python -m ballad_env compare ...``) runs
:func:`agents.experiments.cli.compare.main`, and so on for every job below: the jobs a user
of the library runs. The studies are research, run from a clone
(``python -m scripts.studies.<study>``); :data:`STUDIES` names them, so that asking
``ballad-env`` for one says where it went.

Every job's parser formats its help with :class:`HelpFormatter`, so ``--help`` shows each
option's default. This is the library's top floor: it imports the harness; nothing in the
library imports it.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence

from agents.extras import EXTRA_OF, missing_extra
from ballad_env.files import read_regular_text
from ballad_env.plugins import PluginError, load_entry_points, load_plugins

#: subcommand -> (module of its ``main``, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "compare": ("compare", "compare agents over data sets x seeds x settings (tidy results)"),
    "train": ("train", "train an allocation policy (stable-baselines3, or batched on the replay)"),
    "minari": ("minari_data", "record replay episodes of a policy as a Minari dataset"),
    "lattices": ("lattices", "build a lattice store for the replay environment"),
    "data": ("data", "list data sets: built-in ones and the files of a data folder"),
    "bench": ("bench", "time episodes, grids, the replay and the trainers on this machine"),
}

#: the former ``ballad-env`` jobs that run from a clone now -> their module there
STUDIES: dict[str, str] = {
    **{job: f"scripts.studies.{package}" for job, package in (
        ("paper", "paper"), ("authors-code", "authors_code"),
        ("sadal-published", "sadal_published"), ("lattice-study", "lattice"),
        ("allocator-study", "allocators"), ("allocation-study", "allocation"),
        ("crossed-study", "crossed"), ("policy-study", "policies"),
        ("policy-scale", "policy_scale"), ("robustness", "robustness"))},
    "reports": "scripts.tools.reports",
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every job's help format: each option's help ends with its default, ``(default: 10)``,
    unless it has none to show (``None``, an off flag) or its help already says it in words
    (``(default: $BALLAD_DATA_DIR)``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if not text or "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def whole_number(text: str) -> int:
    """``text`` as an integer, else argparse's error saying it is not a whole number."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def n_jobs_value(text: str) -> int:
    """``--n-jobs``'s type: a whole number other than 0 (joblib's count: -1 all cores, -2 all
    but one, 1 this process); 0 is refused by argparse, whatever the grid's size."""
    value = whole_number(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 workers cannot run anything: use 1 (this "
                                         "process), N workers, or -1 (all cores)")
    if abs(value) > MAX_JOBS:
        raise argparse.ArgumentTypeError(f"at most {MAX_JOBS} worker processes, got {value}")
    return value


#: The most local worker processes ``--n-jobs`` starts (and the most a negative count
#: leaves out).
MAX_JOBS = 1_024


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high`` (a size option's documented
    bound), else argparse's one-line error naming the option."""
    def value(text: str) -> int:
        number = whole_number(text)
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}, got {number:,}")
        return number

    value.__name__ = f"whole number from {low} to {high}"
    return value


def add_execution_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                            n_jobs: int | None = None, scheduler: bool = False,
                            progress: bool = False) -> None:
    """The executor's options, worded once for every job: ``--n-jobs`` (when ``n_jobs``
    gives its default), ``--scheduler`` (a Dask scheduler) and ``--no-progress``."""
    if n_jobs is not None:
        parser.add_argument("--n-jobs", type=n_jobs_value, default=n_jobs,
                            help="worker processes (-1: all cores, 1: in this process); work "
                                 "expected to take under a few seconds runs in this process "
                                 "whatever this says (starting workers would cost more)")
    if scheduler:
        parser.add_argument("--scheduler", default=None, help="address of a Dask scheduler "
                            "(e.g. tcp://host:8786): run there instead")
    if progress:
        parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def add_plugin_argument(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable): a module of the user's that registers agents,
    priors, detectors, ... by name, imported here and in every worker (``ballad_env.plugins``)."""
    parser.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE", help="import MODULE first, here and in every worker "
                        "process: your module that registers agents, priors, rewards, ... "
                        "(repeatable; installed plugins load by themselves)")


def import_plugins(argv: Sequence[str] | None) -> None:
    """Load the plugin entry points and the ``--import`` modules of ``argv`` before a job's
    parser is built (a plugin may register a prior ``--prior`` names); a plugin that fails
    is an error naming it (exit status 2). The folder the command runs in goes on the path
    first, as ``python -m`` puts it there, so ``--import my_agent`` finds ``./my_agent.py``
    from the ``ballad-env`` script too (worker processes inherit the path)."""
    args = list(sys.argv[1:] if argv is None else argv)
    modules = [value for option, value in zip(args, args[1:], strict=False)
               if option == "--import"]
    modules += [arg.removeprefix("--import=") for arg in args if arg.startswith("--import=")]
    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        load_plugins(modules)
    except PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from err


def datasets_from(path: str | os.PathLike) -> tuple[str, ...]:
    """The ``train`` list of data-set names in the JSON file ``path`` (``--datasets-from``,
    e.g. ``docs/policy_split.json``); a ``ValueError`` naming the file and what is wrong (a
    FIFO or folder there is refused, not waited on)."""
    try:
        content = json.loads(read_regular_text(path, "--datasets-from file"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"--datasets-from {path}: not a readable JSON file ({err})") from err
    names = content.get("train") if isinstance(content, dict) else None
    if not isinstance(names, list) or not names or \
            not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"--datasets-from {path}: needs a 'train' list of data-set names "
                         f"(e.g. {{\"train\": [\"Glass\", \"WBC\"]}}), found "
                         f"{json.dumps(names)[:80] if names is not None else 'none'}")
    return tuple(names)


def usage() -> str:
    """The command's help: its subcommands, one line each."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return ("usage: ballad-env <command> [options] | --version   (ballad-env <command> "
            "--help)\n\ncommands:\n" + "\n".join(lines))


def user_error(err: BaseException, what: str = "this command") -> str | None:
    """The one-line message of a failure the user can fix (an optional dependency not
    installed: the extra that installs it; a download that failed: what to do; a folder that
    cannot be written, or a full disk: which folder), or ``None`` for anything else (a bug,
    shown with its traceback)."""
    if isinstance(err, ModuleNotFoundError) and (err.name or "").split(".")[0] in EXTRA_OF:
        return str(missing_extra(err, what))
    from ballad_env.data.download import DownloadError  # the data layer, imported when needed

    if isinstance(err, DownloadError):
        return " ".join(str(err).split())
    if isinstance(err, OSError):
        return unwritable(err)
    return None


def unwritable(err: OSError) -> str | None:
    """What a failed write says in one line, naming its folder: a full disk (with the space
    free there), or a folder without write permission or on a read-only file system; ``None``
    for any other error, or one that names no file."""
    from ballad_env.files import is_disk_full, write_failure

    path = err.filename if isinstance(err.filename, str | os.PathLike) else None
    if path is None:
        return None
    if is_disk_full(err):
        return write_failure(path, err, "write elsewhere")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"cannot write to {os.path.dirname(os.path.abspath(path))} ({path}: "
                f"{err.strerror or err}): make that folder writable, or write elsewhere")
    return None


def run_job(job: Callable[[], int | None], what: str = "this command") -> int:
    """``job()``'s exit status, what every ``ballad-env`` job and every study's ``__main__``
    runs through: a failure the user can fix (:func:`user_error`, an environment variable's
    value) is one line ``error: ...`` with status 2 instead of a traceback, and Ctrl-C one
    line ``interrupted: ...`` with status 130 (a shell's for SIGINT)."""
    from ballad_env.files import EnvVarError

    try:
        return int(job() or 0)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {what} stopped (Ctrl-C); what it finished is kept",
              file=sys.stderr)
        return 130
    except EnvVarError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (ModuleNotFoundError, OSError) as err:
        message = user_error(err, what)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand with the rest of ``argv``; its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        from ballad_env import __version__

        print(f"ballad-env {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name in STUDIES:
        print(f"error: `{name}` is research, run from a clone of the repository: "
              f"python -m {STUDIES[name]} --help", file=sys.stderr)
        return 2
    if name not in COMMANDS:
        print(f"error: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"{__name__}.{COMMANDS[name][0]}")
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] in EXTRA_OF:  # an extra this job needs: named once
            print(f"error: {missing_extra(err, f'`ballad-env {name}`')}", file=sys.stderr)
            return 2
        raise
    try:
        load_entry_points()  # installed plugins, before any option is read
    except PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.argv[0] = f"ballad-env {name}"  # the name argparse shows in usage and errors
    return run_job(lambda: module.main(rest), f"`ballad-env {name}`")


__all__ = ["COMMANDS", "STUDIES", "HelpFormatter", "add_plugin_argument", "import_plugins", "main",
           "n_jobs_value", "run_job", "unwritable", "usage", "user_error", "whole_number"]
