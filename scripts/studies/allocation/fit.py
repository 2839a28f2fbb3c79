"""Fitting the allocation families on the training lattices (plain numpy, no torch).

- ``split-rule`` (:func:`fit_split_rule`): per cost level, one ridge regression per split
  after the probe, from the standardised traits at the decision state to the split's mean
  cost minus All-in-LR's (closed form); the agent takes the split predicted cheapest.
- ``imitation`` (:func:`fit_imitation`): per cost level, a weighted L2 logistic regression
  (Newton steps) of the hindsight-optimal action on the observation, on the states of the
  optimal paths (behaviour cloning), then on the states the policy itself visits, labelled
  by the lattice's exact cost-to-go (DAgger). Each state weighs what the wrong move costs.

The parameters come out as the JSON-able dicts ``agents.allocation`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from agents.allocation import ImitationPolicy
from agents.base import RuleAgent
from ballad_env.episode import AL, LR
from ballad_env.observation import ALL_FEATURE_INDEX, OBSERVATIONS
from ballad_env.replay.lattice import Lattice
from scripts.studies.allocation.cells import PROBES as PROBE_ACTIONS

#: The cost ratio feature of each cost level (``observation.v2_features``).
LEVEL_RATIO = {"default": 0.5, "cfn10": 0.75, "cfp10": 0.25}
#: Feature groups of the ablation: data and budget traits, the start detector's traits, and
#: what the probe (or the rounds so far) showed.
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "data": ("log_size", "log_dimension", "log_contamination", "budget_share"),
    "prior": ("prior_flagged", "prior_confidence"),
    "probe": ("entropy_al", "cosine_al", "train_shift", "flagged_ratio", "confidence_train",
              "anomalies_found", "tau", "val_rejection"),
}
#: The split rule's features: every group.
SPLIT_FEATURES = tuple(f for group in FEATURE_GROUPS.values() for f in group)
#: The imitation policy's features: the whole v2 observation but the action mask and the
#: costs (constant within a cost level, whose model is chosen by them).
IMITATION_FEATURES = tuple(f for f in OBSERVATIONS["v2"]
                           if f not in ("al_available", "lr_available")
                           and not f.startswith("cost_"))


def standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and scales (standard deviations; 1 where a column is constant)."""
    center = X.mean(axis=0)
    scale = X.std(axis=0)
    return center, np.where(scale > 1e-9, scale, 1.0)


