"""The replay environment vectorised natively: N episodes stepped at once in numpy.

``gymnasium.make_vec("ballad_env/BudgetAllocationReplay-v0", num_envs=N, store=...)``
(``vectorization_mode="vector_entry_point"``, the default for this id) returns a
``ReplayVectorEnv``: the same observations, rewards, terminations, truncations, masks and
``info`` as ``SyncVectorEnv`` over N ``BudgetAllocationReplayEnv`` with the same seeds and
autoreset mode, but a step is a few fancy-indexing operations over N environments
(``ballad_env.replay.vector_tables``), not N Python steps. ``docs/REPLAY.md`` ("Many
episodes at once") says when to use it and how fast it is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ballad_env.env import check_reset_options, shown_signal
from ballad_env.episode import ACTION_NAMES, AL, LR, RECORD_FIELDS
from ballad_env.replay.store import LatticeStore
from ballad_env.replay.vector_cells import CellKey, VectorCells
from ballad_env.replay.vector_tables import (
    FIGURE_GROUPS,
    PREVIOUS_COLUMNS,
    PREVIOUS_VALUES,
    SIDE_COLUMNS,
    CellDraws,
    ReplayTables,
    final_entries,
    seed_list,
)
from ballad_env.rewards import SIDE_SIGNAL_NAMES
from ballad_env.settings import Settings

#: The keys of a replay environment's ``info``, in order.
INFO_KEYS = (*RECORD_FIELDS, "queried", "action_mask")
#: The autoreset modes ``ReplayVectorEnv`` plays (gymnasium's ``SyncVectorEnv`` default first).
AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)
_ACTION_TEXT = np.array(["", *ACTION_NAMES], dtype=object)  # by previous action + 1


class ReplayVectorEnv(VectorEnv):
    """N replay episodes (``BudgetAllocationReplayEnv``) stepped together in numpy.

    Arguments: ``num_envs``, then those of ``BudgetAllocationReplayEnv`` (``store``,
    ``datasets``, ``seeds``, ``settings``, ``observation``, any ``Settings`` field), and:

    - ``cells``: mixed cells, a list of (data set, seed, ``Settings``) in place of
      ``datasets``, ``seeds`` and ``settings``: each sub-environment draws among them and
      plays each under its own settings (its costs, budget share and traits: rewards and
      observation v2 are the cell's own; ``ballad_env.replay.vector_cells``). The cells
      must share a number of rounds and a reward (``reward=...`` sets it for all); the
      ``settings`` attribute is then None, as for any vector environment whose
      sub-environments differ.

    - ``autoreset_mode``: ``AutoresetMode.NEXT_STEP`` (the default, as gymnasium's vector
      environments: the step after an episode's last returns the next episode's first
      observation, reward 0, and ignores that environment's action) or
      ``AutoresetMode.SAME_STEP`` (the last step returns the next episode's first
      observation, the last one in ``info["final_obs"]`` and its ``info`` in
      ``info["final_info"]``; what stable-baselines3 expects). Declared in
      ``metadata["autoreset_mode"]``. The names ``"next_step"``, ``"same_step"`` work too.
    - ``info_keys``: the ``info`` keys to build (default: all of ``INFO_KEYS``); ``()`` for
      none, the fastest. Each key k comes with its mask ``_k``, as in gymnasium.

    Environment e draws its cells as a single replay environment reset with seed s + e
    does (``reset(seed=s)``; a list gives each its own), each autoreset drawing the next
    cell from its generator. ``info["queried"]`` is an (N, m) array, m the single
    environment's ``queried_width`` (shorter rows, and the first state's, padded with -1),
    as each single environment pads it; it equals ``SyncVectorEnv``'s.
    Rendering is the single environment's: this one has no render mode.

    Example, on ``store``, a lattice store of the kNN prior (``ballad-env lattices``):

    >>> import gymnasium as gym
    >>> import numpy as np
    >>> import ballad_env
    >>> envs = gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=4, store=store, prior="knn",
    ...                     vectorization_mode="vector_entry_point")
    >>> type(envs.unwrapped).__name__
    'ReplayVectorEnv'
    >>> obs, info = envs.reset(seed=0)
    >>> obs.shape, envs.unwrapped.action_masks().shape
    ((4, 18), (4, 2))
    >>> obs, rewards, terminated, truncated, info = envs.step(np.ones(4, dtype=int))
    >>> rewards.shape, info["round"], bool(terminated.any()), bool(truncated.any())
    ((4,), array([1, 1, 1, 1]), False, False)

    Mixed cells: the stored cells of two cost levels (``store`` holds both), the
    sub-environments' episodes at either, each cell's costs in its observation (v2's
    ``cost_ratio``):

    >>> from ballad_env import Settings
    >>> from ballad_env.observation import ALL_FEATURE_INDEX
    >>> from ballad_env.replay.store import LatticeStore
    >>> levels = [Settings(prior="knn"), Settings(prior="knn", c_fn=10.0)]
    >>> cells = [(d, s, level) for level in levels
    ...          for d, s in LatticeStore(store).cells(level)]
    >>> envs = ReplayVectorEnv(4, store, cells=cells, observation="v2")
    >>> obs, info = envs.reset(seed=0)
    >>> envs.settings is None, sorted(set(obs[:, ALL_FEATURE_INDEX["cost_ratio"]].tolist()))
    (True, [0.5, 0.75])
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int, store: str | os.PathLike | LatticeStore, *,
                 datasets: Sequence[str] | str | None = None,
                 seeds: Sequence[int] | None = None, settings: Settings | None = None,
                 observation: str = "v0", autoreset_mode: AutoresetMode | str =
                 AutoresetMode.NEXT_STEP, info_keys: Sequence[str] | None = None,
                 render_mode: str | None = None,
                 cells: Sequence[tuple[str, int, Settings]] | None = None,
                 **options: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) \
                or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError(f"ReplayVectorEnv does not render (render_mode={render_mode!r}): "
                             "render a single BudgetAllocationReplayEnv instead")
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.info_keys = _info_keys(info_keys)
        store = store if isinstance(store, LatticeStore) else LatticeStore(store)
        #: The cells played and each one's settings (one setting, or mixed ``cells``).
        self.cell_set = VectorCells(store, datasets, seeds, settings, observation, cells,
                                    options)
        #: A single replay environment of these arguments (of the first setting if mixed):
        #: its spaces, reward signal and, for one setting, its cells and settings.
        self.single = self.cell_set.single
        if self.single.unavailable_action != "raise":
            raise ValueError("ReplayVectorEnv refuses exhausted pools' actions: leave "
                             "unavailable_action at 'raise' and mask them (action_masks()), "
                             "or use gymnasium's SyncVectorEnv over the single environment")
        self.num_envs = int(num_envs)
        #: The settings every sub-environment plays (None for mixed cells).
        self.settings: Settings | None = None if cells is not None else self.single.settings
        self.store = self.single.store
        #: The cells drawn: (data set, seed), or (data set, seed, setting name) if mixed.
        self.cells = self.cell_set.keys
        self.single_observation_space = self.single.observation_space
        self.single_action_space = self.single.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.tables = ReplayTables(self.single.reward_signal,
                                   shown_signal(self.single.settings), observation)
        self._k1 = 0  # rounds + 1, set by the first load
        self._load(self.cells)
        self._cell_rows = np.array([self.tables.index[c] for c in self.cells])
        self._draws = CellDraws(self.num_envs, len(self.cells))
        n = self.num_envs  # each environment's path state, as CellReplay's PathState
        self._cell, self._i, self._j = (np.zeros(n, dtype=np.intp) for _ in range(3))
        self._prev = np.full(n, -1, dtype=np.intp)
        self._last, self._before = np.zeros(n, dtype=np.intp), np.zeros(n, dtype=np.intp)
        self._autoreset = np.zeros(n, dtype=bool)
        self._now: dict[str, np.ndarray] | None = None  # _rows() of the states now
        self._started = False
        self._plan_info()
        self._lr_columns = _as_slice(SIDE_COLUMNS[LR])

    def _load(self, cells: Sequence[CellKey]) -> None:
        """Add the tables of these cells, those not loaded yet."""
        new = [c for c in dict.fromkeys(cells) if c not in self.tables.index]
        if new:
            self.tables.add(self.cell_set.load(self.store, new), new)
            self._k1 = self.tables.n_rounds + 1
            self._now = None

    # ----------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode in every environment: environment e draws its cell with its
        generator, seeded with ``seed + e`` (or ``seed[e]``); ``options`` as the single
        environment's (``dataset``, ``seed``), for every environment."""
        seeds = seed_list(seed, self.num_envs)
        self._draws.seed(seeds)
        envs = np.arange(self.num_envs)
        options = check_reset_options(options)  # the single environment's keys and check
        if options:
            chosen = self.cell_set.chosen(self.store, options)
            self._load(chosen)
            drawn = [self.tables.index[chosen[self._draws.draw_among(e, len(chosen))]]
                     for e in envs.tolist()]
            self._start(envs, np.array(drawn, dtype=np.intp))
        else:
            self._start(envs, self._cell_rows[self._draws.draw(envs)])
        self._autoreset[:] = False
        self._started = True
        rows = self._rows()
        return self._observe(rows), self._info(rows)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                          dict[str, Any]]:
        """One round in every environment (0 AL, 1 LR each); episodes that ended restart as
        ``metadata["autoreset_mode"]`` says."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        action = self._check_actions(actions)
        # Every environment steps (an ended episode restarts before it can step again),
        # or, the step after episodes ended in next-step mode, all but those restarting.
        stepping: Any = slice(None)
        if self.autoreset_mode is AutoresetMode.NEXT_STEP and self._autoreset.any():
            restart = np.flatnonzero(self._autoreset)
            stepping = np.flatnonzero(~self._autoreset)
            costs = self._advance(stepping, action[stepping]) if stepping.size else None
            self._start(restart, self._cell_rows[self._draws.draw(restart)])
        else:
            costs = self._advance(stepping, action)
        terminated = self._i + self._j >= self.tables.n_rounds
        truncated = np.zeros(self.num_envs, dtype=bool)
        rows = self._rows()
        rewards = self._rewards(rows, stepping, action[stepping], costs)
        obs, info = self._observe(rows), self._info(rows)
        if self.autoreset_mode is AutoresetMode.SAME_STEP and terminated.any():
            ended = np.flatnonzero(terminated)
            info.update(final_entries(obs, info, ended, self.num_envs))
            self._start(ended, self._cell_rows[self._draws.draw(ended)])
            rows = self._rows()
            obs, info = self._observe(rows), {**info, **self._info(rows)}
        else:
            self._autoreset = terminated.copy()
        return obs, rewards, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """(N, 2) boolean: the valid actions (AL, LR) of each environment now (none once its
        episode has ended), for sb3-contrib's MaskablePPO."""
        if not self._started:
            return np.ones((self.num_envs, 2), dtype=bool)
        return self.tables.arrays["mask"].take(self._state_rows(), axis=0)

    def playing(self) -> list[CellKey]:
        """The cell each environment plays now, as ``cells`` names it."""
        keys = list(self.tables.index)  # in the order of the tables' rows
        return [keys[c] for c in self._cell.tolist()]

    def close_extras(self, **kwargs: Any) -> None:
        """Nothing to release: the tables are arrays."""

    # ----------------------------------------------------------------- stepping
    def _check_actions(self, actions: Any) -> np.ndarray:
        """The actions as an (N,) integer array; an error naming the problem otherwise."""
        action = np.asarray(actions)
        if action.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), one 0 (AL) or 1 "
                             f"(LR) per environment; got shape {action.shape}")
        if action.dtype.kind not in "iub":
            rounded = action.astype(np.int64)
            if not np.array_equal(rounded, action):
                raise ValueError(f"invalid actions {action!r}: use 0 (AL) or 1 (LR)")
            action = rounded
        action = action.astype(np.intp, copy=False)
        if action.min() < min(AL, LR) or action.max() > max(AL, LR):
            raise ValueError(f"invalid actions {action!r}: use 0 (AL) or 1 (LR)")
        return action

    def _advance(self, envs: Any, action: np.ndarray) -> np.ndarray | None:
        """Take ``action`` in ``envs`` (an index array or every one): move their path states
        (as ``CellReplay.after``); return the rewards of a cost signal (None for a side
        signal: ``_rewards`` reads them at the new states)."""
        tables = self.tables
        i, j, last = self._i[envs], self._j[envs], self._last[envs]
        moves = self._state_rows()[envs] * 2 + action  # rows of the [state, action] tables
        self._now = None
        allowed = tables.arrays["mask"].reshape(-1).take(moves)
        if not allowed.all():
            bad = np.flatnonzero(~allowed)
            raise ValueError(f"action(s) unavailable in environment(s) {bad.tolist()}: their "
                             "pool has fewer unlabeled examples than a round; pass "
                             "action_masks() to the policy")
        al = action == AL
        rewards = None if tables.cost is None else \
            tables.arrays["cost_reward"].reshape(-1).take(moves)
        lr, before = ~al, self._before[envs]  # every environment (a slice): views, moved
        np.copyto(before, last, where=lr)       # in place; an index array: copies
        np.copyto(last, i, where=lr)
        i += al
        j += lr
        if not isinstance(envs, slice):
            self._before[envs], self._last[envs], self._i[envs], self._j[envs] = \
                before, last, i, j
        self._prev[envs] = action
        return rewards

    def _rewards(self, rows: dict[str, np.ndarray], envs: Any, action: np.ndarray,
                 costs: np.ndarray | None) -> np.ndarray:
        """The rewards, 0 but in ``envs`` (those that took ``action``): the cost signal's
        (``costs``), or the side signal the round just measured as the record holds it,
        read at the new state: its AL round's (into the new i) or its LR path's (the new
        one: this round's i, the new j, the previous LR round's i)."""
        values = costs
        if self.tables.cost is None:
            column = SIDE_SIGNAL_NAMES.index(self.tables.signal.name)
            columns = self.tables.columns
            values = np.where(action == AL, columns["al_signals"][column].take(rows["al"][envs]),
                              columns["lr_signals"][column].take(rows["lr"][envs]))
        if isinstance(envs, slice) and values is not None:
            return values
        rewards = np.zeros(self.num_envs)
        if values is not None:
            rewards[envs] = values
        return rewards

    def _start(self, envs: np.ndarray, cells: np.ndarray) -> None:
        """Put ``envs`` at the first state (0, 0) of these cells (rows of the tables)."""
        self._cell[envs] = cells
        self._now = None
        self._i[envs] = self._j[envs] = 0
        self._prev[envs] = -1
        self._last[envs] = self._before[envs] = 0  # none yet: 0, as the LR tables key it
        self._autoreset[envs] = False

    def _state_rows(self) -> np.ndarray:
        """Each environment's state row (c, i, j) of the tables."""
        if self._now is not None:
            return self._now["state"]
        return (self._cell * self._k1 + self._i) * self._k1 + self._j

    def _rows(self) -> dict[str, np.ndarray]:
        """Each environment's rows of the tables: its state (c, i, j), its AL round (c, i)
        and its LR path (c, i of the last LR round, j, i of the one before)."""
        k1, cell, tables = self._k1, self._cell, self.tables
        al = cell * k1 + self._i
        lr = cell * len(tables.lr_paths) + tables.lr_index.take(
            (self._last * k1 + self._j) * k1 + self._before)
        self._now = {"state": al * k1 + self._j, "al": al, "lr": lr}
        return self._now

    def _observe(self, rows: dict[str, np.ndarray]) -> np.ndarray:
        """The observations: each state's, with the path's features written over it."""
        tables = self.tables.arrays
        obs = tables["obs"].take(rows["state"], axis=0)  # the AL side's features included
        obs[:, self._lr_columns] = tables["lr_obs"].take(rows["lr"], axis=0)
        obs[:, PREVIOUS_COLUMNS] = PREVIOUS_VALUES.take(self._prev + 1, axis=0)
        return obs

    def _info(self, rows: dict[str, np.ndarray]) -> dict[str, Any]:
        """``info`` as gymnasium's vector environments hold it: per key an array over the
        environments (the type of the single environment's values) and its mask ``_key``:
        one gather per table, the keys its columns."""
        if not self.info_keys:
            return {}
        arrays = self.tables.arrays
        # [column, environment]: each key's array a column of its table's gathered rows (a
        # strided view: no copy per key)
        gathered = {table: arrays[table].take(rows[row], axis=0).T
                    for table, row in self._gathers}
        masks = np.ones((len(self.info_keys), self.num_envs), dtype=bool)
        info: dict[str, Any] = {}
        for n, (key, (table, column)) in enumerate(zip(self.info_keys, self._sources,
                                                       strict=True)):
            if table:
                value = gathered[table][column]
            elif key == "dataset":
                value = arrays["dataset"].take(self._cell)
            elif key == "action":
                value = _ACTION_TEXT.take(self._prev + 1)
            elif key in ("al_measured", "lr_measured"):
                value = (self._i if key == "al_measured" else self._j) > 0
            elif key == "queried":
                value = self._queried()
            else:  # action_mask
                value = arrays["info_mask"].take(rows["state"], axis=0)
            info[key], info[f"_{key}"] = value, masks[n]
        return info

    def _plan_info(self) -> None:
        """Where each ``info`` key comes from: (table of ``ReplayTables.arrays``, column) or
        ("", 0) for the keys made otherwise; and the gathers a step needs."""
        shown = SIDE_SIGNAL_NAMES.index(self.tables.shown)
        sources: list[tuple[str, int]] = []
        for key in self.info_keys:
            group = [(kind, names.index(key)) for kind, names in FIGURE_GROUPS.items()
                     if key in names]
            name, _, side = key.rpartition("_")
            if group:
                sources.append(group[0])
            elif side in ("al", "lr") and (name == "reward" or name in SIDE_SIGNAL_NAMES):
                sources.append((f"{side}_signals", shown if name == "reward"
                                else SIDE_SIGNAL_NAMES.index(name)))
            else:
                sources.append(("", 0))
        self._sources = sources
        tables = dict.fromkeys(table for table, _ in sources if table)
        self._gathers = [(table, "state" if table.startswith("figures") else table[:2])
                         for table in tables]

    def _queried(self) -> np.ndarray:
        """(N, m): the indices each environment's last round labeled, padded with -1 (the
        tables' rows into i = 0 and j = 0, read at the start, are all -1)."""
        k1 = self._k1
        rows = self._cell * (2 * k1) + np.where(self._prev == AL, self._i, self._j + k1)
        width = self.cell_set.queried_width  # the store's widest round, as a single env's
        held = min(width, int(self.tables.arrays["queried"].shape[1]))
        queried = self.tables.queried(held).take(rows, axis=0)
        if held < width:  # no cell loaded yet has the widest round
            queried = np.pad(queried, ((0, 0), (0, width - held)), constant_values=-1)
        return queried


