"""The allocation families (agents/allocation.py) and their fits (studies/allocation)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import v2_observation as observation

import agents
from agents.allocation import ImitationPolicy, SplitRule, packaged_agent, packaged_params
from agents.registry import make_agent
from ballad_env.data import load_dataset
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import AL, LR
from ballad_env.observation import ALL_FEATURE_INDEX
from ballad_env.replay.lattice import build_lattice
from ballad_env.settings import Settings
from scripts.studies.allocation import fit as F
from scripts.studies.allocation.cells import (
    decision_observation,
    probe_path,
    split_costs,
)


def model(ratio: float, coef: list[list[float]], intercept: list[float]) -> dict:
    """A model on the one feature ``tau`` (center 0, scale 1)."""
    return {"cost_ratio": ratio, "features": ["tau"], "center": [0.0], "scale": [1.0],
            "coef": coef, "intercept": intercept}


# ------------------------------------------------------------------ the agents by hand
def test_split_rule_probes_then_plays_the_split_predicted_cheapest() -> None:
    # three splits (0, 2, 4 LR rounds); predictions at tau = t: 1 - t, 0.5, t
    rule = SplitRule([model(0.5, [[-1.0], [0.0], [1.0]], [1.0, 0.5, 0.0])], [0, 2, 4])
    low = [rule.act(observation(budget_used=r / 6, tau=0.2)) for r in range(6)]
    assert rule.lr_rounds == 4 and low == [AL, LR, LR, LR, LR, AL]  # t=0.2: last is cheapest
    rule.reset()
    high = [rule.act(observation(budget_used=r / 6, tau=0.9)) for r in range(6)]
    assert rule.lr_rounds == 0 and high == [AL] * 6  # t=0.9: 1 - t cheapest -> 0 LR rounds


def test_split_rule_margin_keeps_the_last_split_unless_clearly_beaten() -> None:
    models = [model(0.5, [[-1.0], [1.0]], [1.0, 0.0])]  # at tau = 0.6: 0.4 vs 0.6
    assert SplitRule(models, [0, 9], margin=0.1).choose(observation(tau=0.6)) == 0
    assert SplitRule(models, [0, 9], margin=0.3).choose(observation(tau=0.6)) == 9


def test_models_are_chosen_by_the_nearest_cost_ratio() -> None:
    always_al = model(0.75, [[0.0]], [1.0])
    always_lr = model(0.5, [[0.0]], [-1.0])
    policy = ImitationPolicy([always_lr, always_al])
    assert policy.act(observation(cost_ratio=0.5)) == LR
    assert policy.act(observation(cost_ratio=0.7)) == AL
    assert policy.predict(observation(cost_ratio=0.7, al_available=0.0))[0] == LR  # mask


def test_bad_models_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="one output per split"):
        SplitRule([model(0.5, [[1.0]], [0.0])], [0, 2])
    with pytest.raises(ValueError, match="scale"):
        ImitationPolicy([{**model(0.5, [[1.0]], [0.0]), "scale": [0.0]}])


def test_packaged_parameters_are_json_and_make_every_family() -> None:
    from importlib import resources

    text = resources.files("agents").joinpath("allocation_params.json").read_text()
    params = json.loads(text)
    assert params == packaged_params() and params["allocator"] in params["families"]
    for family in (*params["families"], "allocator"):
        if family == "maskable-ppo" or params["allocator"] == "maskable-ppo" == family:
            pytest.importorskip("torch")
        agent = make_agent(family)
        assert agent.observation_version == "v2"
        assert type(agent) is type(packaged_agent(family))


# ------------------------------------------------------------------ live = lattice
@pytest.mark.parametrize("costs", [{}, {"c_fn": 10.0}, {"c_fp": 10.0}, {"c_fp": 2.5, "c_fn": 7.0}])
def test_allocation_agents_replay_on_the_lattice_as_they_run_live(small_xy, costs) -> None:
    dataset = load_dataset(small_xy)
    lattice = build_lattice(dataset, 0, Settings(**costs))
    env = BudgetAllocationEnv(dataset, observation="v2", **costs)
    eager = [model(r, [[-8.0], [0.0]], [0.0, 0.0]) for r in (0.25, 0.5, 0.75)]
    if "maskable-ppo" in packaged_params()["families"]:
        pytest.importorskip("sb3_contrib")
    makers = {"allocator": lambda: make_agent("allocator"),
              "split-rule": lambda: make_agent("split-rule"),
              "imitation": lambda: make_agent("imitation"),
              "eager split": lambda: SplitRule(eager, [0, 14]),
              "tau imitation": lambda: ImitationPolicy(
                  [model(r, [[-10.0]], [1.0]) for r in (0.25, 0.5, 0.75)])}
    if "maskable-ppo" in packaged_params()["families"]:
        makers["maskable-ppo"] = lambda: make_agent("maskable-ppo")
    for name, make in makers.items():
        records = agents.run_episode(env, make(), 0)
        played = tuple(AL if r["action"] == "AL" else LR for r in records)
        assert lattice.replay(make()) == played, name


def test_allocator_plays_sb3_evaluate_policy(small_xy) -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.evaluation import evaluate_policy

    env = BudgetAllocationEnv(load_dataset(small_xy), observation="v2", c_fn=10.0)
    mean, _ = evaluate_policy(make_agent("allocator"), env, n_eval_episodes=2)
    assert np.isfinite(mean)


# ------------------------------------------------------------------ the fits by hand
def test_ridge_by_hand() -> None:
    # one centred feature z = (-1, 0, 1), y = (0, 1, 5): w = sum(z y) / (sum(z^2) + alpha)
    Z, y = np.array([[-1.0], [0.0], [1.0]]), np.array([0.0, 1.0, 5.0])
    coef, intercept = F.ridge(Z, y, alpha=3.0)
    assert coef[0] == pytest.approx(5.0 / 5.0) and intercept == pytest.approx(2.0)


def test_weighted_logistic_matches_the_closed_form_of_one_binary_feature() -> None:
    # x in {0, 1}, no penalty: the fitted log-odds are the weighted log-odds of each group
    Z = np.array([[0.0], [0.0], [0.0], [1.0], [1.0]])
    y = np.array([1.0, 0.0, 0.0, 1.0, 0.0])
    w = np.array([1.0, 1.0, 1.0, 3.0, 1.0])
    coef, intercept = F.fit_logistic(Z, y, w, l2=0.0)
    assert intercept == pytest.approx(np.log(1 / 2), abs=1e-6)
    assert intercept + coef[0] == pytest.approx(np.log(3 / 1), abs=1e-6)


def test_cost_to_go_and_split_costs_on_the_hand_lattice() -> None:
    from test_replay import hand_lattice

    lat = hand_lattice()  # costs [i, j]: (0,0) .5 (0,1) .3 (1,0) .2 (0,2) 0 (1,1) .9 (2,0) .8
    to_go = F.cost_to_go(lat)
    assert to_go[2, 0] == pytest.approx(0.8) and to_go[1, 0] == pytest.approx(0.2 + 0.8)
    assert to_go[0, 1] == pytest.approx(0.3 + 0.0) and to_go[0, 0] == pytest.approx(0.8)
    assert probe_path((AL,), 1, 2) == (AL, LR)
    assert np.allclose(split_costs(lat, (AL,)), [(0.2 + 0.8) / 2, (0.2 + 0.9) / 2])
    assert np.allclose(split_costs(lat, ()), [(0.2 + 0.8) / 2, (0.3 + 0.9) / 2, 0.15])
    obs = decision_observation(lat, (AL,))
    assert obs[ALL_FEATURE_INDEX["prev_al"]] == 1.0
    assert obs[ALL_FEATURE_INDEX["entropy_al"]] == np.float32(0.05)
    samples = F.expert_samples(lat, to_go, [(obs, 0, 0), (obs, 1, 0), (obs, 2, 0)])
    # (0,0): LR (to go 0.3 against AL's 1.0); (1,0): AL (0.8 against 0.9); (2,0): the end
    assert [(s[1], s[2]) for s in samples] == [(0, pytest.approx(0.7)), (1, pytest.approx(0.1))]


def test_split_rule_fit_recovers_a_linear_cost_curve() -> None:
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = []
    for k in range(40):
        tau = float(rng.uniform())
        obs = observation(tau=tau)
        rows.append({"level": "default", "dataset": f"d{k % 8}", "seed": k,
                     "all-in-lr": 1.0, "optimal": 0.0, "obs_al": obs,
                     "splits_al": np.array([1.0 + 2.0 * (tau - 0.5), 1.0])})
    params = F.fit_split_rule(pd.DataFrame(rows), ["tau"], "al", alpha=1e-9)
    coef = np.array(params["models"][0]["coef"])
    assert coef[0, 0] * 1.0 / params["models"][0]["scale"][0] == pytest.approx(2.0, rel=1e-4)
    rule = SplitRule(params["models"], params["splits"], params["probe"])
    assert rule.choose(observation(tau=0.2)) == 0 and rule.choose(observation(tau=0.8)) == 1


def test_level_policies_act_with_the_policy_of_the_nearest_cost_ratio() -> None:
    from agents.allocation import LevelPolicies

    class Constant:
        def __init__(self, action: int) -> None:
            self.action, self.seeds = action, []

        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return np.array(self.action), state

        def reset(self, seed=None) -> None:
            self.seeds.append(seed)

    al, lr = Constant(AL), Constant(LR)
    agent = LevelPolicies({0.5: lr, 0.75: al})
    assert agent.act(observation(cost_ratio=0.5)) == LR
    assert agent.act(observation(cost_ratio=0.8)) == AL
    agent.reset(3)
    assert al.seeds == lr.seeds == [3]


def test_allocator_replays_as_it_plays_on_a_benchmark_at_cfn10() -> None:
    lattice = build_lattice("Glass", 1, Settings(c_fn=10.0))
    env = BudgetAllocationEnv("Glass", observation="v2", c_fn=10.0)
    records = agents.run_episode(env, make_agent("allocator"), 1)
    assert lattice.replay(make_agent("allocator")) == tuple(
        AL if r["action"] == "AL" else LR for r in records)


# ------------------------------------------------------------------ the study's scoring
def test_level_shares_average_seeds_then_data_sets() -> None:
    import pandas as pd

    from scripts.studies.allocation.analysis import folds, level_shares

    rows = pd.DataFrame({
        "level": ["default"] * 3, "dataset": ["a", "a", "b"], "seed": [0, 1, 0],
        "all-in-lr": [1.0, 1.0, 2.0], "optimal": [0.0, 0.0, 1.0], "agent": [0.5, 1.5, 1.0]})
    # seed means: a (lr 1, opt 0, agent 1), b (2, 1, 1); over data sets: 1.5, 0.5, 1.0
    assert level_shares(rows) == {"default": pytest.approx((1.5 - 1.0) / (1.5 - 0.5))}
    assert folds(["c", "a", "b", "a"], 2) == [["a", "c"], ["b"]]


def test_the_allocation_study_refuses_reserved_sets(tmp_path) -> None:
    from scripts.studies.allocation.cells import iter_lattices

    with pytest.raises(ValueError, match="allocation study refuses the reserved"):
        next(iter_lattices(tmp_path, ["Pima", "adbench/yeast"], [0]))
