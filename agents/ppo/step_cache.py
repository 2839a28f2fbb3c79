"""The compiled PPO minibatch step, built once per machine and kept in the user's cache.

``torch.compile`` compiles again in every process: even with inductor's on-disk cache warm
it traces the step, looks its pieces up and loads them, several CPU seconds before a run's
clock. Here the step (``updates.ppo_step`` with its sizes and settings fixed, at one
minibatch shape) is exported (``torch.export``) and compiled ahead of time by AOTInductor
into one package file, ``<cache>/ballad-env/compiled/<key>.pt2``; every later run loads
that file (a shared library and its constants) without tracing or compiling. The key covers
everything the package bakes in: the torch and Python versions, the machine's
architecture and CPU (its vector instruction set and feature flags), the source files of
the step and of the modules it calls (``STEP_SOURCES``), the shapes of its inputs and the
fixed arguments (the network's shapes, the hyperparameters, masking), so a change to any
of them builds a new package. Inductor's own
cache, which the first build fills, is pointed at ``<cache>/ballad-env/inductor`` unless
``TORCHINDUCTOR_CACHE_DIR`` is set.

A package is written under the project's marked temporary name and renamed into place
(``ballad_env.files.atomic_write``), so a killed build leaves no file under the package's
name, and the next build removes what it left (``remove_stale_temporaries``).

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
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from ballad_env.data.adbench import data_home
from ballad_env.files import atomic_write, remove_stale_temporaries

#: inductor's cache folder variable (set here only where the user has not set it).
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"

#: The modules beside this one whose code every step runs (the forward pass, the loss's
#: gradient, Adam): their source is in every package's key with the step's own module.
STEP_SOURCES = ("core.py", "updates.py")
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
    package bakes in (the torch version, the source files of the function and of
    :data:`STEP_SOURCES`, and its fixed arguments, by their ``repr``, among them)."""
    files = {Path(inspect.getsourcefile(function.func) or ""),
             *(Path(__file__).with_name(name) for name in STEP_SOURCES)}
    source = b"".join(path.read_bytes() for path in sorted(files))
    parts = {"torch": torch.__version__, "python": sys.version_info[:2],
             "machine": platform.machine(), "cpu": cpu_features(),
             "name": function.func.__qualname__,
             "source": hashlib.sha256(source).hexdigest(),
             "example": [(tuple(x.shape), str(x.dtype), x.device.type) for x in example],
             "fixed": [repr(a) for a in function.args],
             "keywords": {k: repr(v) for k, v in function.keywords.items()}}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    rows = example[-1].shape[0] if example[-1].dim() else 0
    return f"{function.func.__name__}-{rows}-{digest.hexdigest()[:20]}"


def cpu_features() -> str:
    """The CPU as far as a compiled package depends on it: the vector instruction set torch
    dispatches to and a hash of the feature flags the kernel reports (``/proc/cpuinfo``;
    the processor's name where there is none). Read, not probed: no compiler runs."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    flags = next((line.split(":", 1)[1] for line in lines
                  if line.startswith(("flags", "Features")) and ":" in line),
                 platform.processor())
    digest = hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:16]
    return f"{torch.backends.cpu.get_cpu_capability()}-{digest}"


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
    (written under a marked temporary name and renamed, so a concurrent run never loads
    half a file and a killed build leaves nothing under ``path``; a killed build's
    temporary file is removed first)."""
    import torch._inductor  # the compiler (loading a package needs none of it)

    use_inductor_cache()
    exported = torch.export.export(_Call(function), example, strict=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries([path.parent])

    def write(temporary: Path) -> None:
        # The compiler takes a path ending in .pt2 or a buffer: the temporary file, open.
        with open(temporary, "wb") as handle:
            torch._inductor.aoti_compile_and_package(exported, package_path=handle)

    atomic_write(path, write)


def load_package(path: Path) -> Callable[..., torch.Tensor]:
    """The step in the package ``path``: its shared library loaded by AOTInductor's loader
    and called with its tensors as one list. (``torch._inductor.aoti_load_package`` first
    names the CPU's vector instruction set by compiling and running probe programs, seconds
    spent only to warn of a mismatch the package's key already rules out, and flattens the
    arguments on every call.)"""
    loader = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, -1)
    if json.loads(loader.get_call_spec()[1])[1].get("type") is not None:
        raise ValueError(f"the package {path} returns more than one tensor: delete it to "
                         "build it again")

    def step(*tensors: torch.Tensor) -> torch.Tensor:
        # The package reads each input as laid out when it was built (contiguous): a
        # strided view would be read as other memory, silently.
        if not all(tensor.is_contiguous() for tensor in tensors):
            raise ValueError(f"the compiled step {path.name} takes contiguous tensors: give "
                             "a strided view as .contiguous() (and copy back what it updates)")
        output: torch.Tensor = loader.boxed_run(list(tensors))[0]
        return output

    return step


def load_step(function: functools.partial[torch.Tensor], example: tuple[torch.Tensor, ...],
              announce: Announce | None = None
              ) -> tuple[Callable[..., torch.Tensor], bool]:
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
    return load_package(path), built


def once(announce: Announce | None) -> Announce | None:
    """``announce`` called at most once however often the result is, so a warm-up that
    builds a package for each of several shapes says one line for the run (None stays
    None)."""
    if announce is None:
        return None
    said: list[bool] = []

    def announce_once() -> None:
        if not said:
            said.append(True)
            announce()

    return announce_once


def warn_eager(step: str, err: Exception) -> None:
    """Say that building or loading ``step`` failed with ``err`` (its type and first line)
    and that it runs eagerly: the one warning of every compiled step's fallback."""
    first = str(err).splitlines()[0] if str(err) else ""
    warnings.warn(f"compiling {step} failed ({type(err).__name__}: {first}); it runs eagerly",
                  RuntimeWarning, stacklevel=3)


__all__ = ["INDUCTOR_CACHE_ENV", "STEP_SOURCES", "build", "cache_dir", "cpu_features",
           "load_package", "load_step", "once", "package_key", "use_inductor_cache",
           "warn_eager"]
