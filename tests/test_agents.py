"""Tests of the hand-written allocation agents (SPEC §5) and their SB3 ``predict`` interface."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

import agents
from agents import (
    RECORD_FIELDS,
    Agent,
    AllInAL,
    AllInLR,
    BalladAgent,
    OracleAgent,
    RandomAgent,
    agent_names,
    make_agent,
    run_episode,
)
from ballad_env import AL, ENV_ID, FEATURE_INDEX, LR, OBSERVATION_FEATURES
from ballad_env.observation import OBSERVATIONS, encode
from ballad_env.settings import Settings

SHORT = {"budget_fraction": 0.06, "round_fraction": 0.02}
N_FEATURES = len(OBSERVATION_FEATURES)


def observation(**features: float) -> np.ndarray:
    """An observation with both pools available and the given named features set."""
    obs = np.zeros(N_FEATURES, dtype=np.float32)
    obs[FEATURE_INDEX["al_available"]] = obs[FEATURE_INDEX["lr_available"]] = 1.0
    for name, value in features.items():
        obs[FEATURE_INDEX[name]] = value
    return obs


def measured(**features: float) -> np.ndarray:
    """An observation after both sides have been measured (the greedy phase)."""
    return observation(al_measured=1.0, lr_measured=1.0, **features)


def act(agent, obs: np.ndarray) -> int:
    action, state = agent.predict(obs, deterministic=True)
    assert state is None
    return int(action)


# ==================================================================================== BALLAD


@pytest.mark.parametrize("reward", ["entropy", "cosine"])
def test_ballad_initialisation_is_lr_then_al(reward: str) -> None:
    agent = BalladAgent(reward)
    assert act(agent, observation()) == LR  # round 1
    assert act(agent, observation(lr_measured=1.0)) == AL  # round 2
    # Rewards do not matter before both sides are measured.
    assert act(agent, observation(**{f"{reward}_al": 0.9})) == LR
    assert act(agent, observation(lr_measured=1.0, **{f"{reward}_lr": 0.9})) == AL


# (this side's AL reward, LR reward, expected); the other signal is set the opposite way.
GREEDY_CASES = [(0.30, 0.10, AL), (0.10, 0.30, LR), (0.20, 0.20, AL), (0.0, 0.0, AL),
                (0.0, 1e-6, LR)]


@pytest.mark.parametrize(("al", "lr", "expected"), GREEDY_CASES)
def test_ballad_greedy_rule_reads_entropy(al: float, lr: float, expected: int) -> None:
    obs = measured(entropy_al=al, entropy_lr=lr, cosine_al=0.1 if lr >= al else 0.9,
                   cosine_lr=0.9 if lr >= al else 0.1)
    assert act(BalladAgent(), obs) == expected
    assert act(BalladAgent("entropy"), obs) == expected


@pytest.mark.parametrize(("al", "lr", "expected"), GREEDY_CASES)
def test_ballad_greedy_rule_cosine_variant_reads_cosine(al: float, lr: float,
                                                       expected: int) -> None:
    obs = measured(cosine_al=al, cosine_lr=lr, entropy_al=0.1 if lr >= al else 0.9,
                   entropy_lr=0.9 if lr >= al else 0.1)
    assert act(BalladAgent("cosine"), obs) == expected


def test_ballad_unknown_reward() -> None:
    with pytest.raises(ValueError, match="bogus"):
        BalladAgent("bogus")
    with pytest.raises(ValueError, match="unknown start 'forced'"):
        BalladAgent("cosine", "forced")


def test_ballad_published_start_compares_from_the_first_round() -> None:
    """``start="authors"`` (the published run_BALLAD): the stored rewards start at AL 0.99
    and LR 1, so LR first; then AL only if LR's first reward is at most 0.99; a NaN (the
    published cosine of an all-zero rejection vector) compares false, so LR again."""
    agent = BalladAgent("cosine", "authors")
    assert act(agent, observation()) == LR  # 0.99 >= 1 is false
    assert act(agent, observation(lr_measured=1.0, cosine_lr=0.5)) == AL  # 0.99 >= 0.5
    agent.observe_info({"cosine_lr": 0.99, "cosine_al": 0.0})  # a tie (float64): AL
    assert act(agent, observation(lr_measured=1.0, cosine_lr=0.99)) == AL
    assert act(agent, observation(lr_measured=1.0, cosine_lr=1.0)) == LR  # 0.99 < 1
    # the float64 NaN of info: 0.99 >= NaN is false
    agent.observe_info({"cosine_lr": math.nan, "cosine_al": 0.0})
    assert act(agent, observation(lr_measured=1.0, cosine_lr=1.0)) == LR
    agent.observe_info({"cosine_lr": 0.2, "cosine_al": math.nan})  # AL's NaN loses too
    assert act(agent, measured(cosine_lr=0.2)) == LR
    assert act(agent, measured(cosine_al=0.3, cosine_lr=0.2)) == AL  # then greedy
    # the paper's start plays AL second whatever LR's reward
    assert act(BalladAgent("cosine"), observation(lr_measured=1.0, cosine_lr=1.0)) == AL
    assert repr(agent) == "BalladAgent(reward='cosine', start='authors')"


def test_ballad_cosine_takes_the_published_start_from_the_settings() -> None:
    """``make_agent("ballad-cosine", env)`` starts as the published code under the published
    cosine rule (``Settings.authors_code()``), as the paper otherwise; ``ballad`` (entropy,
    whose first LR reward is below 0.99, so the two starts agree) keeps the paper's."""
    preset = gym.make(ENV_ID, dataset="toy", settings=Settings.authors_code(
        threshold_search="exact"))
    assert make_agent("ballad-cosine", preset).start == "authors"
    assert make_agent("ballad", preset).start == "paper"
    assert make_agent("ballad-cosine", gym.make(ENV_ID, dataset="toy")).start == "paper"
    assert make_agent("ballad-cosine").start is None  # no environment: told by run_episode


