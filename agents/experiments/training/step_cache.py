"""The compiled PPO minibatch step, built once per machine and kept in the user's cache.

``torch.compile`` compiles again in every process: even with inductor's on-disk cache warm
it traces the step, looks its pieces up and loads them, several CPU seconds before a run's
clock. Here the step (``updates.ppo_step`` with its sizes and settings fixed, at one
minibatch shape) is exported (``torch.export``) and compiled ahead of time by AOTInductor
into one package file, ``<cache>/ballad-env/compiled/<key>.pt2``; every later run loads
that file (a shared library and its constants) without tracing or compiling. The key covers
everything the package bakes in: the torch and Python versions, the machine's
architecture, the source file of the step, the shapes of its inputs and the fixed
arguments (the network's shapes, the hyperparameters, masking), so a change to any of them
builds a new package. Inductor's own cache, which the first build fills, is
pointed at ``<cache>/ballad-env/inductor`` unless ``TORCHINDUCTOR_CACHE_DIR`` is set.

A package's step mutates its inputs as the eager step does: the (3, P) state (weights and
Adam's moments) and the step count in place, the statistics returned.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from ballad_env.data.adbench import data_home

#: inductor's cache folder variable (set here only where the user has not set it).
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"

#: What is called (with no arguments) just before a build: say that compiling starts.
Announce = Callable[[], None]


def cache_dir() -> Path:
    """Where the step packages live: ``compiled/`` in ballad-env's user cache folder."""
    return data_home() / "compiled"


def use_inductor_cache() -> str:
    """Point inductor's cache at ballad-env's user cache folder (unless the user chose
    one); the folder in use."""
    return os.environ.setdefault(INDUCTOR_CACHE_ENV, str(data_home() / "inductor"))


def package_key(function: functools.partial[torch.Tensor], example: tuple[torch.Tensor, ...]
                ) -> str:
    """A name for the package of ``function`` at the example's shapes: a hash of all the
    package bakes in (the torch version, the function's source file and its fixed
    arguments, by their ``repr``, among them)."""
    source = Path(inspect.getsourcefile(function.func) or "").read_bytes()
    parts = {"torch": torch.__version__, "python": sys.version_info[:2],
             "machine": platform.machine(), "name": function.func.__qualname__,
             "source": hashlib.sha256(source).hexdigest(),
             "example": [(tuple(x.shape), str(x.dtype), x.device.type) for x in example],
             "fixed": [repr(a) for a in function.args],
             "keywords": {k: repr(v) for k, v in function.keywords.items()}}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    rows = example[-1].shape[0] if example[-1].dim() else 0
    return f"{function.func.__name__}-{rows}-{digest.hexdigest()[:20]}"


class _Call(torch.nn.Module):
    """A function as the module ``torch.export`` takes."""

    def __init__(self, function: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.function(*args)


def build(function: Callable[..., torch.Tensor], example: tuple[torch.Tensor, ...],
          path: Path) -> None:
    """Export ``function`` at the example's shapes and compile it into the package ``path``
    (written under a temporary name and renamed, so a concurrent run never loads half a
    file)."""
    use_inductor_cache()
    exported = torch.export.export(_Call(function), example, strict=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix="building-", suffix=".pt2")
    os.close(handle)
    try:
        torch._inductor.aoti_compile_and_package(exported, package_path=temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def load_step(function: functools.partial[torch.Tensor], example: tuple[torch.Tensor, ...],
              announce: Announce | None = None) -> tuple[Callable[..., torch.Tensor], bool]:
    """``function`` (a module-level function with its non-tensor arguments fixed, whose
    ``repr`` says all they hold) compiled for the example's shapes, loaded from the cache
    (built there first when missing, after calling ``announce``); and whether it was built
    now."""
    path = cache_dir() / f"{package_key(function, example)}.pt2"
    built = not path.exists()
    if built:
        if announce is not None:
            announce()
        build(function, example, path)
    step: Callable[..., torch.Tensor] = torch._inductor.aoti_load_package(str(path))
    return step, built


__all__ = ["INDUCTOR_CACHE_ENV", "build", "cache_dir", "load_step", "package_key",
           "use_inductor_cache"]
