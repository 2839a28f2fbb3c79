"""The preset's cosine BALLAD and All-in-LR against the published code's episodes (issue 41).

``tests/data/authors_cosine_episodes.json`` holds episodes of the published ``run_BALLAD``
(its ``provenance`` says how they were recorded): BALLAD with the cosine reward on WBC, Glass
and Stamps, seeds 0-2, and All-in-LR on Waveform, seeds 0-2, 15 rounds each, with the labels
bought, the threshold, the test cost and the reward of every round. Under
``Settings.authors_code()``, ``make_agent("ballad-cosine", env)`` and ``all-in-lr`` must repeat
them round for round: the same actions (the published cosine's NaN and BALLAD's published
start decide the first rounds), the same labels, the test costs to 1e-6 and the rewards (NaN
where the published code got one).

The fast tests give every round the recorded threshold (the search replaced by a replay), so
they check everything but the search on all 12 episodes; the slow ones run the published
search itself (``authors-bayes``, 50 gp_minimize calls a round) where it matters: BALLAD's
first rounds, and the Waveform rounds whose threshold moves with the squashing's last bit.

Waveform's episodes go through a BLAS product (the fixture's ``arithmetic``): they are compared
to 1e-12 under the OpenBLAS kernel they were recorded under, and to the tolerances measured
across kernels elsewhere (``REWARD_ELSEWHERE``, ``TAU_ELSEWHERE``; ``docs/studies/
REPRODUCTION.md``). The other data sets' episodes repeat to 1e-12 under any kernel.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arithmetic import on_kernel, openblas_kernels, tolerance

from agents.base import feature, show_info
from agents.registry import make_agent
from ballad_env.data import load_dataset
from ballad_env.detectors.priors import make_prior
from ballad_env.env import BudgetAllocationEnv
from ballad_env.episode import AL, LR
from ballad_env.rejection import ConfidenceRejector
from ballad_env.rewards import decisions
from ballad_env.settings import Settings

FIXTURE = Path(__file__).parent / "data" / "authors_cosine_episodes.json"
#: Our agent for each published strategy, and the side signal its records hold.
AGENTS = {"ballad-cosine": ("ballad-cosine", "cosine"), "all-in-lr": ("all-in-lr", "entropy")}


def _recorded() -> list[dict[str, Any]]:
    return list(json.loads(FIXTURE.read_text())["episodes"])


EPISODES = _recorded()
#: The OpenBLAS kernel the episodes were recorded under, and the data sets whose episodes go
#: through a BLAS product (the kNN prior by brute force).
ARITHMETIC: dict[str, Any] = json.loads(FIXTURE.read_text())["provenance"]["arithmetic"]
#: How far Waveform's rewards and searched thresholds may be from the recorded ones under
#: another kernel: measured up to 4.3e-9 and 2.7e-8 under Haswell and Sandybridge.
REWARD_ELSEWHERE = 1e-7
TAU_ELSEWHERE = 1e-6


def _tolerance(dataset: str, elsewhere: float) -> float:
    """1e-12, or ``elsewhere`` for a data set through a BLAS product under a kernel other
    than the recorded one."""
    if dataset not in ARITHMETIC["gemm_datasets"]:
        return 1e-12
    return tolerance(ARITHMETIC["blas_kernel"], elsewhere)


def _id(episode: dict[str, Any]) -> str:
    return f"{episode['strategy']}-{episode['dataset']}-{episode['seed']}"


class _RecordedThresholds:
    """The threshold search replaced by the recorded threshold of each round, in order, and
    by ``search`` (the preset's own) once they run out."""

    def __init__(self, rounds: list[dict[str, Any]], search: Any = None) -> None:
        self.taus = [r["tau"] for r in rounds]
        self.search = search

    def __call__(self, p: np.ndarray, y: np.ndarray, costs: Any, seed: int = 0) -> float:
        if self.taus or self.search is None:
            return self.taus.pop(0)
        return float(self.search(p, y, costs, seed=seed))


def _play(episode: dict[str, Any], rounds: int = 15, searched_from: int | None = None,
          **changes: Any) -> list[tuple[np.ndarray, dict[str, Any]]]:
    """Our agent on the preset (``changes`` to it), from reset to ``rounds`` rounds: the
    observation and info after each round; the recorded thresholds, or from round
    ``searched_from`` on the preset's own search."""
    env = BudgetAllocationEnv(episode["dataset"], settings=Settings.authors_code(**changes))
    agent = make_agent(AGENTS[episode["strategy"]][0], env)
    obs, info = env.reset(seed=episode["seed"])
    assert env.episode is not None
    rejector = env.episode.rejector
    assert isinstance(rejector, ConfidenceRejector)  # the preset's: one searched threshold
    recorded = episode["rounds"] if searched_from is None else \
        episode["rounds"][:searched_from - 1]
    replay: Any = _RecordedThresholds(recorded, rejector.search)  # a search's call
    rejector.search = replay
    agent.reset(episode["seed"])
    show_info(agent, info)
    played = []
    for _ in range(rounds):
        action, _ = agent.predict(obs)
        obs, _, _, _, info = env.step(int(action))
        show_info(agent, info)
        played.append((obs, info))
    return played


def _check_round(obs: np.ndarray, info: dict[str, Any], expected: dict[str, Any],
                 signal: str, reward_tolerance: float = 1e-12) -> None:
    """One round as recorded: action, labels, test cost (1e-6), the side's reward (to
    ``reward_tolerance``; NaN where the published code got NaN, which the observation shows
    as 1)."""
    assert info["action"] == expected["action"]
    queried = np.asarray(info["queried"])
    assert sorted(queried[queried >= 0].tolist()) == expected["new"]  # the rest is padding
    assert info["test_cost"] == pytest.approx(expected["test_cost"], abs=1e-6)
    name = f"{signal}_{expected['action'].lower()}"
    if expected["reward"] is None:
        assert math.isnan(info[name])
        assert feature(obs, name) == 1.0
    else:
        assert info[name] == pytest.approx(expected["reward"], abs=reward_tolerance)


def test_the_fixture_holds_the_episodes_the_issue_names() -> None:
    held = {(e["strategy"], e["dataset"], e["seed"]) for e in EPISODES}
    assert held == {("ballad-cosine", d, s) for d in ("WBC", "Glass", "Stamps")
                    for s in range(3)} | {("all-in-lr", "Waveform", s) for s in range(3)}
    assert all(len(e["rounds"]) == 15 for e in EPISODES)
    # the published cosine BALLAD always plays LR twice first: its first LR reward is NaN
    for episode in EPISODES:
        if episode["strategy"] == "ballad-cosine":
            assert "".join(r["action"][0] for r in episode["rounds"][:2]) == "LL"
            assert episode["rounds"][0]["reward"] is None


@pytest.mark.parametrize(
    "episode", [pytest.param(e, id=_id(e), marks=[pytest.mark.slow] if
                             e["dataset"] == "Waveform" else []) for e in EPISODES])
def test_the_preset_repeats_the_published_episode(episode: dict[str, Any]) -> None:
    """Given the published thresholds, every round as published: actions, labels, test costs
    and rewards (the search itself: the slow tests below)."""
    signal = AGENTS[episode["strategy"]][1]
    played = _play(episode)
    reward_tolerance = _tolerance(episode["dataset"], REWARD_ELSEWHERE)
    for (obs, info), expected in zip(played, episode["rounds"], strict=True):
        _check_round(obs, info, expected, signal, reward_tolerance)


@pytest.mark.parametrize("dataset", ["WBC", "Glass", "Stamps", "Waveform"])
def test_the_fixture_names_the_data_sets_through_a_blas_product(dataset: str) -> None:
    """The preset's kNN prior scores new points by brute force (a BLAS matrix product,
    whose last bits depend on the kernel) exactly on the data sets the fixture names; the
    others use a k-d tree, whose distances no kernel changes."""
    X = load_dataset(dataset).X
    method = make_prior(Settings.authors_code().prior, 0, len(X)).fit(X).neigh_._fit_method
    assert (method == "brute") == (dataset in ARITHMETIC["gemm_datasets"])


def test_our_cosine_rule_leaves_the_published_path_at_round_two() -> None:
    """With ``cosine_rule="ours"`` (finite rewards, the paper's start) the preset plays AL in
    round 2 where the published code plays LR: the rule is what makes the episodes agree."""
    played = _play(_episode("ballad-cosine", "WBC", 0), rounds=2, cosine_rule="ours")
    assert [info["action"] for _, info in played] == ["LR", "AL"]
    # ours: the first LR output is compared with the rejections at tau = 0.1, finitely
    assert 0.0 <= played[0][1]["cosine_lr"] <= 1.0


def test_published_outputs_start_from_zero_rejections_and_signed_labels() -> None:
    """Under the published rule the LR side's initial output is all zero and the AL side's
    decisions are -1/+1; so the first LR reward is NaN whatever the round rejected."""
    env = BudgetAllocationEnv("WBC", settings=Settings.authors_code(threshold_search="exact"))
    env.reset(seed=0)
    assert env.episode is not None
    stored = env.episode.stored
    assert not stored[LR].decision.any() and np.isnan(decisions(stored[LR])).all()
    assert set(np.unique(stored[AL].decision)) <= {-1.0, 1.0}
    _, _, _, _, info = env.step(LR)
    assert math.isnan(info["cosine_lr"]) and info["entropy_lr"] >= 0


def _episode(strategy: str, dataset: str, seed: int) -> dict[str, Any]:
    (episode,) = [e for e in EPISODES if (e["strategy"], e["dataset"], e["seed"]) ==
                  (strategy, dataset, seed)]
    return episode


@pytest.mark.slow
@pytest.mark.parametrize(("dataset", "seed", "first", "last"),
                         [("WBC", 0, 1, 3), ("Stamps", 0, 4, 4)])
def test_the_published_search_plays_ballads_rounds(dataset: str, seed: int, first: int,
                                                   last: int) -> None:
    """The preset's own search (authors-bayes) from round ``first`` to ``last`` (the
    recorded thresholds before): the published thresholds (to 1e-9) and test costs. WBC's
    first three rounds (LR, LR after the NaN, then AL); Stamps' round 4, the first LR round
    after an AL round, where SSDO's label terms summed in our order (``label_terms=
    "incremental"``, last bits apart) moved the threshold to 0.928 from the published
    0.893.

    gp_minimize's Gaussian process runs on BLAS: under a kernel other than the recorded one
    its last bits can move the search elsewhere in the flat stretch of the cost (Stamps'
    round 4 under Haswell and Sandybridge: tau 0.928 again). There the check is what holds
    on any kernel: the published actions and labels, and a threshold that costs on the
    labels what the published one costs."""
    episode = _episode("ballad-cosine", dataset, seed)
    played = _play(episode, rounds=last, searched_from=first)
    if on_kernel(ARITHMETIC["blas_kernel"]):
        for (obs, info), expected in zip(played, episode["rounds"][:last], strict=True):
            _check_round(obs, info, expected, "cosine")
            assert info["tau"] == pytest.approx(expected["tau"], abs=1e-9)
        return
    for (_, info), (_, published) in zip(played, _play(episode, rounds=last), strict=True):
        assert info["action"] == published["action"]
        assert np.array_equal(info["queried"], published["queried"])
        assert info["val_cost"] == pytest.approx(published["val_cost"], abs=1e-12)


def _lr_round_searched(episode: dict[str, Any], k: int, **changes: Any) -> tuple[float, float]:
    """All-in-LR on the preset (``changes`` to it) to round ``k``: the recorded thresholds in
    the rounds before (All-in-LR's labels do not depend on them), the preset's own search in
    round ``k``; its tau and test cost."""
    _, info = _play(episode, rounds=k, searched_from=k, **changes)[-1]
    return info["tau"], info["test_cost"]


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "k"), [(0, 5), (2, 15)])
def test_anomatools_squash_gives_the_published_waveform_threshold(seed: int, k: int) -> None:
    """Waveform, All-in-LR, the two rounds (of 45) where the squashing's last bit moved the
    published search's threshold: with the squashing as anomatools writes it the preset's
    search finds the published threshold and test cost (under another BLAS kernel than the
    recorded one, the threshold to ``TAU_ELSEWHERE``: the kNN prior's last bits move it)."""
    episode = _episode("all-in-lr", "Waveform", seed)
    expected = episode["rounds"][k - 1]
    tau, cost = _lr_round_searched(episode, k)
    assert tau == pytest.approx(expected["tau"], abs=_tolerance("Waveform", TAU_ELSEWHERE))
    assert cost == pytest.approx(expected["test_cost"], abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "k"), [(0, 5), (2, 15)])
def test_our_squash_moves_the_published_waveform_threshold(seed: int, k: int) -> None:
    """With our squashing (-expm1, which differs from anomatools' in the last bit on most
    points) gp_minimize lands elsewhere in the flat stretch of the cost, and one test point
    more or fewer is rejected. Only under the recorded kernel: under others the kNN
    prior's last bits move the search as much as the squashing's (round 15 of seed 2 lands
    on the published threshold under Haswell)."""
    if not on_kernel(ARITHMETIC["blas_kernel"]):
        pytest.skip(f"needs OpenBLAS's {ARITHMETIC['blas_kernel']} kernel, the recorded "
                    f"arithmetic; running {sorted(openblas_kernels())}")
    episode = _episode("all-in-lr", "Waveform", seed)
    expected = episode["rounds"][k - 1]
    tau, cost = _lr_round_searched(episode, k, squash_formula="expm1")
    assert abs(tau - expected["tau"]) > 1e-4
    assert abs(cost - expected["test_cost"]) > 1e-6
