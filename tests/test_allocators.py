"""The validation-sample cost signal, observation v1, and the allocators that read it
(agents.allocators, scripts.studies.allocators)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import agents
from agents.allocators import (
    ALLOCATOR_AGENTS,
    ExpectedImprovementGain,
    PairedProbe,
    ProbeSwitch,
    ThompsonGain,
    TraitSwitch,
)
from ballad_env import AL, LR, BudgetAllocationEnv, Episode, Settings, load_dataset
from ballad_env.cost import Costs
from ballad_env.observation import (
    ALL_FEATURE_INDEX,
    OBSERVATION_FEATURES,
    OBSERVATIONS,
    encode,
    feature_table,
)
from ballad_env.rejection.confidence import confidence, example_costs, mean_and_standard_error
from ballad_env.replay.lattice import STATE_FIELDS, Lattice, build_lattice
from ballad_env.rewards import REWARD_SIGNALS, SIDE_SIGNAL_NAMES
from scripts.studies.allocators import (
    Candidate,
    candidates,
    detection_rounds,
    fit_logistic,
    fit_trait_switch,
    fixed_split,
    goal_table,
    leave_three_out_folds,
    paired_change_stats,
    paired_rows,
    planned_path,
    replay_cell,
    select_params,
    signal_accuracy,
    summary,
    trait_row,
    trait_switch_paths,
    tuned_paths,
)

SHORT = {"budget_fraction": 0.3, "round_fraction": 0.05}  # 6 rounds


# ------------------------------------------------------------------ the signal
def test_example_costs_by_hand() -> None:
    costs = Costs(c_fp=2.0, c_fn=5.0, c_r=0.5)
    conf = np.array([0.9, 0.9, 0.9, 0.9, 0.1])
    pred = np.array([1, 0, 0, 1, 1])
    y = np.array([0, 1, 0, 1, 0])
    # FP, FN, right, right, rejected (conf 0.1 < tau 0.2)
    assert example_costs(0.2, conf, pred, y, costs).tolist() == [2.0, 5.0, 0.0, 0.0, 0.5]


def test_mean_and_standard_error_by_hand() -> None:
    # values 0, 0, 3: mean 1, sample variance ((1 + 1 + 4) / 2) = 3, se = sqrt(3 / 3) = 1
    assert mean_and_standard_error(np.array([0.0, 0.0, 3.0])) == pytest.approx((1.0, 1.0))
    assert mean_and_standard_error(np.array([])) == (0.0, 0.0)
    assert mean_and_standard_error(np.array([0.25])) == (0.25, 0.0)


@pytest.fixture(scope="module")
def short_episode(small_xy):
    """An episode after LR, AL, LR, AL rounds."""
    episode = Episode(load_dataset(small_xy), 3, Settings(**SHORT))
    for action in (LR, AL, LR, AL):
        episode.step(action)
    return episode


def test_validation_sample_cost_matches_a_hand_computation(short_episode) -> None:
    e = short_episode
    idx = e.val_labels.indices
    assert len(idx) == 2 * e.budget.per_round
    p, y = e.p_val[idx], e.split.y_val[idx]
    rejected = confidence(p) < e.tau
    each = np.where(rejected, e.costs.c_r,
                    np.where((p > 0.5) & (y == 0), e.costs.c_fp,
                             np.where((p <= 0.5) & (y == 1), e.costs.c_fn, 0.0)))
    snap = e.snapshot()
    assert snap.val_sample_cost == pytest.approx(each.mean(), abs=1e-15)
    assert snap.val_sample_se == pytest.approx(each.std(ddof=1) / np.sqrt(len(each)), abs=1e-15)


def test_validation_sample_cost_is_zero_without_v_labels_and_is_val_cost_with_them(small_xy):
    episode = Episode(load_dataset(small_xy), 0, Settings(**SHORT))
    episode.step(AL)  # D labels only: val_cost reads them, the sample estimate has none
    snap = episode.snapshot()
    assert (snap.val_sample_cost, snap.val_sample_se) == (0.0, 0.0)
    episode.step(LR)  # once V holds labels, tau and val_cost are set on them alone
    snap = episode.snapshot()
    assert snap.val_sample_cost == snap.val_cost


def test_val_sample_cost_reward_is_the_decrease(small_xy) -> None:
    env = BudgetAllocationEnv(small_xy, reward="val_sample_cost", **SHORT)
    env.reset(seed=0)
    before = env.snapshot().val_sample_cost
    _, reward, *_ = env.step(LR)
    assert reward == pytest.approx(before - env.snapshot().val_sample_cost)
    assert "val_sample_cost" in REWARD_SIGNALS


# ------------------------------------------------------------------ observation v1
def test_v1_appends_two_features_and_keeps_v0(short_episode) -> None:
    snap = short_episode.snapshot()
    v0, v1 = encode(snap), encode(snap, "v1")
    assert np.array_equal(encode(snap, "v0"), v0) and len(v0) == len(OBSERVATION_FEATURES)
    assert np.array_equal(v1[:len(v0)], v0)
    assert OBSERVATIONS["v1"][len(v0):] == ("val_sample_cost", "val_sample_se")
    scale = snap.max_cost
    expected = np.float32([snap.val_sample_cost / scale, snap.val_sample_se / scale])
    assert np.array_equal(v1[len(v0):], expected)
    assert "val_sample_se" in feature_table("v1") and "val_sample_se" not in feature_table()
    with pytest.raises(ValueError, match="unknown observation version 'v9'"):
        encode(snap, "v9")


def test_environment_observes_in_the_version_asked(small_xy) -> None:
    env = BudgetAllocationEnv(small_xy, observation="v1", **SHORT)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (20,) and env.observation_space.contains(obs)
    assert env.feature_names == OBSERVATIONS["v1"]
    obs, *_ = env.step(LR)
    assert obs[ALL_FEATURE_INDEX["val_sample_cost"]] == np.float32(
        env.snapshot().val_sample_cost / env.snapshot().max_cost)
    assert BudgetAllocationEnv(small_xy, **SHORT).reset(seed=0)[0].shape == (18,)
    with pytest.raises(ValueError, match="unknown observation version"):
        BudgetAllocationEnv(small_xy, observation="v9")


def test_a_v1_feature_read_from_a_v0_observation_is_a_clear_error() -> None:
    from agents.base import feature

    with pytest.raises(ValueError, match="observation='v1'"):
        feature(np.zeros(len(OBSERVATION_FEATURES)), "val_sample_cost")


# ------------------------------------------------------------------ the allocators
def obs(**features: float) -> np.ndarray:
    """A v1 observation with both pools available and the named features set."""
    out = np.zeros(len(OBSERVATIONS["v1"]), dtype=np.float32)
    out[ALL_FEATURE_INDEX["al_available"]] = out[ALL_FEATURE_INDEX["lr_available"]] = 1.0
    for name, value in features.items():
        out[ALL_FEATURE_INDEX[name]] = value
    return out


def play(agent, costs: list[float], se: float = 0.01) -> list[int]:
    """Feed ``agent`` observations whose validation-sample cost follows ``costs`` (the
    i-th after i rounds), with the previous action the agent's own; returns its actions."""
    actions: list[int] = []
    previous = None
    for t, cost in enumerate(costs):
        o = obs(budget_used=t / 15, val_sample_cost=cost, val_sample_se=se,
                **({} if previous is None else {("prev_al" if previous == AL else "prev_lr"): 1}))
        previous = int(agent.predict(o)[0])
        actions.append(previous)
    return actions


