"""Rejectors as an extension point: ``REJECTORS`` and the rules an episode rejects by
(``Settings(rejector=...)``).

An episode reaches its learning-to-reject part through two objects, so a new rejector is
one class registered here (or by a user):

* a ``Rejector``, made once per episode from the settings: the ``Rejection`` in force
  before any label (``start``), the one the LR side's initial output is computed with
  (``initial``: the rewards of the first LR round compare with it), and ``fit``, which
  sets a new one from the probabilities of the pool that sets the thresholds (labeled V,
  else labeled D: ``Episode.threshold_pool``), its labeled members and their labels;
* the ``Rejection`` it returns: a frozen rule (the episode's state, so forks, the reset
  cache, the lattice and the replay hold it) that says which examples it rejects
  (``reject``: the test cost, the rejection rates, the LR side's decisions), how likely
  (``rejection_probability``: the LR side's entropy signal), and its figures: ``tau``
  (the observation's feature) and the band's ends ``thresholds`` = (left, right) (the
  info keys ``threshold_left``/``threshold_right`` and the queries' ``QueryContext``).

Built in:

* ``"confidence"`` (BALLAD's, the default): one threshold tau on the confidence
  C = 2 |P - 0.5| (``rejection.ThresholdSearch``), reject iff C < tau, i.e. the open band
  (0.5 - tau / 2, 0.5 + tau / 2) of P; P_rej = 2^(-(C / tau)^2). Before any label tau = 0
  (reject nothing); the LR side starts from tau = 0.1 (``DEFAULT_TAU``), the paper's.
* ``"two-sided"`` (SADAL's, ``ballad_env.rejection.two_sided``): a left and a right threshold fitted
  apart on the validation probabilities (``fit_two_sided``; the search is the setting's
  ``threshold_search``, ``"exact"`` or ``"authors-bayes"``), reject iff left <= P <= right;
  tau is the band's width right - left (for the confidence band that is tau itself).
  Before any label (0.5, 0.5): only P = 0.5 exactly. The LR side starts, as SADAL's code,
  from BALLAD's one-threshold form with tau = the data's contamination.
* ``"rejex"`` (Perini and Davis's RejEx, ``rejection.rejex``): no label needed. It rejects
  an example iff ExCeeD's stability of its prediction, from its rank among the detector's
  training probabilities and the contamination, is at most 1 - 2 exp(-T) (``rejex_T``,
  default 32). Its ``fit`` ignores the labels: an LR round still buys V's labels, which then
  only estimate the cost (``val_cost``, ``val_sample_cost``). It reads D's probabilities
  (``reads_training``), so the rule is in force from the start and follows each AL round.
* ``"rejex-tuned"``: the same rule with T chosen among ``rejex.TUNED_T`` by the cost on the
  threshold pool's labeled members (ties: the smallest T); ``rejex_T`` before any label.

The search seed is a function of the state (i, j) (the ``"threshold"`` stream), so the
rejection after i AL and j LR rounds does not depend on their order; with
``query_rng="authors"`` the two-sided rejector instead draws ``randint(0, 100)`` from the
shared legacy stream every round, after the round's queries, as the published SADAL code
does (``draws_from_shared_stream``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ballad_env.cost import Costs
from ballad_env.registry import Registry
from ballad_env.rejection.confidence import (
    DEFAULT_TAU,
    THRESHOLD_SEARCHES,
    ThresholdSearch,
    confidence,
    rejection_probability,
)
from ballad_env.rejection.rejex import RejExBand, tuned_band
from ballad_env.rejection.two_sided import (
    TWO_SIDED_SEARCHES,
    TwoSidedThresholds,
    check_tie,
    fit_two_sided,
)

if TYPE_CHECKING:
    from ballad_env.settings import Settings


class Rejection(Protocol):
    """A rejection rule in force: which examples it rejects, how likely, and its figures."""

    @property
    def tau(self) -> float:
        """The observation's rejection figure: the band's width in P (confidence: tau)."""

    @property
    def thresholds(self) -> tuple[float, float]:
        """The band's ends (left, right) in P."""

    def reject(self, p: np.ndarray) -> np.ndarray:
        """Mask of the examples with anomaly probabilities ``p`` that are rejected."""

    def rejection_probability(self, p: np.ndarray) -> np.ndarray:
        """The soft rejection of each example (the LR side's output)."""


@dataclass(frozen=True)
class ConfidenceBand:
    """BALLAD's rule: reject iff the confidence 2 |P - 0.5| is below ``tau`` (the open band
    (0.5 - tau / 2, 0.5 + tau / 2) of P); tau = 0 rejects nothing."""

    tau: float = 0.0

    @property
    def thresholds(self) -> tuple[float, float]:
        return 0.5 - self.tau / 2, 0.5 + self.tau / 2

    def reject(self, p: np.ndarray) -> np.ndarray:
        return confidence(p) < self.tau

    def rejection_probability(self, p: np.ndarray) -> np.ndarray:
        return rejection_probability(confidence(p), self.tau)


