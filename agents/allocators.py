"""Allocators that read the validation-sample cost (observation v1): docs/studies/ALLOCATORS.md.

V's labels are a uniform sample, so the cost of the detector on them
(``val_sample_cost``) is an unbiased estimate of its cost; and while only AL rounds are
taken the labeled V examples stay the same, so the estimate before and after AL rounds is
a *paired* measurement of what those rounds did. The rules here use that:

- ``paired-probe``: LR for a warm-up, then AL rounds; stay on AL while the paired
  decrease since the probe started exceeds ``z`` standard errors, else LR to the end.
- ``paired-commit``: the same probe, decided once at its end.
- ``probe-switch``: the same warm-up and a one-round AL probe, then all AL if the probe's
  entropy reward (label-free: how much the detector moved) reaches a threshold, else LR.
- ``thompson-gain``: Thompson sampling, each round, between AL's gain (a Gaussian posterior
  on the paired decrease over AL rounds) and LR's expected gain (how much one more round of
  V labels shrinks the estimate's standard error).
- ``ei-gain``: the same posterior, decided by budget-aware expected improvement (no
  randomness): AL if its expected edge plus what learning it could still win pays.
- ``trait-switch``: a probe round of AL, then all AL or all LR by a logistic score of the
  data set's label-free traits read after it (gamma, how far the detector moved, ...),
  fitted on the training data sets.

(A greedy rule on the validation-sample cost would be ``val-cost-greedy``: once V holds a
label, ``val_cost`` is computed on V's labels only, so the two estimates agree on every
state the rule visits after its first LR round.)

Defaults are the values tuned on the training data sets of ``docs/policy_split.json``
(``scripts.studies.allocators``). Each rule keeps its own state, reset by
``reset(seed)`` and whenever an observation shows an unspent budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.base import AL, LR, AgentFactory, EpisodeStateAgent, ProbeThenDecide, feature


class _OneEpisodeAgent(EpisodeStateAgent):
    """A rule with per-episode state: one environment at a time, reset on a new episode."""

    observation_version = "v1"


class PairedProbe(_OneEpisodeAgent):
    """LR for ``warmup`` rounds, then AL; after ``probe`` AL rounds AL continues while
    the validation-sample cost has fallen by more than ``z`` of its standard errors since
    the probe began (measured on the same V labels), else LR for the rest of the budget.

    With ``recheck=False`` the decision is taken once, at the end of the probe
    (``paired-commit``). The standard error is the one at the probe's start.
    """

    def __init__(self, warmup: int = 6, probe: int = 1, z: float = 1.0,
                 recheck: bool = True) -> None:
        if warmup < 1 or probe < 1:
            raise ValueError(f"warmup and probe must be >= 1 round (the paired measurement "
                             f"needs V labels and an AL round), got {warmup} and {probe}")
        self.warmup, self.probe, self.z, self.recheck = int(warmup), int(probe), float(z), recheck
        self.name = "paired-probe" if recheck else "paired-commit"
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the episode: warm-up again."""
        self.rounds = 0
        self.mode = "warmup"
        self.reference: tuple[float, float] | None = None  # (cost, se) at the probe's start
        self.probed = 0

    def act(self, observation: np.ndarray) -> int:
        if feature(observation, "budget_used") == 0.0:
            self.reset()
        if self.mode == "warmup" and self.rounds >= self.warmup:
            self.mode = "probe"
            self.reference = (feature(observation, "val_sample_cost"),
                              feature(observation, "val_sample_se"))
        if self.mode == "probe" and self.probed >= self.probe \
                or self.mode == "al" and self.recheck:
            self.mode = "al" if self.pays(observation) else "lr"
        action = LR if self.mode in ("warmup", "lr") else AL
        self.rounds += 1
        if action == AL and self.mode == "probe":
            self.probed += 1
        return action

    def pays(self, observation: np.ndarray) -> bool:
        """Whether the paired decrease since the probe began exceeds ``z`` standard errors
        (false if an LR round came in between: the labels are no longer the same)."""
        if self.reference is None or feature(observation, "prev_al") < 0.5:
            return False
        cost, se = self.reference
        return bool(cost - feature(observation, "val_sample_cost") > self.z * se + 1e-9)

    def __repr__(self) -> str:
        return (f"PairedProbe(warmup={self.warmup}, probe={self.probe}, z={self.z:g}, "
                f"recheck={self.recheck})")


