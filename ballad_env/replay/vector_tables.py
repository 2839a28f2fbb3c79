"""The replay's tables for many cells at once, the cells each of N environments draws, and
the seeds and final entries of its resets (as gymnasium's vector environments hand them out).

``ReplayVectorEnv`` (``ballad_env.replay.vector``) steps N episodes with a few fancy-indexing
operations per step. For that, every cell (data set, seed) it may play is turned into
arrays once, when it is loaded, and stacked along a first axis (``ReplayTables``): what
the state (i, j) fixes (the observation on no path, the record's figures typed as the
snapshot types them, the masks), each side's latest signals as the observation and the
record hold them (per AL round i, per LR path (i of the last LR round, j, i of the one
before), as ``ballad_env.replay.env.CellReplay`` keys them), the indices each round labels,
and for a cost reward the reward of every move. ``CellDraws`` draws each environment's
cells from its own generator, in the stream of a single replay environment's resets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import numpy as np
from gymnasium.utils import seeding

from ballad_env.episode import AL, RECORD_FIELDS, STATE_FIGURES, Snapshot
from ballad_env.observation import ALL_FEATURE_INDEX, check_version
from ballad_env.replay.lattice import Lattice
from ballad_env.replay.transitions import state_observations
from ballad_env.rewards import SIDE_SIGNAL_NAMES, CostSignal, SideSignal

#: The type of each state figure as ``Lattice.snapshot`` converts it (``int``, ``bool``,
#: ``float``), and the dtype a vector of such values takes in ``info`` (as gymnasium's
#: ``VectorEnv._add_info`` makes it: ``np.zeros(n, dtype=type(value))``).
FIGURE_DTYPES = {f.name: {"int": np.dtype(int), "bool": np.dtype(bool)}.get(
    str(f.type), np.dtype(float)) for f in fields(Snapshot) if f.name in STATE_FIGURES}
#: The record's keys the state (i, j) fixes.
STATE_RECORD_FIELDS = tuple(key for key in RECORD_FIELDS if key in FIGURE_DTYPES)
#: Those keys grouped by dtype (each group one table).
FIGURE_GROUPS = {f"figures.{kind}": tuple(key for key in STATE_RECORD_FIELDS
                                          if FIGURE_DTYPES[key].str == kind)
                 for kind in dict.fromkeys(FIGURE_DTYPES[key].str for key in STATE_RECORD_FIELDS)}
#: Each side's columns of the observation: its latest signals, then whether it is measured
#: (the state table holds the AL side's, fixed by i; a step writes the LR side's).
SIDE_COLUMNS = {side: [*(ALL_FEATURE_INDEX[f"{name}_{suffix}"] for name in SIDE_SIGNAL_NAMES),
                       ALL_FEATURE_INDEX[f"{suffix}_measured"]]
                for side, suffix in ((AL, "al"), (1 - AL, "lr"))}
#: The previous action's two columns (AL, then LR), and their values by action + 1.
PREVIOUS_COLUMNS = slice(ALL_FEATURE_INDEX["prev_al"], ALL_FEATURE_INDEX["prev_al"] + 2)
PREVIOUS_VALUES = np.array([[0, 0], [1, 0], [0, 1]], dtype=np.float32)
if ALL_FEATURE_INDEX["prev_lr"] != ALL_FEATURE_INDEX["prev_al"] + 1:
    raise RuntimeError("prev_al and prev_lr are no longer neighbours in the observation")
#: Draws made at a time per environment (``CellDraws``).
DRAW_BLOCK = 256


class ReplayTables:
    """The tables of a list of cells, stacked; rows are added as cells are (``add``).

    With k rounds and K = k + 1, a state (c, i, j) of cell c is row ``(c * K + i) * K + j``
    of the state tables, an AL round ``c * K + i`` of the AL tables, an LR path (c, i of the
    last LR round, j, i of the one before) ``c * P + lr_index[(i * K + j) * K + i0]`` of
    the LR tables (i0 = 0 before the second LR round: every i0 holds the same reward then,
    as in ``CellReplay``), P = ``len(lr_paths)`` the paths an episode can take (``lr_paths``:
    a fifth of the K^3, so a step's gathers from these tables mostly hit the cache)."""

    def __init__(self, signal: SideSignal | CostSignal, shown: str, version: str) -> None:
        check_version(version)
        self.signal, self.shown, self.version = signal, shown, version
        self.cost = signal if isinstance(signal, CostSignal) else None
        self.n_rounds = -1
        self.lr_paths = self.lr_index = np.zeros(0, dtype=np.intp)
        self.index: dict[tuple[Any, ...], int] = {}  # a cell's key -> row c
        self.names: list[str] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.columns: dict[str, np.ndarray] = {}
        self._queried: dict[int, np.ndarray] = {}  # the queried table cut to each width

    def __len__(self) -> int:
        return len(self.names)

    def add(self, lattices: list[Lattice], keys: list[tuple[Any, ...]] | None = None) -> None:
        """Add these cells' tables (one concatenation per table, whatever their number),
        each under its key in ``index`` (default: its (data set, seed))."""
        parts: dict[str, list[np.ndarray]] = {}
        keys = keys or [(lattice.dataset, lattice.seed) for lattice in lattices]
        for lattice, key in zip(lattices, keys, strict=True):
            if self.n_rounds < 0:
                self.n_rounds = lattice.n_rounds
                self.lr_paths, self.lr_index = lr_paths(lattice.n_rounds)
            elif lattice.n_rounds != self.n_rounds:
                raise ValueError(f"cell {lattice.dataset} seed {lattice.seed} has "
                                 f"{lattice.n_rounds} rounds, the others {self.n_rounds}: "
                                 "a vector environment plays cells of one budget")
            self.index[key] = len(self.names)
            self.names.append(lattice.dataset)
            for name, part in self._cell_parts(lattice).items():
                parts.setdefault(name, []).append(part)
        if not parts:
            return
        old = self.arrays
        if old:
            parts = {name: [old[name], *new] for name, new in parts.items()}
        width = max(part.shape[-1] for part in parts["queried"])  # rows padded with -1
        parts["queried"] = [np.pad(q, ((0, 0), (0, width - q.shape[-1])), constant_values=-1)
                            for q in parts["queried"]]
        self.arrays = {name: np.concatenate(tables) for name, tables in parts.items()}
        self.arrays["dataset"] = np.array(self.names, dtype=object)
        #: The side signals, one row per signal, for the rewards' gathers.
        self.columns = {name: np.ascontiguousarray(self.arrays[name].T)
                        for name in ("al_signals", "lr_signals")}
        self._queried = {}

    def queried(self, width: int) -> np.ndarray:
        """The first ``width`` columns of the queried table, contiguous (made once per
        width: gathering rows of a contiguous table is several times faster than of a
        slice of a wider one)."""
        table = self._queried.get(width)
        if table is None:
            table = self._queried[width] = np.ascontiguousarray(
                self.arrays["queried"][:, :width])
        return table

    def _cell_parts(self, lattice: Lattice) -> dict[str, np.ndarray]:
        """One cell's rows of every table, flattened as the class docstring says."""
        k, grid = lattice.n_rounds, lattice.grid
        n_states = (k + 1) ** 2
        parts: dict[str, np.ndarray] = {
            "obs": state_observations(lattice, self.version).reshape(n_states, -1),
            "mask": np.stack([grid["al_available"] > 0.5, grid["lr_available"] > 0.5],
                             axis=-1).reshape(n_states, 2),  # as CellReplay.masks
            "info_mask": np.stack([grid["al_available"] != 0, grid["lr_available"] != 0],
                                  axis=-1).reshape(n_states, 2),  # bool(x), the snapshot's
        }
        for kind, names in FIGURE_GROUPS.items():  # [state, figure] per dtype
            parts[kind] = np.stack([typed(name, grid[name]).reshape(-1) for name in names],
                                   axis=-1)
        al = np.stack([lattice.al_reward[name] for name in SIDE_SIGNAL_NAMES], axis=-1,
                      dtype=float)
        lr = np.stack([lattice.lr_reward_from[name] for name in SIDE_SIGNAL_NAMES], axis=-1,
                      dtype=float)
        al[0], lr[:, 0] = 0.0, 0.0  # the record's values: float64, 0 before measured
        parts["al_signals"] = al
        parts["lr_signals"] = lr.reshape(-1, len(SIDE_SIGNAL_NAMES))[self.lr_paths]
        al_obs = _side_observations(parts["al_signals"], np.arange(k + 1) > 0)
        parts["obs"] = parts["obs"].reshape(k + 1, k + 1, -1)  # the AL side's, fixed by i
        parts["obs"][:, :, SIDE_COLUMNS[AL]] = al_obs[:, None, :]
        parts["obs"] = parts["obs"].reshape(n_states, -1)
        measured = self.lr_paths // (k + 1) % (k + 1) > 0  # j > 0
        parts["lr_obs"] = _side_observations(parts["lr_signals"], measured)
        empty = np.full((k + 1, 0), -1, dtype=np.intp)
        parts["queried"] = np.concatenate([  # AL rounds' rows, then LR rounds'
            empty if lattice.al_queried is None else lattice.al_queried,
            empty if lattice.lr_queried is None else lattice.lr_queried])
        parts["queried"][[0, k + 1]] = -1  # no round leads into i = 0 or j = 0: the start's
        if self.cost is not None:
            parts["cost_reward"] = self._cost_rewards(lattice)
        return parts

    def _cost_rewards(self, lattice: Lattice) -> np.ndarray:
        """[state, action]: the cost signal of every move, called on the two states' figures
        typed as the snapshot types them (``CellReplay.figures``); NaN where no move is."""
        assert self.cost is not None
        k = lattice.n_rounds
        columns = {name: typed(name, lattice.grid[name]).reshape(-1).tolist()
                   for name in FIGURE_DTYPES}
        figures = [SimpleNamespace(**{name: column[i * (k + 1) + j]
                                      for name, column in columns.items()})
                   for i in range(k + 1) for j in range(k + 1)]
        rewards = np.full((k + 1, k + 1, 2), np.nan)
        reachable = lattice.reachable
        for i in range(k + 1):
            for j in range(k + 1 - i):
                at = i * (k + 1) + j
                if i < k and reachable[i + 1, j]:
                    rewards[i, j, 0] = self.cost(figures[at], figures[at + k + 1])
                if j < k and reachable[i, j + 1]:
                    rewards[i, j, 1] = self.cost(figures[at], figures[at + 1])
        return rewards.reshape(-1, 2)


def lr_paths(k: int) -> tuple[np.ndarray, np.ndarray]:
    """The LR paths (i of the last LR round, j, i of the one before; 0 for none) an episode
    of k rounds can be on, as ``(i * K + j) * K + i0`` (K = k + 1): i0 <= i and i + j <= k;
    and the index of each of the K^3 in that list (0, the start's, for the others: the
    rewards of an AL move look one up and drop it)."""
    size = k + 1
    last, j, before = np.meshgrid(*[np.arange(size)] * 3, indexing="ij")
    paths = np.flatnonzero((before <= last) & (last + j <= k))
    index = np.zeros(size ** 3, dtype=np.intp)
    index[paths] = np.arange(paths.size)
    return paths, index


def typed(name: str, values: np.ndarray) -> np.ndarray:
    """Values of state figure ``name`` as the snapshot holds them (``Lattice.snapshot``):
    ``int(x)`` (0 where unreachable), ``bool(x)`` or ``float(x)``, in ``FIGURE_DTYPES``."""
    kind = FIGURE_DTYPES[name]
    if kind == np.dtype(bool):
        return values != 0
    if kind == np.dtype(int):
        return np.where(np.isnan(values), 0.0, values).astype(int)
    return values.astype(float)


def _side_observations(signals: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """[row, (signals..., measured)]: a side's latest signals as the observation holds them
    (float32, clipped to [0, 1], as ``encode``); 0 before the side is measured."""
    table = np.concatenate([signals, measured.astype(float)[:, None]], axis=-1)
    return np.clip(table.astype(np.float32), 0.0, 1.0)


class CellDraws:
    """Each environment's generator, and the cells it draws: environment e draws as a single
    replay environment reset with the same seed does (``integers(number of cells)`` per
    reset), in blocks of ``DRAW_BLOCK`` (a block of draws equals as many single draws)."""

    def __init__(self, n_envs: int, n_cells: int) -> None:
        self.n_cells = n_cells
        self.generators: list[np.random.Generator | None] = [None] * n_envs
        self._block = np.zeros((n_envs, DRAW_BLOCK), dtype=np.int64)
        self._used = np.full(n_envs, DRAW_BLOCK)  # draws taken from each block
        self._start: list[Any] = [None] * n_envs  # generator state before the block

    def seed(self, seeds: list[int | None]) -> None:
        """Seed environment e with ``seeds[e]`` (``seeding.np_random``, as
        ``gymnasium.Env.reset``); None keeps its generator (a fresh one if it has none)."""
        for e, seed in enumerate(seeds):
            if seed is not None or self.generators[e] is None:
                self.generators[e] = seeding.np_random(seed)[0]
                self._start[e], self._used[e] = None, DRAW_BLOCK

    def draw(self, envs: np.ndarray) -> np.ndarray:
        """One cell (a row of the cell list) for each of ``envs`` (distinct)."""
        for e in envs[self._used[envs] >= DRAW_BLOCK].tolist():
            generator = self._generator(e)
            self._start[e] = generator.bit_generator.state
            self._block[e] = generator.integers(self.n_cells, size=DRAW_BLOCK)
            self._used[e] = 0
        cells = self._block[envs, self._used[envs]]
        self._used[envs] += 1
        return cells

    def draw_among(self, env: int, n: int) -> int:
        """One draw among ``n`` cells (a reset with options): the generator is taken back to
        the draws used so far, so the stream is a single environment's."""
        self._rewind(env)
        return int(self._generator(env).integers(n))

    def _generator(self, env: int) -> np.random.Generator:
        generator = self.generators[env]
        if generator is None:
            generator = self.generators[env] = seeding.np_random(None)[0]
        return generator

    def _rewind(self, env: int) -> None:
        """Put environment ``env``'s generator where its single draws so far leave it."""
        start, generator = self._start[env], self.generators[env]
        if start is not None and generator is not None:
            generator.bit_generator.state = start
            generator.integers(self.n_cells, size=int(self._used[env]))
        self._start[env] = None
        self._used[env] = DRAW_BLOCK


def final_entries(obs: np.ndarray, info: dict[str, Any], ended: np.ndarray,
           n: int) -> dict[str, Any]:
    """``final_obs`` and ``final_info`` for the environments in ``ended``, as gymnasium's
    ``SyncVectorEnv`` adds them in same-step mode (None or 0 for the others)."""
    final_obs = np.full(n, None, dtype=object)
    for e in ended.tolist():
        final_obs[e] = obs[e]
    mask = np.zeros(n, dtype=bool)
    mask[ended] = True
    final_info: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_"):
            final_info[key] = mask.copy()
        elif value.dtype == object:
            final_info[key] = np.where(mask, value, None)
        else:
            final_info[key] = np.where(mask.reshape(-1, *[1] * (value.ndim - 1)), value,
                                       np.zeros((), value.dtype))
    return {"final_obs": final_obs, "_final_obs": mask.copy(), "final_info": final_info,
            "_final_info": mask.copy()}


def seed_list(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """Each environment's seed, as ``SyncVectorEnv.reset`` hands them out."""
    if seed is None:
        return [None] * n
    if isinstance(seed, int | np.integer):
        return [int(seed) + e for e in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"seed: give one int, or a list of num_envs={n} seeds; got "
                         f"{len(seeds)}")
    return seeds


__all__ = ["DRAW_BLOCK", "FIGURE_DTYPES", "FIGURE_GROUPS", "PREVIOUS_COLUMNS", "PREVIOUS_VALUES",
           "SIDE_COLUMNS", "STATE_RECORD_FIELDS", "CellDraws", "ReplayTables", "final_entries",
           "lr_paths", "seed_list", "typed"]