def test_paired_probe_continues_while_the_paired_decrease_pays() -> None:
    # warm-up 2 LR; the probe starts at cost 0.10; AL rounds bring 0.08, 0.07, then 0.11
    agent = PairedProbe(warmup=2, probe=1, z=1.0)
    actions = play(agent, [0.3, 0.2, 0.10, 0.08, 0.07, 0.11, 0.11, 0.11])
    assert actions == [LR, LR, AL, AL, AL, LR, LR, LR]
    # the decrease must exceed z standard errors: 0.10 - 0.095 < 1 * 0.01
    agent = PairedProbe(warmup=2, probe=1, z=1.0)
    assert play(agent, [0.3, 0.2, 0.10, 0.095, 0.0]) == [LR, LR, AL, LR, LR]


def test_paired_commit_decides_once_at_the_end_of_the_probe() -> None:
    agent = PairedProbe(warmup=1, probe=2, z=0.0, recheck=False)
    actions = play(agent, [0.3, 0.10, 0.12, 0.09, 0.5, 0.5])
    assert actions == [LR, AL, AL, AL, AL, AL]  # 0.09 < 0.10 after two AL rounds
    agent = PairedProbe(warmup=1, probe=2, z=0.0, recheck=False)
    assert play(agent, [0.3, 0.10, 0.12, 0.10, 0.0, 0.0]) == [LR, AL, AL, LR, LR, LR]