class Rejector(Protocol):
    """A kind of rejector, made per episode from the settings (``REJECTORS`` holds the
    classes)."""

    #: Whether the search seed is drawn from ``query_rng="authors"``'s shared stream.
    draws_from_shared_stream: bool
    #: Whether the rule reads D's probabilities (then the episode calls ``label_free`` for
    #: the rules before any label and passes ``train`` to ``fit``).
    reads_training: bool

    def start(self) -> Rejection:
        """The rule before any label."""

    def initial(self, contamination: float) -> Rejection:
        """The rule of the LR side's initial output (what the first LR reward compares with)."""

    def fit(self, p: np.ndarray, labeled: np.ndarray, y: np.ndarray, costs: Costs,
            seed: int) -> Rejection:
        """The rule fitted on a pool: every member's probability ``p``, the indices
        ``labeled`` of its labeled members (in the order bought), the 0/1 labels ``y`` of
        the pool (read where labeled); ``seed``: the search's."""


class TrainingRejector(Rejector, Protocol):
    """A rejector whose rule reads D's probabilities (``reads_training``): a rule before any
    label (``label_free``) and ``fit`` given D's probabilities and the contamination."""

    def label_free(self, train: np.ndarray, contamination: float, costs: Costs) -> Rejection:
        """The rule from D's probabilities ``train`` alone."""

    def fit(self, p: np.ndarray, labeled: np.ndarray, y: np.ndarray, costs: Costs,
            seed: int, train: np.ndarray | None = None, contamination: float = 0.0
            ) -> Rejection:
        """The rule fitted on a pool (as ``Rejector.fit``) and on D's probabilities."""


class ConfidenceRejector:
    """``"confidence"``: BALLAD's one threshold, found by ``ThresholdSearch`` on the labeled
    members only (the settings' ``threshold_search``, ``bayes_calls``, ``tau_position``)."""

    draws_from_shared_stream = False
    reads_training = False

    def __init__(self, settings: Settings) -> None:
        self.search = ThresholdSearch(settings.threshold_search, settings.bayes_calls,
                                      settings.tau_position)

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """Every confidence search applies (checked by ``Settings``); ``tau_without_val=
        "validation"`` is the two-sided rejector's."""
        THRESHOLD_SEARCHES.check(settings.threshold_search)
        if settings.two_sided_tie != "fewest":
            raise ValueError(f"two_sided_tie={settings.two_sided_tie!r} places the two-sided "
                             "rejector's thresholds; the confidence rejector's tau is placed "
                             "by tau_position: leave two_sided_tie at 'fewest', or "
                             "rejector='two-sided'")
        if settings.tau_without_val == "validation":
            raise ValueError("tau_without_val='validation' fits the two-sided rejector on V "
                             "without labels (the published SADAL code); the confidence "
                             "rejector has no such fit: use 'train-labels' or 'zero', or "
                             "rejector='two-sided'")

    def start(self) -> ConfidenceBand:
        return ConfidenceBand(0.0)

    def initial(self, contamination: float) -> ConfidenceBand:
        return ConfidenceBand(DEFAULT_TAU)

    def fit(self, p: np.ndarray, labeled: np.ndarray, y: np.ndarray, costs: Costs,
            seed: int) -> ConfidenceBand:
        return ConfidenceBand(self.search(p[labeled], y[labeled], costs, seed=seed))


class TwoSidedRejector:
    """``"two-sided"``: SADAL's left and right thresholds (``two_sided.fit_two_sided``) on
    the whole pool's probabilities and its labeled members; the search is the settings'
    ``threshold_search`` (``"exact"`` or ``"authors-bayes"``: ``TWO_SIDED_SEARCHES``), the
    exact one landing among tied thresholds by ``two_sided_tie``."""

    draws_from_shared_stream = True
    reads_training = False

    def __init__(self, settings: Settings) -> None:
        self.check_settings(settings)
        self.search = settings.threshold_search
        self.tie = settings.two_sided_tie
        #: fit on a pool without labels (the published SADAL code; its search then stays at
        #: its starting points), rather than keep the start's (0.5, 0.5)
        self.fit_unlabeled = settings.tau_without_val == "validation"

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """A clear error for the confidence rejector's options that do not apply."""
        if settings.threshold_search not in TWO_SIDED_SEARCHES:
            raise ValueError(
                f"threshold_search={settings.threshold_search!r} is a search of the confidence "
                f"rejector; rejector='two-sided' searches with one of "
                f"{', '.join(TWO_SIDED_SEARCHES.names())}")
        if settings.tau_position != "as-found":
            raise ValueError(
                f"tau_position={settings.tau_position!r} places the confidence rejector's tau; "
                "rejector='two-sided' has no such option: leave tau_position at 'as-found'")
        check_tie(settings.two_sided_tie, settings.threshold_search)

    def start(self) -> TwoSidedThresholds:
        return TwoSidedThresholds(0.5, 0.5)

    def initial(self, contamination: float) -> ConfidenceBand:
        return ConfidenceBand(contamination)

    def fit(self, p: np.ndarray, labeled: np.ndarray, y: np.ndarray, costs: Costs,
            seed: int) -> TwoSidedThresholds:
        if np.size(labeled) == 0 and not self.fit_unlabeled:
            return self.start()
        return fit_two_sided(p, labeled, y, costs, self.search, seed, self.tie)


