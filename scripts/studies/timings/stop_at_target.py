"""Stop a training run once a checkpoint reaches the time-to-target study's target.

A run's time to the target is the wall time of its first checkpoint at or below it, so the
steps a run trains after that checkpoint only lengthen the study. ``watch`` follows a
running ``ballad-env train`` process: it scores each checkpoint as it appears (the study's
cost on one measure's cells) and ends the process once one is at or below the target. A
checkpoint is scored only once the next one exists or the process has ended, so a file
still being written is never read; the run therefore trains one checkpoint interval past
the one that reached the target, and that checkpoint's file (its wall time) is already
written when the process ends.

A stopped run writes no run record, so ``stopped_facts`` reads its training speed and
setup off the checkpoints' wall times instead.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: Seconds between looks at the checkpoint folder.
POLL_S = 0.5
#: Seconds a stopped process gets to end after SIGTERM before it is killed.
GRACE_S = 10.0


def checkpoint_steps(path: Path) -> int:
    """The steps in a checkpoint's name (``<run>_<steps>_steps.zip``)."""
    return int(path.stem.split("_")[-2])


def saved_checkpoints(folder: Path) -> list[Path]:
    """The checkpoints in ``folder`` so far, in step order."""
    return sorted(folder.glob("*_steps.zip"), key=checkpoint_steps)


@dataclass
class Watch:
    """What ``watch`` saw: each scored checkpoint's cost, and the one that reached the
    target (``None`` where the run ended first)."""

    costs: dict[Path, float] = field(default_factory=dict)
    reached: Path | None = None


def _score_ready(folder: Path, ended: bool, score: Callable[[Path], float], target: float,
                 seen: Watch) -> None:
    """Score, in step order, the checkpoints not yet scored whose file is complete (a later
    one exists, or the process has ended); stop at the first at or below ``target``."""
    saved = saved_checkpoints(folder)
    ready = saved if ended else saved[:-1]
    for path in ready:
        if path in seen.costs:
            continue
        seen.costs[path] = score(path)
        if seen.costs[path] <= target:
            seen.reached = path
            return


def watch(process: subprocess.Popen[bytes], folder: Path, score: Callable[[Path], float],
          target: float, poll_s: float = POLL_S) -> Watch:
    """Follow ``process`` while it writes checkpoints to ``folder``; end it (SIGTERM, then
    SIGKILL after ``GRACE_S``) once ``score`` of one is at or below ``target``. Returns when
    the process has ended, with the costs it scored."""
    seen = Watch()
    while seen.reached is None:
        ended = process.poll() is not None
        _score_ready(folder, ended, score, target, seen)
        if ended:
            break
        if seen.reached is None:
            time.sleep(poll_s)
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return seen


def stopped_facts(walls: list[tuple[int, float]]) -> dict[str, float]:
    """A stopped run's training speed and setup from its checkpoints' (steps, wall s since
    the process started): steps a second between the first and the last checkpoint, the
    setup as the first checkpoint's wall time less the time its steps took at that speed,
    and the training seconds to the last checkpoint. Needs two checkpoints at different
    steps."""
    if len(walls) < 2 or walls[-1][0] <= walls[0][0] or walls[-1][1] <= walls[0][1]:
        raise ValueError(f"a stopped run needs two checkpoints apart in steps and time to "
                         f"read its speed, got {walls}: use a finer --every")
    (first_steps, first_wall), (last_steps, last_wall) = walls[0], walls[-1]
    speed = (last_steps - first_steps) / (last_wall - first_wall)
    setup = first_wall - first_steps / speed
    return {"steps_per_s": speed, "setup_s": setup, "train_s": last_wall - setup}


__all__ = ["GRACE_S", "POLL_S", "Watch", "checkpoint_steps", "saved_checkpoints",
           "stopped_facts", "watch"]