def test_probe_switch_reads_the_probe_rounds_entropy_reward() -> None:
    for moved, rest in ((0.12, AL), (0.08, LR)):
        agent = ProbeSwitch(warmup=2, threshold=0.1)
        steps = [obs(budget_used=0.0), obs(budget_used=1 / 15, prev_lr=1),
                 obs(budget_used=2 / 15, prev_lr=1),
                 obs(budget_used=3 / 15, prev_al=1, entropy_al=moved),
                 obs(budget_used=4 / 15, prev_al=1, entropy_al=moved)]
        assert [int(agent.predict(o)[0]) for o in steps] == [LR, LR, AL, rest, rest]


def test_thompson_posterior_update_by_hand() -> None:
    # prior N(0, 1), gain 1 observed with noise variance 1: precision 2, mean 1/2
    assert ThompsonGain.update((0.0, 1.0), 1.0, 1.0) == pytest.approx((0.5, 0.5))
    # prior N(0.2, 0.04), gain 0.4 with variance 0.01: precision 25 + 100 = 125,
    # mean (0.2 * 25 + 0.4 * 100) / 125 = 0.36
    assert ThompsonGain.update((0.2, 0.04), 0.4, 0.01) == pytest.approx((0.36, 0.008))


def test_thompson_draws_against_the_lr_gain_by_hand() -> None:
    # round 0: LR (no V label). Round 1 (j = 1, se 0.02): prior N(0.5 * 0.02, (1 * 0.02)^2);
    # LR's gain 4 * 0.02 * (1 - sqrt(1/2)). Round 2, after that AL round (paired decrease
    # 0.01, noise 1 x 0.02): the conjugate posterior, LR's gain unchanged (j still 1).
    agent = ThompsonGain(prior_mean=0.5, prior_sd=1.0, noise=1.0, lr_gain=4.0)
    agent.reset(seed=7)
    z = np.random.default_rng(7).standard_normal(2)
    lr_gain = 4 * 0.02 * (1 - np.sqrt(0.5))
    first = AL if 0.01 + 0.02 * z[0] > lr_gain else LR
    steps = [obs(budget_used=0.0), obs(budget_used=1 / 15, prev_lr=1, val_sample_cost=0.1,
                                        val_sample_se=0.02)]
    actions = [int(agent.predict(o)[0]) for o in steps]
    assert actions == [LR, first]
    if first == AL:
        mean, var = ThompsonGain.update((0.01, 0.0004), 0.01, 0.0004)
        second = AL if mean + np.sqrt(var) * z[1] > lr_gain else LR
        o = obs(budget_used=2 / 15, prev_al=1, val_sample_cost=0.09, val_sample_se=0.02)
        assert int(agent.predict(o)[0]) == second


def test_thompson_follows_the_evidence() -> None:
    # the prior says AL (mean 1 SE, sd 0.25 SE; se 0.01, LR's gain 0). AL rounds that lower
    # the paired estimate keep the rule on AL; one that raises it by 10 SEs ends AL
    for seed in range(5):
        agent = ThompsonGain(prior_mean=1.0, prior_sd=0.25, noise=0.5, lr_gain=0.0)
        agent.reset(seed)
        assert play(agent, [0.3, 0.2, 0.3, 0.3, 0.3, 0.3]) == [LR, AL] + [LR] * 4
        agent.reset(seed)
        assert play(agent, [0.3, 0.2, 0.18, 0.16, 0.14, 0.12]) == [LR] + [AL] * 5
    with pytest.raises(ValueError, match="prior_sd and noise"):
        ThompsonGain(noise=0.0)


