"""Which action is truly better at each state of a lattice, and how well a signal tells it.

The better action at (i, j) is the move to the successor with the lower test cost; a
signal (a side signal's rewards, or the decrease of a cost estimate from paid labels,
``COST_SIGNALS``) votes for the side where it is larger. The ``Lattice`` methods of the
same names call these functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ballad_env.rewards import SIDE_SIGNAL_NAMES
from ballad_env.snapshot import AL, LR

if TYPE_CHECKING:
    from ballad_env.replay.lattice import Lattice

#: Cost estimates from paid labels (state figures) whose decrease is a signal.
COST_SIGNALS = ("val_cost", "val_sample_cost")
#: Signals that can be scored against the truly better action.
SIGNALS = (*SIDE_SIGNAL_NAMES, *COST_SIGNALS)
#: How a signal is read at state (i, j): the rewards of the two moves out of it
#: ("lookahead") or the latest rewards of the moves into it, as a greedy rule uses them
#: ("lagged").
SIGNAL_MODES = ("lookahead", "lagged")


def better_action(lattice: Lattice) -> np.ndarray:
    """[i, j]: the action whose successor has the lower test cost (0 AL, 1 LR); NaN on a
    tie, or where a move is impossible.
    """
    k = lattice.n_rounds
    out = np.full((k + 1, k + 1), np.nan)
    for i, j in inner_states(lattice):
        al, lr = lattice.cost[i + 1, j], lattice.cost[i, j + 1]
        if al != lr:
            out[i, j] = AL if al < lr else LR
    return out


def inner_states(lattice: Lattice) -> list[tuple[int, int]]:
    """States where both moves are possible."""
    k = lattice.n_rounds
    return [(i, j) for i in range(k) for j in range(k - i)
            if lattice.can_move(i, j, AL) and lattice.can_move(i, j, LR)]


def signal_votes(lattice: Lattice, signal: str, mode: str = "lookahead") -> np.ndarray:
    """[i, j]: the side whose signal is larger (0 AL, 1 LR), NaN on a tie or undefined.

    ``"lookahead"`` compares the two moves out of (i, j): each side's reward on arriving
    at its successor (the LR one with the previous LR round at this i), or for a cost
    signal (``COST_SIGNALS``) the decrease of that estimate. ``"lagged"`` compares
    the moves into (i, j), i.e. the latest rewards a greedy rule would read there.
    """
    if signal not in SIGNALS:
        raise ValueError(f"unknown signal {signal!r}: use one of {SIGNALS}")
    if mode not in SIGNAL_MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {SIGNAL_MODES}")
    k = lattice.n_rounds
    votes = np.full((k + 1, k + 1), np.nan)
    for i, j in inner_states(lattice):
        if mode == "lagged" and (i == 0 or j == 0):
            continue
        al, lr = _signal_pair(lattice, signal, mode, i, j)
        if al != lr and not np.isnan(al) and not np.isnan(lr):
            votes[i, j] = AL if al > lr else LR
    return votes


def _signal_pair(lattice: Lattice, signal: str, mode: str, i: int, j: int
                 ) -> tuple[float, float]:
    """(AL side, LR side) of ``signal`` at (i, j): larger means "choose me"."""
    if signal in COST_SIGNALS:
        vc = lattice.grid[signal]
        if mode == "lookahead":
            return vc[i, j] - vc[i + 1, j], vc[i, j] - vc[i, j + 1]
        return vc[i - 1, j] - vc[i, j], vc[i, j - 1] - vc[i, j]
    lr = lattice.lr_reward(signal)
    if mode == "lookahead":
        return lattice.al_reward[signal][i + 1], lr[i, j + 1]
    return lattice.al_reward[signal][i], lr[i, j]


def score_signal(lattice: Lattice, signal: str, mode: str = "lookahead") -> dict[str, int]:
    """Counts over the states with a strictly better action: ``states``; ``voted`` (the
    signal has a larger side); ``correct`` (that side is the better action);
    ``al_better`` (AL is the better action).
    """
    better = better_action(lattice)
    votes = signal_votes(lattice, signal, mode)
    if mode == "lagged":
        better = better.copy()
        better[0, :] = np.nan
        better[:, 0] = np.nan
    decided = ~np.isnan(better)
    voted = decided & ~np.isnan(votes)
    return {"states": int(decided.sum()), "voted": int(voted.sum()),
            "correct": int(np.sum(votes[voted] == better[voted])),
            "al_better": int(np.sum(better[decided] == AL))}


def right_moves(lattice: Lattice, actions: Sequence[int]) -> tuple[int, int]:
    """(moves to the strictly better successor, moves where one was strictly better)."""
    better = better_action(lattice)
    right = decided = 0
    i = j = 0
    for action in actions:
        if not np.isnan(better[i, j]):
            decided += 1
            right += int(better[i, j] == action)
        i, j = lattice.next_state(i, j, int(action))
    return right, decided


__all__ = ["COST_SIGNALS", "SIGNALS", "SIGNAL_MODES", "better_action", "inner_states",
           "right_moves", "score_signal", "signal_votes"]