class RejExRejector:
    """``"rejex"``: RejEx's rule with T = ``rejex_T`` on D's probabilities; no label read."""

    draws_from_shared_stream = False
    reads_training = True

    def __init__(self, settings: Settings) -> None:
        self.check_settings(settings)
        self.t = settings.rejex_T

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """The other rejectors' search options do not apply: a clear error naming them."""
        for name, default in (("threshold_search", "exact"), ("tau_position", "as-found"),
                              ("two_sided_tie", "fewest")):
            if getattr(settings, name) != default:
                raise ValueError(f"{name}={getattr(settings, name)!r} tunes another "
                                 f"rejector's threshold search; rejector="
                                 f"{settings.rejector!r} searches no threshold: leave {name} "
                                 f"at {default!r}")
        if settings.tau_without_val == "validation":
            raise ValueError("tau_without_val='validation' fits the two-sided rejector on V "
                             f"without labels; rejector={settings.rejector!r} needs no label: "
                             "use 'train-labels' or 'zero'")

    def start(self) -> ConfidenceBand:
        return ConfidenceBand(0.0)  # replaced by ``label_free`` once D's probabilities exist

    def initial(self, contamination: float) -> ConfidenceBand:
        return ConfidenceBand(DEFAULT_TAU)  # replaced by ``label_free`` on the initial detector

    def label_free(self, train: np.ndarray, contamination: float, costs: Costs) -> RejExBand:
        """The rule before any label: RejEx with T = ``rejex_T``."""
        return RejExBand.fit(train, contamination, self.t, costs)

    def fit(self, p: np.ndarray, labeled: np.ndarray, y: np.ndarray, costs: Costs,
            seed: int, train: np.ndarray | None = None, contamination: float = 0.0
            ) -> RejExBand:
        """The rule on D's probabilities ``train``; the pool's labels are not read."""
        return RejExBand.fit(_needs(train), contamination, self.t, costs)


class TunedRejExRejector(RejExRejector):
    """``"rejex-tuned"``: RejEx with T among ``rejex.TUNED_T`` that costs least on the pool's
    labeled members (``rejex.tuned_band``); ``rejex_T`` while it has none."""

    def fit(self, p: np.ndarray, labeled: np.ndarray, y: np.ndarray, costs: Costs,
            seed: int, train: np.ndarray | None = None, contamination: float = 0.0
            ) -> RejExBand:
        return tuned_band(_needs(train), contamination, costs, np.asarray(p)[labeled],
                          np.asarray(y)[labeled], self.t)


def _needs(train: np.ndarray | None) -> np.ndarray:
    """D's probabilities, which a rejector that reads them cannot fit without."""
    if train is None:
        raise ValueError("a RejEx rejector fits on D's probabilities: pass train=")
    return train


#: name -> the rejector's class (made per episode from the settings).
REJECTORS: Registry[type] = Registry("rejector")
REJECTORS.register("confidence", ConfidenceRejector)
REJECTORS.register("two-sided", TwoSidedRejector)
REJECTORS.register("rejex", RejExRejector)
REJECTORS.register("rejex-tuned", TunedRejExRejector)


def make_rejector(settings: Settings) -> Rejector:
    """The episode's rejector under ``settings``."""
    rejector: Rejector = REJECTORS[settings.rejector](settings)
    return rejector


def check_rejector_settings(settings: Settings) -> None:
    """The registered rejector's own check of the settings (a ``ValueError`` naming the
    option), if it has one."""
    check = getattr(REJECTORS[settings.rejector], "check_settings", None)
    if check is not None:
        check(settings)


#: The info keys of ``rejector_figures``: RejEx's expected test rejection rate and its
#: bounds on the rate and the cost per test example.
REJECTOR_FIGURES = ("rejex_expected_rejection", "rejex_rejection_bound", "rejex_cost_bound")
#: A rejector figure of a rule without it: -1, never a rate or a cost (not NaN, which
#: gymnasium's checker cannot tell equal to itself in two identical infos).
NO_FIGURE = -1.0


def rejector_figures(rule: Rejection) -> dict[str, float]:
    """A rule's own info figures (RejEx's expected rejection rate and bounds), ``NO_FIGURE``
    for a rule that has none."""
    figures = getattr(rule, "figures", None) or {}
    return {name: float(figures.get(name, NO_FIGURE)) for name in REJECTOR_FIGURES}


__all__ = ["NO_FIGURE", "REJECTORS", "REJECTOR_FIGURES", "ConfidenceBand", "ConfidenceRejector",
           "RejExRejector", "Rejection", "Rejector", "TrainingRejector", "TunedRejExRejector",
           "TwoSidedRejector", "check_rejector_settings", "make_rejector", "rejector_figures"]
