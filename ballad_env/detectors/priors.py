"""Priors: the unsupervised pyod detectors SSDO starts from, by name.

``PRIORS`` holds the registered factories (``iforest``, the paper's text; ``knn``, the
authors' code); any other tabular pyod detector is found by its module name and registered
on first use (``prior_factory``). ``make_prior`` builds one, ``check_prior`` names the
problem with a bad one, and ``training_scores`` reads a fitted prior's scores of its
training points. See ``docs/method.md``, Detector.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import pkgutil
import threading
import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from ballad_env.data import DataWarning
from ballad_env.registry import Registry

#: name -> factory(seed, number of training points) of an unfitted pyod detector.
PriorFactory = Callable[[int | None, int | None], Any]
PRIORS: Registry[PriorFactory] = Registry("prior")


@PRIORS.register("iforest")
def _iforest(seed: int | None, n_samples: int | None) -> Any:
    """The paper's text: IForest with pyod's defaults."""
    from pyod.models.iforest import IForest

    return IForest(random_state=seed)


@PRIORS.register("knn")
def _knn(seed: int | None, n_samples: int | None) -> Any:
    """The authors' code: mean distance to 10 neighbours (fewer on tiny training sets)."""
    from pyod.models.knn import KNN

    neighbours = 10 if n_samples is None else max(1, min(10, n_samples - 1))
    return KNN(n_neighbors=neighbours, method="mean")


_PYOD_SKIPPED_PREFIXES = ("_", "base", "pyg_", "ts_", "audio_")
_PYOD_SKIPPED = frozenset({"combination", "sklearn_base", "gaal_base", "thresholds",
                           "embedding", "so_gaal_new"})
_resolve_lock = threading.Lock()


@cache
def pyod_detector_names() -> tuple[str, ...]:
    """Module names of pyod's tabular detectors (``ecod``, ``copod``, ``lof``, ...), found
    without importing them; each can be named as a prior."""
    spec = importlib.util.find_spec("pyod.models")
    if spec is None or not spec.submodule_search_locations:
        return ()
    names = (module.name for module in pkgutil.iter_modules(spec.submodule_search_locations))
    return tuple(sorted(name for name in names if not name.startswith(_PYOD_SKIPPED_PREFIXES)
                        and name not in _PYOD_SKIPPED))


def _unknown_prior(name: str) -> ValueError:
    others = [n for n in pyod_detector_names() if n not in PRIORS]
    return ValueError(f"unknown prior {name!r}: use one of {', '.join(PRIORS)} or the name of "
                      f"a pyod detector ({', '.join(others)})")


def _pyod_class(name: str) -> type:
    """The detector class of ``pyod.models.<name>`` (``ECOD`` for ``ecod``), checked to work
    as SSDO's prior: importable, buildable with its defaults, and unsupervised."""
    if name not in pyod_detector_names():
        raise _unknown_prior(name)
    try:
        module = importlib.import_module(f"pyod.models.{name}")
    except ImportError as err:
        raise ValueError(f"prior {name!r}: pyod's {name} needs a package that is not "
                         f"installed ({err})") from err
    from pyod.models.base import BaseDetector

    wanted = name.replace("_", "")
    found = [value for value in vars(module).values()
             if isinstance(value, type) and issubclass(value, BaseDetector)
             and value.__module__ == module.__name__
             and value.__name__.lower().replace("_", "") == wanted]
    if not found:
        raise _unknown_prior(name)
    cls: Any = found[0]
    label = inspect.signature(cls.fit).parameters.get("y")
    if label is not None and label.default is inspect.Parameter.empty:
        raise ValueError(f"prior {name!r}: pyod's {cls.__name__} is supervised (its fit needs "
                         "labels); SSDO's prior must learn without labels")
    try:
        cls()
    except TypeError as err:
        raise ValueError(f"prior {name!r}: pyod's {cls.__name__} cannot be built with its "
                         f"defaults ({err}); register a factory for it with "
                         "ballad_env.detectors.ssdo.model.PRIORS.register") from err
    return cls


