"""Named registries: the extension points of the project (priors, threshold searches, query
strategies, reward signals, agents).

A registry maps a name to an item (usually a factory). Looking up an unknown name raises a
``ValueError`` that lists the names there are, so every option is validated in one place
with one message. :func:`lazy_exports` maps a package's public names to the modules that
define them, imported on first use (PEP 562), so importing a package stays cheap: ``import
ballad_env`` registers the environments and nothing more, and the ``ballad-env`` command's
``--help`` and ``--version`` answer without importing scikit-learn, scipy or the harness.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Registry(Generic[T]):
    """Items of one kind by name, in registration order.

    Parameters
    ----------
    kind : str
        What the items are, for error messages (``"prior"``, ``"threshold search"``...).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, item: T) -> T: ...

    def register(self, name: str, item: T | None = None) -> T | Callable[[T], T]:
        """Add ``item`` as ``name`` (names are unique); without ``item``, a decorator."""
        if item is None:
            return lambda value: self.register(name, value)
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def check(self, name: str) -> None:
        """Raise the registry's ``ValueError`` unless ``name`` is registered."""
        self[name]  # noqa: B018  (the lookup raises, naming what there is)

    def unregister(self, name: str) -> T:
        """Remove ``name`` and return its item (to undo a temporary registration)."""
        item = self[name]
        del self._items[name]
        return item

    def __getitem__(self, name: str) -> T:
        if name not in self._items:
            raise ValueError(f"unknown {self.kind} {name!r}: use one of {', '.join(self)}")
        return self._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._items)

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, item) pairs, in registration order."""
        return tuple(self._items.items())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self)})"


def lazy_exports(package: str, sources: dict[str, str],
                 wrap_error: Callable[[ModuleNotFoundError], Exception] | None = None
                 ) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of ``package``: each name of ``sources`` (name ->
    the module defining it) imported on first use and kept in the package's namespace.
    ``wrap_error`` rewords a missing optional dependency (e.g. to name its extra)."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(source), name)
        except ModuleNotFoundError as err:
            if wrap_error is None:
                raise
            raise wrap_error(err) from err
        vars(importlib.import_module(package))[name] = value
        return value

    return __getattr__


def lazy_dir(package: str, sources: dict[str, str]) -> Callable[[], list[str]]:
    """The module-level ``__dir__`` of ``package``: its names so far and every name of
    ``sources`` (those :func:`lazy_exports` imports on first use), so that ``dir()`` and tab
    completion list them before they are used. ``sources`` is read at each call: names added
    to it later are listed too."""

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(package)), *sources})

    return __dir__


__all__ = ["Registry", "lazy_dir", "lazy_exports"]
