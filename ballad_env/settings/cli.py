"""The command line of :class:`~ballad_env.settings.Settings`: one ``--option`` per field.

Every script and ``ballad-env`` job builds its settings options here
(:func:`add_settings_arguments`) and reads them back (:func:`settings_from_args`), so an
option's name, help, default, choices and parsing come from its field in one place. The
value parsers turn the words an option takes (``gamma``, ``auto``, ``split``, ``all``)
into the field's values.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from ballad_env.detectors import DETECTORS
from ballad_env.detectors.priors import check_prior
from ballad_env.detectors.ssdo.kernel import KERNEL_DTYPES, KERNEL_PAIRS
from ballad_env.queries import AL_QUERIES, LR_QUERIES
from ballad_env.registry import Registry
from ballad_env.rejection import REJECTORS
from ballad_env.rejection.confidence import THRESHOLD_SEARCHES
from ballad_env.rewards import REWARD_SIGNALS
from ballad_env.settings import FIXED_CHOICES, Settings


def c_r_value(text: str) -> float | str | None:
    """``gamma`` (the contamination, the paper's default), ``bound`` (min(c_fp (1 - gamma),
    c_fn gamma), SADAL's) or a number."""
    if text.lower() in ("gamma", "bound"):
        return None if text.lower() == "gamma" else "bound"
    return float(text)


def prior_name(text: str) -> str:
    """A prior's name, checked as the library checks it (registered, or a pyod detector's);
    an unknown one fails with the library's message."""
    try:
        check_prior(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text.lower()


def eta_sample_value(text: str) -> int | None:
    """``auto`` (by the training set's size), ``all`` (0) or a number of points."""
    if text.lower() in ("auto", "none"):
        return None
    return 0 if text.lower() == "all" else int(text)


def kernel_device_value(text: str) -> str | None:
    """``auto`` (cuda when torch sees a GPU, else cpu) or a torch device's name."""
    return None if text.lower() in ("auto", "none") else text


def query_seed_value(text: str) -> int | None:
    """``split`` (the episode's split seed) or a whole number."""
    if text.lower() in ("split", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid query seed {text!r}: use split or a whole "
                                         "number (331: the published code's)") from None


def ssif_contamination_value(text: str) -> float | str:
    """``data`` (the data set's contamination) or a number (the published code's 0.1)."""
    if text.lower() == "data":
        return "data"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid SSIF contamination {text!r}: use data or a "
                                         "number in (0, 1) (0.1: the published code's)") from None


def _auto_or_one_of(text: str, what: str, choices: tuple[str, ...]) -> str | None:
    """None for ``auto`` (or ``none``: chosen by the training set), else one of ``choices``."""
    if text.lower() in ("auto", "none"):
        return None
    if text not in choices:
        raise argparse.ArgumentTypeError(f"unknown {what} {text!r}: use auto, "
                                         f"{', '.join(choices)}")
    return text


def kernel_dtype_value(text: str) -> str | None:
    """``auto`` (by the training set's size), ``float64`` or ``float32``."""
    return _auto_or_one_of(text, "kernel dtype", KERNEL_DTYPES)


def kernel_pairs_value(text: str) -> str | None:
    """``auto`` (by the training set's size and backend), ``all`` or ``near``."""
    return _auto_or_one_of(text, "kernel pairs", KERNEL_PAIRS)


_CHOICES: dict[str, Registry[Any]] = {
    "reward": REWARD_SIGNALS, "threshold_search": THRESHOLD_SEARCHES,
    "al_strategy": AL_QUERIES, "lr_strategy": LR_QUERIES, "detector": DETECTORS,
    "rejector": REJECTORS}
_TYPES: dict[str, Callable[[str], Any]] = {
    "c_r": c_r_value, "bayes_calls": int, "k": int, "ssif_trees": int, "prior": prior_name,
    "eta_sample": eta_sample_value, "kernel_dtype": kernel_dtype_value,
    "kernel_device": kernel_device_value, "query_seed": query_seed_value,
    "kernel_pairs": kernel_pairs_value, "ssif_contamination": ssif_contamination_value}