@pytest.mark.parametrize(
    ("obs", "choice"),
    [(observation(), LR),  # round 1 wants LR
     (observation(lr_measured=1.0), AL),  # round 2 wants AL
     (measured(entropy_al=0.5, entropy_lr=0.1), AL),
     (measured(entropy_al=0.1, entropy_lr=0.5), LR)],
)
def test_ballad_falls_back_when_its_choice_is_unavailable(obs: np.ndarray, choice: int) -> None:
    agent = BalladAgent()
    assert act(agent, obs) == choice
    blocked = obs.copy()
    blocked[FEATURE_INDEX["al_available" if choice == AL else "lr_available"]] = 0.0
    assert act(agent, blocked) == 1 - choice


def test_ballad_in_the_environment(make_env) -> None:
    """LR, AL, then the side with the larger latest entropy reward in the observation."""
    env = make_env()
    obs, _ = env.reset(seed=0)
    agent = BalladAgent()
    agent.reset(0)
    actions = []
    terminated = False
    while not terminated:
        action = act(agent, obs)
        if len(actions) >= 2:
            f = FEATURE_INDEX
            assert action == (AL if obs[f["entropy_al"]] >= obs[f["entropy_lr"]] else LR)
        actions.append(action)
        obs, _, terminated, _, _ = env.step(action)
    assert actions[:2] == [LR, AL] and len(actions) == 15


# =============================================================================== baselines


def random_observations(n: int = 30, seed: int = 0) -> np.ndarray:
    obs = np.random.default_rng(seed).random((n, N_FEATURES)).astype(np.float32)
    obs[:, FEATURE_INDEX["al_available"]] = obs[:, FEATURE_INDEX["lr_available"]] = 1.0
    return obs


@pytest.mark.parametrize(("cls", "action"), [(AllInAL, AL), (AllInLR, LR)])
def test_all_in_agents_are_constant(cls, action: int) -> None:
    agent = cls()
    assert [act(agent, o) for o in random_observations()] == [action] * 30
    # ... unless that pool is exhausted.
    obs = observation(**{"al_available" if action == AL else "lr_available": 0.0})
    assert act(agent, obs) == 1 - action


def test_random_agent_is_reproducible_from_reset() -> None:
    obs = observation()
    agent = RandomAgent()
    agent.reset(5)
    first = [act(agent, obs) for _ in range(60)]
    agent.reset(5)
    assert [act(agent, obs) for _ in range(60)] == first
    assert [act(RandomAgent(seed=5), obs) for _ in range(1)] == first[:1]
    agent.reset(6)
    assert [act(agent, obs) for _ in range(60)] != first
    assert 10 < sum(first) < 50  # a fair coin: both actions, roughly equally often


@pytest.mark.parametrize("agent", [BalladAgent(), BalladAgent("cosine"), AllInAL(), AllInLR(),
                                   RandomAgent(seed=1)], ids=repr)
