"""The lattice of an episode: every state (i AL rounds, j LR rounds), i + j <= k.

Each side draws from its own random stream, so the state after i AL and j LR rounds does
not depend on their order (the AL labels follow the AL stream and a detector fitted on D's
labels only; the LR labels follow the LR stream and V's labels only, whether one random
order of V or a fresh sample each round; the argsort ranking draws nothing). One
``Lattice`` therefore holds the test cost (and FPR, FNR, rejection rate, tau, the
validation-cost estimate, the rewards) of every allocation policy's every state, for one
data set, seed and setting. (``query_rng="authors"`` breaks the premise: one stream shared
in the order of the rounds; ``build_lattice`` refuses it, :func:`check_lattice_settings`.)
From it follow the hindsight-optimal allocation, the regret of any policy, which action
truly lowers the next test cost at each state, and an exact replay of any agent that reads
only its observations, at the price of about k + k(k + 1)/2 rounds instead of k per policy.

Rewards, precisely. An AL reward compares the anomaly side's output with the one after
the previous AL round; that output depends on i only, so the AL reward of the move
(i - 1, j) -> (i, j) is the same on every path (``al_reward[s][i]``). An LR reward
compares the rejection side's output with the one stored at that side's previous LR
round, which ended at some state (i0, j - 1), i0 <= i, depending on the path:
``lr_reward_from[s][i, j, i0]`` holds all of them. For j = 1 no LR round came before and
the stored output is the initial one (no labels; the rejector's ``initial`` rule: tau = 0.1
for the confidence rejector, tau = the contamination for the two-sided one), whatever i0.
The rejection rule after (i, j) is fitted on the probabilities after i AL rounds and the V
labels of j LR rounds with a search seed drawn from (i, j), whichever rejector.
``lr_reward(s)[i, j]`` picks i0 = i: the previous LR round also happened at this i (the
reward a greedy agent sees after two LR rounds in a row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ballad_env.data import Dataset, load_dataset
from ballad_env.episode import Episode
from ballad_env.observation import encode
from ballad_env.queries import AL_QUERIES, LR_QUERIES
from ballad_env.replay.signals import (
    COST_SIGNALS,
    SIGNAL_MODES,
    SIGNALS,
    better_action,
    right_moves,
    score_signal,
    signal_votes,
)
from ballad_env.rewards import SIDE_SIGNAL_NAMES, SIDE_SIGNALS
from ballad_env.settings import Settings
from ballad_env.snapshot import AL, FIGURE_TYPES, LR, STATE_FIGURES, Snapshot

#: Per-state figures (the snapshot's state fields), each a (k + 1, k + 1) array indexed
#: [i, j] (NaN where unreachable).
STATE_FIELDS = STATE_FIGURES
ACTION_LETTERS = "AL"  # AL -> "A", LR -> "L" in path strings


@dataclass
class Lattice:
    """Every state (i, j) of one episode (data set, seed, setting), i + j <= ``n_rounds``.

    ``grid[name][i, j]`` holds the ``STATE_FIELDS`` after i AL and j LR rounds; see the
    module docstring for ``al_reward`` and ``lr_reward_from``.
    """

    dataset: str
    seed: int
    n_rounds: int
    contamination: float
    grid: dict[str, np.ndarray]
    al_reward: dict[str, np.ndarray]
    lr_reward_from: dict[str, np.ndarray]
    settings: Settings = field(default_factory=Settings)
    #: Indices each round labels (``info["queried"]``): ``al_queried[i]`` those of the AL
    #: round into i (into D), ``lr_queried[j]`` those of the LR round into j (into V; the LR
    #: queries depend on j only, as the lattice requires). Row 0 is unused (-1).
    al_queried: np.ndarray | None = None
    lr_queried: np.ndarray | None = None
    #: The snapshot's state fields of each state asked for, as Python scalars (a cache).
    _states: dict[tuple[int, int], dict[str, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    #: Observations by everything they depend on (a cache): replaying many agents on one
    #: lattice meets the same states again.
    _observations: dict[tuple[Any, ...], np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    # ----------------------------------------------------------------- states
    @property
    def cost(self) -> np.ndarray:
        """Test cost per example at every state, [i, j]."""
        return self.grid["test_cost"]

    @property
    def reachable(self) -> np.ndarray:
        """Boolean [i, j]: the state exists (i + j <= k and both pools held the labels)."""
        return ~np.isnan(self.grid["test_cost"])

    def can_move(self, i: int, j: int, action: int) -> bool:
        """Whether ``action`` can be taken at (i, j)."""
        name = "al_available" if action == AL else "lr_available"
        return bool(self.reachable[i, j] and self.grid[name][i, j] > 0.5)

    def lr_reward(self, signal: str) -> np.ndarray:
        """[i, j]: LR reward of (i, j - 1) -> (i, j) when the previous LR round was at this i."""
        full = self.lr_reward_from[signal]
        idx = np.arange(self.n_rounds + 1)
        return full[idx, :, idx]

    # ----------------------------------------------------------------- paths
    def states_along(self, actions: Sequence[int]) -> list[tuple[int, int]]:
        """The states after each action, starting from (0, 0); raises on an impossible move."""
        i = j = 0
        states = []
        for action in actions:
            if not self.can_move(i, j, int(action)):
                raise ValueError(f"action {action} is not possible at state ({i}, {j})")
            i, j = self.next_state(i, j, int(action))
            states.append((i, j))
        return states

    def costs_along(self, actions: Sequence[int]) -> np.ndarray:
        """Test cost after each round of an action sequence."""
        return np.array([self.cost[s] for s in self.states_along(actions)])

    def mean_cost(self, actions: Sequence[int]) -> float:
        """Mean test cost over the rounds of an action sequence (the path's score)."""
        return float(np.mean(self.costs_along(actions)))

    def optimal_path(self, objective: str = "mean") -> tuple[int, ...]:
        """Hindsight-optimal whole-budget actions: lowest mean cost over rounds (``"mean"``),
        or lowest final cost (``"final"``, ties broken by the mean). Ties prefer AL.
        """
        if objective not in ("mean", "final"):
            raise ValueError(f"unknown objective {objective!r}: use 'mean' or 'final'")
        k = self.n_rounds
        ends = [(i, k - i) for i in range(k + 1) if self.reachable[i, k - i]]
        if objective == "final":
            best = min(self.cost[s] for s in ends)
            ends = [s for s in ends if self.cost[s] == best]
        to_go = np.full((k + 1, k + 1), np.inf)  # sum of costs from the state to the end
        for i, j in ends:
            to_go[i, j] = self.cost[i, j]
        for total in range(k - 1, -1, -1):
            for i in range(total + 1):
                j = total - i
                if self.reachable[i, j]:
                    to_go[i, j] = self.cost[i, j] + min(self._next_to_go(to_go, i, j))
        actions, i, j = [], 0, 0
        for _ in range(k):
            al, lr = self._next_to_go(to_go, i, j)
            if not np.isfinite(min(al, lr)):
                raise ValueError("no complete path through the lattice")
            action = AL if al <= lr else LR
            actions.append(action)
            i, j = self.next_state(i, j, action)
        return tuple(actions)

    def _next_to_go(self, to_go: np.ndarray, i: int, j: int) -> tuple[float, float]:
        al = to_go[i + 1, j] if self.can_move(i, j, AL) else np.inf
        lr = to_go[i, j + 1] if self.can_move(i, j, LR) else np.inf
        return float(al), float(lr)

    def regret(self, actions: Sequence[int]) -> float:
        """Mean cost of ``actions`` minus that of the hindsight-optimal path (>= 0)."""
        return self.mean_cost(actions) - self.mean_cost(self.optimal_path("mean"))

    def one_step_oracle(self) -> tuple[int, ...]:
        """The one-step oracle's actions: the move to the lower next test cost (ties to AL)."""
        actions, i, j = [], 0, 0
        for _ in range(self.n_rounds):
            moves = [a for a in (AL, LR) if self.can_move(i, j, a)]
            action = min(moves, key=lambda a: (self.cost[self.next_state(i, j, a)], a))
            actions.append(action)
            i, j = self.next_state(i, j, action)
        return tuple(actions)

    @staticmethod
    def next_state(i: int, j: int, action: int) -> tuple[int, int]:
        """The state ``action`` leads to from (i, j)."""
        return (i + 1, j) if action == AL else (i, j + 1)

    # ----------------------------------------------------------------- which action is better
    def better_action(self) -> np.ndarray:
        """[i, j]: the action whose successor has the lower test cost (0 AL, 1 LR); NaN on a
        tie, or where a move is impossible (``lattice_signals.better_action``)."""
        return better_action(self)

    def signal_votes(self, signal: str, mode: str = "lookahead") -> np.ndarray:
        """[i, j]: the side whose signal is larger (0 AL, 1 LR), NaN on a tie or undefined
        (``lattice_signals.signal_votes``)."""
        return signal_votes(self, signal, mode)

    def score_signal(self, signal: str, mode: str = "lookahead") -> dict[str, int]:
        """Counts of the states where ``signal`` votes for the better action
        (``lattice_signals.score_signal``)."""
        return score_signal(self, signal, mode)

    def right_moves(self, actions: Sequence[int]) -> tuple[int, int]:
        """(moves to the strictly better successor, moves where one was strictly better)."""
        return right_moves(self, actions)

    # ----------------------------------------------------------------- agents
    def snapshot(self, i: int, j: int, latest: dict[int, dict[str, float] | None],
                 previous: int | None, queried: np.ndarray | None = None) -> Snapshot:
        """The episode's snapshot at (i, j), given the parts that depend on the path: each
        side's latest side signals and the previous action (``queried``, the indices the
        previous round labeled, is left empty unless given: see :meth:`queried`)."""
        state = self._states.get((i, j))
        if state is None:  # converted once per state: replays ask for each state often
            state = {}
            for name in STATE_FIELDS:  # bool, int or float, as the snapshot types them
                state[name] = FIGURE_TYPES[name](self.grid[name][i, j])
            self._states[(i, j)] = state
        return Snapshot(dataset=self.dataset, previous=previous,
                        queried=np.empty(0, dtype=np.intp) if queried is None else queried,
                        latest=latest, **state)

    def observation(self, i: int, j: int, latest: dict[int, dict[str, float] | None],
                    previous: int | None, version: str = "v0") -> np.ndarray:
        """The environment's observation (in ``version``) at (i, j) on a path with these
        ``latest`` signals and ``previous`` action."""
        return encode(self.snapshot(i, j, latest, previous), version)

    def queried(self, i: int, j: int, action: int | None) -> np.ndarray:
        """The indices the round ``action`` into (i, j) labeled (empty at the start, or if
        this lattice does not hold them)."""
        table = self.al_queried if action == AL else self.lr_queried
        if action is None or table is None:
            return np.empty(0, dtype=np.intp)
        return table[i if action == AL else j].copy()

    def replay(self, agent: Any) -> tuple[int, ...]:
        """The actions ``agent`` takes in this episode, without stepping an environment.

        Exact for agents that read only their observations (every rule agent), and the
        side rewards of ``info`` at float64 (an agent's optional ``observe_info``, as
        ``run_episode`` shows them) and the lattice's settings (its optional
        ``observe_settings``, as ``run_episode`` gives the environment's); the agent is
        reset with the episode's seed, as ``run_episode`` does, and observes in its
        ``observation_version`` (``"v0"`` if it has none).
        """
        version = getattr(agent, "observation_version", "v0")
        observe_info = getattr(agent, "observe_info", None)  # agents.base.show_info's hook
        observe_settings = getattr(agent, "observe_settings", None)  # agents.base.play_in's
        if observe_settings is not None:  # an agent whose rule depends on the settings
            observe_settings(self.settings)
        cache = self._observations
        agent.reset(self.seed)
        latest: dict[int, dict[str, float] | None] = {AL: None, LR: None}
        i = j = 0
        last_lr_i = 0
        previous: int | None = None
        actions: list[int] = []
        while i + j < self.n_rounds:
            key = (i, j, previous, version,
                   *(tuple(values.values()) if (values := latest[side]) is not None else None
                     for side in (AL, LR)))
            if key not in cache:
                cache[key] = self.observation(i, j, latest, previous, version)
                cache[key].setflags(write=False)
            if observe_info is not None:  # the side rewards at float64, as live info has
                observe_info({f"{s}_{name}": (0.0 if values is None else values[s])
                              for side, name in ((AL, "al"), (LR, "lr"))
                              for values in [latest[side]] for s in SIDE_SIGNAL_NAMES})
            choice, _ = agent.predict(cache[key], deterministic=True)
            action = int(np.asarray(choice).item())
            if not self.can_move(i, j, action):
                raise ValueError(f"{agent!r} chose an impossible action {action} at ({i}, {j})")
            i, j = self.next_state(i, j, action)
            if action == AL:
                latest[AL] = {s: float(self.al_reward[s][i]) for s in SIDE_SIGNAL_NAMES}
            else:
                latest[LR] = {s: float(self.lr_reward_from[s][i, j, last_lr_i])
                              for s in SIDE_SIGNAL_NAMES}
                last_lr_i = i
            previous = action
            actions.append(action)
        return tuple(actions)

    # ----------------------------------------------------------------- export
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every array of the lattice by a flat name (``grid.<field>``, ``al_reward.<signal>``,
        ``lr_reward_from.<signal>``, ``al_queried``, ``lr_queried``), for an ``.npz`` file;
        the scalars and settings go with them as ``ballad_env.replay.store`` writes them."""
        arrays = {f"grid.{name}": table for name, table in self.grid.items()}
        arrays.update({f"al_reward.{s}": v for s, v in self.al_reward.items()})
        arrays.update({f"lr_reward_from.{s}": v for s, v in self.lr_reward_from.items()})
        if self.al_queried is not None and self.lr_queried is not None:
            arrays.update(al_queried=self.al_queried, lr_queried=self.lr_queried)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], *, dataset: str, seed: int,
                    n_rounds: int, contamination: float, settings: Settings) -> Lattice:
        """Inverse of :meth:`to_arrays`."""
        def part(prefix: str) -> dict[str, np.ndarray]:
            return {name.removeprefix(prefix): value for name, value in arrays.items()
                    if name.startswith(prefix)}

        return cls(dataset=dataset, seed=seed, n_rounds=n_rounds, contamination=contamination,
                   grid=part("grid."), al_reward=part("al_reward."),
                   lr_reward_from=part("lr_reward_from."), settings=settings,
                   al_queried=arrays.get("al_queried"), lr_queried=arrays.get("lr_queried"))

    def state_records(self) -> list[dict[str, Any]]:
        """One dict per reachable state: i, j, the ``STATE_FIELDS`` and the rewards of the
        moves into it (the LR ones with the previous LR round at the same i).
        """
        lr = {s: self.lr_reward(s) for s in SIDE_SIGNAL_NAMES}
        records = []
        for i, j in zip(*np.nonzero(self.reachable), strict=True):
            record: dict[str, Any] = {"i": int(i), "j": int(j)}
            record.update({name: float(self.grid[name][i, j]) for name in STATE_FIELDS})
            for s in SIDE_SIGNAL_NAMES:
                record[f"{s}_al"] = float(self.al_reward[s][i])
                record[f"{s}_lr"] = float(lr[s][i, j])
            records.append(record)
        return records


def path_string(actions: Sequence[int]) -> str:
    """A compact path: "A" for each AL round, "L" for each LR round."""
    return "".join(ACTION_LETTERS[int(a)] for a in actions)


def parse_path(text: str) -> tuple[int, ...]:
    """Inverse of :func:`path_string`."""
    return tuple(ACTION_LETTERS.index(c) for c in text)


def check_lattice_settings(settings: Settings) -> None:
    """A ``ValueError`` naming the option if the labels under ``settings`` depend on the
    order of the rounds, so that one lattice cannot hold every path (or if its replay could
    not play BALLAD as the environment does: the published cosine rule): a shared query stream,
    or a query strategy marked ``depends_on_path`` (SADAL's ``stratified-probability``, whose
    labels follow the probabilities, and ``threshold-distance*``, whose ranking reads the
    previous round's rejection thresholds; its ``path_reason`` says why)."""
    if settings.query_rng != "streams":
        raise ValueError(
            f"no lattice with query_rng={settings.query_rng!r}: AL and LR then draw their "
            "labels from one shared random stream, so the labels after i AL and j LR rounds "
            "depend on the order of the rounds; use query_rng='streams' (the default) for "
            "lattices and replay stores")
    if settings.cosine_rule != "ours":
        raise ValueError(
            f"no lattice with cosine_rule={settings.cosine_rule!r}: ballad-cosine then starts "
            "from the published rewards, which it reads from the environment's settings, and "
            "a lattice's replay gives the agent none; use cosine_rule='ours' (the default) for "
            "lattices and replay stores")
    for option, registry in (("al_strategy", AL_QUERIES), ("lr_strategy", LR_QUERIES)):
        name = getattr(settings, option)
        strategy = registry[name]
        if getattr(strategy, "depends_on_path", False):
            reason = getattr(strategy, "path_reason", "its labels depend on the rounds before "
                                                      "them")
            raise ValueError(
                f"no lattice with {option}={name!r}: {reason}, so the labels after i AL and j "
                "LR rounds depend on their order; build lattices and replay stores with "
                "another strategy")


def build_lattice(dataset: Dataset | str, seed: int, settings: Settings | None = None,
                  data_dir: str | None = None) -> Lattice:
    """Step one episode through every state (i, j), i + j <= k, and record each.

    The AL chain (i = 0, 1, ...) is stepped once; from each of its states a fork takes
    LR rounds j = 1, ..., k - i. The real ``Episode.step`` does every transition, so the
    environment's rules (tau set on labeled D while V has none, seeded threshold search)
    hold by construction.
    """
    settings = settings or Settings()
    check_lattice_settings(settings)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_dir=data_dir)
    episode = Episode(data, seed, settings)
    k = episode.budget.n_rounds
    grid = {name: np.full((k + 1, k + 1), np.nan) for name in STATE_FIELDS}
    al_reward = {s: np.full(k + 1, np.nan) for s in SIDE_SIGNAL_NAMES}
    lr_from = {s: np.full((k + 1, k + 1, k + 1), np.nan) for s in SIDE_SIGNAL_NAMES}
    lr_summaries: dict[tuple[int, int], dict[str, np.ndarray]] = {}
    al_queried = np.full((k + 1, episode.budget.per_round), -1, dtype=np.intp)
    lr_queried = al_queried.copy()
    _record(grid, episode.snapshot())
    i = 0
    while True:
        _walk_lr(episode, grid, lr_from, lr_summaries, lr_queried)
        if episode.done or not episode.available(AL):
            break
        result = episode.step(AL)
        i += 1
        for s in SIDE_SIGNAL_NAMES:
            al_reward[s][i] = result.rewards[s]
        al_queried[i] = result.queried
        _record(grid, episode.snapshot())
    return Lattice(dataset=data.name, seed=int(seed), n_rounds=k,
                   contamination=episode.contamination, grid=grid, al_reward=al_reward,
                   lr_reward_from=lr_from, settings=settings, al_queried=al_queried,
                   lr_queried=lr_queried)


def _walk_lr(start: Episode, grid: dict[str, np.ndarray], lr_from: dict[str, np.ndarray],
             lr_summaries: dict[tuple[int, int], dict[str, np.ndarray]],
             lr_queried: np.ndarray) -> None:
    """From ``start`` = (i, 0), take LR rounds on a fork to the end of the budget.

    Each LR output is kept as its side signals' summaries, so the rewards against every
    earlier i0 cost one comparison each. The first fork to reach j records its queries.
    """
    episode = start.fork()
    i = episode.n_al
    while not episode.done and episode.available(LR):
        result = episode.step(LR)
        j = episode.n_lr
        if lr_queried[j, 0] < 0:
            lr_queried[j] = result.queried
        _record(grid, episode.snapshot())
        output = episode.stored[LR]
        lr_summaries[(i, j)] = {s.name: s.summarise(output) for s in SIDE_SIGNALS}
        for i0 in range(i + 1):
            if j == 1 or i0 == i:
                rewards = result.rewards  # j = 1: the initial output, whatever i0
            elif (i0, j - 1) in lr_summaries:
                new, old = lr_summaries[(i, j)], lr_summaries[(i0, j - 1)]
                rewards = {s.name: s.between(new[s.name], old[s.name]) for s in SIDE_SIGNALS}
            else:
                continue
            for s in SIDE_SIGNAL_NAMES:
                lr_from[s][i, j, i0] = rewards[s]


def _record(grid: dict[str, np.ndarray], snapshot: Snapshot) -> None:
    """Store the state figures of ``snapshot`` at its state (i, j)."""
    at = (snapshot.n_al, snapshot.n_lr)
    for name, table in grid.items():
        table[at] = float(getattr(snapshot, name))


__all__ = ["ACTION_LETTERS", "COST_SIGNALS", "SIGNALS", "SIGNAL_MODES", "STATE_FIELDS", "Lattice",
           "build_lattice", "check_lattice_settings", "parse_path", "path_string"]