def test_expected_improvement_by_hand() -> None:
    ei = ExpectedImprovementGain.expected_improvement
    assert ei(0.0, 1.0) == pytest.approx(1 / np.sqrt(2 * np.pi))  # phi(0)
    # delta -0.01, sd 0.02: 0.02 phi(-0.5) - 0.01 Phi(-0.5) = 0.0070414 - 0.0030854
    assert ei(-0.01, 0.02) == pytest.approx(0.0039560, abs=1e-7)
    assert ei(5.0, 0.01) == pytest.approx(5.0)  # sure gain: the gain itself


def test_ei_gain_explores_while_the_budget_can_use_it() -> None:
    # after one LR round (se 0.02): posterior N(-0.01, 0.02^2), LR's gain 0, 14/15 of the
    # budget left: -0.01 + kappa * (14/15) * 0.003956 is < 0 for kappa 1, > 0 for kappa 4
    for kappa, second in ((1.0, LR), (4.0, AL)):
        agent = ExpectedImprovementGain(prior_mean=-0.5, prior_sd=1.0, lr_gain=0.0,
                                        kappa=kappa)
        steps = [obs(budget_used=0.0), obs(budget_used=1 / 15, prev_lr=1,
                                            val_sample_cost=0.1, val_sample_se=0.02)]
        assert [int(agent.predict(o)[0]) for o in steps] == [LR, second]
        # late in the budget the same posterior no longer pays for exploring
        late = obs(budget_used=14 / 15, prev_lr=1, val_sample_cost=0.1, val_sample_se=0.02)
        agent.lr_rounds = 0
        agent.posterior = None
        assert int(agent.predict(late)[0]) == LR
    with pytest.raises(ValueError, match="kappa"):
        ExpectedImprovementGain(kappa=-1.0)


def constant_switch(intercept: float) -> TraitSwitch:
    """A trait switch that ignores the traits: AL after the probe if ``intercept`` > 0."""
    n = len(TraitSwitch.TRAITS)
    return TraitSwitch(coef=[0.0] * n, intercept=intercept, center=[0.0] * n, scale=[1.0] * n)


def test_trait_switch_scores_standardised_traits_by_hand() -> None:
    # traits: contamination 0.1, entropy_al 0.3, the rest 0; centres 0.05 / 0.1, scales
    # 0.05 / 0.1: standardised 1 and 2; score -1 + 0.5 * 1 + 1 * 2 = 1.5 > 0: AL
    agent = TraitSwitch(coef=[0.5, 1.0, 0, 0, 0, 0], intercept=-1.0,
                        center=[0.05, 0.1, 0, 0, 0, 0], scale=[0.05, 0.1, 1, 1, 1, 1])
    decided = obs(budget_used=1 / 15, prev_al=1, contamination=0.1, entropy_al=0.3)
    assert agent.score(decided) == pytest.approx(1.5, abs=1e-6)
    assert [int(agent.predict(o)[0]) for o in (obs(), decided, decided)] == [AL, AL, AL]
    agent.intercept = -3.0  # score -0.5: LR after the AL probe
    assert [int(agent.predict(o)[0]) for o in (obs(), decided, decided)] == [AL, LR, LR]
    with pytest.raises(ValueError, match="one value per trait"):
        TraitSwitch(coef=[1.0], intercept=0.0, center=[0.0], scale=[1.0])
    with pytest.raises(ValueError, match="end with an AL round"):
        TraitSwitch(coef=[0.0] * 6, intercept=0.0, center=[0.0] * 6, scale=[1.0] * 6,
                    probe=(LR,))


