"""Tests of the allocators beyond greedy (agents.bandits) on hand-made observation sequences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents import make_agent
from agents.bandits import (
    BANDIT_AGENTS,
    UCB1,
    DiscountedGreedy,
    EpsilonGreedy,
    Half,
    LRFirst,
    SlidingWindow,
    ValCostGreedy,
    lr_first,
)
from ballad_env import AL, FEATURE_INDEX, LR, OBSERVATION_FEATURES


def obs(**features: float) -> np.ndarray:
    """An observation with both pools available, the given named features set, rest 0."""
    out = np.zeros(len(OBSERVATION_FEATURES), dtype=np.float32)
    out[FEATURE_INDEX["al_available"]] = out[FEATURE_INDEX["lr_available"]] = 1.0
    for name, value in features.items():
        out[FEATURE_INDEX[name]] = value
    return out


def play(agent, rewards: list[tuple[int, float]], reward: str = "entropy",
         n_rounds: int = 15) -> list[int]:
    """Feed the agent a scripted episode: the i-th observation reports ``rewards[i - 1]``
    (side, value) as the previous round; returns the agent's actions. The scripted sides
    are what happened, whatever the agent chose (rewards then follow the script)."""
    latest = {AL: 0.0, LR: 0.0}
    actions = [int(agent.predict(obs(budget_used=0.0))[0])]
    for t, (side, value) in enumerate(rewards, start=1):
        latest[side] = value
        name = "al" if side == AL else "lr"
        o = obs(budget_used=t / n_rounds, **{f"prev_{name}": 1.0},
                **{f"{reward}_al": latest[AL], f"{reward}_lr": latest[LR]})
        actions.append(int(agent.predict(o)[0]))
    return actions


# ------------------------------------------------------------------ history rules
def test_discounted_greedy_sums_each_side_with_discount_half() -> None:
    # LR 0.2, AL 0.1, LR 0.05, LR 0.0 -> LR sums 0.2 -> 0.15 -> 0.075; AL 0.1
    actions = play(DiscountedGreedy(), [(LR, 0.2), (AL, 0.1), (LR, 0.05), (LR, 0.0)])
    assert actions == [LR, AL, LR, LR, AL]
    # a latest-reward rule would take AL after LR's 0.05 (0.1 > 0.05): the discount matters
    greedy = DiscountedGreedy(discount=0.0)
    assert play(greedy, [(LR, 0.2), (AL, 0.1), (LR, 0.05)]) == [LR, AL, LR, AL]


def test_discounted_score_by_hand() -> None:
    agent = DiscountedGreedy(discount=0.5)
    play(agent, [(LR, 0.4), (AL, 0.3), (LR, 0.2), (LR, 0.1)])
    assert agent.score(LR) == pytest.approx(0.25 * 0.4 + 0.5 * 0.2 + 0.1)
    assert agent.score(AL) == pytest.approx(0.3)


def test_ucb1_choice_by_hand() -> None:
    agent = UCB1()
    # after LR 0.3, AL 0.1: t = 2, equal bonuses sqrt(2 ln 2): LR's mean wins
    assert play(agent, [(LR, 0.3), (AL, 0.1)])[-1] == LR
    agent = UCB1()
    actions = play(agent, [(LR, 0.3), (AL, 0.1), (LR, 0.3)])
    al = 0.1 + math.sqrt(2 * math.log(3) / 1)  # 1.582
    lr = 0.3 + math.sqrt(2 * math.log(3) / 2)  # 1.348
    assert agent.index(AL) == pytest.approx(al, rel=1e-6)
    assert agent.index(LR) == pytest.approx(lr, rel=1e-6)
    assert actions[-1] == AL  # the less-tried side, despite its lower mean


def test_ucb1_without_exploration_is_greedy_on_means() -> None:
    actions = play(UCB1(c=0.0), [(LR, 0.3), (AL, 0.1), (LR, 0.0)])
    assert actions[-1] == LR  # LR mean 0.15 > AL mean 0.1


def test_sliding_window_forgets_old_rewards() -> None:
    script = [(LR, 0.9), (AL, 0.2), (LR, 0.1), (LR, 0.1)]
    assert play(SlidingWindow(window=2), script)[-1] == AL  # LR window mean 0.1 < 0.2
    assert play(SlidingWindow(window=3), script)[-1] == LR  # (0.9 + 0.1 + 0.1) / 3 > 0.2


def test_epsilon_greedy_is_greedy_on_means_with_epsilon_zero() -> None:
    actions = play(EpsilonGreedy(epsilon=0.0), [(LR, 0.3), (AL, 0.1), (LR, 0.0)])
    assert actions == [LR, AL, LR, LR]  # LR mean 0.15 > 0.1


def test_epsilon_greedy_is_reproducible_under_reset_and_draws_from_default_rng_seed() -> None:
    script = [(LR, 0.3), (AL, 0.1)] + [(AL, 0.05)] * 10
    agent = EpsilonGreedy(epsilon=1.0)
    agent.reset(7)
    first = play(agent, script)
    agent.reset(7)
    assert play(agent, script) == first
    rng = np.random.default_rng(7)
    expected = []
    for _ in range(len(script) - 1):
        rng.random()
        expected.append(int(rng.integers(2)))
    assert first[2:] == expected
    agent.reset(8)
    assert play(agent, script) != first


def test_history_agents_start_lr_then_al_and_forget_between_episodes() -> None:
    for agent in (DiscountedGreedy(), UCB1(), EpsilonGreedy(seed=0), SlidingWindow()):
        assert play(agent, [(LR, 0.5)])[:2] == [LR, AL], agent
        assert agent.history == {AL: [], LR: [0.5]}
        agent.predict(obs(budget_used=0.0))  # a new episode: its first observation
        assert agent.history == {AL: [], LR: []}
        agent.history[AL].append(1.0)
        agent.reset(0)
        assert agent.history == {AL: [], LR: []}


def test_history_agents_refuse_batches_and_respect_exhausted_pools() -> None:
    agent = DiscountedGreedy()
    with pytest.raises(ValueError, match="one observation at a time"):
        agent.predict(np.stack([obs(), obs()]))
    assert int(agent.predict(obs(lr_available=0.0))[0]) == AL  # wants LR, none left


# ------------------------------------------------------------------ validation cost
def test_val_cost_greedy_follows_the_larger_decrease() -> None:
    agent = ValCostGreedy()
    agent.reset(0)
    # dyadic estimates: float32 observations hold them exactly, so ties are exact
    steps = [
        (obs(), LR),  # no labels yet: LR first
        (obs(budget_used=1 / 15, prev_lr=1, labeled_val=0.1, val_cost=0.5), AL),  # then AL
        (obs(budget_used=2 / 15, prev_al=1, labeled_val=0.1, val_cost=0.375), LR),  # AL +1/8;
        # LR has no gain yet (its round started without labels): measure it
        (obs(budget_used=3 / 15, prev_lr=1, labeled_val=0.2, val_cost=0.4375), AL),  # LR -1/16
        (obs(budget_used=4 / 15, prev_al=1, labeled_val=0.2, val_cost=0.5), AL),  # tie: AL
        (obs(budget_used=5 / 15, prev_al=1, labeled_val=0.2, val_cost=0.625), LR),  # -1/8 < -1/16
        (obs(budget_used=6 / 15, prev_lr=1, labeled_val=0.3, val_cost=0.25), LR),  # LR +3/8
    ]
    for observation, expected in steps:
        assert int(agent.predict(observation)[0]) == expected, observation
    assert agent.gain == {AL: -0.125, LR: 0.375}


# ------------------------------------------------------------------ fixed splits
def test_half_alternates_starting_with_lr() -> None:
    agent = Half()
    assert int(agent.predict(obs())[0]) == LR
    assert int(agent.predict(obs(prev_lr=1))[0]) == AL
    assert int(agent.predict(obs(prev_al=1))[0]) == LR


@pytest.mark.parametrize(("percent", "n_lr"), [(0, 0), (20, 3), (33, 5), (50, 8), (100, 15)])
def test_lr_first_spends_the_first_share_of_rounds_on_lr(percent: float, n_lr: int) -> None:
    agent = lr_first(f"lr-first-{percent}")
    actions = [int(agent.predict(obs(budget_used=np.float32(t / 15)))[0]) for t in range(15)]
    assert actions == [LR] * n_lr + [AL] * (15 - n_lr)


def test_lr_first_names() -> None:
    assert lr_first("lr-first-12.5").percent == 12.5
    for bad in ("lr-first-", "lr-first-x", "lr-last-20"):
        with pytest.raises(ValueError, match="lr-first"):
            lr_first(bad)
    with pytest.raises(ValueError, match="percent"):
        LRFirst(120)


def test_every_bandit_agent_is_registered() -> None:
    expected = {"discounted": DiscountedGreedy, "ucb1": UCB1, "epsilon-greedy": EpsilonGreedy,
                "sliding-window": SlidingWindow, "val-cost-greedy": ValCostGreedy,
                "half": Half, "lr-first-20": LRFirst}
    assert set(expected) <= set(BANDIT_AGENTS)
    for name, cls in expected.items():
        assert type(make_agent(name)) is cls, name
    assert make_agent("lr-first-33").percent == 33


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="discount"):
        DiscountedGreedy(discount=1.5)
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonGreedy(epsilon=-0.1)
    with pytest.raises(ValueError, match="window"):
        SlidingWindow(window=0)
    with pytest.raises(ValueError, match="reward"):
        UCB1(reward="bogus")
