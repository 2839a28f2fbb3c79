"""Plugins: a user's registrations (agents, priors, detectors, rejectors, rewards, ...) made
where every process of a run sees them, the command line and worker processes included.

A registration made in a script's own code reaches only that process: a grid large enough
to go to worker processes would then fail with "unknown agent" in the workers. Two ways
in survive them. A module named with ``--import MODULE`` (``run_grid(..., plugins=[...])``,
or :func:`load_plugins` in Python) is imported here and again in every worker before its
first task (``agents.experiments.executor`` passes :func:`plugin_modules` on). A package
can declare its plugin as a Python entry point in the group :data:`ENTRY_POINT_GROUP`::

    [project.entry-points."ballad_env.plugins"]
    mine = "my_package.ballad_plugin"          # a module: importing it registers
    other = "my_package.plugin:register"       # or a function, called with no arguments

which every ``ballad-env`` command and every worker loads at startup. Loading is
idempotent: each module is imported, each entry point called, once per process.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import entry_points

#: The entry-point group of plugins.
ENTRY_POINT_GROUP = "ballad_env.plugins"
_modules: dict[str, None] = {}  # modules imported by name, in order (an ordered set)
_entry_points_loaded: set[str] = set()  # names of the entry points loaded in this process


class PluginError(ImportError):
    """A plugin module or entry point that cannot be loaded, named with the reason."""


def load_plugins(modules: Iterable[str] = ()) -> tuple[str, ...]:
    """Load the entry points of :data:`ENTRY_POINT_GROUP` (once per process), then import
    ``modules`` by name; :class:`PluginError` naming one that fails. Returns
    :func:`plugin_modules`."""
    load_entry_points()
    for name in modules:
        if name in _modules:
            continue
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure, sys.exit too
            raise PluginError(f"cannot import the plugin module {name!r} ({type(err).__name__}"
                              f": {err}): it must be importable by that name from this "
                              "Python (on its path, e.g. installed or in the folder the "
                              "command runs in)") from err
        _modules[name] = None
    return plugin_modules()


def load_entry_points() -> None:
    """Load every entry point of :data:`ENTRY_POINT_GROUP`, once per process: a module's is
    imported, a function's called with no arguments."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in _entry_points_loaded:  # a retry after another one failed
            continue
        try:
            loaded = point.load()
            if callable(loaded) and ":" in point.value:
                loaded()
        except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure, sys.exit too
            dist = getattr(point.dist, "name", "an installed package")
            raise PluginError(f"the plugin {point.name!r} ({point.value}, from {dist}, "
                              f"entry point group {ENTRY_POINT_GROUP!r}) cannot be loaded "
                              f"({type(err).__name__}: {err}): fix or uninstall it") from err
        _entry_points_loaded.add(point.name)


def plugin_modules() -> tuple[str, ...]:
    """The modules imported by name so far in this process, in order (what a worker imports
    before its first task)."""
    return tuple(_modules)


__all__ = ["ENTRY_POINT_GROUP", "PluginError", "load_entry_points", "load_plugins",
           "plugin_modules"]
