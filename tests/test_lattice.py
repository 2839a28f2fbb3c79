"""Tests of the state lattice (ballad_env.replay.lattice): equal to stepping, optimal, and exact
replay."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import two_round_grid

import agents
from ballad_env import AL, LR, BudgetAllocationEnv, Settings, load_dataset
from ballad_env.replay.lattice import (
    STATE_FIELDS,
    Lattice,
    build_lattice,
    parse_path,
    path_string,
)
from ballad_env.rewards import SIDE_SIGNAL_NAMES as REWARDS

SEED = 3
SHORT = {"budget_fraction": 0.1, "round_fraction": 0.02}  # 5 rounds
COMPARED = ("test_cost", "fpr", "fnr", "rejection_rate", "auc", "tau", "val_cost",
            "n_labeled_train", "n_labeled_val", "n_anomalies_found")


@pytest.fixture(scope="module")
def dataset(small_xy):
    return load_dataset(small_xy)


@pytest.fixture(scope="module")
def lattice(dataset) -> Lattice:
    return build_lattice(dataset, SEED, Settings(prior="knn"))


@pytest.fixture(scope="module")
def short_lattice(dataset) -> Lattice:
    return build_lattice(dataset, SEED, Settings(prior="knn", **SHORT))


@pytest.fixture
def env(dataset) -> BudgetAllocationEnv:
    return BudgetAllocationEnv(dataset, prior="knn")


def orders(n_al: int, n_lr: int, count: int, rng: np.random.Generator) -> list[list[int]]:
    """``count`` distinct-ish random orders of n_al AL and n_lr LR actions, plus both blocks."""
    base = [AL] * n_al + [LR] * n_lr
    out = [base, base[::-1]]
    out += [list(rng.permutation(base)) for _ in range(count)]
    return out


# ------------------------------------------------------------------ equal to stepping
@pytest.mark.parametrize(("n_al", "n_lr"), [(15, 0), (0, 15), (7, 8), (11, 4), (2, 6)])
def test_lattice_entry_equals_stepping_the_environment_in_any_order(
        lattice: Lattice, env: BudgetAllocationEnv, n_al: int, n_lr: int) -> None:
    """Every prefix of every order lands on the lattice entry of its (i, j), rewards included."""
    rng = np.random.default_rng(n_al * 31 + n_lr)
    for actions in orders(n_al, n_lr, 3, rng):
        env.reset(seed=SEED)
        i = j = last_lr_i = 0
        for action in actions:
            _, _, _, _, info = env.step(int(action))
            if action == AL:
                i += 1
            else:
                j += 1
            for key in COMPARED:
                assert info[key] == lattice.grid[key][i, j], (key, i, j, path_string(actions))
            if action == AL:
                for s in REWARDS:
                    assert info[f"{s}_al"] == lattice.al_reward[s][i]
            else:
                for s in REWARDS:
                    assert info[f"{s}_lr"] == lattice.lr_reward_from[s][i, j, last_lr_i]
                last_lr_i = i


def test_lattice_covers_every_state_and_nothing_beyond(lattice: Lattice) -> None:
    k = lattice.n_rounds
    i, j = np.indices((k + 1, k + 1))
    assert np.array_equal(lattice.reachable, i + j <= k)
    for name in STATE_FIELDS:
        assert np.all(np.isnan(lattice.grid[name][i + j > k])), name
    assert lattice.n_rounds == 15


def test_lr_reward_same_i_is_two_lr_rounds_in_a_row(lattice: Lattice, env) -> None:
    """lr_reward(s)[i, j] is what an agent sees after LR at (i, j - 2) -> (i, j - 1) -> (i, j)."""
    env.reset(seed=SEED)
    for action in [AL] * 4 + [LR] * 3:
        _, _, _, _, info = env.step(action)
    assert info["entropy_lr"] == lattice.lr_reward("entropy")[4, 3]
    assert info["cosine_lr"] == lattice.lr_reward("cosine")[4, 3]
    # j = 1 compares with the initial output, so every i0 agrees
    assert np.unique(lattice.lr_reward_from["entropy"][6, 1, :7]).size == 1


# ------------------------------------------------------------------ optimal paths
def test_dp_optimum_equals_brute_force_over_all_paths(short_lattice: Lattice) -> None:
    k = short_lattice.n_rounds
    assert k == 5
    paths = list(itertools.product((AL, LR), repeat=k))
    means = {p: short_lattice.mean_cost(p) for p in paths}
    finals = {p: short_lattice.costs_along(p)[-1] for p in paths}
    best = short_lattice.optimal_path("mean")
    assert means[best] == pytest.approx(min(means.values()), abs=1e-15)
    best_final = short_lattice.optimal_path("final")
    assert finals[best_final] == min(finals.values())
    ties = [p for p in paths if finals[p] == finals[best_final]]
    assert means[best_final] == pytest.approx(min(means[p] for p in ties), abs=1e-15)


def test_regret_is_zero_for_the_optimum_and_positive_otherwise(lattice: Lattice) -> None:
    best = lattice.optimal_path()
    assert lattice.regret(best) == 0.0
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(2, size=lattice.n_rounds)
        assert lattice.regret(actions) >= 0.0
    all_al = (AL,) * lattice.n_rounds
    expected = lattice.costs_along(all_al).mean() - lattice.costs_along(best).mean()
    assert lattice.regret(all_al) == pytest.approx(expected)


def hand_lattice() -> Lattice:
    """Two rounds. Costs after (AL, LR) orders: greedy takes AL (0.2 < 0.3) then pays 0.9;
    LR first (0.3) leads to 0.0. LR is impossible from (1, 0).
    """
    nan = np.nan
    grid = two_round_grid(10)
    grid["al_available"] = np.array([[1, 1, 0], [1, 0, nan], [0, nan, nan]], dtype=float)
    grid["lr_available"] = np.array([[1, 1, 0], [0, 0, nan], [0, nan, nan]], dtype=float)
    grid["val_cost"] = np.array([[0.0, 0.4, 0.1], [0.3, 0.2, nan], [0.1, nan, nan]])
    al = {"entropy": np.array([nan, 0.05, 0.01]), "cosine": np.array([nan, 0.2, 0.1])}
    lr = {s: np.full((3, 3, 3), nan) for s in REWARDS}
    lr["entropy"][0, 1, :] = 0.08
    lr["entropy"][0, 2, 0] = 0.02
    lr["entropy"][1, 1, :] = 0.08
    lr["cosine"][0, 1, :] = 0.1
    lr["cosine"][0, 2, 0] = 0.3
    lr["cosine"][1, 1, :] = 0.1
    return Lattice("hand", 0, 2, 0.1, grid, al, lr)


def test_hand_lattice_optimum_oracle_and_impossible_moves() -> None:
    lat = hand_lattice()
    assert lat.optimal_path("mean") == (LR, LR)  # 0.3 + 0.0 beats AL then AL (0.2 + 0.8)
    assert lat.optimal_path("final") == (LR, LR)
    assert lat.one_step_oracle() == (AL, AL)  # greedy on the next cost; LR impossible at (1, 0)
    assert lat.regret((AL, AL)) == pytest.approx(0.5 - 0.15)
    with pytest.raises(ValueError, match=r"not possible at state \(1, 0\)"):
        lat.states_along((AL, LR))


def test_hand_lattice_better_action_and_signal_scores() -> None:
    lat = hand_lattice()
    better = lat.better_action()
    assert better[0, 0] == AL  # 0.2 < 0.3
    assert better[0, 1] == LR  # 0.0 < 0.9
    assert np.isnan(better[1, 0])  # LR is impossible there
    # lookahead at (0, 0): entropy AL 0.05 vs LR 0.08 -> LR (wrong); cosine 0.2 vs 0.1 -> AL
    # at (0, 1): entropy AL 0.05 vs LR 0.02 -> AL (wrong); cosine 0.2 vs 0.3 -> LR (right)
    entropy_votes, cosine_votes = lat.signal_votes("entropy"), lat.signal_votes("cosine")
    assert (entropy_votes[0, 0], entropy_votes[0, 1]) == (LR, AL)
    assert (cosine_votes[0, 0], cosine_votes[0, 1]) == (AL, LR)
    assert lat.score_signal("entropy") == {"states": 2, "voted": 2, "correct": 0, "al_better": 1}
    assert lat.score_signal("cosine") == {"states": 2, "voted": 2, "correct": 2, "al_better": 1}
    # val_cost at (0, 0): AL takes it 0 -> 0.3, LR 0 -> 0.4: AL's decrease (-0.3) is larger;
    # at (0, 1): AL 0.4 -> 0.2, LR 0.4 -> 0.1: LR's
    val_votes = lat.signal_votes("val_cost")
    assert (val_votes[0, 0], val_votes[0, 1]) == (AL, LR)
    assert lat.right_moves((LR, LR)) == (1, 2)
    assert lat.right_moves((AL, AL)) == (1, 1)


def test_signal_votes_are_consistent_with_the_rewards(lattice: Lattice) -> None:
    votes = lattice.signal_votes("entropy", "lookahead")
    lr = lattice.lr_reward("entropy")
    for i, j in [(0, 0), (3, 4), (8, 2)]:
        al_side, lr_side = lattice.al_reward["entropy"][i + 1], lr[i, j + 1]
        assert votes[i, j] == (AL if al_side > lr_side else LR)
    lagged = lattice.signal_votes("cosine", "lagged")
    assert np.all(np.isnan(lagged[0, :])) and np.all(np.isnan(lagged[:, 0]))
    score = lattice.score_signal("val_cost", "lagged")
    assert 0 <= score["correct"] <= score["voted"] <= score["states"]


# ------------------------------------------------------------------ agents on the lattice
@pytest.mark.parametrize("seed", [0, 1])
def test_replay_matches_running_every_agent_in_the_environment(dataset, seed: int) -> None:
    """Seed 0: every registered agent but the oracle; seed 1: the seeded random ones again."""
    names = [n for n in agents.agent_names() if n != "oracle"]
    if seed == 1:
        names = ["random", "epsilon-greedy"]
    lattice = build_lattice(dataset, seed, Settings(prior="knn"))
    env = BudgetAllocationEnv(dataset, prior="knn")
    for name in names:
        # an agent that reads v1 features plays an environment observing in v1
        env.use_observation(getattr(agents.make_agent(name), "observation_version", "v0"))
        records = agents.run_episode(env, agents.make_agent(name, env), seed)
        played = parse_path("".join(r["action"][0] for r in records))
        assert lattice.replay(agents.make_agent(name)) == played, name
        costs = np.array([r["test_cost"] for r in records])
        assert np.array_equal(lattice.costs_along(played), costs), name


def test_one_step_oracle_matches_the_oracle_agent(lattice: Lattice, env) -> None:
    records = agents.run_episode(env, agents.make_agent("oracle", env), SEED)
    assert parse_path("".join(r["action"][0] for r in records)) == lattice.one_step_oracle()


def test_replay_refuses_an_impossible_action() -> None:
    lat = hand_lattice()

    class AlwaysLR:
        def reset(self, seed=None):
            pass

        def predict(self, observation, state=None, episode_start=None, deterministic=True):
            return LR, state

    assert lat.replay(AlwaysLR()) == (LR, LR)

    class ALThenLR(AlwaysLR):
        def reset(self, seed=None):
            self.calls = 0

        def predict(self, observation, state=None, episode_start=None, deterministic=True):
            self.calls += 1
            return (AL if self.calls == 1 else LR), state

    with pytest.raises(ValueError, match="impossible action 1"):
        lat.replay(ALThenLR())


def test_path_strings_round_trip() -> None:
    actions = (LR, AL, AL, LR)
    assert path_string(actions) == "LAAL"
    assert parse_path("LAAL") == actions
