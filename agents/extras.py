"""Optional dependencies: a missing one is an error naming the extra that installs it.

Installing the project (``pip install -e .`` in a clone) gives the environment and the rule
agents; the experiment harness needs the ``experiments`` extra (pandas, pyarrow, joblib,
dask), policy training and saved policies the ``rl`` extra (stable-baselines3, sb3-contrib,
torch) and the statistics of ``compare --stats`` the ``stats`` extra (scikit-posthocs,
statsmodels).
"""

from __future__ import annotations

import importlib.util

#: The extra that installs each optional top-level module.
EXTRA_OF = {"pandas": "experiments", "pyarrow": "experiments", "joblib": "experiments",
            "dask": "experiments", "distributed": "experiments", "torch": "rl",
            "stable_baselines3": "rl", "sb3_contrib": "rl", "rl_zoo3": "zoo",
            "minari": "minari", "scikit_posthocs": "stats", "statsmodels": "stats"}


def missing_extra(err: ModuleNotFoundError, what: str) -> ModuleNotFoundError:
    """``err`` reworded to name the extra that installs the missing module (``err`` itself
    if the module is not an optional dependency)."""
    module = (err.name or "").split(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return err
    return ModuleNotFoundError(
        f"{what} needs {module}, which is not installed: install the project's '{extra}' "
        f"extra: pip install -e '.[{extra}]' in the clone (ballad-env is not on PyPI)",
        name=module)


def require(*modules: str) -> None:
    """A ``ModuleNotFoundError`` for the first of ``modules`` not installed, found without
    importing it: a module that imports a slow optional dependency where it is used (pandas,
    on the training path) still fails at its own import, where the caller names the extra."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


__all__ = ["EXTRA_OF", "missing_extra", "require"]
