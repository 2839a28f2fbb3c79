"""Issue 40's study parts: split costs on the hand lattice, the fixed split's and the safe
split's fits, and the shares' standard errors, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import v2_observation as observation

from agents.split_allocators import ALL_IN_LR, FixedSplitByCost, SafeSplit
from ballad_env.episode import AL, LR
from scripts.studies.allocation import tasks_fit as F
from scripts.studies.allocation.tasks_cells import candidate_splits, cell_row, split_path
from scripts.studies.allocation.tasks_report import shares_with_se


def test_split_costs_on_the_hand_lattice_equal_the_agents_replay() -> None:
    from test_replay import hand_lattice

    lat = hand_lattice()  # costs [i, j]: (0,0) .5 (0,1) .3 (1,0) .2 (0,2) 0 (1,1) .9 (2,0) .8
    assert candidate_splits(2) == [(LR, 0), (LR, 1), (AL, 1)]
    row = cell_row(lat, "default", "hand")
    assert np.allclose(row["split_costs"], [(0.2 + 0.8) / 2, (0.3 + 0.9) / 2, (0.2 + 0.9) / 2])
    assert row["all-in-lr"] == pytest.approx(0.15) and row["optimal"] == pytest.approx(0.15)
    for split in [*candidate_splits(2), ALL_IN_LR]:
        agent = FixedSplitByCost({0.5: split})
        assert lat.replay(agent) == split_path(lat, split)


def _rows(gains_by_tau: list[tuple[float, list[float]]], level: str = "default",
          groups: int = 4) -> pd.DataFrame:
    """Rows with All-in-LR cost 1, optimum 0 and split costs 1 - gain (two-round budget)."""
    rows = []
    for k, (tau, gains) in enumerate(gains_by_tau):
        rows.append({"level": level, "dataset": f"d{k % groups}", "group": f"g{k % groups}",
                     "seed": k, "n_rounds": 2, "unit": 1.0, "all-in-lr": 1.0, "optimal": 0.0,
                     "obs": observation(log_contamination=tau, log_size=0.1 * (k % 3)),
                     "split_costs": 1.0 - np.array(gains)})
    return pd.DataFrame(rows)


def test_fixed_split_takes_the_least_mean_cost_per_level() -> None:
    rows = pd.concat([_rows([(0.5, [0.1, 0.3, -0.2])] * 4),
                      _rows([(0.5, [-0.1, -0.3, -0.2])] * 4, "cfp10")], ignore_index=True)
    params = F.fit_fixed(rows)
    levels = {lv["level"]: tuple(lv["split"]) for lv in params["levels"]}
    assert levels == {"default": (LR, 1), "cfp10": ALL_IN_LR}  # every split loses at cfp10
    choices = F.fixed_choices(params, rows.iloc[:1])
    assert F.costs_of(rows.iloc[:1], choices) == pytest.approx([0.7])


def test_safe_split_fit_learns_a_gain_that_turns_with_a_trait() -> None:
    rng = np.random.default_rng(0)
    taus = rng.uniform(size=200)
    rows = _rows([(t, [0.4 * (t - 0.5), 0.0, -0.1]) for t in taus], groups=10)
    params = F.fit_safe(rows, alpha=1e-6, z=0.0, margin=0.0, ood=None)
    near = observation(log_contamination=0.9, log_size=0.1)  # gains 0.16, 0, -0.1
    agent = SafeSplit.from_entry(params)
    assert agent.gains(near)[0] == pytest.approx([0.16, 0.0, -0.1], abs=1e-6)
    assert agent.choose(near)[0] == (LR, 0)
    assert agent.choose(observation(log_contamination=0.1))[0] == ALL_IN_LR  # no gain > 0
    strict = SafeSplit.from_entry({**params, "margin": 0.5})
    assert strict.choose(near)[0] == ALL_IN_LR
    checked = F.fit_safe(rows, alpha=1e-6, z=0.0, margin=0.0, ood=0.9)
    far = SafeSplit.from_entry(checked)
    assert far.choose(near)[0] == (LR, 0)
    assert far.choose(observation(log_contamination=0.9, log_size=2.0))[0] == ALL_IN_LR
    distances = [far.distance(o) for o in rows["obs"]]
    assert np.mean(np.array(distances) <= checked["ood"]["threshold"]) == pytest.approx(0.9,
                                                                                      abs=0.01)


def test_folds_and_training_rows_keep_groups_apart() -> None:
    assert F.folds(["b", "a", "c", "a", "d", "e", "f"], 3) == [["a", "d"], ["b", "e"], ["c", "f"]]
    real = _rows([(0.5, [0.0, 0.0, 0.0])] * 4)
    tasks = real.assign(level="task", group=["g0", "g1", "g2", "g9"])
    train = F.training_rows(real, tasks, ["g0", "g9"])
    assert sorted(train["group"]) == ["g0", "g0", "g9"]


def test_shares_and_standard_errors_by_hand() -> None:
    # two data sets, All-in-LR 1 and 3, optimum 0 and 1 (room 1.5); agent 0.5 and 3.0:
    # gains 0.5 and 0: share 0.25 / 1.5, SE sd(0.5, 0) / sqrt(2) / 1.5 = 0.25 / 1.5
    rows = pd.DataFrame({"level": ["default"] * 2, "dataset": ["a", "b"],
                         "all-in-lr": [1.0, 3.0], "optimal": [0.0, 1.0]})
    share, se = shares_with_se(rows, np.array([0.5, 3.0]))["default"]
    assert share == pytest.approx(0.25 / 1.5) and se == pytest.approx(0.25 / 1.5)
    assert F.level_shares(rows, np.array([0.5, 3.0]))["default"] == pytest.approx(0.25 / 1.5)


def test_vectorised_choices_equal_the_agents() -> None:
    rng = np.random.default_rng(1)
    rows = _rows([(t, [0.4 * (t - 0.5), 0.1 * (0.5 - t), 0.02]) for t in rng.uniform(size=60)],
                 groups=6)
    for z, ood, residual in ((0.0, None, False), (1.0, 0.8, False), (0.5, None, True)):
        params = F.fit_safe(rows, alpha=1.0, z=z, margin=0.01, ood=ood, members=5,
                            residual=residual)
        assert F.safe_choices(params, rows, F.design(rows)) == F.safe_choices(params, rows)


def test_a_decision_rule_on_one_ensemble_equals_fitting_each_candidate() -> None:
    rng = np.random.default_rng(2)
    rows = _rows([(t, [0.4 * (t - 0.5), 0.1 * (0.5 - t), 0.02]) for t in rng.uniform(size=60)],
                 groups=6)
    arrays = F.design(rows)
    base = F.fit_safe(rows, alpha=1.0, z=0.0, margin=0.0, ood=None, residual=True)
    for rule in ({"z": 1.0, "margin": 0.01, "ood": 0.8, "residual": True},
                 {"z": 0.5, "margin": 0.0, "ood": None, "residual": False}):
        direct = F.fit_safe(rows, alpha=1.0, **rule)
        assert F.with_decision(base, arrays["T"], **rule) == direct
    with pytest.raises(ValueError, match="residual=True"):
        F.with_decision(F.fit_safe(rows, alpha=1.0, z=0.0, margin=0.0, ood=None),
                        arrays["T"], 1.0, 0.0, None)


def test_the_residual_bound_counts_a_new_groups_scatter() -> None:
    """Every group's gain of the first split is 0.05 + its own offset (+-0.2, no trait
    explains it): the ensemble agrees on the mean (0.05; a small spread) and leaves All-in-LR
    at z = 1, but the out-of-bag residual (about 0.2, and more where a bootstrap sample
    drew more of one sign) holds that a new group's gain may be < 0."""
    offsets = [0.2, -0.2, 0.2, -0.2, 0.2, -0.2, 0.2, -0.2]
    rows = _rows([(0.5, [0.05 + offsets[k % 8], -0.5, -0.5]) for k in range(80)], groups=8)
    spread_only = F.fit_safe(rows, alpha=1.0, z=1.0, margin=0.0, ood=None)
    with_residual = F.fit_safe(rows, alpha=1.0, z=1.0, margin=0.0, ood=None, residual=True)
    assert spread_only["residual"] is None
    assert 0.15 < with_residual["residual"][0] < 0.35  # the offsets' 0.2, and the bootstrap's
    obs = rows["obs"].iloc[0]
    assert SafeSplit.from_entry(spread_only).choose(obs)[0] == (LR, 0)
    assert SafeSplit.from_entry(with_residual).choose(obs)[0] == ALL_IN_LR
    with pytest.raises(ValueError, match="residual must be 3 values"):
        SafeSplit.from_entry({**with_residual, "residual": [0.1]})


