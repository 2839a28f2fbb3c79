"""One repetition of the BALLAD protocol as a plain state machine (no Gymnasium).

An ``Episode`` owns the split, the detector, the labels bought so far, the rejection
rule in force (``rejection``: the settings' rejector's, ``ballad_env.rejection``) and each
side's stored output for the rewards. ``step(AL)`` buys b training
labels, ``step(LR)`` buys b validation labels. Label-free work (split, scaling, prior,
eta, prior probabilities of V and T: an :class:`EpisodeStart`) happens once in
``__init__``, or is taken from the process's reset cache (``ballad_env.compute``) when
this data set and seed were started before under the same prior and kernel options; a
round only adds kernel sums for the new labels and re-thresholds. Both run with one
BLAS/OpenMP thread by default (``ballad_env.compute``).

Each purpose draws from its own random stream (``docs/method.md``, Protocol), so the
state after i AL and j LR rounds does not depend on their order; with
``query_rng="authors"`` (the published code's one shared stream) it does.

The budget is a number of rounds. A query strategy may buy fewer than b labels in a round
(``threshold-distance-authors`` buys none when the published rejected flag says so): the
round still counts as one of the budget's rounds and as an AL (or LR) round (``n_al``,
``n_lr``), it records what it bought (``queried``, possibly empty), and the labels it did not
buy are not carried over, as in the published code; ``n_labeled_train``/``n_labeled_val``
count the labels bought. An AL round that bought nothing leaves the detector as it was.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ballad_env.compute import thread_limit
from ballad_env.cost import Evaluation, evaluate
from ballad_env.data import Dataset
from ballad_env.episode_start import (
    EpisodeStart,
    authors_split_seed,
    check_settings,
    episode_start,
)
from ballad_env.protocol import spawn_streams
from ballad_env.queries import (
    AL_QUERIES,
    LR_QUERIES,
    QueryContext,
    query_generators,
    select_with,
)
from ballad_env.rejection import Rejection, TrainingRejector, make_rejector, rejector_figures
from ballad_env.rejection.confidence import (
    labeled_cost,
    labeled_example_costs,
    mean_and_standard_error,
)
from ballad_env.rewards import SideOutput
from ballad_env.settings import Settings
from ballad_env.snapshot import (
    ACTION_NAMES,
    AL,
    LR,
    PATH_FIELDS,
    RECORD_FIELDS,
    STATE_FIGURES,
    Snapshot,
    detector_traits,
)


@dataclass(frozen=True)
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

    def unlabeled(self) -> np.ndarray:
        """Sorted indices of the examples not labeled yet."""
        labeled = np.zeros(self.size, dtype=bool)
        labeled[self.indices] = True
        return np.flatnonzero(~labeled)


class Episode:
    """One episode: the state after any number of AL and LR rounds, and how it evaluates."""

    def __init__(self, dataset: Dataset, seed: int | np.random.SeedSequence,
                 settings: Settings | None = None) -> None:
        with thread_limit():
            self._start(dataset, seed, settings or Settings())

    def _start(self, dataset: Dataset, seed: int | np.random.SeedSequence,
               settings: Settings) -> None:
        self.settings = cfg = settings
        self.dataset = dataset
        self.contamination = dataset.contamination
        self.costs, self.budget = check_settings(dataset, cfg)
        self.rejector = make_rejector(cfg)
        self.rejection: Rejection = self.rejector.start()
        streams = spawn_streams(seed)
        split_seed = authors_split_seed(seed, streams)
        self.start = episode_start(dataset, streams, cfg, split_seed)
        self.split = self.start.split
        n_train, n_val = len(self.split.y_train), len(self.split.y_val)
        #: The eta sample and kernel precision in force (the settings' "auto" resolved).
        self.eta_sample = cfg.eta_sample_for(n_train)
        self.kernel_dtype = cfg.kernel_dtype_for(n_train)
        self.scores = self.start.scores(cfg, streams)
        al_rng, lr_rng = query_generators(cfg.query_rng, streams["al"], streams["lr"],
                                          cfg.query_seed_for(split_seed))
        self.al_query = AL_QUERIES[cfg.al_strategy](al_rng, n_train)
        self.lr_query = LR_QUERIES[cfg.lr_strategy](lr_rng, n_val)
        self._threshold_stream = streams["threshold"]
        #: query_rng="authors"'s shared legacy stream, for a rejector that draws from it
        self._shared_stream = al_rng if (isinstance(al_rng, np.random.RandomState)
                                         and self.rejector.draws_from_shared_stream) else None
        self.train_labels, self.val_labels = _Labels(n_train), _Labels(n_val)
        self.rounds_done = 0
        self.previous: int | None = None
        self.last_queried = np.empty(0, dtype=np.intp)
        self._evaluation: tuple[tuple[int, int], Evaluation] | None = None
        self._refresh_probabilities()
        self.p_train_start = self.p_train
        self.prior_traits = detector_traits(self.p_train)
        if self.rejector.reads_training:  # a label-free rule is in force from the start
            self.rejection = self._reads_training().label_free(self.p_train,
                                                               self.contamination, self.costs)
        initial = self._outputs(self._initial_rule(), initial=True, p=self.start.p_initial)
        self.stored: dict[int, SideOutput] = {AL: initial[AL], LR: initial[LR]}
        self.latest: dict[int, dict[str, float] | None] = {AL: None, LR: None}

    # ----------------------------------------------------------------- state queries
    @property
    def tau(self) -> float:
        """The rejection rule's tau (two-sided: the band's width right - left)."""
        return self.rejection.tau

    @property
    def search(self) -> Any:
        """The rejector's threshold search (confidence: its ``ThresholdSearch``)."""
        return getattr(self.rejector, "search", None)

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
        """Cost, FPR, FNR, rejection rate and ROC AUC on T with the current detector and
        rejection rule.

        Computed once per state: a step, its reward and its ``info`` all read it.
        """
        state = (self.n_al, self.n_lr)
        if self._evaluation is None or self._evaluation[0] != state:
            self._evaluation = (state, evaluate(self.p_test, self.split.y_test,
                                                self.rejection.reject(self.p_test), self.costs))
        return self._evaluation[1]

    def threshold_pool(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pool whose labels set the rejection rule: its probabilities, the indices of its
        labeled members (in the order bought) and its labels. V once it holds a label, else
        D (biased; no labeled member with ``tau_without_val="zero"``: no rejection; V with
        no labeled member with ``"validation"``, the published SADAL code's)."""
        if self.val_labels.count or self.settings.tau_without_val == "validation":
            return self.p_val, self.val_labels.indices, self.split.y_val
        idx = self.train_labels.indices
        if self.settings.tau_without_val == "zero":
            idx = idx[:0]
        return self.p_train, idx, self.split.y_train

    def threshold_data(self) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities and labels of the labeled examples that set the rejection rule."""
        p, idx, y = self.threshold_pool()
        return p[idx], y[idx]

    def validation_cost(self) -> float:
        """M on the labeled examples that set the rejection rule (0 before any label)."""
        p, y = self.threshold_data()
        return labeled_cost(self.rejection.reject(p), (p > 0.5).astype(np.int8), y, self.costs)

    def validation_sample_cost(self) -> tuple[float, float]:
        """Cost of the current detector and tau on the labeled V examples only, with its
        standard error ((0, 0) before any V label).

        V's labels are a uniform random sample (either LR strategy), so unlike ``val_cost``
        (which falls back on D's uncertainty-sampled labels) this estimate is not biased by
        the query strategy; tau is fitted on the same labels, so it is optimistic, and
        equally so before and after an AL round on the same labels.
        """
        idx = self.val_labels.indices
        p = self.p_val[idx]
        values = labeled_example_costs(self.rejection.reject(p), (p > 0.5).astype(np.int8),
                                       self.split.y_val[idx], self.costs)
        return mean_and_standard_error(values)

    def validation_rejection_rate(self) -> float:
        """Share of all of V (labeled or not) that the rejection rule rejects."""
        return float(np.mean(self.rejection.reject(self.p_val)))

    def snapshot(self) -> Snapshot:
        """The episode now, as one frozen record (see :class:`Snapshot`)."""
        test = self.evaluate_test()
        mask = self.action_mask()
        sample_cost, sample_se = self.validation_sample_cost()
        flagged, confidence = detector_traits(self.p_train)
        return Snapshot(
            dataset=self.dataset.name, round=self.rounds_done, n_rounds=self.budget.n_rounds,
            n_al=self.n_al, n_lr=self.n_lr, previous=self.previous,
            queried=self.last_queried.copy(), test_cost=test.cost, fpr=test.fpr, fnr=test.fnr,
            rejection_rate=test.rejection_rate, auc=test.auc,
            test_cost_per_example=test.cost_per_example,
            test_cost_class_conditional=test.cost_class_conditional, tau=self.tau,
            threshold_left=self.rejection.thresholds[0],
            threshold_right=self.rejection.thresholds[1],
            **rejector_figures(self.rejection),
            val_cost=self.validation_cost(), val_rejection=self.validation_rejection_rate(),
            val_sample_cost=sample_cost, val_sample_se=sample_se,
            n_labeled_train=self.train_labels.count, n_labeled_val=self.val_labels.count,
            n_train=self.train_labels.size, n_val=self.val_labels.size,
            n_anomalies_found=self.anomalies_found(), contamination=self.contamination,
            max_cost=self.costs.max_cost, c_fp=self.costs.c_fp, c_fn=self.costs.c_fn,
            c_r=self.costs.c_r, n_features=self.dataset.n_features,
            per_round=self.budget.per_round, prior_flagged=self.prior_traits[0],
            prior_confidence=self.prior_traits[1], flagged_train=flagged,
            confidence_train=confidence,
            train_shift=float(np.mean(np.abs(self.p_train - self.p_train_start))),
            al_available=bool(mask[AL]),
            lr_available=bool(mask[LR]),
            latest={side: None if values is None else dict(values)
                    for side, values in self.latest.items()})

    # ----------------------------------------------------------------- transitions
    def step(self, action: int) -> RoundResult:
        """Spend one round of the budget on ``action`` (AL or LR) and measure its reward."""
        with thread_limit():
            return self._step(action)

    def _step(self, action: int) -> RoundResult:
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
        self.previous, self.last_queried = action, queried
        if action == AL:
            self._refresh_probabilities()
        self._refresh_threshold()
        output = self._outputs(self.rejection)[action]
        rewards = output.rewards(self.stored[action])
        self.stored[action] = output
        self.latest[action] = rewards
        return RoundResult(action, queried, rewards, self.evaluate_test())

    def fork(self) -> Episode:
        """An independent copy to step ahead in (the oracle's look-ahead, the lattice's
        branches); it shares the read-only parts (data, the label-free start and its arrays),
        since copying a fitted IForest costs more than the rounds taken from the copy."""
        shared = (self.dataset, *self.start.shared)
        return copy.deepcopy(self, {id(part): part for part in shared})

    def _query_al(self) -> np.ndarray:
        """Buy b training labels chosen by the AL query strategy; update the detector."""
        chosen = select_with(self.al_query, self.p_train, self.train_labels.unlabeled(),
                             self.budget.per_round, self.query_context())
        self.train_labels.order.append(chosen)
        if chosen.size:  # a round that bought nothing leaves the detector as it was
            self.scores.add_training_labels(chosen, self.split.y_train[chosen])
        return chosen

    def _query_lr(self) -> np.ndarray:
        """Buy b validation labels chosen by the LR query strategy."""
        chosen = select_with(self.lr_query, self.p_val, self.val_labels.unlabeled(),
                             self.budget.per_round, self.query_context())
        self.val_labels.order.append(chosen)
        return chosen

    def _refresh_probabilities(self) -> None:
        """Anomaly probabilities of D, V and T under the current detector."""
        self.p_train, p_other = self.scores.probabilities()
        n_val = len(self.split.y_val)
        self.p_val, self.p_test = p_other[:n_val], p_other[n_val:]

    def query_context(self) -> QueryContext:
        """What the query strategies that read it get (``queries.select_with``): the
        rejection band's ends (left, right) in force, i.e. those of the previous round, once
        an LR round has set them on V (None before; with ``tau_without_val="validation"``
        once any round has, as in the published SADAL code)."""
        fitted = self.n_lr or (self.rounds_done and self.settings.tau_without_val == "validation")
        return QueryContext(thresholds=self.rejection.thresholds if fitted else None)

    def _initial_rule(self) -> Rejection:
        """The rule of the LR side's initial output: the rejector's ``initial``, or, for a
        rejector that reads D's probabilities, its label-free rule on the initial detector's
        (``start.p_initial``, D's then V's, if another detector's; else the rule in force)."""
        if not self.rejector.reads_training:
            return self.rejector.initial(self.contamination)
        if self.start.p_initial is None:
            return self.rejection
        n_train = len(self.split.y_train)
        return self._reads_training().label_free(self.start.p_initial[:n_train],
                                                 self.contamination, self.costs)

    def _reads_training(self) -> TrainingRejector:
        """The rejector, as one that reads D's probabilities (``reads_training``)."""
        return cast(TrainingRejector, self.rejector)

    def _refresh_threshold(self) -> None:
        """Re-fit the rejection rule on the labels that set it (``threshold_pool``), and on
        D's probabilities for a rejector that reads them."""
        p, labeled, y = self.threshold_pool()
        if self.rejector.reads_training:
            self.rejection = self._reads_training().fit(
                p, labeled, y, self.costs, self._search_seed(), train=self.p_train,
                contamination=self.contamination)
            return
        self.rejection = self.rejector.fit(p, labeled, y, self.costs, self._search_seed())

    def _search_seed(self) -> int:
        """The threshold search's seed: a function of the state (i, j), or, for a rejector
        that draws from it, ``randint(0, 100)`` from ``query_rng="authors"``'s shared stream
        (after the round's queries, as the published SADAL code)."""
        if self._shared_stream is not None:
            return int(self._shared_stream.randint(0, 100))
        stream = self._threshold_stream
        state = np.random.SeedSequence(stream.entropy,
                                       spawn_key=(*stream.spawn_key, self.n_al, self.n_lr))
        return int(state.generate_state(1)[0])

    def _outputs(self, rule: Rejection, initial: bool = False, p: np.ndarray | None = None
                 ) -> dict[int, SideOutput]:
        """Each side's output on D and V (from their probabilities ``p``, by default the
        detector's): AL the anomaly side, LR the rejection side under ``rule``. With
        ``entropy_log="authors"`` the LR side's and the initial AL side's entropies take the
        natural log; ``entropy_terms`` picks the entropy. With ``cosine_rule="authors"`` the
        AL side's decisions are anomatools' -1/+1 labels and the LR side's initial decisions
        all zero (the published ``initialize_loop``'s ``oldpred_LR``)."""
        if p is None:
            p = np.concatenate([self.p_train, self.p_val])
        mixed = self.settings.entropy_log == "authors"
        terms, cosine = self.settings.entropy_terms, self.settings.cosine_rule
        flagged = p > 0.5
        rejected = rule.reject(p).astype(np.float64)
        if cosine == "authors":
            flagged = np.where(flagged, 1.0, -1.0)
            if initial:
                rejected = np.zeros_like(rejected)
        return {AL: SideOutput(p, flagged.astype(np.float64), math.e if mixed and initial
                               else 2.0, terms, cosine),
                LR: SideOutput(rule.rejection_probability(p), rejected,
                               math.e if mixed else 2.0, terms, cosine)}


__all__ = ["ACTION_NAMES", "AL", "LR", "PATH_FIELDS", "RECORD_FIELDS", "STATE_FIGURES", "Episode",
           "EpisodeStart", "RoundResult", "Snapshot", "check_settings", "episode_start"]
