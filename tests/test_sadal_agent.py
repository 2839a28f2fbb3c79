"""Tests of SADAL's allocation rule (agents.sadal), by hand."""

from __future__ import annotations

import pytest
from test_bandits import play

from agents import make_agent
from agents.sadal import SadalAgent, discounted_sum, sadal_choice
from ballad_env import AL, LR


def test_discounted_sum_by_hand() -> None:
    # 1 (oldest), 0.3, 0.05 (latest): 0.05 + 0.5 * 0.3 + 0.25 * 1 = 0.45
    assert discounted_sum([1.0, 0.3, 0.05], 0.5) == pytest.approx(0.45)


def test_sadal_choice_by_hand() -> None:
    # Pseudo-rewards only: AL 0.99 < LR 1, so LR.
    assert sadal_choice([], []) == LR
    # LR reward 0.3: LR 0.3 + 0.5 * 1 = 0.8 < 0.99, so AL.
    assert sadal_choice([], [0.3]) == AL
    # AL reward 0.2: AL 0.2 + 0.5 * 0.99 = 0.695 < 0.8, so LR.
    assert sadal_choice([0.2], [0.3]) == LR
    # LR reward 0.05: LR 0.05 + 0.15 + 0.25 = 0.45 < 0.695, so AL.
    assert sadal_choice([0.2], [0.3, 0.05]) == AL
    # LR's first reward 0.49: 0.49 + 0.5 = 0.99 ties AL's 0.99, and ties go to LR.
    assert sadal_choice([], [0.49]) == LR


def test_agent_plays_the_rule_on_observations() -> None:
    # The scripted episode above: LR, then AL, LR, AL.
    actions = play(SadalAgent(), [(LR, 0.3), (AL, 0.2), (LR, 0.05)])
    assert actions == [LR, AL, LR, AL]
    # DiscountedGreedy would force LR then AL; SADAL keeps LR after a large first reward.
    assert play(SadalAgent(), [(LR, 0.6)]) == [LR, LR]


def test_registered() -> None:
    assert isinstance(make_agent("sadal"), SadalAgent)
    with pytest.raises(ValueError, match="discount"):
        SadalAgent(discount=2.0)
