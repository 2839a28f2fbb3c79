"""What a training run shows while it runs, the same for every trainer: a progress bar of
the environment steps, their rate and the latest figures (the recent training episodes'
final test cost, the latest held-out evaluation's), and one line before the update is
compiled.

The bar is drawn on a terminal only: where standard error is a file or a pipe (a study's
log, CI), a bar redrawn in place would fill it with thousands of lines, so it stays off
there (tqdm's own ``disable``), as the run's settings JSON and curves say the same after it.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm

#: Seconds the compiled trainer's update takes to build the first time on a machine (a
#: loaded 2-core CPU: ``docs/training.md``, "Setup"); later runs load it from the cache.
COMPILE_SECONDS = 90


def on_terminal() -> bool:
    """Whether standard error is a terminal (where a redrawn bar reads as one line)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(total: int, enabled: bool = True) -> Any:
    """A tqdm bar of ``total`` environment steps on standard error (steps, steps/s, time
    left), drawn only when ``enabled`` and on a terminal; a disabled bar takes every call
    and prints nothing."""
    return tqdm(total=total, unit="step", unit_scale=True, dynamic_ncols=True,
                file=sys.stderr, disable=not (enabled and on_terminal()))


def show_costs(bar: Any, train_cost: float | None = None,
               eval_cost: float | None = None) -> dict[str, str]:
    """Put the latest figures after the bar: ``cost`` (the recent training episodes' mean
    final test cost) and ``eval`` (the latest held-out evaluation's); returns them as shown,
    whether the bar is drawn or not."""
    figures = {name: f"{value:.4f}" for name, value in
               (("cost", train_cost), ("eval", eval_cost)) if value is not None}
    if figures and not bar.disable:
        bar.set_postfix(figures, refresh=False)
    return figures


def announce_compile(seconds: float = COMPILE_SECONDS) -> None:
    """The line said before compiling, so a silent wait of tens of seconds has a reason."""
    print(f"compiling the update, about {seconds:.0f} s the first time; cached afterwards",
          file=sys.stderr, flush=True)


__all__ = ["COMPILE_SECONDS", "announce_compile", "on_terminal", "progress_bar", "show_costs"]
