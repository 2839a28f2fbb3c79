"""The replay environment: BALLAD's episodes played from stored lattices, with no detector.

Each stored cell (data set, seed) is played through its transition table
(``ballad_env.replay.transitions.CellReplay``: path states, and every step a table look-up,
equal to the live environment to the bit); this module holds the environment and the
process's cache of those tables.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ballad_env.env import (
    RESET_OPTIONS,
    as_action,
    check_options,
    check_render_mode,
    check_reset_options,
    check_unavailable_action,
    played_action,
    shown_signal,
)
from ballad_env.observation import check_version, observation_space
from ballad_env.replay.lattice import Lattice
from ballad_env.replay.store import LatticeStore, StoreError, read_header, setting_key
from ballad_env.replay.transitions import (
    PATH_FEATURES,
    START,
    CellReplay,
    GrowthCounter,
    PathState,
    state_observations,
)
from ballad_env.rewards import REWARD_SIGNALS
from ballad_env.settings import Settings
from ballad_env.snapshot import Snapshot, padded_queried
from ballad_env.snapshot import queried_width as snapshot_queried_width

#: Bytes of cells (lattice and transition table) kept per process, least recently used
#: dropped when a cell is loaded. A cell of 15 rounds holds about 0.35 MB once loaded
#: (lattice and the tables made at load), plus 1.1 to 1.9 kB per state and 0.8 kB per
#: transition visited (about 4 MB once all of its ~3,900 transitions have been). A cell
#: dropped is loaded again when drawn (about 2 ms) and its transitions recomputed; set it
#: (``ballad_env.replay.env.CACHE_BYTES = n``) to fit memory.
CACHE_BYTES = 2_000_000_000
#: Bytes of the Python values made at load per (i, j) of the grid (the states' record
#: values; the figures too for a cost-decrease reward), of one state's parts and of one
#: transition (with its share of the LR parts), measured with tracemalloc on a cell of 15
#: rounds (the larger of a side-signal and a cost reward); ``CellReplay.nbytes`` sums them.
SLOT_BYTES = 900
STATE_BYTES = 1_900
TRANSITION_BYTES = 800

_CELLS: OrderedDict[tuple[str, str, str, int, str, str], CellReplay] = OrderedDict()


class _KeptBytes(GrowthCounter):
    """What the cells kept hold, counted lazily: ``counted``, their ``nbytes`` at the last
    count and the cells loaded since, plus ``grown``, the states and transitions made since
    by any cell; an upper bound, so a load counts the cells again only when it may pass
    ``CACHE_BYTES`` (counting at every load would cost time in the number of cells)."""

    counted = 0


_KEPT = _KeptBytes()


def cell_replay(store: LatticeStore, dataset: str, seed: int, settings: Settings,
                key_of_settings: str | None = None, version: str = "v0") -> CellReplay:
    """The transition table of one stored cell for ``settings``' reward, shared by every
    replay environment of this process (the least recently used dropped when a load takes
    the cells over ``CACHE_BYTES``); ``key_of_settings`` is ``setting_key(settings)`` when
    the caller has it."""
    key = (str(store.root), key_of_settings or setting_key(settings), dataset, seed,
           settings.reward, version)
    cell = _CELLS.get(key)
    if cell is None:
        lattice = store.load(dataset, seed, settings)
        cell = CellReplay(lattice, REWARD_SIGNALS[settings.reward], shown_signal(settings),
                          version, _KEPT)
        if _KEPT.counted + _KEPT.grown + cell.nbytes > CACHE_BYTES:
            total = cell.nbytes + sum(other.nbytes for other in _CELLS.values())
            while _CELLS and total > CACHE_BYTES:
                total -= _CELLS.popitem(last=False)[1].nbytes
            _KEPT.counted, _KEPT.grown = total, 0
        else:
            _KEPT.counted += cell.nbytes
        _CELLS[key] = cell
    else:
        _CELLS.move_to_end(key)
    return cell



class BudgetAllocationReplayEnv(gym.Env):
    """BALLAD's allocation problem replayed from a lattice store (``ballad_env.replay.store``).

    ## Description
    The episodes of ``BudgetAllocationEnv`` (``help(ballad_env.BudgetAllocationEnv)``), read
    from lattices computed beforehand (``ballad-env lattices``, ``docs/REPLAY.md``): no
    detector runs, so a step is a table look-up, for training policies fast.

    ## Action Space, Observation Space, Rewards, Episode End
    As ``BudgetAllocationEnv``, to the bit, for the same (data set, seed, setting) and
    actions: ``Discrete(2)`` with ``action_masks()``; the same 18 features; every reward of
    ``REWARD_SIGNALS``; terminated after the budget's rounds, never truncated; the same
    ``info`` (test cost, FPR, FNR, rejection rate, AUC, rewards, tau, label counts, the
    indices queried, the mask), ``info["queried"]`` padded with -1 to ``queried_width`` as
    there (64, or the widest round of the store's data sets if wider; a reset's is all -1),
    so that Gymnasium's vector envs can stack it. Stepping after the end or on an exhausted
    pool raises the live environment's errors.

    ## Starting State
    Each reset draws a stored cell (data set, seed) with the environment's generator
    (``reset(seed=...)`` seeds it) and starts at its state (0, 0).

    ## Arguments

    | argument | default | meaning |
    |---|---|---|
    | store | (required) | folder built by ``ballad-env lattices`` |
    | datasets | every one stored | the data sets to draw from (names) |
    | seeds | every one stored | the episode seeds to draw from |
    | settings | ``Settings()`` | the episode's options; any reward works with any store |
    | render_mode | ``None`` | ``"rgb_array"`` (the lattice's costs and the path) or ``"ansi"`` |
    | observation | ``"v0"`` | observation version, as the live environment's |
    | queried_width | ``None`` | width of ``info["queried"]``, as the live environment's |
    | unavailable_action | ``"raise"`` | an exhausted pool's action, as the live one's |
    | any ``Settings`` field | from ``settings`` | overrides it, e.g. ``reward="cost"`` |

    ``reset(options={"dataset": ..., "seed": ...})`` draws among the stored cells of these
    data sets and seeds instead (a name or seed, or a list of them).

    ## Version History
    * v0: initial version.
    * v0, ``info["queried"]`` at least 64 wide (``queried_width``; it was the store's widest
      round) and ``unavailable_action``: observation, rewards and episodes unchanged, so
      the id keeps its version.
    """

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 2}

    def __init__(self, store: str | os.PathLike | LatticeStore, *,
                 datasets: Sequence[str] | str | None = None, seeds: Sequence[int] | None = None,
                 settings: Settings | None = None, render_mode: str | None = None,
                 observation: str = "v0", queried_width: int | None = None,
                 unavailable_action: str = "raise", **options: Any) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        check_options(type(self), options, "store, datasets, seeds, settings, render_mode, "
                      "observation, queried_width, unavailable_action")
        #: What an action whose pool is exhausted does, as the live environment's.
        self.unavailable_action = check_unavailable_action(unavailable_action)
        self.settings = (settings or Settings()).replace(**options)
        self._setting_key = setting_key(self.settings)
        self.store = store if isinstance(store, LatticeStore) else LatticeStore(store)
        self._stored = self.store.cells(self.settings)
        if not self._stored:
            raise StoreError(f"the store {self.store.root} holds no lattice for the setting "
                             f"{self._setting_key}: build them with "
                             "ballad-env lattices")
        self.cells = self._select(datasets, seeds)
        #: The width of ``info["queried"]`` (``snapshot.queried_width``, the widest round
        #: of the store's data sets of this setting), shorter rounds and resets padded with
        #: -1, as the live environment's, so that Gymnasium's vector envs, which stack every
        #: ``info`` entry, work over data sets of any sizes.
        self.queried_width = snapshot_queried_width(self._widest_round(), queried_width)
        self.reward_signal = REWARD_SIGNALS[self.settings.reward]
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(2)
        #: Feature names of the observation, in order.
        self.feature_names = check_version(observation)
        self.observation_version = observation
        self.observation_space = observation_space(observation)
        self._cell: CellReplay | None = None
        self._state: PathState = START
        self._path: list[PathState] = []  # this episode's path states, for render()

    @property
    def reward_name(self) -> str:
        """The reward this environment gives (``settings.reward``)."""
        return self.settings.reward

    @property
    def lattice(self) -> Lattice | None:
        """The lattice of the episode being played (``None`` before the first reset)."""
        return None if self._cell is None else self._cell.lattice

    def _select(self, datasets: Sequence[str] | str | None, seeds: Any
                ) -> tuple[tuple[str, int], ...]:
        """The stored cells of these data sets (names, any case) and seeds; an error naming
        what the store holds if none is."""
        cells = self._stored
        if datasets is not None:
            wanted = [datasets] if isinstance(datasets, str) else list(datasets)
            names = {d.lower(): d for d, _ in cells}
            missing = [d for d in wanted if str(d).lower() not in names]
            if missing:
                raise StoreError(f"the store {self.store.root} has no lattice of "
                                 f"{', '.join(map(str, missing))} under setting "
                                 f"{self._setting_key}: it holds "
                                 f"{', '.join(sorted(set(names.values())))}")
            keep = {names[str(d).lower()] for d in wanted}
            cells = [c for c in cells if c[0] in keep]
        if seeds is not None:
            chosen = {int(s) for s in np.atleast_1d(np.asarray(seeds))}
            self._check_seeds(cells, chosen)
            cells = [c for c in cells if c[1] in chosen]
        return tuple(cells)

    def _check_seeds(self, cells: Sequence[tuple[str, int]], chosen: set[int]) -> None:
        """A ``StoreError`` unless every data set selected holds every seed asked for, listing
        the seeds stored (asking for ``range(50)`` of a store of seeds 0-2 would otherwise
        play 3 seeds)."""
        stored: dict[str, set[int]] = {}
        for name, seed in cells:
            stored.setdefault(name, set()).add(seed)
        short = {name: sorted(chosen - held) for name, held in stored.items() if chosen - held}
        if short:
            listing = "; ".join(f"{name} lacks {_seed_text(missing)} (holds "
                                f"{_seed_text(sorted(stored[name]))})"
                                for name, missing in sorted(short.items()))
            raise StoreError(f"the store {self.store.root} does not hold every seed asked for "
                             f"under setting {self._setting_key}: {listing}. Ask for stored "
                             "seeds, or build the others (ballad-env lattices)")

    # ----------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on a cell drawn with the environment's generator."""
        super().reset(seed=seed)
        cells = self.cells
        options = check_reset_options(options)  # the live environment's keys and check
        if options:
            cells = self._select(options.get("dataset"), options.get("seed"))
        dataset, cell_seed = cells[int(self.np_random.integers(len(cells)))]
        self._cell = cell_replay(self.store, dataset, cell_seed, self.settings,
                                 self._setting_key, self.observation_version)
        self._state = START
        obs, info = self._cell.start
        self._path = [START]
        return obs.copy(), self._padded(self._cell.info(info), False)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Spend one round of labels on AL (0) or LR (1): one look-up in the cell's table."""
        if self._cell is None:
            raise RuntimeError("call reset() before step()")
        cell = self._cell
        action, replaced = played_action(as_action(action), self.action_masks(),
                                         self.unavailable_action)
        self._state, obs, reward, terminated, info = cell.step(self._state, action)
        self._path.append(self._state)
        return obs.copy(), reward, terminated, False, self._padded(cell.info(info), replaced)

    def _padded(self, info: dict[str, Any], replaced: bool) -> dict[str, Any]:
        """``info`` with ``queried`` padded with -1 to :attr:`queried_width`, and
        ``action_replaced`` under ``unavailable_action="other"``, as the live one's."""
        info["queried"] = padded_queried(info["queried"], self.queried_width)
        if self.unavailable_action == "other":
            info["action_replaced"] = replaced
        return info

    def _widest_round(self) -> int:
        """The most labels a round buys among the stored data sets of this setting (read
        from one lattice header each: a round's size depends on the data set, not the
        seed)."""
        first: dict[str, int] = {}
        for name, seed in self._stored:
            first.setdefault(name, seed)
        widths = [0]
        for name, seed in first.items():
            layout = read_header(self.store.path(name, seed, self.settings))["arrays"]
            widths += [int(shape[1]) for array, _, shape, _ in layout
                       if array in ("al_queried", "lr_queried") and len(shape) == 2]
        return max(widths)

    def snapshot(self) -> Snapshot:
        """The current state as a frozen record (as ``BudgetAllocationEnv.snapshot``)."""
        if self._cell is None:
            raise RuntimeError("call reset() before snapshot()")
        return self._cell.snapshot(self._state)

    def action_masks(self) -> np.ndarray:
        """Valid actions (AL, LR) now, for sb3-contrib's MaskablePPO."""
        if self._cell is None:
            return np.ones(2, dtype=bool)
        i, j = self._state[:2]
        return self._cell.masks[i, j].copy()

    def render(self) -> np.ndarray | str | None:
        """The lattice's test costs with the path so far, and the rounds (``"rgb_array"``),
        or a line of text (``"ansi"``)."""
        if self.render_mode is None or self._cell is None:
            return None
        from ballad_env import render

        if self.render_mode == "ansi":
            return render.ansi(self.snapshot())
        cell = self._cell
        history = [cell.snapshot(state) for state in self._path]
        return render.lattice_rgb_array(cell.lattice.cost, history,
                                        cell.lattice.n_rounds * cell.per_round)


def _seed_text(seeds: Sequence[int]) -> str:
    """Seeds as runs: ``0-2, 5, 7-9`` (a listing of 50 seeds stays short)."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


__all__ = ["CACHE_BYTES", "PATH_FEATURES", "RESET_OPTIONS", "START", "BudgetAllocationReplayEnv",
           "CellReplay", "PathState", "cell_replay", "state_observations"]
