"""One repetition of the BALLAD protocol as a plain state machine (no Gymnasium).

An ``Episode`` owns the split, the detector, the labels bought so far, the rejection
threshold and each side's stored output for the rewards. ``step(AL)`` buys b training
labels, ``step(LR)`` buys b validation labels. Label-free work (split, scaling, prior,
eta, prior probabilities of V and T) happens once in ``__init__``; a round only adds
kernel sums for the new labels and re-thresholds.

Each purpose draws from its own random stream (SPEC §5), so the state after i AL and
j LR rounds does not depend on their order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ballad_env.cost import Costs, Evaluation, evaluate
from ballad_env.data import Dataset
from ballad_env.detector import PRIORS, SSDO, PointScores
from ballad_env.protocol import Budget, spawn_streams, split_and_scale, split_sizes
from ballad_env.rejection import (
    DEFAULT_TAU,
    ThresholdSearch,
    confidence,
    empirical_cost,
    rejection_probability,
)
from ballad_env.rewards import REWARDS, cosine_reward, entropy_reward

AL, LR = 0, 1
ACTION_NAMES = ("AL", "LR")
AL_STRATEGIES = ("uncertainty", "random")


@dataclass(frozen=True)
class EpisodeConfig:
    """Everything the paper varies. Defaults are the paper's protocol (SPEC §1-§5)."""

    budget_fraction: float = 0.3
    round_fraction: float = 0.02
    c_fp: float = 1.0
    c_fn: float = 1.0
    c_r: float | None = None  # None: the contamination factor gamma
    prior: str | Any = "iforest"
    threshold_search: str = "exact"
    bayes_calls: int = 20
    al_strategy: str = "uncertainty"
    k: int = 30
    alpha: float = 2.3

    def __post_init__(self) -> None:
        if self.al_strategy not in AL_STRATEGIES:
            raise ValueError(f"unknown AL strategy {self.al_strategy!r}: use one of "
                             f"{AL_STRATEGIES}")
        ThresholdSearch(self.threshold_search, self.bayes_calls)  # validates both
        if isinstance(self.prior, str) and self.prior.lower() not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}: use one of {PRIORS} or a pyod "
                             "detector")


@dataclass
class SideOutput:
    """A side's detector output on D and V: probabilities (entropy) and 0/1 decisions (cosine)."""

    probability: np.ndarray
    decision: np.ndarray

    def rewards(self, previous: SideOutput) -> dict[str, float]:
        """Both reward signals of the change from ``previous`` to this output."""
        return {"entropy": entropy_reward(self.probability, previous.probability),
                "cosine": cosine_reward(self.decision, previous.decision)}


@dataclass
class RoundResult:
    """What one round bought and what it measured."""

    action: int
    queried: np.ndarray
    rewards: dict[str, float]
    evaluation: Evaluation


@dataclass
class _Labels:
    """Which examples of one set are labeled, in the order they were bought."""

    size: int
    order: list[np.ndarray] = field(default_factory=list)

    @property
    def indices(self) -> np.ndarray:
        return np.concatenate(self.order) if self.order else np.empty(0, dtype=np.intp)

    @property
    def count(self) -> int:
        return sum(len(chunk) for chunk in self.order)


def check_settings(dataset: Dataset, config: EpisodeConfig) -> tuple[Costs, Budget]:
    """Costs and budget of ``config`` on ``dataset``; a clear error if either is invalid."""
    costs = Costs.for_contamination(dataset.contamination, config.c_fp, config.c_fn, config.c_r)
    n_train, n_val, _ = split_sizes(dataset.y)
    budget = Budget.from_fractions(n_train, config.budget_fraction, config.round_fraction)
    budget.check(n_train, n_val, dataset.name)
    return costs, budget


