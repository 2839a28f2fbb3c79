"""The lattice of an episode: every state (i AL rounds, j LR rounds), i + j <= k (SPEC §5).

Each side draws from its own random stream, so the state after i AL and j LR rounds does
not depend on their order. One ``Lattice`` therefore holds the test cost (and FPR, FNR,
rejection rate, tau, the validation-cost estimate, the rewards) of every allocation
policy's every state, for one data set, seed and setting. From it follow the
hindsight-optimal allocation, the regret of any policy, which action truly lowers the
next test cost at each state, and an exact replay of any agent that reads only its
observations, at the price of about k + k(k + 1)/2 rounds instead of k per policy.

Rewards, precisely. An AL reward compares the anomaly side's output with the one after
the previous AL round; that output depends on i only, so the AL reward of the move
(i - 1, j) -> (i, j) is the same on every path (``al_reward[s][i]``). An LR reward
compares the rejection side's output with the one stored at that side's previous LR
round, which ended at some state (i0, j - 1), i0 <= i, depending on the path:
``lr_reward_from[s][i, j, i0]`` holds all of them. For j = 1 no LR round came before and
the stored output is the initial one (no labels, tau = 0.1), whatever i0.
``lr_reward(s)[i, j]`` picks i0 = i: the previous LR round also happened at this i (the
reward a greedy agent sees after two LR rounds in a row).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ballad_env.cost import Evaluation
from ballad_env.data import Dataset, load_dataset
from ballad_env.env import STATE_FEATURES, encode_observation, state_features
from ballad_env.episode import AL, LR, Episode, EpisodeConfig
from ballad_env.rewards import REWARDS, cosine_reward, entropy

#: Per-state figures, each a (k + 1, k + 1) array indexed [i, j] (NaN where unreachable).
STATE_FIELDS = ("cost", "fpr", "fnr", "rejection_rate", "auc", "tau", "val_cost",
                "val_rejection", "labeled_train", "labeled_val", "anomalies_found",
                "al_available", "lr_available")
#: Signals that can be scored against the truly better action.
SIGNALS = (*REWARDS, "val_cost")
#: How a signal is read at state (i, j): the rewards of the two moves out of it
#: ("lookahead") or the latest rewards of the moves into it, as a greedy rule uses them
#: ("lagged").
SIGNAL_MODES = ("lookahead", "lagged")
#: Grid entries holding the environment's state features (for ``Lattice.observation``).
_FEATURE_KEY = "feature:"
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
    gamma: float
    grid: dict[str, np.ndarray]
    al_reward: dict[str, np.ndarray]
    lr_reward_from: dict[str, np.ndarray]
    config: EpisodeConfig = field(default_factory=EpisodeConfig)

    # ----------------------------------------------------------------- states
    @property
    def cost(self) -> np.ndarray:
        """Test cost per example at every state, [i, j]."""
        return self.grid["cost"]

    @property
    def reachable(self) -> np.ndarray:
        """Boolean [i, j]: the state exists (i + j <= k and both pools held the labels)."""
        return ~np.isnan(self.grid["cost"])

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
            i, j = self._next(i, j, int(action))
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
            i, j = self._next(i, j, action)
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
            action = min(moves, key=lambda a: (self.cost[self._next(i, j, a)], a))
            actions.append(action)
            i, j = self._next(i, j, action)
        return tuple(actions)

    @staticmethod
    def _next(i: int, j: int, action: int) -> tuple[int, int]:
        return (i + 1, j) if action == AL else (i, j + 1)

    # ----------------------------------------------------------------- which action is better
    def better_action(self) -> np.ndarray:
        """[i, j]: the action whose successor has the lower test cost (0 AL, 1 LR); NaN on a
        tie, or where a move is impossible.
        """
        k = self.n_rounds
        out = np.full((k + 1, k + 1), np.nan)
        for i, j in self._inner_states():
            al, lr = self.cost[i + 1, j], self.cost[i, j + 1]
            if al != lr:
                out[i, j] = AL if al < lr else LR
        return out

    def _inner_states(self) -> list[tuple[int, int]]:
        """States where both moves are possible."""
        k = self.n_rounds
        return [(i, j) for i in range(k) for j in range(k - i)
                if self.can_move(i, j, AL) and self.can_move(i, j, LR)]

    def signal_votes(self, signal: str, mode: str = "lookahead") -> np.ndarray:
        """[i, j]: the side whose signal is larger (0 AL, 1 LR), NaN on a tie or undefined.

        ``"lookahead"`` compares the two moves out of (i, j): each side's reward on arriving
        at its successor (the LR one with the previous LR round at this i), or for
        ``"val_cost"`` the decrease of the validation-cost estimate. ``"lagged"`` compares
        the moves into (i, j), i.e. the latest rewards a greedy rule would read there.
        """
        if signal not in SIGNALS:
            raise ValueError(f"unknown signal {signal!r}: use one of {SIGNALS}")
        if mode not in SIGNAL_MODES:
            raise ValueError(f"unknown mode {mode!r}: use one of {SIGNAL_MODES}")
        k = self.n_rounds
        votes = np.full((k + 1, k + 1), np.nan)
        for i, j in self._inner_states():
            if mode == "lagged" and (i == 0 or j == 0):
                continue
            al, lr = self._signal_pair(signal, mode, i, j)
            if al != lr and not np.isnan(al) and not np.isnan(lr):
                votes[i, j] = AL if al > lr else LR
        return votes

    def _signal_pair(self, signal: str, mode: str, i: int, j: int) -> tuple[float, float]:
        """(AL side, LR side) of ``signal`` at (i, j): larger means "choose me"."""
        if signal == "val_cost":
            vc = self.grid["val_cost"]
            if mode == "lookahead":
                return vc[i, j] - vc[i + 1, j], vc[i, j] - vc[i, j + 1]
            return vc[i - 1, j] - vc[i, j], vc[i, j - 1] - vc[i, j]
        lr = self.lr_reward(signal)
        if mode == "lookahead":
            return self.al_reward[signal][i + 1], lr[i, j + 1]
        return self.al_reward[signal][i], lr[i, j]

    def score_signal(self, signal: str, mode: str = "lookahead") -> dict[str, int]:
        """Counts over the states with a strictly better action: ``states``; ``voted`` (the
        signal has a larger side); ``correct`` (that side is the better action);
        ``al_better`` (AL is the better action).
        """
        better = self.better_action()
        votes = self.signal_votes(signal, mode)
        if mode == "lagged":
            better = better.copy()
            better[0, :] = np.nan
            better[:, 0] = np.nan
        decided = ~np.isnan(better)
        voted = decided & ~np.isnan(votes)
        return {"states": int(decided.sum()), "voted": int(voted.sum()),
                "correct": int(np.sum(votes[voted] == better[voted])),
                "al_better": int(np.sum(better[decided] == AL))}

    def right_moves(self, actions: Sequence[int]) -> tuple[int, int]:
        """(moves to the strictly better successor, moves where one was strictly better)."""
        better = self.better_action()
        right = decided = 0
        i = j = 0
        for action in actions:
            if not np.isnan(better[i, j]):
                decided += 1
                right += int(better[i, j] == action)
            i, j = self._next(i, j, int(action))
        return right, decided

    # ----------------------------------------------------------------- agents
    def observation(self, i: int, j: int, latest: dict[int, dict[str, float] | None],
                    previous: int | None) -> np.ndarray:
        """The environment's observation at (i, j), given each side's latest rewards and the
        previous action (the only parts of it that depend on the path).
        """
        state = {name: self.grid[_FEATURE_KEY + name][i, j] for name in STATE_FEATURES}
        return encode_observation(state, latest, previous)

    def replay(self, agent: Any) -> tuple[int, ...]:
        """The actions ``agent`` takes in this episode, without stepping an environment.

        Exact for agents that read only their observations (every rule agent); the agent
        is reset with the episode's seed, as ``run_episode`` does.
        """
        agent.reset(self.seed)
        latest: dict[int, dict[str, float] | None] = {AL: None, LR: None}
        i = j = 0
        last_lr_i = 0
        previous: int | None = None
        actions: list[int] = []
        while i + j < self.n_rounds:
            choice, _ = agent.predict(self.observation(i, j, latest, previous),
                                      deterministic=True)
            action = int(np.asarray(choice).item())
            if not self.can_move(i, j, action):
                raise ValueError(f"{agent!r} chose an impossible action {action} at ({i}, {j})")
            i, j = self._next(i, j, action)
            if action == AL:
                latest[AL] = {s: float(self.al_reward[s][i]) for s in REWARDS}
            else:
                latest[LR] = {s: float(self.lr_reward_from[s][i, j, last_lr_i]) for s in REWARDS}
                last_lr_i = i
            previous = action
            actions.append(action)
        return tuple(actions)

    # ----------------------------------------------------------------- export
    def state_records(self) -> list[dict[str, Any]]:
        """One dict per reachable state: i, j, the ``STATE_FIELDS`` and the rewards of the
        moves into it (the LR ones with the previous LR round at the same i).
        """
        lr = {s: self.lr_reward(s) for s in REWARDS}
        records = []
        for i, j in zip(*np.nonzero(self.reachable), strict=True):
            record: dict[str, Any] = {"i": int(i), "j": int(j)}
            record.update({name: float(self.grid[name][i, j]) for name in STATE_FIELDS})
            for s in REWARDS:
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


def build_lattice(dataset: Dataset | str, seed: int, config: EpisodeConfig | None = None,
                  data_dir: str | None = None) -> Lattice:
    """Step one episode through every state (i, j), i + j <= k, and record each.

    The AL chain (i = 0, 1, ...) is stepped once; from each of its states a copy takes
    LR rounds j = 1, ..., k - i. The real ``Episode.step`` does every transition, so the
    environment's rules (tau set on labeled D while V has none, seeded threshold search)
    hold by construction.
    """
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, data_dir=data_dir)
    config = config or EpisodeConfig()
    episode = Episode(data, seed, config)
    k = episode.budget.n_rounds
    names = (*STATE_FIELDS, *(_FEATURE_KEY + name for name in STATE_FEATURES))
    grid = {name: np.full((k + 1, k + 1), np.nan) for name in names}
    al_reward = {s: np.full(k + 1, np.nan) for s in REWARDS}
    lr_from = {s: np.full((k + 1, k + 1, k + 1), np.nan) for s in REWARDS}
    lr_outputs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    _record(grid, episode, episode.evaluate_test())
    i = 0
    while True:
        _walk_lr(episode, grid, lr_from, lr_outputs)
        if episode.done or not episode.available(AL):
            break
        result = episode.step(AL)
        i += 1
        for s in REWARDS:
            al_reward[s][i] = result.rewards[s]
        _record(grid, episode, result.evaluation)
    return Lattice(dataset=data.name, seed=int(seed), n_rounds=k, gamma=episode.gamma,
                   grid=grid, al_reward=al_reward, lr_reward_from=lr_from, config=config)


def _walk_lr(start: Episode, grid: dict[str, np.ndarray], lr_from: dict[str, np.ndarray],
             lr_outputs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]) -> None:
    """From ``start`` = (i, 0), take LR rounds on a copy to the end of the budget.

    Each LR output is kept as (entropy of its rejection probabilities, its decisions), so
    the rewards against every earlier i0 cost one subtraction each (SPEC §4's formulas).
    """
    episode = _fork(start)
    i = episode.n_al
    while not episode.done and episode.available(LR):
        result = episode.step(LR)
        j = episode.n_lr
        _record(grid, episode, result.evaluation)
        output = episode.stored[LR]
        lr_outputs[(i, j)] = (entropy(output.probability), output.decision)
        for i0 in range(i + 1):
            if j == 1 or i0 == i:
                rewards = result.rewards  # j = 1: the initial output, whatever i0
            elif (i0, j - 1) in lr_outputs:
                rewards = _rewards_between(lr_outputs[(i, j)], lr_outputs[(i0, j - 1)])
            else:
                continue
            for s in REWARDS:
                lr_from[s][i, j, i0] = rewards[s]


def _rewards_between(new: tuple[np.ndarray, np.ndarray], old: tuple[np.ndarray, np.ndarray]
                     ) -> dict[str, float]:
    """Both rewards from cached (entropy, decisions) pairs, as ``SideOutput.rewards``."""
    return {"entropy": float(np.mean(np.abs(new[0] - old[0]))),
            "cosine": cosine_reward(new[1], old[1])}


def _fork(episode: Episode) -> Episode:
    """A deep copy of ``episode`` that shares its read-only parts (data, split, fitted prior).

    Copying a fitted IForest (100 trees) costs more than the LR rounds taken from the copy;
    rounds never touch the prior once its probabilities are computed.
    """
    shared = (episode.dataset, episode.split, episode.scores.detector.prior_)
    return copy.deepcopy(episode, {id(part): part for part in shared})


def _record(grid: dict[str, np.ndarray], episode: Episode, evaluation: Evaluation) -> None:
    """Store the figures of ``episode``'s current state (i, j)."""
    at = (episode.n_al, episode.n_lr)
    mask = episode.action_mask()
    values = {
        "cost": evaluation.cost, "fpr": evaluation.fpr, "fnr": evaluation.fnr,
        "rejection_rate": evaluation.rejection_rate, "auc": evaluation.auc,
        "tau": episode.tau, "val_cost": episode.validation_cost(),
        "val_rejection": episode.validation_rejection_rate(),
        "labeled_train": episode.train_labels.count / episode.train_labels.size,
        "labeled_val": episode.val_labels.count / episode.val_labels.size,
        "anomalies_found": episode.anomalies_found(),
        "al_available": mask[AL], "lr_available": mask[LR],
    }
    values.update({_FEATURE_KEY + name: value
                   for name, value in state_features(episode).items()})
    for name, table in grid.items():
        table[at] = float(values[name])


__all__ = ["ACTION_LETTERS", "SIGNALS", "SIGNAL_MODES", "STATE_FIELDS", "Lattice",
           "build_lattice", "parse_path", "path_string"]
