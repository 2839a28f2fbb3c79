"""Stop a training run once a checkpoint reaches the time-to-target study's target.

A run's time to the target is the wall time of its first checkpoint at or below it, so the
steps a run trains after that checkpoint only lengthen the study. ``watch`` follows a
running ``ballad-env train`` process: it scores each checkpoint as it appears (the study's
cost on one measure's cells) and ends the process once one is at or below the target. A
checkpoint is scored only once the next one exists or the process has ended, so a file
still being written is never read; the run therefore trains one checkpoint interval past
the one that reached the target, and that checkpoint's file (its wall time) is already
written when the process ends.

The run is paused (SIGSTOP, then SIGCONT) while its checkpoints are scored, and the pauses
are kept: a checkpoint's wall time less the pauses before it is the time it would have had
unwatched. Scoring beside the run instead would share the machine with it and slow it
(``docs/training.md``, "The final measurement", has the figures).

A stopped run writes no run record, and a watched run's own training clock counts the
pauses, so ``stopped_facts`` reads a watched run's training speed and setup off its
checkpoints' wall times instead.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
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
    """What ``watch`` saw: each scored checkpoint's cost, the one that reached the target
    (``None`` where the run ended first), and the run's pauses (wall clock start and end)."""

    costs: dict[Path, float] = field(default_factory=dict)
    reached: Path | None = None
    pauses: list[tuple[float, float]] = field(default_factory=list)

    def paused_before(self, moment: float) -> float:
        """Seconds the run was paused before ``moment`` (a wall clock time)."""
        return sum(end - start for start, end in self.pauses if end <= moment)


@contextlib.contextmanager
def paused(process: subprocess.Popen[bytes], pauses: list[tuple[float, float]]
           ) -> Iterator[None]:
    """``process`` stopped (SIGSTOP) within the block and continued after; the pause's
    start and end are appended to ``pauses``."""
    process.send_signal(signal.SIGSTOP)
    start = time.time()
    try:
        yield
    finally:
        pauses.append((start, time.time()))
        process.send_signal(signal.SIGCONT)


def _score(paths: list[Path], score: Callable[[Path], float], target: float,
           seen: Watch) -> None:
    """Score ``paths`` in order, stopping at the first at or below ``target``."""
    for path in paths:
        seen.costs[path] = score(path)
        if seen.costs[path] <= target:
            seen.reached = path
            return


def watch(process: subprocess.Popen[bytes], folder: Path, score: Callable[[Path], float],
          target: float, poll_s: float = POLL_S) -> Watch:
    """Follow ``process`` while it writes checkpoints to ``folder``, pausing it while
    ``score`` reads each complete one (a later one exists, or the process has ended), in
    step order; end it (SIGTERM, then SIGKILL after ``GRACE_S``) once one is at or below
    ``target``. Returns when the process has ended, with the costs and the pauses."""
    seen = Watch()
    try:
        while seen.reached is None:
            ended = process.poll() is not None
            saved = saved_checkpoints(folder)
            ready = [p for p in (saved if ended else saved[:-1]) if p not in seen.costs]
            if ready and not ended:
                with paused(process, seen.pauses):
                    _score(ready, score, target, seen)
            elif ready:
                _score(ready, score, target, seen)
            if ended:
                break
            if seen.reached is None:
                time.sleep(poll_s)
    finally:  # reached, or the scoring failed: no run is left behind
        _end(process)
    return seen


def _end(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` if it still runs: SIGTERM, then SIGKILL after ``GRACE_S``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


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


__all__ = ["GRACE_S", "POLL_S", "Watch", "checkpoint_steps", "paused", "saved_checkpoints",
           "stopped_facts", "watch"]