#: How a default of None reads on the command line.
_NONE_SHOWN = {"c_r": "gamma", "eta_sample": "auto", "kernel_dtype": "auto",
               "kernel_pairs": "auto", "kernel_device": "auto", "query_seed": "split"}


def option_text(name: str, value: Any) -> str:
    """How ``value`` of settings field ``name`` is written on a command line (None as the
    word its option reads: ``gamma`` for c_r, ``auto`` for the size-dependent options)."""
    return _NONE_SHOWN.get(name, "None") if value is None else str(value)


def _parsing(name: str) -> tuple[Callable[[str], Any], Sequence[str] | None]:
    """How settings field ``name``'s option reads its text, and its choices (if fixed)."""
    choices: Sequence[str] | None = FIXED_CHOICES.get(name)
    kind: Callable[[str], Any] = _TYPES.get(name, str if name in _CHOICES or choices else float)
    registry = _CHOICES.get(name)
    return kind, (registry.names() if registry is not None else choices)


def setting_from_text(text: str) -> tuple[str, Any]:
    """``option=value`` (``threshold_search=exact``; dashes or underscores) as a settings
    field's name and value, read as its ``--option`` reads it (``argparse.ArgumentTypeError``
    naming an unknown option or a value outside its choices)."""
    name, equals, value = text.partition("=")
    name = name.strip().replace("-", "_")
    known = [f.name for f in fields(Settings)]
    if not equals or name not in known:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not option=value with a settings option (unknown {name!r}): use one "
            f"of {', '.join(known)}")
    kind, choices = _parsing(name)
    try:
        parsed = kind(value.strip())
    except (ValueError, argparse.ArgumentTypeError) as err:
        raise argparse.ArgumentTypeError(f"{name}: {err}") from None
    if choices is not None and parsed not in choices:
        raise argparse.ArgumentTypeError(f"unknown {name} {parsed!r}: use one of "
                                         f"{', '.join(choices)}")
    return name, parsed


def add_settings_arguments(parser: argparse.ArgumentParser, *, several: bool = False,
                           only: Sequence[str] | None = None,
                           defaults: Settings | None = None,
                           several_defaults: dict[str, list[Any]] | None = None) -> None:
    """Add one ``--option`` per settings field (``only`` a subset) to ``parser``.

    With ``several`` each option takes one or more values and :func:`settings_from_args`
    returns every combination (a grid); otherwise one value each. Defaults come from
    ``defaults``, or for a grid from ``several_defaults`` (field -> list of values).
    """
    defaults = defaults or Settings()
    lists = several_defaults or {}
    group = parser.add_argument_group("settings" + (" (several values each: every "
                                                    "combination runs)" if several else ""))
    for f in fields(Settings):
        if only is not None and f.name not in only:
            continue
        default = getattr(defaults, f.name)
        kind, choices = _parsing(f.name)
        if several:
            default = lists.get(f.name, [default])
        shown = " ".join(option_text(f.name, v) for v in (default if several else [default]))
        group.add_argument(f"--{f.name.replace('_', '-')}", type=kind,
                           nargs="+" if several else None, default=default,
                           choices=choices,
                           help=f"{f.metadata['help']} (default: {shown})".replace("%", "%%"))


def settings_from_args(args: argparse.Namespace, *, base: Settings | None = None
                       ) -> tuple[Settings, ...]:
    """The settings the parsed options describe: one, or every combination of several values."""
    options = {f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)}
    return Settings.grid(base, **{name: value if isinstance(value, list) else [value]
                                  for name, value in options.items()})


__all__ = ["add_settings_arguments", "c_r_value", "eta_sample_value", "kernel_device_value",
           "kernel_dtype_value", "kernel_pairs_value", "option_text", "prior_name",
           "query_seed_value", "setting_from_text", "settings_from_args",
           "ssif_contamination_value"]
