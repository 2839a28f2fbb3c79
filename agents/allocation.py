"""Allocators fitted across data sets and cost levels (observation v2): docs/studies/ALLOCATION.md.

Both read observation v2 (``ballad_env.observation``): the unit costs, the budget and
label-free traits of the data and the detector, next to v1's features. Each holds one linear
model per cost level it was fitted at and uses the one whose cost ratio (``cost_ratio``:
log10(c_fn / c_fp), scaled) is nearest the episode's, so one agent serves every level.

- ``split-rule``: the ``probe`` rounds (one AL round by default: it shows how far labels move
  the detector), then a fixed split of the rounds left, m LR rounds and then AL. A ridge
  regression per split predicts its mean cost (relative to All-in-LR) from the traits read
  after the probe; the rule takes the split predicted cheapest. It generalises
  ``trait-switch`` (all AL or all LR) to every split.
- ``imitation``: a logistic policy over the whole observation, each round, fitted to the
  lattice's hindsight-optimal action at the states it visits (behaviour cloning, then DAgger
  rounds on its own paths), each state weighted by what the wrong action costs.
- ``maskable-ppo``: MaskablePPO policies trained on the replay environment, one per cost
  level (saved SB3 models shipped in ``allocation_policies/``; needs the ``rl`` extra).

The fitted parameters ship as JSON (``allocation_params.json``), read without pickle, and
the policies as SB3 zips loaded without unpickling; the fit is
``scripts.studies.allocation``. ``allocator`` is ``safe-split-3``
(``agents.split_allocators.SafeSplit``, fitted on the training sets and their real-anomaly
tasks by ``scripts.studies.allocation.safe_study``): safe by construction (a lower bound
on the gain, a margin and a trait-distance check, else All-in-LR), chosen by the harmless
safety rule over grouped cross validation on the training sets alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from agents.base import AL, LR, AgentFactory, ProbeThenDecide, RuleAgent, feature
from agents.split_allocators import FixedSplitByCost, SafeSplit, nearest_level

#: The packaged parameters' file name (in this package).
PARAMS_FILE = "allocation_params.json"


class _LevelModels:
    """Linear models on named features, one per fitted cost level, chosen by the nearest
    ``cost_ratio``. A model: ``cost_ratio``, ``features``, ``center``, ``scale``, ``coef``
    (one row per output) and ``intercept`` (one per output)."""

    def __init__(self, models: Sequence[Mapping[str, Any]]) -> None:
        if not models:
            raise ValueError("give at least one model (one per cost level)")
        self.models = [self._checked(m) for m in models]

    @staticmethod
    def _checked(model: Mapping[str, Any]) -> dict[str, Any]:
        names = list(model["features"])
        coef = np.atleast_2d(np.asarray(model["coef"], dtype=float))
        center, scale = (np.asarray(model[k], dtype=float) for k in ("center", "scale"))
        intercept = np.atleast_1d(np.asarray(model["intercept"], dtype=float))
        if not coef.shape[1] == center.size == scale.size == len(names) or \
                coef.shape[0] != intercept.size or np.any(scale <= 0):
            raise ValueError(f"a model needs one center, scale (> 0) and coefficient per "
                             f"feature ({len(names)}) and one intercept per output row; got "
                             f"coef {coef.shape}, center {center.size}, scale {scale.size}, "
                             f"intercept {intercept.size}")
        return {"cost_ratio": float(model["cost_ratio"]), "features": names, "coef": coef,
                "center": center, "scale": scale, "intercept": intercept}

    def model_for(self, observation: np.ndarray) -> dict[str, Any]:
        """The model fitted at the cost level nearest the observation's (first on ties)."""
        ratio = nearest_level([m["cost_ratio"] for m in self.models], observation)
        return next(m for m in self.models if m["cost_ratio"] == ratio)

    def outputs(self, observation: np.ndarray) -> np.ndarray:
        """The chosen model's outputs, ``intercept + coef @ ((x - center) / scale)``."""
        model = self.model_for(observation)
        x = np.array([feature(observation, name) for name in model["features"]])
        return np.asarray(model["intercept"] + model["coef"] @ ((x - model["center"])
                                                                / model["scale"]))


