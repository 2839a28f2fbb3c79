"""Checks and text of ``Settings``' numeric values: the messages name the option and the
value given."""

from __future__ import annotations

import math
from typing import Any


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


__all__ = ["finite_number", "number_text", "whole_number"]
