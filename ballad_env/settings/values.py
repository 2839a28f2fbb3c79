"""Checks and text of ``Settings``' numeric values: the messages name the option and the
value given."""

from __future__ import annotations

import difflib
import functools
import importlib.util
import math
from dataclasses import fields
from typing import Any, TypeVar

from ballad_env.cost import COST_RANGE

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


#: The largest value of each size option (a bound on time or memory, not on sense): the
#: bayes searches' evaluations (20 by default, the published code's 50), SSDO's neighbour
#: rank, SSIF's trees (100 by default) and eta's sample.
SIZE_BOUNDS = {"bayes_calls": 1_000, "k": 10_000, "ssif_trees": 10_000, "eta_sample": 10**7}


def whole_number(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int: a whole number from ``minimum`` to the option's
    :data:`SIZE_BOUNDS` entry (if any); else a ``ValueError`` naming ``name``."""
    maximum = SIZE_BOUNDS.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or int(value) != value or value < minimum or \
            (maximum is not None and value > maximum):
        upper = f" and <= {maximum:,}" if maximum is not None else ""
        raise ValueError(f"{name} must be a whole number >= {minimum}{upper}, got {value!r}")
    return int(value)


def cost_value(name: str, value: Any) -> float:
    """A cost as a float within :data:`COST_RANGE`; else a ``ValueError`` naming it."""
    try:
        number = finite_number(name, value)
    except ValueError:
        number = float("nan")
    low, high = COST_RANGE
    if not low <= number <= high:
        raise ValueError(f"invalid costs: {name} must be a number from {low:g} to {high:g}, "
                         f"got {value!r}")
    return number


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


def check_backend(kernel_backend: str, kernel_device: Any) -> None:
    """A kernel device only with the torch backend, and torch installed for that backend
    (looked for, not imported: importing torch takes seconds)."""
    if kernel_device is not None:
        if not isinstance(kernel_device, str) or not kernel_device.strip():
            raise ValueError(f"kernel_device must be a torch device's name (cpu, cuda, "
                             f"cuda:N) or None, got {kernel_device!r}")
        if kernel_backend != "torch":
            raise ValueError(f"kernel_device={kernel_device!r} applies to the torch "
                             "backend only: add kernel_backend='torch', or leave the "
                             "device out")
    if kernel_backend == "torch" and importlib.util.find_spec("torch") is None:
        raise ValueError("kernel_backend='torch' needs PyTorch, which is not installed: "
                         "pip install -e '.[torch]' in the clone (or pip install torch), or use "
                         "kernel_backend='numpy'")


def query_seed_value(seed: Any, query_rng: str) -> int | None:
    """``query_seed`` checked: None (or ``"split"``, read as None) or a seed of a legacy
    ``RandomState``, and a seed only with ``query_rng="authors"``, the one stream it seeds."""
    if seed is None or isinstance(seed, str) and seed.lower() == "split":
        return None
    if (isinstance(seed, bool) or not isinstance(seed, int | float)
            or not float(seed).is_integer() or not 0 <= seed < 2**32):
        raise ValueError(f"query_seed must be 'split' (the split seed) or a whole number "
                         f"from 0 to 2**32 - 1 (a RandomState seed), got {seed!r}")
    if query_rng != "authors":
        raise ValueError(f"query_seed={seed!r} seeds the one legacy stream of "
                         f"query_rng='authors', but query_rng={query_rng!r} draws "
                         "the queries from the episode's own streams: use "
                         "query_rng='authors', or leave query_seed at 'split'")
    return int(seed)


def rejex_t_value(value: Any, rejector: str, default: float) -> float:
    """``rejex_T`` checked: a positive number, other than its ``default`` only for a RejEx
    rejector (the others have no tolerance)."""
    number = finite_number("rejex_T", value)
    if not number > 0:
        raise ValueError(f"rejex_T must be a positive number (RejEx's tolerance T), got "
                         f"{value!r}")
    if number != default and not str(rejector).startswith("rejex"):
        raise ValueError(f"rejex_T={number:g} is RejEx's tolerance; rejector={rejector!r} has "
                         f"none: use rejector='rejex' or 'rejex-tuned', or leave rejex_T at "
                         f"{default:g}")
    return number


def ssif_contamination_value(value: Any) -> str | float:
    """``ssif_contamination`` checked: ``"data"`` (the data set's) or a number in (0, 1)."""
    if isinstance(value, str) and value.lower() == "data":
        return "data"
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValueError(f"ssif_contamination must be 'data' (the data set's) or a number "
                         f"in (0, 1) (the published code's 0.1), got {value!r}")
    return float(value)


__all__ = ["COST_RANGE", "SIZE_BOUNDS", "check_backend", "cost_value", "finite_number",
           "named_options", "number_text", "query_seed_value", "rejex_t_value",
           "ssif_contamination_value", "whole_number"]