class SplitRule(ProbeThenDecide):
    """The ``probe`` rounds, then m LR rounds and AL to the end, m = ``splits[k]`` for the
    output k predicted cheapest (each output: a split's mean cost minus All-in-LR's); the
    last split (the most LR rounds) unless the cheapest is predicted to beat it by more than
    ``margin`` (a cost per example: leaving All-in-LR must be worth the risk)."""

    name = "split-rule"
    observation_version = "v2"

    def __init__(self, models: Sequence[Mapping[str, Any]], splits: Sequence[int],
                 probe: Sequence[int] = (AL,), margin: float = 0.0) -> None:
        self.levels = _LevelModels(models)
        self.margin = float(margin)
        self.splits = tuple(int(m) for m in splits)
        if any(m["coef"].shape[0] != len(self.splits) for m in self.levels.models):
            raise ValueError(f"each model needs one output per split ({len(self.splits)})")
        self.probe = tuple(int(a) for a in probe)
        self.reset()

    def choose(self, observation: np.ndarray) -> int:
        """The number of LR rounds predicted cheapest from this observation (the last
        split unless another beats it by more than ``margin``)."""
        predicted = self.levels.outputs(observation)
        best = int(np.argmin(predicted))
        if predicted[best] > predicted[-1] - self.margin:
            best = len(predicted) - 1
        return self.splits[best]

    def decide(self, observation: np.ndarray) -> int:
        """The split: how many LR rounds follow the probe before AL to the end."""
        return self.choose(observation)

    def after_probe(self, k: int, decision: Any) -> int:
        return LR if k <= decision else AL

    @property
    def lr_rounds(self) -> int | None:
        """The split chosen after the probe (None before it)."""
        return self.decision

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> SplitRule:
        """The rule of a fitted entry (``agents/allocation_params.json``'s layout)."""
        return cls(entry["models"], entry["splits"], entry["probe"], entry["margin"])

    def __repr__(self) -> str:
        return f"SplitRule(splits={self.splits}, probe={self.probe}, margin={self.margin:g})"


class ImitationPolicy(RuleAgent):
    """AL when the logistic model's probability of AL exceeds ``threshold`` (0.5: its
    score is positive), else LR; no memory, so it plays any number of environments at once
    and replays exactly on a lattice. A threshold above 0.5 is the fallback rule: AL only
    where the model is confident, All-in-LR's move otherwise."""

    name = "imitation"
    observation_version = "v2"

    def __init__(self, models: Sequence[Mapping[str, Any]], threshold: float = 0.5) -> None:
        self.levels = _LevelModels(models)
        if any(m["coef"].shape[0] != 1 for m in self.levels.models):
            raise ValueError("an imitation model has one output (the log-odds of AL)")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold is a probability in (0, 1), got {threshold}")
        self.threshold = float(threshold)
        #: The score AL needs: the log-odds of the threshold (0 at 0.5).
        self.min_score = float(np.log(threshold / (1.0 - threshold)))

    def act(self, observation: np.ndarray) -> int:
        return AL if float(self.levels.outputs(observation)[0]) > self.min_score else LR

    def __repr__(self) -> str:
        return (f"ImitationPolicy(levels={len(self.levels.models)}, "
                f"threshold={self.threshold:g})")


class LevelPolicies(RuleAgent):
    """Saved policies, one per cost level: the one fitted at the cost ratio nearest the
    observation's acts (each a ``PolicyAgent`` reading observation v2)."""

    name = "maskable-ppo"
    observation_version = "v2"

    def __init__(self, policies: Mapping[float, Any]) -> None:
        if not policies:
            raise ValueError("give at least one policy (one per cost level)")
        self.policies = dict(policies)

    def reset(self, seed: int | None = None) -> None:
        for policy in self.policies.values():
            policy.reset(seed)

    def nearest(self, observation: np.ndarray) -> Any:
        """The policy fitted at the cost ratio nearest the observation's."""
        return self.policies[nearest_level(self.policies, observation)]

    def act(self, observation: np.ndarray) -> int:
        action, _ = self.nearest(observation).predict(observation, deterministic=True)
        return int(np.asarray(action).item())

    def action_probabilities(self, observation: np.ndarray) -> np.ndarray:
        """(AL, LR) probabilities of the nearest level's policy, on the valid actions."""
        return np.asarray(self.nearest(observation).action_probabilities(observation))

    def __repr__(self) -> str:
        return f"LevelPolicies(levels={sorted(self.policies)})"