class ProbeSwitch(_OneEpisodeAgent):
    """LR for ``warmup`` rounds, one AL round, then AL to the end if that round's entropy
    reward is at least ``threshold`` (the detector moved a lot on its first labels), else LR.

    Reads no validation label at all: the decision is a data set trait measured by one
    round of AL. The threshold is learned on the training data sets.
    """

    name = "probe-switch"
    observation_version = "v0"

    def __init__(self, warmup: int = 1, threshold: float = 0.13) -> None:
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0 rounds, got {warmup}")
        self.warmup, self.threshold = int(warmup), float(threshold)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the episode."""
        self.rounds = 0
        self.choice: int | None = None

    def act(self, observation: np.ndarray) -> int:
        if feature(observation, "budget_used") == 0.0:
            self.reset()
        self.rounds += 1
        if self.rounds <= self.warmup:
            return LR
        if self.rounds == self.warmup + 1:
            return AL
        if self.choice is None:
            moved = feature(observation, "entropy_al") if feature(observation, "prev_al") > 0.5 \
                else 0.0
            self.choice = AL if moved >= self.threshold else LR
        return self.choice

    def __repr__(self) -> str:
        return f"ProbeSwitch(warmup={self.warmup}, threshold={self.threshold:g})"


class ThompsonGain(_OneEpisodeAgent):
    """Thompson sampling between AL's gain per round and LR's expected gain.

    AL's gain is the paired decrease of the validation-sample cost over one AL round (the
    same V labels before and after), with a Gaussian posterior: prior ``N(prior_mean * s,
    (prior_sd * s)**2)`` where s is the standard error after the first LR round, and each
    AL round an observation with noise ``noise`` x the standard error before it. LR's gain
    is ``lr_gain`` x how much one more round of V labels shrinks that standard error,
    se x (1 - sqrt(j / (j + 1))) after j LR rounds: more labels matter while tau is set on
    few. Each round draws AL's gain from the posterior and takes AL if the draw is larger.
    Round 0 is LR (nothing can be measured without a V label). Randomness: one generator,
    ``numpy.random.default_rng(seed)`` from ``reset(seed)``, restarted with every episode.
    """

    name = "thompson-gain"

    #: Floor of a standard error (in units of the largest unit cost): all-equal costs on
    #: the V sample give an SE of 0, which would make the prior and the noise degenerate.
    SE_FLOOR = 1e-3

    def __init__(self, prior_mean: float = 0.0, prior_sd: float = 1.0, noise: float = 1.0,
                 lr_gain: float = 2.0) -> None:
        if prior_sd <= 0 or noise <= 0 or lr_gain < 0:
            raise ValueError(f"prior_sd and noise must be > 0 and lr_gain >= 0, got "
                             f"{prior_sd}, {noise} and {lr_gain}")
        self.prior_mean, self.prior_sd = float(prior_mean), float(prior_sd)
        self.noise, self.lr_gain = float(noise), float(lr_gain)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Forget the episode; ``seed`` seeds the generator of this and later episodes."""
        self.seed = seed
        self._restart()

    def _restart(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.lr_rounds = 0
        self.posterior: tuple[float, float] | None = None  # (mean, variance) of AL's gain
        self.before: tuple[float, float] | None = None  # (cost, se) before the last round

    def act(self, observation: np.ndarray) -> int:
        if feature(observation, "budget_used") == 0.0:
            self._restart()
        if feature(observation, "prev_lr") > 0.5:
            self.lr_rounds += 1
        if self.lr_rounds == 0:
            return LR  # nothing to measure yet (and no v1 feature read: any version works)
        cost, se = feature(observation, "val_sample_cost"), feature(observation, "val_sample_se")
        if feature(observation, "prev_al") > 0.5 and self.posterior and self.before:
            self.posterior = self.update(self.posterior, self.before[0] - cost,
                                         (self.noise * max(self.before[1], self.SE_FLOOR)) ** 2)
        self.before = (cost, se)
        if self.posterior is None:
            scale = max(se, self.SE_FLOOR)
            self.posterior = (self.prior_mean * scale, (self.prior_sd * scale) ** 2)
        j = self.lr_rounds
        lr_value = self.lr_gain * se * (1.0 - np.sqrt(j / (j + 1.0)))
        return AL if self.prefers_al(*self.posterior, lr_value, observation) else LR

    def prefers_al(self, mean: float, variance: float, lr_value: float,
                   observation: np.ndarray) -> bool:
        """Whether a draw of AL's gain from the posterior beats LR's gain."""
        return bool(mean + np.sqrt(variance) * self.rng.standard_normal() > lr_value)

    @staticmethod
    def update(posterior: tuple[float, float], gain: float, noise_var: float
               ) -> tuple[float, float]:
        """The Gaussian posterior (mean, variance) after observing ``gain`` with noise
        variance ``noise_var`` (conjugate normal update)."""
        mean, variance = posterior
        precision = 1.0 / variance + 1.0 / noise_var
        return (mean / variance + gain / noise_var) / precision, 1.0 / precision

    def __repr__(self) -> str:
        return (f"ThompsonGain(prior_mean={self.prior_mean:g}, prior_sd={self.prior_sd:g}, "
                f"noise={self.noise:g}, lr_gain={self.lr_gain:g})")



class ExpectedImprovementGain(ThompsonGain):
    """``thompson-gain``'s posterior and LR gain, decided without randomness and aware of
    the budget: AL if ``d + kappa * remaining * EI > 0``, where d = posterior mean minus
    LR's gain, EI = E[max(gain - LR's gain, 0)] (what learning AL's gain could still win)
    and ``remaining`` the share of the budget left to use what is learned."""

    name = "ei-gain"

    def __init__(self, prior_mean: float = 0.0, prior_sd: float = 1.0, noise: float = 1.0,
                 lr_gain: float = 2.0, kappa: float = 1.0) -> None:
        if kappa < 0:
            raise ValueError(f"kappa must be >= 0, got {kappa}")
        self.kappa = float(kappa)
        super().__init__(prior_mean, prior_sd, noise, lr_gain)

    @staticmethod
    def expected_improvement(delta: float, sd: float) -> float:
        """E[max(X, 0)] for X ~ N(delta, sd^2): sd phi(delta / sd) + delta Phi(delta / sd)."""
        z = delta / sd
        pdf = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        cdf = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
        return sd * pdf + delta * cdf

    def prefers_al(self, mean: float, variance: float, lr_value: float,
                   observation: np.ndarray) -> bool:
        delta = mean - lr_value
        remaining = 1.0 - feature(observation, "budget_used")
        ei = self.expected_improvement(delta, math.sqrt(variance))
        return delta + self.kappa * remaining * ei > 0.0

    def __repr__(self) -> str:
        return super().__repr__().replace("ThompsonGain(", "ExpectedImprovementGain(")[:-1] \
            + f", kappa={self.kappa:g})"


class TraitSwitch(ProbeThenDecide):
    """The ``probe`` rounds, then all AL if a logistic score of traits read after them is
    positive, else all LR: ``intercept + sum(coef * (trait - center) / scale) > 0``.

    The traits (``TRAITS``) need no label beyond the probe's: gamma, how much the probe's AL
    round moved the detector (entropy and cosine rewards), the anomalies it found, and tau
    and the rejection rate it leaves. The decision that matters comes first
    (docs/studies/ALLOCATORS.md), so the probe is short. The coefficients are fitted on the
    training data sets (``scripts.studies.allocators.fit_trait_switch``).
    """

    name = "trait-switch"
    observation_version = "v1"
    TRAITS = ("contamination", "entropy_al", "cosine_al", "anomalies_found", "tau",
              "val_rejection")

    def __init__(self, coef: Sequence[float], intercept: float, center: Sequence[float],
                 scale: Sequence[float], probe: Sequence[int] = (AL,)) -> None:
        n = len(self.TRAITS)
        if not len(coef) == len(center) == len(scale) == n:
            raise ValueError(f"coef, center and scale need one value per trait ({n}), got "
                             f"{len(coef)}, {len(center)} and {len(scale)}")
        if min(scale) <= 0 or not probe or probe[-1] != AL:
            raise ValueError("scales must be > 0 and the probe must end with an AL round")
        self.coef, self.center, self.scale = (np.asarray(v, dtype=float)
                                              for v in (coef, center, scale))
        self.intercept, self.probe = float(intercept), tuple(int(a) for a in probe)
        self.reset()

    def score(self, observation: np.ndarray) -> float:
        """The logistic score (log-odds that AL pays) of the traits in ``observation``."""
        traits = np.array([feature(observation, name) for name in self.TRAITS])
        return float(self.intercept + self.coef @ ((traits - self.center) / self.scale))

    def decide(self, observation: np.ndarray) -> int:
        """All AL if the traits' score is positive, else all LR."""
        return AL if self.score(observation) > 0.0 else LR

    def __repr__(self) -> str:
        return (f"TraitSwitch(coef={self.coef.round(4).tolist()}, "
                f"intercept={self.intercept:.4g}, probe={self.probe})")


#: The trait switch fitted on the 12 training data sets at the default costs (both priors;
#: ``allocator_study.fit_trait_switch``, rounded to 4 digits), in ``TraitSwitch.TRAITS`` order.
TRAIT_SWITCH_DEFAULTS: dict[str, Any] = {
    "coef": [1.9132, 1.2268, 1.1617, -1.8086, -0.5641, -0.2552], "intercept": -2.7420,
    "center": [0.041, 0.0726, 0.1867, 0.0134, 0.7201, 0.1958],
    "scale": [0.0287, 0.0552, 0.2185, 0.0273, 0.291, 0.1902], "probe": (AL,)}

#: Registered names and factories (the environment is not needed by any of them), with the
#: parameters tuned on the training data sets at the default costs (docs/studies/ALLOCATORS.md).
ALLOCATOR_AGENTS: dict[str, AgentFactory] = {
    "paired-probe": lambda env: PairedProbe(warmup=6, probe=1, z=1.0),
    "paired-commit": lambda env: PairedProbe(warmup=10, probe=1, z=2.0, recheck=False),
    "probe-switch": lambda env: ProbeSwitch(),
    "thompson-gain": lambda env: ThompsonGain(prior_mean=-0.5, prior_sd=0.25, noise=2.0,
                                              lr_gain=0.0),
    "ei-gain": lambda env: ExpectedImprovementGain(prior_mean=-0.5, prior_sd=0.25, noise=0.5,
                                                   lr_gain=0.0, kappa=16.0),
    "trait-switch": lambda env: TraitSwitch(**TRAIT_SWITCH_DEFAULTS),
}


__all__ = ["ALLOCATOR_AGENTS", "TRAIT_SWITCH_DEFAULTS", "ExpectedImprovementGain", "PairedProbe",
           "ProbeSwitch", "ThompsonGain", "TraitSwitch"]