def test_loss_shares_count_only_the_data_sets_where_the_agent_loses() -> None:
    """Room 1 on 'a' (gained 0.5) and 0 on 'b' (lost 0.25): the share is 0.25 / 1, the
    room lost 0.25 / 1; an agent that gains everywhere loses nothing."""
    rows = pd.DataFrame({"level": ["default"] * 2, "dataset": ["a", "b"],
                         "all-in-lr": [1.0, 1.0], "optimal": [0.0, 1.0]})
    assert F.loss_shares(rows, np.array([0.5, 1.25]))["default"] == pytest.approx(0.25)
    assert F.level_shares(rows, np.array([0.5, 1.25]))["default"] == pytest.approx(0.25)
    assert F.loss_shares(rows, np.array([0.5, 1.0]))["default"] == 0.0
    row = F.cv_row("x", {}, rows, np.array([0.5, 1.25]), [["a"], ["b"]])
    assert row["loss"] == pytest.approx(0.25) and row["loss default"] == pytest.approx(0.25)


def _cv_table(rows: dict[str, tuple[list[float], list[float]]]) -> pd.DataFrame:
    """A hand-made cross-validation table: name -> (fold means, standard errors) per level."""
    table = []
    for name, (means, ses) in rows.items():
        row: dict[str, object] = {"candidate": name}
        for level, mean, se in zip(("default", "cfn10", "cfp10"), means, ses, strict=True):
            row |= {f"fold {level}": mean, f"se {level}": se, f"lower {level}": mean - se}
        row["fold mean"] = float(np.mean(means))
        table.append(row)
    return pd.DataFrame(table)