def test_fit_logistic_by_hand() -> None:
    # no information in x: the intercept is the weighted log-odds, log(3 / 1)
    coef, intercept = fit_logistic(np.zeros((2, 1)), np.array([0.0, 1.0]), np.array([1.0, 3.0]))
    assert intercept == pytest.approx(np.log(3.0)) and coef == pytest.approx([0.0])
    # x = -1 (y 0), x = 1 (y 1), L2 1: by symmetry intercept 0, and the gradient
    # -2 sigma(-w) + w = 0 gives w = 2 / (1 + e^w)
    coef, intercept = fit_logistic(np.array([[-1.0], [1.0]]), np.array([0.0, 1.0]), np.ones(2))
    assert intercept == pytest.approx(0.0, abs=1e-12)
    assert coef[0] == pytest.approx(2.0 / (1.0 + np.exp(coef[0])))


def test_fit_trait_switch_picks_the_cheaper_continuation() -> None:
    # data set A: AL continuations cheaper where the detector moved a lot; B: LR cheaper
    rows = []
    for dataset, moved, al, lr in (("A", 0.4, 1.0, 2.0), ("B", 0.1, 3.0, 2.0)):
        for seed in range(3):
            traits = {name: 0.05 for name in TraitSwitch.TRAITS}
            traits["entropy_al"] = moved + 0.01 * seed
            rows.append({"costs": "default", "prior": "knn", "dataset": dataset, "seed": seed,
                         **traits, **{f"{side}_{k}": cost for side, cost in (("al", al),
                                                                            ("lr", lr))
                                      for k in ("mean_cost", "final_cost", "regret")},
                         "al_al_share": 1.0, "lr_al_share": 0.1})
    traits = pd.DataFrame(rows)
    params = fit_trait_switch(traits, ["A", "B"])
    assert params["coef"][1] > 0 and params["scale"][0] == 1.0  # constant trait: scale 1
    out = trait_switch_paths(traits, ["A", "B"], ["A", "B"])
    assert out.groupby("dataset")["mean_cost"].max().to_dict() == {"A": 1.0, "B": 2.0}
    assert out["allocator"].unique().tolist() == ["trait-switch"]


def test_trait_row_matches_the_switch_replayed_on_the_lattice(small_xy) -> None:
    lattice = build_lattice(load_dataset(small_xy), 0, Settings(prior="knn", **SHORT))
    row = trait_row(lattice)
    for intercept, side, then in ((1.0, "al", AL), (-1.0, "lr", LR)):
        path = lattice.replay(constant_switch(intercept))
        assert path == planned_path(lattice, (AL, *[then] * (lattice.n_rounds - 1)))
        assert row[f"{side}_mean_cost"] == pytest.approx(lattice.mean_cost(path))
    # the traits are those of the observation after the AL probe
    assert row["entropy_al"] == pytest.approx(float(lattice.al_reward["entropy"][1]), abs=1e-6)


@pytest.mark.parametrize("name", sorted(ALLOCATOR_AGENTS))
def test_allocators_respect_the_mask_and_forget_between_episodes(name: str) -> None:
    agent = agents.make_agent(name)
    agent.reset(seed=0)
    assert agent.name == name
    exhausted = obs(budget_used=0.0)
    exhausted[ALL_FEATURE_INDEX["lr_available"]] = 0.0
    assert int(agent.predict(exhausted)[0]) == AL  # LR first, but V is exhausted
    first = play(agent, [0.3, 0.2, 0.1, 0.05, 0.2, 0.2])
    assert play(agent, [0.3, 0.2, 0.1, 0.05, 0.2, 0.2]) == first  # reset at budget 0
    with pytest.raises(ValueError, match="one observation at a time"):
        agent.predict(np.stack([obs(), obs()]))


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="warmup and probe"):
        PairedProbe(warmup=0)
    with pytest.raises(ValueError, match="warmup"):
        ProbeSwitch(warmup=-1)


#: The registered allocators, and variants that switch early (the tuned ones mostly take LR).
VARIANTS = {**{name: (lambda name=name: agents.make_agent(name)) for name in ALLOCATOR_AGENTS},
            "eager probe": lambda: PairedProbe(warmup=1, probe=1, z=-0.5),
            "eager commit": lambda: PairedProbe(warmup=2, probe=2, z=-0.5, recheck=False),
            "eager switch": lambda: ProbeSwitch(warmup=1, threshold=0.0),
            "eager thompson": lambda: ThompsonGain(prior_mean=0.5, prior_sd=2.0, lr_gain=0.0),
            "eager ei": lambda: ExpectedImprovementGain(prior_mean=0.5, prior_sd=1.0, kappa=4.0),
            "al switch": lambda: constant_switch(1.0)}