def _pyod_factory(cls: type) -> PriorFactory:
    """A prior factory for a pyod class: its defaults, seeded, with at most n - 1 neighbours."""

    def factory(seed: int | None, n_samples: int | None) -> Any:
        detector = cls()
        params = detector.get_params()
        if "random_state" in params:
            detector.set_params(random_state=seed)
        neighbours = params.get("n_neighbors")
        if n_samples is not None and isinstance(neighbours, int) and neighbours >= n_samples:
            detector.set_params(n_neighbors=max(1, n_samples - 1))
        return detector

    factory.__doc__ = f"pyod's {cls.__name__} with its defaults (registered by name on first use)."
    return factory


def prior_factory(name: str) -> PriorFactory:
    """The factory of prior ``name``: a registered one, else the pyod detector of that module
    name (``ecod``, ``copod``, ``lof``, ``hbos``, ...), registered on first use."""
    name = name.lower()
    with _resolve_lock:
        if name not in PRIORS:
            PRIORS.register(name, _pyod_factory(_pyod_class(name)))
        return PRIORS[name]


def check_prior(prior: str | Any) -> None:
    """Raise a clear error unless ``prior`` names a registered prior or a pyod detector, or is
    a pyod-like detector (with ``fit`` and ``decision_function``)."""
    if isinstance(prior, str):
        prior_factory(prior)
    elif not hasattr(prior, "fit") or not hasattr(prior, "decision_function"):
        raise TypeError(f"prior {prior!r} has no fit/decision_function: pass a pyod detector "
                        f"or one of {', '.join(PRIORS)}")
    elif type(prior).__module__.split(".")[0] == "sklearn":
        raise TypeError(
            f"prior {type(prior).__name__} is a scikit-learn estimator, but SSDO needs a pyod "
            "detector: it reads the scores pyod keeps of the training points after fitting "
            "(decision_scores_, larger = more anomalous), which scikit-learn's detectors do not "
            "have (and their scores run the other way). Use pyod's version "
            "(pyod.models.iforest.IForest for IsolationForest, pyod.models.lof.LOF for "
            f"LocalOutlierFactor) or a prior name: {', '.join(PRIORS)}")


def training_scores(prior: Any) -> np.ndarray:
    """A fitted prior's scores of its training points (pyod's ``decision_scores_``, larger =
    more anomalous); a ``DataWarning`` when they all tie, since SSDO then starts from no
    ranking at all."""
    scores = getattr(prior, "decision_scores_", None)
    if scores is None:
        raise TypeError(f"prior {type(prior).__name__} has no decision_scores_ after fit: SSDO "
                        "needs a pyod detector (pyod.models.base.BaseDetector) or a prior name: "
                        f"{', '.join(PRIORS)}")
    raw = np.asarray(scores, dtype=np.float64)
    if raw.size > 1 and np.all(raw == raw[0]):
        warnings.warn(
            f"the {type(prior).__name__} prior scores every training example alike "
            f"({raw[0]:g}), so until labels separate them every test score ties (ROC AUC 0.5). "
            "Typical causes: constant features, or every example repeated at least as often as "
            "the prior has neighbours (kNN: 10).", DataWarning, stacklevel=2)
    return raw


def make_prior(prior: str | Any = "iforest", seed: int | None = None,
               n_samples: int | None = None) -> Any:
    """An unfitted prior: a registered or pyod name (``prior_factory``) or a copy of a given
    detector."""
    check_prior(prior)
    if isinstance(prior, str):
        return prior_factory(prior)(seed, n_samples)
    detector = copy.deepcopy(prior)
    if seed is not None and "random_state" in getattr(detector, "get_params", dict)():
        detector.set_params(random_state=seed)
    return detector


__all__ = ["PRIORS", "PriorFactory", "check_prior", "make_prior", "prior_factory",
           "pyod_detector_names", "training_scores"]
