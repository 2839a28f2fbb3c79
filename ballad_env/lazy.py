"""Package names imported when first used (PEP 562), so importing a package stays cheap.

``import ballad_env`` registers the environments and nothing more; ``ballad_env.Settings``
imports its module on first use. The ``ballad-env`` command's ``--help`` and ``--version``
then answer without importing scikit-learn, scipy or the harness; a job imports what it
needs when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


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


__all__ = ["lazy_exports"]