@pytest.mark.parametrize("seed", [0, 1])
def test_allocators_replay_on_the_lattice_as_they_run_live(small_xy, seed: int) -> None:
    dataset = load_dataset(small_xy)
    lattice = build_lattice(dataset, seed, Settings(prior="knn"))
    env = BudgetAllocationEnv(dataset, prior="knn", observation="v1")
    paths = set()
    for name, make in VARIANTS.items():
        records = agents.run_episode(env, make(), seed)
        played = tuple(AL if r["action"] == "AL" else LR for r in records)
        assert lattice.replay(make()) == played, name
        again = agents.run_episode(env, make(), seed)  # deterministic for a seed
        assert [r["action"] for r in again] == [r["action"] for r in records], name
        paths.add(played)
    assert len(paths) > 2  # the variants do take different paths


def test_the_runner_gives_a_v1_agent_a_v1_observation(small_xy) -> None:
    from agents.experiments.run import play_agents

    env = BudgetAllocationEnv(load_dataset(small_xy), **SHORT)
    played = play_agents(env, 0, ["paired-probe", "ballad"])
    assert played[0][1].observation_version == "v1"
    assert played[1][1].observation_version == "v0"
    assert env.observation_version == "v0"


# ------------------------------------------------------------------ the study's tables
def test_fixed_split_and_replay_cell_on_a_short_lattice(small_xy) -> None:
    lattice = build_lattice(load_dataset(small_xy), 0, Settings(prior="knn", **SHORT))
    assert fixed_split(lattice, 2) == (LR, LR, AL, AL, AL, AL)
    probe = Candidate("paired-probe", (("warmup", 2), ("probe", 1), ("z", 0.0)))
    rows = replay_cell(lattice, [Candidate("all-in-lr"), probe])
    by = {r["allocator"]: r for r in rows}
    assert by["optimal"]["regret"] == 0.0
    assert by["all-in-lr"]["mean_cost"] == by[f"fixed-lr{lattice.n_rounds}"]["mean_cost"]
    assert by["paired-probe[warmup=2,probe=1,z=0]"]["regret"] >= 0.0


def _paths() -> pd.DataFrame:
    """A hand-made replay table: two data sets x one seed x one prior; family "paired-probe"
    with two candidates."""
    rows = []
    for dataset, costs in (("A", {"all-in-lr": 2.0, "p1": 1.0, "p2": 3.0, "optimal": 0.5}),
                           ("B", {"all-in-lr": 2.0, "p1": 4.0, "p2": 1.0, "optimal": 1.0})):
        for name, cost in costs.items():
            family = "paired-probe" if name.startswith("p") else name
            rows.append({"costs": "default", "prior": "iforest", "dataset": dataset, "seed": 0,
                         "allocator": name, "family": family, "mean_cost": cost,
                         "final_cost": cost, "regret": cost - costs["optimal"], "al_share": 0.0})
        for m, cost in ((0, 3.0), (1, 2.0)):
            rows.append({"costs": "default", "prior": "iforest", "dataset": dataset, "seed": 0,
                         "allocator": f"fixed-lr{m}", "family": "fixed", "mean_cost": cost,
                         "final_cost": cost, "regret": 0.0, "al_share": 0.0})
    return pd.DataFrame(rows)


