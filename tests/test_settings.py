"""The one settings object: validation, names, serialisation, grids and command-line options."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from ballad_env import BudgetAllocationEnv, Settings
from ballad_env.settings.cli import add_settings_arguments, c_r_value, settings_from_args


def test_defaults_are_the_papers_protocol() -> None:
    s = Settings()
    assert (s.reward, s.budget_fraction, s.round_fraction, s.c_fp, s.c_fn, s.c_r) == (
        "entropy", 0.3, 0.02, 1.0, 1.0, None)
    assert (s.prior, s.threshold_search, s.al_strategy, s.lr_strategy, s.k, s.alpha) == (
        "iforest", "exact", "uncertainty", "random", 30, 2.3)
    assert s.n_rounds == 15


def test_settings_are_frozen_and_replace_validates() -> None:
    s = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.c_fp = 2.0  # type: ignore[misc]
    assert s.replace(c_fn=10).c_fn == 10.0 and s.c_fn == 1.0
    with pytest.raises(ValueError, match="unknown prior 'lofx'"):
        s.replace(prior="lofx")


def test_names_are_short_stable_and_distinct() -> None:
    assert Settings().name == "iforest"
    assert Settings(prior="knn", c_fp=10).name == "knn_cfp10"
    assert Settings(threshold_search="bayes").name == "iforest_bayes20"
    assert Settings(reward="cosine", c_r=0.01).name == "iforest_cosine_cr0.01"
    assert Settings(prior="knn", budget_fraction=0.1, c_r=0.5).name == "knn_cr0.5_budget0.1"
    assert Settings(al_strategy="random", k=10).name == "iforest_al-random_k10"
    # bayes_calls means nothing to the exact search: no second name for the same experiment.
    assert Settings(bayes_calls=50) == Settings()
    assert Settings(prior="KNN") == Settings(prior="knn")


@pytest.mark.parametrize(
    ("options", "message"),
    [({"reward": "profit"}, "unknown reward 'profit'"),
     ({"threshold_search": "grid"}, "unknown threshold search 'grid'"),
     ({"al_strategy": "greedy"}, "unknown AL query strategy 'greedy'"),
     ({"lr_strategy": "uncertainty"}, "unknown LR query strategy 'uncertainty'"),
     ({"c_fp": -1}, "invalid costs: c_fp"), ({"c_r": float("nan")}, "invalid costs: c_r"),
     ({"c_fn": "1"}, "invalid costs: c_fn"),
     ({"budget_fraction": 0.01}, "round_fraction <= budget_fraction"),
     ({"threshold_search": "bayes", "bayes_calls": 1}, "bayes_calls must be a whole number"),
     ({"k": 0}, "k must be a whole number"), ({"alpha": 0.0}, "alpha must be positive"),
     ({"query_rng": "authors", "query_seed": -1}, "query_seed must be 'split'"),
     ({"query_rng": "authors", "query_seed": 2**32}, "query_seed must be 'split'"),
     ({"query_rng": "authors", "query_seed": 3.5}, "query_seed must be 'split'"),
     ({"query_rng": "authors", "query_seed": "331"}, "query_seed must be 'split'"),
     ({"query_rng": "authors", "query_seed": True}, "query_seed must be 'split'"),
     ({"query_seed": 331}, "query_rng='streams' draws the queries from the episode's own")],
)
def test_bad_options_name_the_problem(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(**options)


def test_prior_objects_are_accepted_but_not_saved() -> None:
    from pyod.models.hbos import HBOS

    s = Settings(prior=HBOS())
    assert s.name == "hbos"
    with pytest.raises(ValueError, match="cannot be saved"):
        s.to_dict()
    with pytest.raises(TypeError, match="no fit/decision_function"):
        Settings(prior=object())


def test_dict_round_trip_and_grid() -> None:
    grid = Settings.grid(prior=["iforest", "knn"], c_fp=[1, 10])
    assert [s.name for s in grid] == ["iforest", "iforest_cfp10", "knn", "knn_cfp10"]
    assert all(Settings.from_dict(s.to_dict()) == s for s in grid)
    assert Settings.from_dict({"name": "ignored", "c_fn": 10}) == Settings(c_fn=10)
    base = Settings(prior="knn", budget_fraction=0.1)
    assert [s.name for s in Settings.grid(base, c_fn=[1, 10])] == ["knn_budget0.1",
                                                                  "knn_cfn10_budget0.1"]
    # duplicates collapse: bayes_calls is normalised away for the exact search
    assert len(Settings.grid(bayes_calls=[10, 20])) == 1


def test_command_line_options_come_from_the_fields() -> None:
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser, several=True)
    args = parser.parse_args(["--prior", "iforest", "knn", "--c-fn", "1", "10", "--c-r", "gamma",
                              "--budget-fraction", "0.1"])
    assert [s.name for s in settings_from_args(args)] == [
        "iforest_budget0.1", "knn_budget0.1", "iforest_cfn10_budget0.1", "knn_cfn10_budget0.1"]
    single = argparse.ArgumentParser()
    add_settings_arguments(single, only=["reward", "c_fn"], defaults=Settings(reward="cost"))
    (one,) = settings_from_args(single.parse_args(["--c-fn", "10"]))
    assert one == Settings(reward="cost", c_fn=10)
    with pytest.raises(SystemExit):
        single.parse_args(["--prior", "knn"])  # not offered by this command line
    with pytest.raises(SystemExit):
        parser.parse_args(["--threshold-search", "grid"])  # not a registered search
    assert c_r_value("gamma") is None and c_r_value("0.05") == 0.05


def test_settings_help_prints_percent_signs() -> None:
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    text = parser.format_help()  # argparse %-formats help: a bare "%" used to crash it
    assert "the 10% quantile" in " ".join(text.split())


def test_environment_is_built_from_settings(small_xy) -> None:
    base = Settings(prior="knn", c_fn=10, budget_fraction=0.1)
    env = BudgetAllocationEnv(small_xy, settings=base, reward="cost")
    assert env.settings == base.replace(reward="cost")
    assert env.episode is None and env.reward_name == "cost"
    env.reset(seed=0)
    assert env.episode.costs.c_fn == 10.0 and env.episode.budget.n_rounds == 5
    with pytest.raises(TypeError, match="unexpected keyword argument 'gama'"):
        BudgetAllocationEnv(small_xy, gama=0.1)


def test_query_seed_is_named_only_when_set_and_parsed_from_the_command_line() -> None:
    """``query_seed``: the split seed by default (None, ``split`` on the command line), which
    changes no name; a whole number is named ``qseed<n>`` and survives the JSON round trip."""
    assert Settings().query_seed is None and Settings(query_rng="authors").query_seed is None
    assert Settings(query_rng="authors", query_seed="split") == Settings(query_rng="authors")
    assert Settings(query_rng="authors").name == "iforest_qrng-authors"
    seeded = Settings(query_rng="authors", query_seed=331.0)
    assert seeded.query_seed == 331 and isinstance(seeded.query_seed, int)
    assert seeded.name == "iforest_qrng-authors_qseed331"
    assert Settings(query_rng="authors", query_seed=4_000_000_001).name.endswith(
        "_qseed4000000001")  # never rounded by :g into another seed's name
    assert Settings.from_dict(seeded.to_dict()) == seeded
    assert (seeded.query_seed_for(7), Settings(query_rng="authors").query_seed_for(7)) == (
        331, 7)
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    (one,) = settings_from_args(parser.parse_args(["--query-rng", "authors",
                                                   "--query-seed", "331"]))
    assert one == seeded
    (split,) = settings_from_args(parser.parse_args(["--query-rng", "authors",
                                                     "--query-seed", "split"]))
    assert split.query_seed is None
    assert "(default: split)" in " ".join(parser.format_help().split())
    with pytest.raises(SystemExit):
        parser.parse_args(["--query-seed", "seed331"])