class ConfidentPolicy(RuleAgent):
    """The fallback rule: AL where ``inner`` puts at least ``threshold`` of its probability
    on AL, else LR (All-in-LR's move); the available one where a pool is exhausted. At 0.5
    it is ``inner``'s greedy action (ties to AL, as ``PolicyAgent`` breaks them). ``inner``
    gives ``action_probabilities(observation)`` ((AL, LR) per row) and reads no memory."""

    name = "confident"

    def __init__(self, inner: Any, threshold: float) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold is a probability in (0, 1), got {threshold}")
        self.inner, self.threshold = inner, float(threshold)
        self.observation_version = getattr(inner, "observation_version", "v2")

    def reset(self, seed: int | None = None) -> None:
        self.inner.reset(seed)

    def act(self, observation: np.ndarray) -> int:
        p_al = float(np.atleast_2d(self.inner.action_probabilities(observation))[0, AL])
        return AL if p_al >= self.threshold else LR

    def __repr__(self) -> str:
        return f"ConfidentPolicy({self.inner!r}, threshold={self.threshold:g})"


def packaged_policies(entry: Mapping[str, Any]) -> LevelPolicies:
    """The packaged per-level policies of ``entry`` (``levels``: name -> cost ratio; the
    zips and settings JSON in this package's ``folder``), loaded without unpickling
    (``agents.policy.load_policy``; needs the ``rl`` extra)."""
    from agents.policy import load_policy

    folder = resources.files("agents").joinpath(entry["folder"])
    return LevelPolicies({float(ratio): load_policy(str(folder.joinpath(f"mppo_{level}.zip")))
                          for level, ratio in entry["levels"].items()})


@cache
def packaged_params() -> dict[str, Any]:
    """The fitted parameters shipped with the package (JSON, no pickle)."""
    text = resources.files("agents").joinpath(PARAMS_FILE).read_text()
    return dict(json.loads(text))


def packaged_agent(family: str) -> RuleAgent:
    """A fresh agent of ``family`` with the packaged parameters: ``split-rule``,
    ``imitation``, ``maskable-ppo``, the second round's ``split-rule-2``, ``imitation-2``
    and ``maskable-ppo-confident`` (an entry naming a ``family`` and a ``threshold``: that
    family behind ``ConfidentPolicy``), or ``allocator`` (the family the file names)."""
    params = packaged_params()
    if family == "allocator":
        family = params["allocator"]
    if family not in params["families"]:
        raise ValueError(f"no packaged parameters for {family!r}: use one of "
                         f"{', '.join(params['families'])} or 'allocator'")
    entry = params["families"][family]
    if family == "fixed-split-by-cost":
        return FixedSplitByCost.from_entry(entry)
    if family.startswith("safe-split"):
        return SafeSplit.from_entry(entry)
    if "family" in entry:
        return ConfidentPolicy(packaged_agent(entry["family"]), entry["threshold"])
    if family == "maskable-ppo":
        return packaged_policies(entry)
    if family.startswith("split-rule"):
        return SplitRule.from_entry(entry)
    return ImitationPolicy(entry["models"], entry.get("threshold", 0.5))


#: Registered names and factories (no environment needed).
ALLOCATION_AGENTS: dict[str, AgentFactory] = {
    "split-rule": lambda env: packaged_agent("split-rule"),
    "imitation": lambda env: packaged_agent("imitation"),
    "maskable-ppo": lambda env: packaged_agent("maskable-ppo"),
    "fixed-split-by-cost": lambda env: packaged_agent("fixed-split-by-cost"),
    "safe-split": lambda env: packaged_agent("safe-split"),
    "safe-split-2": lambda env: packaged_agent("safe-split-2"),
    "safe-split-3": lambda env: packaged_agent("safe-split-3"),
    "allocator": lambda env: packaged_agent("allocator"),
}

__all__ = ["ALLOCATION_AGENTS", "PARAMS_FILE", "ConfidentPolicy", "ImitationPolicy",
           "LevelPolicies", "SplitRule", "nearest_level", "packaged_agent", "packaged_params",
           "packaged_policies"]