def test_parameters_are_selected_on_the_training_sets_only() -> None:
    paths = _paths()
    assert select_params(paths, ["A"]) == {("default", "paired-probe"): "p1"}
    assert select_params(paths, ["B"]) == {("default", "paired-probe"): "p2"}
    tuned = tuned_paths(paths, select_params(paths, ["A"]), ["B"])
    row = tuned[tuned["allocator"] == "paired-probe"]
    assert row["mean_cost"].tolist() == [4.0] and row["chosen"].tolist() == ["p1"]
    table = summary(tuned).set_index("allocator")
    assert table.loc["paired-probe", "cost_vs_lr"] == pytest.approx(4.0 / 2.0 - 1)
    assert table.loc["paired-probe", "regret_vs_lr"] == pytest.approx(3.0 / 1.0)
    assert table.loc["paired-probe", "rank"] == 2.0 and table.loc["all-in-lr", "rank"] == 1.0
    assert table.loc["best-fixed-per-dataset", "cost"] == 2.0
    assert not goal_table(tuned).set_index("allocator").loc["paired-probe", "goal"]


def test_leave_three_out_folds_hold_each_data_set_out_once() -> None:
    names = [f"d{i}" for i in range(18)]
    folds = leave_three_out_folds(names)
    assert [len(f) for f in folds] == [3] * 6
    assert sorted(n for f in folds for n in f) == sorted(names)
    assert folds[0] == ["d0", "d6", "d12"]


def test_signal_accuracy_sums_counts_before_dividing() -> None:
    rows = pd.DataFrame([
        {"costs": "default", "prior": "knn", "dataset": d, "signal": "val_sample_cost",
         "mode": "lookahead", "states": s, "voted": v, "correct": c, "al_better": a}
        for d, s, v, c, a in (("A", 10, 8, 6, 5), ("B", 10, 2, 0, 1))])
    out = signal_accuracy(rows).iloc[0]
    assert out["accuracy"] == pytest.approx(6 / 10) and out["coverage"] == pytest.approx(0.5)
    assert out["al_better"] == pytest.approx(6 / 20)


def test_candidates_cover_each_grid() -> None:
    grid = {"probe-switch": {"warmup": [1, 2], "threshold": [0.1]}}
    labels = [c.label for c in candidates(grid, baselines=("all-in-lr",))]
    assert labels == ["all-in-lr", "probe-switch[warmup=1,threshold=0.1]",
                      "probe-switch[warmup=2,threshold=0.1]"]
    assert isinstance(candidates(grid)[-1].make(), ProbeSwitch)


def open_lattice(cost: np.ndarray, vs: np.ndarray, se: np.ndarray) -> Lattice:
    """A k-round lattice with every move possible while the budget lasts."""
    k = cost.shape[0] - 1
    i, j = np.indices(cost.shape)
    inside = i + j <= k
    grid = {name: np.where(inside, 0.0, np.nan) for name in STATE_FIELDS}
    grid.update(test_cost=np.where(inside, cost, np.nan), val_sample_cost=vs, val_sample_se=se)
    grid["al_available"] = grid["lr_available"] = np.where(inside, (i + j < k) * 1.0, np.nan)
    al = {s: np.zeros(k + 1) for s in SIDE_SIGNAL_NAMES}
    lr = {s: np.zeros((k + 1, k + 1, k + 1)) for s in SIDE_SIGNAL_NAMES}
    return Lattice("hand", 0, k, 0.1, grid, al, lr)


def test_paired_rows_and_their_statistics_by_hand() -> None:
    cost = np.array([[0.5, 0.4, 0.3, 0.2], [0.6, 0.3, 0.1, 0], [0.2, 0.4, 0, 0], [0.1, 0, 0, 0]])
    vs = np.array([[0.0, 0.2, 0.2, 0.1], [0.0, 0.1, 0.2, 0], [0.0, 0.1, 0, 0], [0.0, 0, 0, 0]])
    se = np.full((4, 4), 0.05)
    rows = paired_rows(open_lattice(cost, vs, se))
    # AL possible from (i, j), j >= 1, i + j < 3: (0, 1), (0, 2), (1, 1)
    assert [(r["i"], r["j"]) for r in rows] == [(0, 1), (0, 2), (1, 1)]
    assert [r["dv"] for r in rows] == pytest.approx([-0.1, 0.0, 0.0])
    assert [r["dt"] for r in rows] == pytest.approx([-0.1, -0.2, 0.1])
    assert np.isnan(rows[0]["dv_prev"]) and rows[2]["dv_prev"] == pytest.approx(-0.1)
    frame = pd.DataFrame([{"costs": "default", "prior": "knn", **r} for r in rows])
    stats = paired_change_stats(frame).iloc[0]
    assert stats["states"] == 3 and stats["dv_zero"] == pytest.approx(2 / 3)
    assert stats["sign_agreement"] == 1.0  # the one state where both moved: both fell
    assert stats["dt_if_v_better"] == pytest.approx(-0.1) and np.isnan(stats["dt_if_v_worse"])
    assert stats["median_se"] == pytest.approx(0.05)
    assert stats["median_abs_dt"] == pytest.approx(0.1)