def test_the_safe_rule_takes_the_best_mean_among_candidates_safe_at_every_level() -> None:
    """'bold' has the largest mean but its c_fp = 10 bound is below 0; 'steady' and 'meek'
    clear 0 at every level (one exactly at 0), 'steady' with the larger mean."""
    cv = _cv_table({"bold": ([0.9, 0.8, 0.1], [0.1, 0.1, 0.2]),
                    "steady": ([0.5, 0.4, 0.2], [0.1, 0.2, 0.2]),
                    "meek": ([0.3, 0.2, 0.1], [0.1, 0.1, 0.05]),
                    "all-in-lr": ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])})
    assert F.choose_safely(cv)["candidate"] == "steady"
    assert F.choose_safely(cv, ["bold", "meek", "all-in-lr"])["candidate"] == "meek"
    # nothing but All-in-LR clears every bound: All-in-LR, whose share is 0 by construction
    assert F.choose_safely(cv, ["bold", "all-in-lr"])["candidate"] == "all-in-lr"
    with pytest.raises(ValueError, match="add All-in-LR"):
        F.choose_safely(cv, ["bold"])


def test_the_harmless_rule_takes_the_least_loss_within_one_standard_error() -> None:
    """'bold' leads by 0.05 with a standard error of its mean of 0.1, so 'careful' (mean
    0.05 lower, half the room lost) is as good by the folds and loses less: the harmless
    rule takes it; 'timid' is more than one standard error below and is not considered."""
    cv = _cv_table({"bold": ([0.5, 0.4, 0.3], [0.1, 0.1, 0.1]),
                    "careful": ([0.45, 0.35, 0.25], [0.1, 0.1, 0.1]),
                    "timid": ([0.2, 0.1, 0.05], [0.05, 0.05, 0.05]),
                    "all-in-lr": ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])})
    cv["se mean"] = [0.1, 0.1, 0.05, 0.0]
    cv["loss"] = [0.2, 0.1, 0.0, 0.0]
    assert F.choose_safely(cv)["candidate"] == "bold"
    assert F.choose_safely(cv, harmless=True)["candidate"] == "careful"
    with pytest.raises(ValueError, match="reads"):
        F.choose_safely(cv.drop(columns="loss"), harmless=True)