def _as_slice(positions: list[int]) -> slice | list[int]:
    """Columns as a slice where evenly spaced (writing through one is several times faster
    than through a list of positions)."""
    steps = set(np.diff(positions).tolist())
    if len(steps) == 1 and (step := steps.pop()) > 0:
        return slice(positions[0], positions[-1] + 1, step)
    return positions


def _autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """The mode named, one of ``AUTORESET_MODES``; an error naming them otherwise."""
    names = {m.name.lower(): m for m in AUTORESET_MODES}
    names.update({m.value: m for m in AUTORESET_MODES})
    chosen = mode if isinstance(mode, AutoresetMode) else names.get(str(mode).lower(),
                                                                     names.get(str(mode)))
    if chosen not in AUTORESET_MODES:
        raise ValueError(f"unsupported autoreset_mode {mode!r}: use AutoresetMode.NEXT_STEP "
                         "or AutoresetMode.SAME_STEP")
    return chosen


def _info_keys(keys: Sequence[str] | None) -> tuple[str, ...]:
    """The ``info`` keys asked for (all if None), in ``INFO_KEYS`` order."""
    if keys is None:
        return INFO_KEYS
    wanted = [keys] if isinstance(keys, str) else list(keys)
    unknown = sorted(set(wanted) - set(INFO_KEYS))
    if unknown:
        raise ValueError(f"unknown info key(s) {', '.join(unknown)}: use some of "
                         f"{', '.join(INFO_KEYS)}")
    return tuple(key for key in INFO_KEYS if key in wanted)


__all__ = ["AUTORESET_MODES", "INFO_KEYS", "ReplayVectorEnv"]
