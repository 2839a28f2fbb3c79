"""The replay's transition table: one stored lattice as path states and the steps between them.

A lattice (``ballad_env.replay.lattice``) holds every state (i AL, j LR rounds) of one (data set,
seed, setting), and the rewards of every move between them. The parts of the observation
and ``info`` that depend on the path are known along any path: the latest AL rewards
depend on i only; the latest LR rewards on the state of the last LR round and of the one
before it (``Lattice.lr_reward_from``); and the previous action. So a path state

    (i, j, previous action, i of the last LR round, i of the LR round before it)

fixes the snapshot, and stepping is a table look-up. Each transition is computed once per
process, then cached: the state's parts (observation features, record values, mask) for
every state of a cell in one vectorised pass over the lattice when it is loaded
(``state_observations``: ``observation.state_features`` elementwise), with the path's
parts written over them (``CellReplay``). The tests hold every transition equal to the
live environment's own code on the path state's whole snapshot (``observation.encode``,
``Snapshot.info``, ``env.step_reward`` on the registered reward signal), so the replay
equals the live environment to the bit for the same (data set, seed, setting) and
actions, at tens of thousands of steps a second.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import numpy as np

from ballad_env.env import step_reward
from ballad_env.observation import (
    ALL_FEATURE_INDEX,
    check_version,
    encode,
    side_features,
    state_features,
    v1_features,
    v2_features,
)
from ballad_env.replay.lattice import Lattice
from ballad_env.rewards import SIDE_SIGNAL_NAMES, CostSignal, SideSignal
from ballad_env.snapshot import (
    ACTION_NAMES,
    AL,
    FIGURE_TYPES,
    LR,
    RECORD_FIELDS,
    Snapshot,
    side_record,
)

#: A path state: (i, j, previous action or -1, i of the last LR round or -1, i of the LR
#: round before it or -1).
PathState = tuple[int, int, int, int, int]
START: PathState = (0, 0, -1, -1, -1)
#: Bytes of the Python values made at load per (i, j) of the grid (the states' record
#: values; the figures too for a cost-decrease reward), of one state's parts and of one
#: transition (with its share of the LR parts), measured with tracemalloc on a cell of 15
#: rounds (the larger of a side-signal and a cost reward); ``CellReplay.nbytes`` sums them.
SLOT_BYTES = 900
STATE_BYTES = 1_900
TRANSITION_BYTES = 800
#: Each side and the suffix of its features and record keys.
SIDES = ((AL, "al"), (LR, "lr"))
#: Observation features set by the path (each side's latest signals, whether it is
#: measured, the previous action); every other feature is fixed by the state (i, j).
PATH_FEATURES = (*(f"{name}_{suffix}" for name in SIDE_SIGNAL_NAMES for _, suffix in SIDES),
                 *(f"{suffix}_measured" for _, suffix in SIDES),
                 *(f"prev_{suffix}" for _, suffix in SIDES))
#: A step's results: the next path state, observation, reward, terminated and the values
#: of ``info`` (in ``CellReplay.info_keys`` order; a tuple takes a third of a dict's memory).
_Entry = tuple[PathState, np.ndarray, float, bool, tuple[Any, ...]]


#: Part of a record: keys and values (numbers, strings, flags). The parts a cell makes are
#: plain dicts of these, not kept in tuples or named tuples: the garbage collector stops
#: tracking such a dict, and an entry made of numbers, strings and arrays, but tracks any
#: tuple holding a dict for good, and a cold replay makes tens of thousands of parts that
#: each full collection would walk again.
_Record = dict[str, Any]


def state_observations(lattice: Lattice, version: str = "v0") -> np.ndarray:
    """[i, j, feature]: every state's observation on no path (no side measured, no previous
    action), in one vectorised pass: ``observation.state_features``, ``v1_features`` and
    ``v2_features`` on the lattice's grid, elementwise (NaN where unreachable), so every
    feature equals ``encode``'s to the bit."""
    grid = SimpleNamespace(**lattice.grid)
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN at unreachable states
        features = {**state_features(grid), **v1_features(grid), **v2_features(grid)}
    names = check_version(version)
    missing = set(names) - set(features) - set(PATH_FEATURES)
    if missing:
        raise RuntimeError(f"state_observations lacks the feature(s) {sorted(missing)}")
    zeros = np.zeros_like(lattice.grid["test_cost"])  # the path's features, on no path
    table = np.stack([features.get(name, zeros) for name in names], axis=-1)
    return np.clip(table.astype(np.float32), 0.0, 1.0)