def test_fold_shares_are_the_mean_and_standard_error_over_folds() -> None:
    """Two folds of one data set each, All-in-LR 1 and optimum 0: the agent's costs 0.5 and
    0.9 give fold shares 0.5 and 0.1, mean 0.3, standard error sd / sqrt(2) = 0.2."""
    rows = pd.DataFrame({"level": ["default"] * 2, "dataset": ["a", "b"],
                         "all-in-lr": [1.0, 1.0], "optimal": [0.0, 0.0]})
    mean, se = F.fold_shares(rows, np.array([0.5, 0.9]), [["a"], ["b"]])["default"]
    assert mean == pytest.approx(0.3) and se == pytest.approx(0.2)
    row = F.cv_row("x", {}, rows, np.array([0.5, 0.9]), [["a"], ["b"]])
    assert row["lower default"] == pytest.approx(0.1) and row["cv default"] == pytest.approx(0.3)


def test_only_candidates_with_both_parts_of_the_fallback_may_ship() -> None:
    from scripts.studies.allocation.safe_study import is_safe

    assert is_safe({"z": 0.5, "ood": 0.95})
    assert not is_safe({"z": 0.0, "ood": 0.95})  # no lower bound: the mean alone
    assert not is_safe({"z": 1.0, "ood": None}) and not is_safe({"z": 1.0, "ood": np.nan})


def test_the_shipped_allocator_is_safe_by_construction() -> None:
    """make_agent("allocator") carries both parts of the fallback: a lower bound on the gain
    (z > 0, a margin) and the trait-distance check; a task whose traits lie beyond the
    check's threshold gets All-in-LR whatever the gains say."""
    from agents.allocation import packaged_params
    from agents.registry import make_agent

    agent = make_agent("allocator")
    entry = packaged_params()["families"][packaged_params()["allocator"]]
    assert isinstance(agent, SafeSplit) and agent.z > 0
    assert entry["ood"]["threshold"] is not None and "safety rule" in entry["chosen_by"]
    far = observation(log_size=5.0, log_dimension=5.0, prior_confidence=5.0)
    assert agent.distance(far) > entry["ood"]["threshold"]
    eager = SafeSplit.from_entry({**entry, "z": 0.0, "margin": -1e9})  # would always leave LR
    assert eager.choose(far)[0] == ALL_IN_LR


def test_coverage_counts_the_cells_whose_gain_clears_each_bound() -> None:
    """Four cells of mean 0.1, spread 0.1 and residual 0.2: gains 0.5 and 0.05 clear
    both bounds at z = 1 (0 and 0.1 - sqrt(0.05) = -0.12), -0.05 only the wide one, -0.5
    neither."""
    from scripts.studies.allocation.calibration import coverage

    scored = pd.DataFrame({"level": ["default"] * 4, "mean": [0.1] * 4, "spread": [0.1] * 4,
                           "residual": [0.2] * 4, "gain": [0.5, 0.05, -0.05, -0.5]})
    table = coverage(scored, widths=(1.0,)).set_index("level")
    assert table.loc["default", "spread"] == pytest.approx(0.5)
    assert table.loc["default", "spread and residual"] == pytest.approx(0.75)
    assert table.loc["all", "promised"] == pytest.approx(0.8413, abs=1e-4)
