"""Checks and text of ``Settings``' numeric values: the messages name the option and the
value given."""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T", bound=type)


def number_text(value: float) -> str:
    """A number in a setting's name: ``:g``, but whole numbers that ``:g`` would round (a
    seed such as 4000000001) in full, so that two settings never share a name."""
    text = f"{value:g}"
    return str(value) if isinstance(value, int) and float(text) != value else text


def finite_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def whole_number(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def named_options(cls: T) -> T:
    """A dataclass whose ``__init__`` names an unknown option (and the likeliest one meant)
    and lists every option, as ``gym.make`` does, instead of Python's bare ``TypeError``."""
    init = vars(cls)["__init__"]  # the dataclass's own

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            hints = [f"{u!r} (did you mean {close[0]!r}?)" if (
                close := difflib.get_close_matches(u, names, n=1)) else repr(u)
                for u in unknown]
            raise TypeError(f"{cls.__name__}: unknown option(s) {', '.join(hints)}; the "
                            f"options are {', '.join(names)}")
        init(self, *args, **kwargs)

    cls.__init__ = checked  # type: ignore[misc]
    return cls


__all__ = ["finite_number", "named_options", "number_text", "whole_number"]