class CellReplay:
    """One lattice as a transition table: path state and action -> the step's results.

    A transition is computed on its first visit, then cached, from parts computed once
    each: at load, in vectorised passes over the lattice, every state's observation on no
    path (``state_observations``), every state's record values and each side's latest
    signals as the observation holds them; on first use, a state's record (``state``), and
    each side's record entries per AL round and per LR path state. ``_entry`` writes the
    path's parts (each side's latest signals, the previous action, the indices queried) over
    the state's, by position and key. ``reference_entry`` computes a transition the slow
    way, from the path state's whole snapshot, as the live environment does; the tests hold
    the two equal.
    """

    def __init__(self, lattice: Lattice, signal: SideSignal | CostSignal, shown: str,
                 version: str = "v0", growth: GrowthCounter | None = None) -> None:
        self.lattice = lattice
        self._growth = growth if growth is not None else GrowthCounter()
        self.signal, self.shown = signal, shown
        self._cost = signal if isinstance(signal, CostSignal) else None
        check_version(version)
        self.version = version  # of the observation (``observation.OBSERVATIONS``)
        grid = lattice.grid
        self.masks = np.stack([grid["al_available"] > 0.5, grid["lr_available"] > 0.5], axis=-1)
        self.per_round = lattice.settings.budget(int(grid["n_train"][0, 0]),
                                                 int(grid["n_val"][0, 0])).per_round
        self.transitions: dict[tuple[PathState, int], _Entry] = {}
        self.states: dict[tuple[int, int], _Record] = {}  # record on no path, by state
        self._state_figures: dict[tuple[int, int], SimpleNamespace] = {}  # cost rewards
        # the path's parts of the observation: each side's latest signals, then whether it
        # is measured (its table's row at its latest round), and the previous action
        self.observations = state_observations(lattice, version)
        self._slots = {side: _slot([ALL_FEATURE_INDEX[name] for name in _side_feature_names(side)])
                       for side, _ in SIDES}
        self._previous = [ALL_FEATURE_INDEX[f"prev_{suffix}"] for _, suffix in SIDES]
        self._al_obs = _side_observations(AL, lattice.al_reward)
        self._lr_obs = _side_observations(LR, lattice.lr_reward_from)
        # the path's parts of the record, and the states' (typed as the snapshot's fields)
        self._al_parts = [self._side_part(AL, None if i == 0 else
                                          {s: float(lattice.al_reward[s][i])
                                           for s in SIDE_SIGNAL_NAMES})
                          for i in range(lattice.n_rounds + 1)]
        self._lr_none = self._side_part(LR, None)
        self._lr_parts: dict[tuple[int, int, int], _Record] = {}
        # the reward of a side signal: the record entry of the side just measured
        self._reward_keys = [f"{signal.name}_{suffix}" for _, suffix in SIDES]
        columns = _typed_columns(lattice, FIGURE_TYPES if self._cost is not None
                                 else [key for key in RECORD_FIELDS if key in FIGURE_TYPES])
        self._figure_columns = columns if self._cost is not None else {}  # cost rewards
        on_no_path = {"dataset": lattice.dataset, "action": "", **self._al_parts[0],
                      **self._lr_none}
        n_states = grid["test_cost"].size
        self._records = list(zip(*(columns.get(key) or [on_no_path[key]] * n_states
                                   for key in RECORD_FIELDS), strict=True))
        self._info_masks = list(np.stack([grid["al_available"] != 0,  # bool(x), as the
                                          grid["lr_available"] != 0],  # snapshot's
                                         axis=-1).reshape(-1, 2))
        self._queried = {side: [np.empty(0, dtype=np.intp)] * (lattice.n_rounds + 1)
                         if table is None else list(table)  # rows: views of the lattice's
                         for side, table in ((AL, lattice.al_queried), (LR, lattice.lr_queried))}
        self.lattice_bytes = (sum(a.nbytes for a in lattice.to_arrays().values())
                              + self.observations.nbytes + self._lr_obs.nbytes
                              + SLOT_BYTES * n_states)
        snapshot = self.snapshot(START)
        info = snapshot.info(shown)
        self.info_keys = tuple(info)
        if self.info_keys != (*RECORD_FIELDS, "queried", "action_mask"):
            raise RuntimeError(f"info is not the record, queried and the mask: {self.info_keys}")
        self.start = (encode(snapshot, version), tuple(info.values()))

    @property
    def nbytes(self) -> int:
        """Estimated memory this cell holds (lattice and load-time tables, states,
        transitions)."""
        return (self.lattice_bytes + STATE_BYTES * len(self.states)
                + TRANSITION_BYTES * len(self.transitions))

    def latest(self, state: PathState) -> dict[int, dict[str, float] | None]:
        """Each side's latest side signals at this path state (``Snapshot.latest``)."""
        i, j, _, lr_i, lr_i0 = state
        lat = self.lattice
        latest: dict[int, dict[str, float] | None] = {AL: None, LR: None}
        if i > 0:
            latest[AL] = {s: float(lat.al_reward[s][i]) for s in SIDE_SIGNAL_NAMES}
        if j > 0:  # for j = 1 every i0 holds the same reward (against the initial output)
            latest[LR] = {s: float(lat.lr_reward_from[s][lr_i, j, max(lr_i0, 0)])
                          for s in SIDE_SIGNAL_NAMES}
        return latest

    def snapshot(self, state: PathState) -> Snapshot:
        """The live environment's snapshot at this path state."""
        i, j, previous = state[:3]
        action = None if previous < 0 else previous
        return self.lattice.snapshot(i, j, self.latest(state), action,
                                     self.lattice.queried(i, j, action))

    def state(self, i: int, j: int) -> _Record:
        """The record of (i, j) on no path (no side measured, no previous action), in
        ``Snapshot.record``'s order (cached)."""
        record = self.states.get((i, j))
        if record is None:
            self._growth.grown += STATE_BYTES
            record = self.states[(i, j)] = dict(zip(
                RECORD_FIELDS, self._records[i * (self.lattice.n_rounds + 1) + j], strict=True))
        return record

    def mask(self, i: int, j: int) -> np.ndarray:
        """The action mask of (i, j) as ``info`` holds it (the snapshot's; not to be changed)."""
        return self._info_masks[i * (self.lattice.n_rounds + 1) + j]

    def figures(self, i: int, j: int) -> SimpleNamespace:
        """The figures of (i, j) as the snapshot types them, what a ``CostSignal`` reads
        (cached; for a cost reward only)."""
        figures = self._state_figures.get((i, j))
        if figures is None:
            at = i * (self.lattice.n_rounds + 1) + j
            figures = self._state_figures[(i, j)] = SimpleNamespace(
                **{name: column[at] for name, column in self._figure_columns.items()})
        return figures

    def step(self, state: PathState, action: int) -> _Entry:
        """The step from ``state`` by ``action`` (computed once, then cached); the live
        episode's errors for a step after the end or on an exhausted pool."""
        entry = self.transitions.get((state, action))
        if entry is None:
            entry = self._entry(state, self.after(state, action))
            self.transitions[(state, action)] = entry
            self._growth.grown += TRANSITION_BYTES
        return entry

    def after(self, state: PathState, action: int) -> PathState:
        """The path state ``action`` leads to from ``state`` (the live episode's errors for
        a step after the end or on an exhausted pool)."""
        i, j, _, lr_i, lr_i0 = state
        if i + j >= self.lattice.n_rounds:
            raise RuntimeError("step() called after the episode ended: the label budget is "
                               "spent; call reset()")
        if not self.masks[i, j, action]:
            pool = "D (training)" if action == AL else "V (validation)"
            raise ValueError(f"action {ACTION_NAMES[action]} is unavailable: {pool} has fewer "
                             f"than {self.per_round} unlabeled examples left")
        return ((i + 1, j, AL, lr_i, lr_i0) if action == AL
                else (i, j + 1, LR, i, lr_i if j >= 1 else -1))

    def _side_part(self, side: int, signals: dict[str, float] | None) -> _Record:
        """A side's record entries, as ``Snapshot.record`` makes them (``side_record``)."""
        return side_record(side, signals, self.shown)

    def _lr_part(self, key: tuple[int, int, int]) -> _Record:
        """The LR side's record entries after j >= 1 LR rounds, the last at i = lr_i, the one
        before at i0 (``key`` = (lr_i, j, i0), any i0 for j = 1), made once."""
        rewards = self.lattice.lr_reward_from
        part = self._lr_parts[key] = self._side_part(
            LR, {s: float(rewards[s][key]) for s in SIDE_SIGNAL_NAMES})
        return part

    def _entry(self, state: PathState, after: PathState) -> _Entry:
        """The step into ``after``: the state's observation and record with the path's
        parts written over them (as ``encode`` and ``Snapshot.record`` set them)."""
        i, j, previous, lr_i, lr_i0 = after
        on_no_path = self.states.get((i, j)) or self.state(i, j)
        lr_key = (lr_i, j, max(lr_i0, 0))  # for j = 1 every i0 holds the same reward
        al = self._al_parts[i]
        lr = self._lr_none if j == 0 else self._lr_parts.get(lr_key) or self._lr_part(lr_key)
        record = on_no_path.copy()
        record.update(al)
        record.update(lr)
        record["action"] = ACTION_NAMES[previous]
        obs = self.observations[i, j].copy()  # on no path: the path's features 0
        if i:
            obs[self._slots[AL]] = self._al_obs[i]
        if j:
            obs[self._slots[LR]] = self._lr_obs[lr_key]
        obs[self._previous[previous]] = 1.0
        if self._cost is not None:  # a cost signal of the two states' figures
            reward = self._cost(self.figures(*state[:2]), self.figures(i, j))
        else:
            reward = float(record[self._reward_keys[previous]])  # the side just measured
        queried = self._queried[previous][i if previous == AL else j]
        return (after, obs, reward, i + j >= self.lattice.n_rounds,
                (*record.values(), queried, self.mask(i, j)))

    def reference_entry(self, state: PathState, after: PathState) -> _Entry:
        """The step into ``after`` from the two path states' whole snapshots, through the
        live environment's code (``encode``, ``Snapshot.info``, ``step_reward``)."""
        before_snapshot, after_snapshot = self.snapshot(state), self.snapshot(after)
        info = after_snapshot.info(self.shown)
        return (after, encode(after_snapshot, self.version),
                step_reward(self.signal, before_snapshot, after_snapshot),
                after[0] + after[1] >= self.lattice.n_rounds, tuple(info.values()))

    def info(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """``info`` from its cached values, its arrays copied: the caller may change it all,
        as the live environment's."""
        info = dict(zip(RECORD_FIELDS, values))  # noqa: B905 (the arrays follow the record)
        info["queried"] = values[-2].copy()
        info["action_mask"] = values[-1].copy()
        return info


def _side_feature_names(side: int) -> list[str]:
    """A side's features, in the order its observation table holds them."""
    return list(side_features(side, dict.fromkeys(SIDE_SIGNAL_NAMES, 0.0)))


def _side_observations(side: int, rewards: dict[str, np.ndarray]) -> np.ndarray:
    """[index of a side's reward table, features]: ``observation.side_features`` of the
    side once measured, elementwise on its reward tables (float32, clipped, as ``encode``)."""
    features = side_features(side, rewards)
    shape = rewards[SIDE_SIGNAL_NAMES[0]].shape
    table = np.stack([np.broadcast_to(np.asarray(features[name], dtype=np.float64), shape)
                      for name in _side_feature_names(side)], axis=-1)
    return np.clip(table.astype(np.float32), 0.0, 1.0)


def _typed_columns(lattice: Lattice, names: Iterable[str]) -> dict[str, list[Any]]:
    """These state figures over the states ([i * (k + 1) + j]) as the snapshot types them
    (``Lattice.snapshot``: ``int(x)``, ``bool(x)`` or ``float(x)``; 0 where unreachable)."""
    columns = {}
    for name in names:
        kind = FIGURE_TYPES[name]
        values = lattice.grid[name].reshape(-1)
        if kind is bool:
            values = values != 0
        elif kind is int:
            values = np.where(np.isnan(values), 0.0, values).astype(np.int64)
        columns[name] = values.tolist()
    return columns


def _slot(positions: list[int]) -> slice | list[int]:
    """``positions`` of an array as a slice if they are evenly spaced (writing through a
    slice is about twice as fast as through a list)."""
    steps = set(np.diff(positions).tolist()) or {1}
    if len(steps) == 1 and (step := steps.pop()) > 0:
        return slice(positions[0], positions[-1] + 1, step)
    return positions


class GrowthCounter:
    """Bytes of states and transitions cells have made since the cache last counted them
    (``ballad_env.replay.env.cell_replay``): cells sharing one counter report their growth
    without the cache walking every cell at each load."""

    grown = 0


__all__ = ["PATH_FEATURES", "START", "CellReplay", "GrowthCounter", "PathState",
           "state_observations"]