def test_batched_predict_returns_an_array(agent) -> None:
    batch = random_observations(6, seed=3)
    batch[1, FEATURE_INDEX["lr_measured"]] = 0.0  # a BALLAD round-1 row
    batch[2, FEATURE_INDEX["al_available"]] = 0.0  # an exhausted pool
    twin = copy.deepcopy(agent)
    actions, state = agent.predict(batch, state=None, episode_start=np.ones(6, bool))
    assert isinstance(actions, np.ndarray) and actions.shape == (6,) and state is None
    assert set(actions.tolist()) <= {AL, LR}
    assert actions.tolist() == [act(twin, o) for o in batch]  # row by row, same answers
    assert actions[2] == LR


# ================================================================================ registry


def test_make_agent_for_every_registered_name(make_env) -> None:
    names = agent_names()
    assert {"ballad", "ballad-cosine", "all-in-al", "all-in-lr", "random", "oracle"} <= set(names)
    env = make_env(**SHORT)
    env.reset(seed=0)
    # each agent observes in the version it declares, as the runner and the replay give it
    observed = {v: encode(env.unwrapped.snapshot(), v) for v in OBSERVATIONS}
    for name in names:
        agent = make_agent(name, env)
        assert isinstance(agent, Agent), name
        agent.reset(0)
        obs = observed[getattr(agent, "observation_version", "v0")]
        assert act(agent, obs) in (AL, LR), name
    expected = {"ballad": BalladAgent, "ballad-cosine": BalladAgent, "all-in-al": AllInAL,
                "all-in-lr": AllInLR, "random": RandomAgent, "oracle": OracleAgent}
    for name, cls in expected.items():
        assert type(make_agent(name, env)) is cls
    assert make_agent("ballad-cosine").reward == "cosine"
    assert make_agent("ballad").reward == "entropy"


def test_make_agent_unknown_name_lists_the_names() -> None:
    with pytest.raises(ValueError, match="bogus") as err:
        make_agent("bogus")
    for name in agent_names():
        assert name in str(err.value)


def test_oracle_needs_an_environment() -> None:
    with pytest.raises(RuntimeError, match="environment it acts in"):
        make_agent("oracle").predict(np.zeros(18, dtype=np.float32))
    with pytest.raises(ValueError, match="already registered"):
        agents.register_agent("ballad", lambda env: BalladAgent())


# ================================================================================== oracle


def test_oracle_picks_the_action_with_the_lower_next_test_cost(make_env) -> None:
    env = make_env()
    obs, _ = env.reset(seed=2)
    oracle = OracleAgent(env)
    episode = env.unwrapped.episode
    chosen = []
    terminated = False
    while not terminated:
        costs = {a: copy.deepcopy(episode).step(a).evaluation.cost for a in (AL, LR)}
        before = (episode.rounds_done, episode.train_labels.count, episode.val_labels.count)
        action = act(oracle, obs)
        assert (episode.rounds_done, episode.train_labels.count,
                episode.val_labels.count) == before  # looking ahead changes nothing
        assert costs[action] <= costs[1 - action]
        if costs[AL] == costs[LR]:
            assert action == AL  # ties to AL
        obs, _, terminated, _, info = env.step(action)
        assert info["test_cost"] == costs[action]  # the look-ahead was exact
        chosen.append(action)
    assert len(chosen) == 15


class _ScriptedEpisode:
    """Stands in for an episode whose next test cost per action is known in advance."""

    def __init__(self, costs: dict[int, float]) -> None:
        self.costs = costs

    def available(self, action: int) -> bool:
        return action in self.costs

    def fork(self) -> _ScriptedEpisode:
        return self

    def step(self, action: int) -> SimpleNamespace:
        return SimpleNamespace(evaluation=SimpleNamespace(cost=self.costs[action]))


@pytest.mark.parametrize(
    ("costs", "expected"),
    [({AL: 0.2, LR: 0.1}, LR), ({AL: 0.1, LR: 0.2}, AL), ({AL: 0.1, LR: 0.1}, AL),
     ({LR: 0.3}, LR), ({AL: 0.3}, AL)],
    ids=["LR-cheaper", "AL-cheaper", "tie-to-AL", "only-LR", "only-AL"],
)
def test_oracle_decision_rule(make_env, costs: dict[int, float], expected: int) -> None:
    env = make_env(**SHORT)
    env.reset(seed=0)
    env.unwrapped.episode = _ScriptedEpisode(costs)
    assert act(OracleAgent(env), observation()) == expected