def ridge(Z: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Ridge regression on centred inputs: (coef, intercept) minimising
    |y - b - Z w|^2 + alpha |w|^2 (the intercept unpenalised: the mean of y when Z's
    columns have mean 0)."""
    Zc = Z - Z.mean(axis=0)
    coef = np.linalg.solve(Zc.T @ Zc + alpha * np.eye(Z.shape[1]), Zc.T @ (y - y.mean()))
    return coef, float(y.mean() - Z.mean(axis=0) @ coef)


def columns(observations: Sequence[np.ndarray], features: Sequence[str]) -> np.ndarray:
    """The named features of each observation, as a float64 matrix."""
    idx = [ALL_FEATURE_INDEX[f] for f in features]
    return np.asarray(np.stack(observations)[:, idx], dtype=float)


def fit_split_rule(records: pd.DataFrame, features: Sequence[str] = SPLIT_FEATURES,
                   probe: str = "al", alpha: float = 10.0,
                   splits: Sequence[int] | None = None, margin: float = 0.0) -> dict[str, Any]:
    """The ``split-rule`` parameters fitted on ``records`` (``cells.cell_records``), one
    model per cost level; ``splits`` the candidate numbers of LR rounds (default: all)."""
    models = []
    for level, rows in records.groupby("level", sort=False):
        X = columns(list(rows[f"obs_{probe}"]), features)
        Y = np.stack(list(rows[f"splits_{probe}"])) - rows["all-in-lr"].to_numpy()[:, None]
        chosen = list(range(Y.shape[1])) if splits is None else list(splits)
        center, scale = standardise(X)
        Z = (X - center) / scale
        coefs, intercepts = [], []
        for m in chosen:
            ok = np.isfinite(Y[:, m])
            if ok.sum() < 2:  # no cell holds this split: never predicted cheapest
                coefs.append(np.zeros(len(features)))
                intercepts.append(np.inf)
                continue
            coef, intercept = ridge(Z[ok], Y[ok, m], alpha)
            coefs.append(coef)
            intercepts.append(intercept)
        models.append(_model(str(level), features, center, scale, np.array(coefs),
                             np.array(intercepts)))
    return {"models": models, "splits": chosen, "probe": list(PROBE_ACTIONS[probe]),
            "margin": float(margin)}



def _model(level: str, features: Sequence[str], center: np.ndarray, scale: np.ndarray,
           coef: np.ndarray, intercept: np.ndarray) -> dict[str, Any]:
    """One level's model as ``agents.allocation`` reads it (rounded to 6 digits)."""
    big = np.where(np.isfinite(intercept), intercept, 1e9)
    return {"level": level, "cost_ratio": LEVEL_RATIO[level], "features": list(features),
            "center": np.round(center, 6).tolist(), "scale": np.round(scale, 6).tolist(),
            "coef": np.round(np.atleast_2d(coef), 6).tolist(),
            "intercept": np.round(np.atleast_1d(big), 6).tolist()}


def split_choices(params: Mapping[str, Any], records: pd.DataFrame, probe: str
                  ) -> np.ndarray:
    """The split each record's cell gets (the agent's choice, computed from the stored
    decision observation: what ``SplitRule.choose`` returns on it)."""
    from agents.allocation import SplitRule

    rule = SplitRule.from_entry(params)
    return np.array([rule.choose(obs) for obs in records[f"obs_{probe}"]])


def split_rule_costs(params: Mapping[str, Any], records: pd.DataFrame, probe: str
                     ) -> np.ndarray:
    """Mean cost of each record's cell under the split rule, from the stored split costs
    (a split the pools cannot hold: the nearest one they can, as an estimate; the study's
    scores replay the agent instead)."""
    out = []
    for m, costs in zip(split_choices(params, records, probe), records[f"splits_{probe}"],
                        strict=True):
        finite = np.flatnonzero(np.isfinite(costs))
        out.append(costs[m] if np.isfinite(costs[m]) else costs[finite[np.argmin(
            np.abs(finite - m))]])
    return np.array(out)


# ---------------------------------------------------------------------------- imitation
def cost_to_go(lattice: Lattice) -> np.ndarray:
    """[i, j]: the least sum of test costs over the states still to visit from (i, j) to
    the end of the budget, the state's own cost included (inf where unreachable)."""
    k = lattice.n_rounds
    to_go = np.full((k + 2, k + 2), np.inf)
    for total in range(k, -1, -1):
        for i in range(total + 1):
            j = total - i
            if not lattice.reachable[i, j]:
                continue
            if total == k:
                to_go[i, j] = lattice.cost[i, j]
                continue
            nexts = [to_go[lattice.next_state(i, j, a)] for a in (AL, LR)
                     if lattice.can_move(i, j, a)]
            to_go[i, j] = lattice.cost[i, j] + (min(nexts) if nexts else np.inf)
    return to_go[:k + 1, :k + 1]


class _Recorder(RuleAgent):
    """Plays ``inner`` (an agent) or a fixed action sequence and keeps every observation."""

    observation_version = "v2"

    def __init__(self, inner: Any = None, actions: Sequence[int] = ()) -> None:
        self.inner, self.actions = inner, tuple(actions)
        self.seen: list[np.ndarray] = []

    def reset(self, seed: int | None = None) -> None:
        self.seen = []
        if self.inner is not None:
            self.inner.reset(seed)

    def act(self, observation: np.ndarray) -> int:
        self.seen.append(np.array(observation))
        if self.inner is None:
            return self.actions[len(self.seen) - 1]
        choice, _ = self.inner.predict(observation, deterministic=True)
        return int(np.asarray(choice).item())


def visited(lattice: Lattice, agent: Any = None, actions: Sequence[int] = ()
            ) -> list[tuple[np.ndarray, int, int]]:
    """(observation, i, j) of every decision on the path ``agent`` (or ``actions``) takes."""
    recorder = _Recorder(agent, actions)
    path = lattice.replay(recorder)
    states = [(0, 0), *lattice.states_along(path)[:-1]]
    return [(obs, i, j) for obs, (i, j) in zip(recorder.seen, states, strict=True)]


def expert_samples(lattice: Lattice, to_go: np.ndarray,
                   decisions: Sequence[tuple[np.ndarray, int, int]]
                   ) -> list[tuple[np.ndarray, int, float]]:
    """(observation, 1 if AL is the optimal move else 0, |cost-to-go difference|) at each
    decision where both moves are possible."""
    out = []
    for obs, i, j in decisions:
        if not (lattice.can_move(i, j, AL) and lattice.can_move(i, j, LR)):
            continue
        al, lr = to_go[i + 1, j], to_go[i, j + 1]
        out.append((obs, int(al <= lr), float(abs(al - lr))))
    return out


def fit_logistic(Z: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float,
                 iterations: int = 50) -> tuple[np.ndarray, float]:
    """Weighted logistic regression with an L2 penalty on the coefficients (not the
    intercept), by Newton steps: (coef, intercept) of the log-odds of y = 1."""
    X = np.hstack([np.ones((Z.shape[0], 1)), Z])
    beta = np.zeros(X.shape[1])
    penalty = l2 * np.eye(X.shape[1])
    penalty[0, 0] = 0.0
    w = w / w.mean()
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(X @ beta, -30, 30)))
        gradient = X.T @ (w * (y - p)) - penalty @ beta
        hessian = X.T @ (X * (w * p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(X.shape[1])
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.max(np.abs(step)) < 1e-8:
            break
    return beta[1:], float(beta[0])


def _imitation_model(level: str, samples: list[tuple[np.ndarray, int, float]],
                     features: Sequence[str], l2: float) -> dict[str, Any]:
    X = columns([s[0] for s in samples], features)
    y = np.array([s[1] for s in samples], dtype=float)
    w = np.array([s[2] for s in samples]) + 1e-6
    center, scale = standardise(X)
    coef, intercept = fit_logistic((X - center) / scale, y, w, l2)
    return _model(level, features, center, scale, coef, np.array([intercept]))


def fit_imitation(lattices: Sequence[tuple[str, Lattice]],
                  features: Sequence[str] = IMITATION_FEATURES, l2: float = 1.0,
                  dagger_rounds: int = 3) -> dict[str, Any]:
    """The ``imitation`` parameters: behaviour cloning on the optimal paths' states, then
    ``dagger_rounds`` rounds that add the states the current policy visits (labelled by
    the exact cost-to-go) and refit; one model per cost level."""
    by_level: dict[str, list[Lattice]] = {}
    for level, lattice in lattices:
        by_level.setdefault(level, []).append(lattice)
    to_go = {id(lat): cost_to_go(lat) for lats in by_level.values() for lat in lats}
    data: dict[str, list[tuple[np.ndarray, int, float]]] = {
        level: [s for lat in lats for s in expert_samples(
            lat, to_go[id(lat)], visited(lat, actions=lat.optimal_path("mean")))]
        for level, lats in by_level.items()}
    models = {level: _imitation_model(level, data[level], features, l2) for level in by_level}
    for _ in range(dagger_rounds):
        for level, lats in by_level.items():
            policy = ImitationPolicy([models[level]])
            data[level] += [s for lat in lats for s in expert_samples(
                lat, to_go[id(lat)], visited(lat, policy))]
            models[level] = _imitation_model(level, data[level], features, l2)
    return {"models": list(models.values()),
            "samples": {level: len(rows) for level, rows in data.items()}}


__all__ = ["FEATURE_GROUPS", "IMITATION_FEATURES", "LEVEL_RATIO", "PROBE_ACTIONS",
           "SPLIT_FEATURES", "cost_to_go", "expert_samples", "fit_imitation",
           "fit_logistic", "fit_split_rule", "ridge", "split_choices", "split_rule_costs",
           "standardise", "visited"]