def test_gymnasium_checks_the_v1_environment(small_xy) -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(BudgetAllocationEnv(small_xy, observation="v1", **SHORT), skip_render_check=True)


def test_detection_rounds_by_hand() -> None:
    # dv -1, -3 (i = 0, 1) and 2 (i = 5): mean -2/3, sample variance 19/3, so
    # (2 sd / |mean|)^2 = 4 * (19/3) / (4/9) = 57; the first three AL rounds only (-1, -3):
    # mean -2, variance 2: 4 * 2 / 4 = 2
    rows = pd.DataFrame({"costs": "default", "prior": "knn", "dataset": "A", "i": [0, 1, 5],
                         "dv": [-1.0, -3.0, 2.0], "dt": [0.0, -1.0, 1.0]})
    out = detection_rounds(rows).iloc[0]
    assert out["rounds"] == pytest.approx(57.0) and out["rounds_early"] == pytest.approx(2.0)
    assert out["dv"] == pytest.approx(-2 / 3) and out["dt"] == pytest.approx(0.0)


def test_replays_run_into_a_result_store_resume_and_grow(tmp_path) -> None:
    """The study's replays are cells of a ResultStore (a TableCell per table): the stored
    paths are ``replay_cell``'s rows, a rerun computes nothing, and a candidate added later
    is replayed alone and appended to each finished cell."""
    from scripts.studies.allocators import (
        build_lattices,
        compute_replays,
        iter_lattices,
        replay_store,
        table_cell,
        trait_table,
    )

    assert build_lattices(tmp_path, ["toy"], [0, 1], ["knn"], ["default"]) == 2
    first = [Candidate("ballad"), Candidate("all-in-lr")]
    logged: list[str] = []
    paths, signals = compute_replays(tmp_path, ["default"], ["knn"], ["toy"], [0, 1], first,
                                     log=logged.append)
    assert len(logged) == 2
    lattices = list(iter_lattices(tmp_path, "default", "knn", ["toy"], [0, 1]))
    expected = pd.DataFrame([{"costs": "default", "prior": "knn", "dataset": "toy",
                              "seed": seed, **row}
                             for _, seed, lattice in lattices
                             for row in replay_cell(lattice, first)])
    pd.testing.assert_frame_equal(paths, expected)
    assert set(signals["seed"]) == {0, 1}
    assert list(trait_table(tmp_path, ["default"], ["knn"], ["toy"], [0, 1])["seed"]) == [0, 1]
    store = replay_store(tmp_path)
    assert store.path(table_cell("paths", ("default", "knn", "toy", 0))).exists()

    logged.clear()
    again, _ = compute_replays(tmp_path, ["default"], ["knn"], ["toy"], [0, 1], first,
                               log=logged.append)
    assert logged == [] and again.equals(paths)

    grown, _ = compute_replays(tmp_path, ["default"], ["knn"], ["toy"], [0, 1],
                               [*first, Candidate("all-in-al")], log=logged.append)
    assert len(logged) == 2
    for seed, (_, _, lattice) in enumerate(lattices):
        cell = grown[grown["seed"] == seed]
        assert list(cell["allocator"])[:len(paths[paths["seed"] == seed])] == list(
            paths[paths["seed"] == seed]["allocator"])
        added = cell[cell["allocator"] == "all-in-al"]
        assert len(added) == 1
        assert added["mean_cost"].item() == replay_cell(
            lattice, [Candidate("all-in-al")], yardsticks=False)[0]["mean_cost"]