def test_oracle_takes_the_only_available_action(tiny_xy) -> None:
    env = gym.make(ENV_ID, dataset=tiny_xy, prior="knn", budget_fraction=1.0,
                   round_fraction=0.35)
    obs, _ = env.reset(seed=0)
    env.step(AL)
    obs, *_ = env.step(AL)  # D has 7 unlabeled examples left, a round needs 9
    assert act(OracleAgent(env), obs) == LR


def test_oracle_without_reset_raises(make_env) -> None:
    with pytest.raises(RuntimeError, match="reset"):
        OracleAgent(make_env()).predict(observation())


# ============================================================================= run_episode


def test_run_episode_records(make_env) -> None:
    env = make_env()
    records = run_episode(env, BalladAgent(), seed=3)
    assert len(records) == 15
    assert [r["round"] for r in records] == list(range(1, 16))
    for record in records:
        assert set(record) == {*RECORD_FIELDS, "reward"}
        assert isinstance(record["reward"], float) and math.isfinite(record["reward"])
        assert record["action"] in ("AL", "LR")
    assert [r["action"] for r in records[:2]] == ["LR", "AL"]
    b = env.unwrapped.episode.budget.per_round
    assert records[-1]["n_labeled_train"] + records[-1]["n_labeled_val"] == 15 * b
    # The reward is the chosen side's signal; the records are reproducible from the seed.
    for record in records:
        assert record["reward"] == record["reward_al" if record["action"] == "AL" else "reward_lr"]
    again = run_episode(env, BalladAgent(), seed=3)
    assert [r["test_cost"] for r in again] == [r["test_cost"] for r in records]


def test_run_episode_with_start(make_env) -> None:
    records = run_episode(make_env(**SHORT), RandomAgent(), seed=1, include_start=True)
    assert [r["round"] for r in records] == [0, 1, 2, 3]
    assert math.isnan(records[0]["reward"]) and records[0]["action"] == ""
    assert records[0]["n_labeled_train"] == records[0]["n_labeled_val"] == 0


def test_run_episode_seeds_the_agent(make_env) -> None:
    env = make_env()
    first = [r["action"] for r in run_episode(env, RandomAgent(), seed=4)]
    again = [r["action"] for r in run_episode(env, RandomAgent(seed=99), seed=4)]
    assert first == again and len(set(first)) == 2


# ======================================================================= stable-baselines3


@pytest.mark.parametrize("agent", [AllInAL(), BalladAgent(), RandomAgent(seed=0)], ids=repr)
def test_sb3_evaluate_policy_with_a_hand_written_agent(small_xy, agent) -> None:
    env = Monitor(gym.make(ENV_ID, dataset=small_xy, prior="knn", **SHORT))
    env.reset(seed=0)  # seeds the generator the evaluation's unseeded resets draw from
    replay = copy.deepcopy(agent)  # the same agent state, for the replay by hand
    rewards, lengths = evaluate_policy(agent, env, n_eval_episodes=2,
                                       return_episode_rewards=True)
    assert lengths == [3, 3]
    # The same two episodes by hand: the unseeded resets follow the seeded one.
    twin = gym.make(ENV_ID, dataset=small_xy, prior="knn", **SHORT)
    twin.reset(seed=0)
    expected = []
    for _ in range(2):
        obs, _ = twin.reset()
        total, terminated = 0.0, False
        while not terminated:
            obs, reward, terminated, _, _ = twin.step(act(replay, obs))
            total += reward
        expected.append(total)
    assert rewards == pytest.approx(expected, abs=2e-6)  # Monitor rounds to 6 decimals
    mean, std = evaluate_policy(agent, env, n_eval_episodes=2)
    assert math.isfinite(mean) and math.isfinite(std) and mean >= 0


def test_env_settings_of_a_vector_env_are_its_sub_environments_shared_settings() -> None:
    """An agent built for an SB3 or Gymnasium vector env in this process reads the settings
    its sub-environments share; sub-environments of differing settings give none."""
    from types import SimpleNamespace

    from agents.base import env_settings
    from ballad_env.settings import Settings

    one, other = Settings(), Settings(c_fn=10.0)
    sub = SimpleNamespace(unwrapped=SimpleNamespace(settings=one))
    assert env_settings(SimpleNamespace(envs=[sub, sub])) == one
    odd = SimpleNamespace(unwrapped=SimpleNamespace(settings=other))
    assert env_settings(SimpleNamespace(envs=[sub, odd])) is None
    assert env_settings(SimpleNamespace()) is None
