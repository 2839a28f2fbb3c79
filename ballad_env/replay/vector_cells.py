"""The cells a ``ReplayVectorEnv`` plays: those of one setting, or mixed cells at their own.

By default every sub-environment draws among the stored cells (data set, seed) of the one
setting the environment is made with (``datasets``, ``seeds``, ``settings``), as a single
``BudgetAllocationReplayEnv`` does. With ``cells``, a list of (data set, seed, ``Settings``),
each cell is played under its own settings (costs, budget share, detector: whatever its
lattice was built with), so one policy trains on sub-environments that play different
tasks at different costs; observation v2 carries each cell's costs and label-free traits
(its lattice holds them, so replay stays exact). ``VectorCells`` resolves either form once:
the cells' keys in the order drawn, each key's settings, a single environment of the first
setting (spaces, reward signal) and the ``info["queried"]`` width that fits every cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.replay.lattice import Lattice
from ballad_env.replay.store import LatticeStore, StoreError, setting_key
from ballad_env.settings import Settings

#: A cell's key in the vector environment's tables: (data set, seed) for the cells of one
#: setting, (data set, seed, setting name) for mixed cells.
CellKey = tuple[Any, ...]


class VectorCells:
    """The cells of a vector replay environment and their settings (the module docstring).

    ``options`` (any ``Settings`` field, ``queried_width``, ``unavailable_action``) apply to
    every cell, mixed or not; mixed cells must share one reward (the vector environment
    steps one reward signal), and ``datasets``, ``seeds`` and ``settings`` are refused with
    them (each cell names its own)."""

    def __init__(self, store: LatticeStore, datasets: Sequence[str] | str | None,
                 seeds: Sequence[int] | None, settings: Settings | None, observation: str,
                 cells: Sequence[tuple[str, int, Settings]] | None,
                 options: dict[str, Any]) -> None:
        self.mixed = cells is not None
        if cells is None:
            self.single = BudgetAllocationReplayEnv(store, datasets=datasets, seeds=seeds,
                                                    settings=settings,
                                                    observation=observation, **options)
            self.keys: tuple[CellKey, ...] = tuple(self.single.cells)
            self.queried_width = self.single.queried_width
            return
        if datasets is not None or seeds is not None or settings is not None:
            raise ValueError("cells names each cell's data set, seed and settings: leave "
                             "datasets, seeds and settings out")
        checked = _checked_cells(cells)  # a list: read twice below, so never a spent iterator
        singles = self._singles(store, checked, observation, options)
        self.single = next(iter(singles.values()))
        self._settings: dict[CellKey, Settings] = {}
        for name, seed, cell_settings in checked:
            single = singles[setting_key(cell_settings)]
            stored = _stored_name(single, name, int(seed))
            if stored is None:
                raise StoreError(f"the store {store.root} has no lattice for data set "
                                 f"{name!r}, seed {seed}, setting {setting_key(cell_settings)}:"
                                 " build it with ballad-env lattices")
            self._settings[(stored, int(seed), setting_key(cell_settings))] = single.settings
        self.keys = tuple(self._settings)
        rewards = {s.reward for s in self._settings.values()}
        if len(rewards) > 1:
            raise ValueError(f"mixed cells of different rewards ({', '.join(sorted(rewards))})"
                             ": a vector environment steps one reward; give it as reward=...")
        self.queried_width = max(single.queried_width for single in singles.values())

    @staticmethod
    def _singles(store: LatticeStore, cells: Sequence[tuple[str, int, Settings]],
                 observation: str, options: dict[str, Any]
                 ) -> dict[str, BudgetAllocationReplayEnv]:
        """A single environment per setting of ``cells`` over its cells' data sets (which
        checks that the store holds the setting and gives its settings with ``options``)."""
        names: dict[str, tuple[Settings, set[str]]] = {}
        for name, _, cell_settings in cells:
            names.setdefault(setting_key(cell_settings), (cell_settings, set()))[1].add(name)
        return {key: BudgetAllocationReplayEnv(store, datasets=sorted(held),
                                               settings=cell_settings,
                                               observation=observation, **options)
                for key, (cell_settings, held) in names.items()}

    def settings_of(self, key: CellKey) -> Settings:
        """The settings a cell is played under (for one setting, any stored cell's: a reset
        with options may load cells beyond those drawn at first)."""
        return self._settings[key] if self.mixed else self.single.settings

    def load(self, store: LatticeStore, keys: Sequence[CellKey]) -> list[Lattice]:
        """The lattices of these cells, each under its own settings."""
        return [store.load(key[0], key[1], self.settings_of(key)) for key in keys]

    def chosen(self, store: LatticeStore, options: dict[str, Any]) -> list[CellKey]:
        """The cells a reset with ``options`` (``dataset``, ``seed``: a name or seed, or a
        list) draws among: the single environment's selection, or the mixed cells of those
        data sets (any case) and seeds; an error naming them if there are none."""
        if not self.mixed:
            return list(BudgetAllocationReplayEnv(store, datasets=options.get("dataset"),
                                                  seeds=options.get("seed"),
                                                  settings=self.single.settings).cells)
        chosen = list(self.keys)
        if options.get("dataset") is not None:
            names = options["dataset"]
            wanted = {str(n).lower() for n in ([names] if isinstance(names, str) else names)}
            chosen = [key for key in chosen if key[0].lower() in wanted]
        if options.get("seed") is not None:
            seeds = options["seed"]
            wanted_seeds = {int(s) for s in (seeds if isinstance(seeds, Sequence) else [seeds])}
            chosen = [key for key in chosen if key[1] in wanted_seeds]
        if not chosen:
            raise StoreError(f"no mixed cell of data set {options.get('dataset')!r} and seed "
                             f"{options.get('seed')!r}: choose among the cells given")
        return chosen


def _stored_name(single: BudgetAllocationReplayEnv, name: str, seed: int) -> str | None:
    """The store's spelling of data set ``name`` where it holds ``seed`` (names in any case,
    as a single replay environment takes them), or None."""
    return next((held for held, held_seed in single.cells
                 if held_seed == seed and held.lower() == name.lower()), None)


def _checked_cells(cells: Sequence[tuple[str, int, Settings]]
                   ) -> list[tuple[str, int, Settings]]:
    """``cells`` as a list of (name, seed, Settings); an error naming the bad one."""
    checked = list(cells)
    if not checked:
        raise ValueError("cells is empty: give at least one (data set, seed, Settings)")
    for cell in checked:
        if not (isinstance(cell, tuple | list) and len(cell) == 3 and isinstance(cell[0], str)
                and isinstance(cell[2], Settings)):
            raise ValueError(f"each cell is (data set name, seed, Settings), got {cell!r}")
    return checked


__all__ = ["CellKey", "VectorCells"]