class Episode:
    """One episode: the state after any number of AL and LR rounds, and how it evaluates."""

    def __init__(self, dataset: Dataset, seed: int | np.random.SeedSequence,
                 config: EpisodeConfig | None = None) -> None:
        self.config = config or EpisodeConfig()
        self.dataset = dataset
        self.gamma = dataset.contamination
        cfg = self.config
        self.costs, self.budget = check_settings(dataset, cfg)
        self.search = ThresholdSearch(cfg.threshold_search, cfg.bayes_calls)
        streams = spawn_streams(seed)
        self.split = split_and_scale(dataset.X, dataset.y, np.random.default_rng(streams["split"]))
        n_train, n_val = len(self.split.y_train), len(self.split.y_val)
        prior_seed = int(np.random.default_rng(streams["prior"]).integers(2**31 - 1))
        detector = SSDO(self.gamma, cfg.prior, cfg.k, cfg.alpha, random_state=prior_seed)
        detector.fit(self.split.X_train)
        self.scores = PointScores(detector, np.vstack([self.split.X_val, self.split.X_test]))
        self._al_rng = np.random.default_rng(streams["al"])
        self._lr_order = np.random.default_rng(streams["lr"]).permutation(n_val)
        self._threshold_stream = streams["threshold"]
        self.train_labels, self.val_labels = _Labels(n_train), _Labels(n_val)
        self.rounds_done = 0
        self._evaluation: tuple[tuple[int, int], Evaluation] | None = None
        self._refresh_probabilities()
        self.tau = 0.0
        initial = self._outputs(DEFAULT_TAU)
        self.stored: dict[int, SideOutput] = {AL: initial[AL], LR: initial[LR]}
        self.latest: dict[int, dict[str, float] | None] = {AL: None, LR: None}

    # ----------------------------------------------------------------- state queries
    @property
    def n_al(self) -> int:
        """AL rounds taken so far."""
        return len(self.train_labels.order)

    @property
    def n_lr(self) -> int:
        """LR rounds taken so far."""
        return len(self.val_labels.order)

    @property
    def done(self) -> bool:
        """True once the whole budget is spent."""
        return self.rounds_done >= self.budget.n_rounds

    def available(self, action: int) -> bool:
        """Whether the pool of ``action`` still holds a whole round of unlabeled examples."""
        labels = self.train_labels if action == AL else self.val_labels
        return labels.size - labels.count >= self.budget.per_round

    def action_mask(self) -> np.ndarray:
        """Boolean mask over (AL, LR): which actions can be taken now."""
        if self.done:
            return np.zeros(2, dtype=bool)
        return np.array([self.available(AL), self.available(LR)])

    def anomalies_found(self) -> int:
        """Anomalies among all labels bought so far."""
        return int(self.split.y_train[self.train_labels.indices].sum()
                   + self.split.y_val[self.val_labels.indices].sum())

    def evaluate_test(self) -> Evaluation:
        """Cost, FPR, FNR, rejection rate and ROC AUC on T with the current detector and tau.

        Computed once per state: a step, its reward and its ``info`` all read it.
        """
        state = (self.n_al, self.n_lr)
        if self._evaluation is None or self._evaluation[0] != state:
            self._evaluation = (state, evaluate(self.p_test, self.split.y_test,
                                                confidence(self.p_test) < self.tau, self.costs))
        return self._evaluation[1]

    def threshold_data(self) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities and labels that set tau: labeled V, else labeled D (biased), else none."""
        if self.val_labels.count:
            idx = self.val_labels.indices
            return self.p_val[idx], self.split.y_val[idx]
        idx = self.train_labels.indices
        return self.p_train[idx], self.split.y_train[idx]

    def validation_cost(self) -> float:
        """M(tau) on the labeled examples that set tau (0 before any label)."""
        p, y = self.threshold_data()
        return empirical_cost(self.tau, confidence(p), (p > 0.5).astype(np.int8), y, self.costs)

    def validation_rejection_rate(self) -> float:
        """Share of all of V (labeled or not) that tau rejects."""
        return float(np.mean(confidence(self.p_val) < self.tau))

    # ----------------------------------------------------------------- transitions
    def step(self, action: int) -> RoundResult:
        """Spend one round of the budget on ``action`` (AL or LR) and measure its reward."""
        if self.done:
            raise RuntimeError("step() called after the episode ended: the label budget is "
                               "spent; call reset()")
        if action not in (AL, LR):
            raise ValueError(f"invalid action {action!r}: use 0 (AL) or 1 (LR)")
        if not self.available(action):
            pool = "D (training)" if action == AL else "V (validation)"
            raise ValueError(f"action {ACTION_NAMES[action]} is unavailable: {pool} has fewer "
                             f"than {self.budget.per_round} unlabeled examples left")
        queried = self._query_al() if action == AL else self._query_lr()
        self.rounds_done += 1
        if action == AL:
            self._refresh_probabilities()
        self._refresh_threshold()
        output = self._outputs(self.tau)[action]
        rewards = output.rewards(self.stored[action])
        self.stored[action] = output
        self.latest[action] = rewards
        return RoundResult(action, queried, rewards, self.evaluate_test())

    def _query_al(self) -> np.ndarray:
        """Buy b training labels: random in the first AL round, then by uncertainty."""
        b = self.budget.per_round
        labeled = np.zeros(self.train_labels.size, dtype=bool)
        labeled[self.train_labels.indices] = True
        pool = np.flatnonzero(~labeled)
        if self.n_al == 0 or self.config.al_strategy == "random":
            chosen = self._al_rng.choice(pool, size=b, replace=False)
        else:
            tie_break = self._al_rng.random(pool.size)
            order = np.lexsort((tie_break, confidence(self.p_train[pool])))
            chosen = pool[order[:b]]
        self.train_labels.order.append(chosen)
        self.scores.add_labels(self.split.X_train[chosen], self.split.y_train[chosen])
        return chosen

    def _query_lr(self) -> np.ndarray:
        """Buy b random validation labels (a fixed random order of V, drawn at the start)."""
        b, start = self.budget.per_round, self.val_labels.count
        chosen = self._lr_order[start:start + b]
        self.val_labels.order.append(chosen)
        return chosen

    def _refresh_probabilities(self) -> None:
        """Anomaly probabilities of D, V and T under the current detector."""
        self.p_train, p_other = self.scores.probabilities()
        n_val = len(self.split.y_val)
        self.p_val, self.p_test = p_other[:n_val], p_other[n_val:]

    def _refresh_threshold(self) -> None:
        """Re-optimise tau on the labels that set it (SPEC §3), seeded by the state (i, j)."""
        p, y = self.threshold_data()
        stream = self._threshold_stream
        state = np.random.SeedSequence(stream.entropy,
                                       spawn_key=(*stream.spawn_key, self.n_al, self.n_lr))
        self.tau = self.search(p, y, self.costs, seed=int(state.generate_state(1)[0]))

    def _outputs(self, tau: float) -> dict[int, SideOutput]:
        """Each side's output on D and V: AL the anomaly side, LR the rejection side."""
        p = np.concatenate([self.p_train, self.p_val])
        conf = confidence(p)
        return {AL: SideOutput(p, (p > 0.5).astype(np.float64)),
                LR: SideOutput(rejection_probability(conf, tau), (conf < tau).astype(np.float64))}


__all__ = ["AL", "LR", "ACTION_NAMES", "AL_STRATEGIES", "REWARDS", "Episode", "EpisodeConfig",
           "RoundResult", "SideOutput"]
