"""The policy study (scripts.studies.policies.study): its split rule, the settings it trains
and evaluates under, resuming, its analysis on small hand-built tables, and the whole study
at tiny size through ``python -m scripts.studies.policies``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import load_job, write_data_files

from agents import make_agent, run_episode
from ballad_env import BudgetAllocationEnv
from ballad_env.settings import Settings
from scripts.studies.common import policy_runs as shared
from scripts.studies.policies import study

ROOT = Path(__file__).resolve().parents[1]




@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Four small benchmark-style files and their manifest (rows 120..150)."""
    return write_data_files(tmp_path / "data", {"alpha": 150, "beta": 120, "gamma": 140,
                                                "delta": 130})


# --------------------------------------------------------------------------- split
def test_policy_split_is_the_stated_rule():
    """docs/policy_split.json is what its rule gives, 12 + 6 disjoint sets, one per size block."""
    split = json.loads((ROOT / "docs" / "policy_split.json").read_text())
    manifest = {name: {"n": n} for name, n in split["rows"].items()}
    assert study.make_split(manifest) == split
    assert len(split["train"]) == 12 and len(split["held_out"]) == 6
    assert not set(split["train"]) & set(split["held_out"])
    assert all(len(set(block) & set(split["held_out"])) == 1 for block in split["blocks"])


def test_split_is_fixed_once_written(tmp_path):
    manifest = {f"d{k}": {"n": 100 + k} for k in range(4)}
    split = study.make_split(manifest, n_blocks=2)
    assert split["blocks"] == [["d0", "d1"], ["d2", "d3"]] and len(split["held_out"]) == 2
    path = tmp_path / "split.json"
    study.write_split(split, path)
    study.write_split(split, path)  # the same split again is fine
    other = study.make_split(manifest, seed=1, n_blocks=2)
    assert other != split
    with pytest.raises(shared.StudyError, match="split is fixed"):
        study.write_split(other, path)
    study.write_split(other, path, force=True)
    assert json.loads(path.read_text()) == other
    with pytest.raises(shared.StudyError, match="cannot fill"):
        study.make_split(manifest, n_blocks=3)


# --------------------------------------------------------------------------- settings
def _fake_policy(folder: Path, name: str, config: dict, timesteps: int = 300) -> Path:
    """A run folder with an (empty) model file and the settings JSON beside it."""
    run = folder / name
    run.mkdir(parents=True)
    (run / f"{name}.zip").write_bytes(b"")
    s = {"run_name": name, "algo": name.split("-")[0], "config": config,
         "num_timesteps": timesteps, "train_seconds": 12.34}
    (run / f"{name}.json").write_text(json.dumps(s))
    return run / f"{name}.zip"


def test_train_configs_name_runs_and_carry_the_settings(tmp_path):
    """One training run per (algorithm, reward, seed) under the study's settings, the reward
    each run's own; they train in the executor's workers, never through a script."""
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["a", "b"], "held_out": ["c"]}))
    settings = Settings(c_fn=10.0, budget_fraction=0.1, prior="knn", c_r=0.5, k=12)
    plan = study.TrainPlan(settings=settings, algos=("ppo",), train_seeds=2)
    configs = study.train_configs(plan, split, "data", tmp_path)
    assert list(configs) == ["ppo-cost-train2-s0", "ppo-cost-train2-s1",
                             "ppo-val_cost-train2-s0", "ppo-val_cost-train2-s1"]
    config = configs["ppo-val_cost-train2-s1"]
    assert config.settings == settings.replace(reward="val_cost")
    assert (config.seed, config.datasets, config.data_dir) == (1, ("a", "b"), "data")
    assert (config.hp.batch_size, config.checkpoint_freq) == (plan.n_steps, plan.timesteps // 2)
    assert config.name == "ppo-val_cost-train2-s1" and not config.progress_bar
    assert config.output_dir == str(tmp_path / "policies")


def test_policies_trained_under_other_settings_are_refused(tmp_path):
    knn10 = Settings(reward="cost", prior="knn", c_fn=10.0)
    new = _fake_policy(tmp_path, "ppo-cost-train2-s0", {"seed": 0,
                                                         "settings": knn10.to_dict()})
    old = _fake_policy(tmp_path, "ppo-val_cost-train12-s0",  # the layout before Settings
                       {"seed": 0, "reward": "val_cost", "prior": "iforest"})
    assert shared.trained_settings(new) == knn10
    assert shared.trained_settings(old) == Settings(reward="val_cost")
    study.check_trained([new], Settings(prior="knn", c_fn=10.0))  # the reward may differ
    study.check_trained([old], Settings())
    with pytest.raises(shared.StudyError, match="trained with settings knn_cost_cfn10"):
        study.check_trained([new], Settings(prior="knn"))
    with pytest.raises(shared.StudyError, match="trained with settings iforest_val_cost"):
        study.check_trained([old], Settings(c_fn=10.0))


# --------------------------------------------------------------------------- evaluate
def stored(folder, episodes, **record):
    """A study store holding one round row of each (data set, seed, agent) episode."""
    store = shared.prepare_rounds(folder, sorted({d for d, _, _ in episodes}),
                                  sorted({s for _, s, _ in episodes}),
                                  list(dict.fromkeys(a for _, _, a in episodes)), **record)
    for d, s, a in episodes:
        shared.write_episode(store, [{**dict.fromkeys(study.ROUND_COLUMNS, 0), "dataset": d,
                                      "seed": s, "agent": a}])
    return store


def test_cells_with_a_new_agent_run_that_agent_only(tmp_path):
    stored(tmp_path, [("A", 0, "ballad"), ("A", 0, "random"), ("A", 1, "ballad")])
    done = study.finished_agents(tmp_path)
    assert done == {("A", 0): {"ballad", "random"}, ("A", 1): {"ballad"}}
    specs = ["ballad", "random", "/x/ppo-cost-train12-s0.zip"]
    assert study.pending_cells(["A", "B"], 2, specs, done) == [
        ("A", 0, ("/x/ppo-cost-train12-s0.zip",)),
        ("A", 1, ("random", "/x/ppo-cost-train12-s0.zip")),
        ("B", 0, tuple(specs)), ("B", 1, tuple(specs))]
    assert study.pending_cells(["A"], 1, specs[:2], done) == []
    (tmp_path / "rounds.csv").write_text("dataset,seed,agent,round,action,test_cost\n")
    with pytest.raises(shared.StudyError, match="rounds.csv written before the round store"):
        stored(tmp_path, [("A", 2, "ballad")])


def test_rows_of_other_settings_are_not_mixed(tmp_path):
    study.check_evaluated_settings(tmp_path, Settings(c_fn=10.0))  # nothing stored yet
    stored(tmp_path, [("A", 0, "ballad")], settings=Settings(c_fn=10.0).to_dict())
    study.check_evaluated_settings(tmp_path, Settings(c_fn=10.0, reward="cost"))
    with pytest.raises(shared.StudyError, match="this evaluation runs iforest: use another"):
        study.check_evaluated_settings(tmp_path, Settings())
    with pytest.raises(shared.StudyError, match="holds results under settings iforest_cfn10,"):
        study.check_evaluated_settings(tmp_path, Settings(prior="knn"))


def test_evaluate_cell_equals_fresh_episodes(data_dir):
    """One shared reset, copied per agent, gives each agent's episode from a fresh reset."""
    settings = Settings(prior="knn", c_fn=10.0)
    rows = study.evaluate_cell("beta", 3, ["ballad", "random"], data_dir, settings)
    assert all(tuple(r) == study.ROUND_COLUMNS for r in rows)
    for agent in ("ballad", "random"):
        mine = [r for r in rows if r["agent"] == agent]
        env = BudgetAllocationEnv("beta", data_dir=str(data_dir), settings=settings)
        fresh = run_episode(env, make_agent(agent, env), 3, include_start=True)
        assert [r["round"] for r in mine] == list(range(16))
        assert [{k: r[k] for k in study.ROUND_COLUMNS[3:]} for r in mine] == [
            {k: r[k] for k in study.ROUND_COLUMNS[3:]} for r in fresh]


# --------------------------------------------------------------------------- report
#: (dataset, agent) -> the actions (A = AL, L = LR) and test costs of rounds 1..3.
EPISODES = {
    ("A", "ballad"): ("ALL", [0.4, 0.3, 0.2]), ("B", "ballad"): ("AAA", [0.5, 0.5, 0.4]),
    ("C", "ballad"): ("LLL", [0.3, 0.3, 0.3]),
    ("A", "ppo-cost-train2-s0"): ("LLL", [0.3, 0.2, 0.1]),
    ("B", "ppo-cost-train2-s0"): ("LLL", [0.4, 0.4, 0.4]),
    ("C", "ppo-cost-train2-s0"): ("LLL", [0.3, 0.2, 0.2]),
    ("A", "ppo-cost-train2-s1"): ("ALA", [0.5, 0.4, 0.3]),
    ("B", "ppo-cost-train2-s1"): ("ALA", [0.5, 0.4, 0.5]),
    ("C", "ppo-cost-train2-s1"): ("LLL", [0.3, 0.3, 0.3]),
}
START = {"A": 0.5, "B": 0.6, "C": 0.4}


@pytest.fixture
def rounds(tmp_path: Path) -> pd.DataFrame:
    """The hand-built episodes in a study's store (round 0 first), read by ``load_rounds``."""
    rows = []
    for (dataset, agent), (actions, costs) in EPISODES.items():
        rows.append({"dataset": dataset, "seed": 0, "agent": agent, "round": 0, "action": "",
                     "test_cost": START[dataset], "val_cost": 0.0})
        for r, (a, c) in enumerate(zip(actions, costs, strict=True), start=1):
            rows.append({"dataset": dataset, "seed": 0, "agent": agent, "round": r,
                         "action": {"A": "AL", "L": "LR"}[a], "test_cost": c,
                         "val_cost": c + 0.1 * r})
    frame = pd.DataFrame(rows)
    store = shared.prepare_rounds(tmp_path, list(dict.fromkeys(frame["dataset"])),
                                  sorted(set(frame["seed"])), list(dict.fromkeys(frame["agent"])))
    for _, episode in frame.groupby(["dataset", "seed", "agent"], sort=False):
        shared.write_episode(store, episode.to_dict("records"))
    return shared.load_rounds(tmp_path)


def test_load_rounds_groups_policy_runs(rounds):
    groups = rounds.drop_duplicates("agent").set_index("agent")
    assert groups["group"].to_dict() == {"ballad": "ballad", "ppo-cost-train2-s0": "ppo-cost",
                                         "ppo-cost-train2-s1": "ppo-cost"}
    assert groups["train_seed"].fillna(-1).to_dict() == {
        "ballad": -1, "ppo-cost-train2-s0": 0, "ppo-cost-train2-s1": 1}


def test_episode_table_by_hand(rounds):
    table = shared.episode_table(rounds).set_index(["dataset", "agent"])
    ballad_a = table.loc[("A", "ballad")]
    assert ballad_a["final_cost"] == 0.2 and ballad_a["mean_cost"] == pytest.approx(0.3)
    assert ballad_a["al_share"] == pytest.approx(1 / 3) and ballad_a["switches"] == 1
    assert ballad_a["first_switch"] == 2  # round 2 is the first with another action
    s1_b = table.loc[("B", "ppo-cost-train2-s1")]
    assert s1_b["final_cost"] == 0.5 and s1_b["mean_cost"] == pytest.approx(1.4 / 3)
    assert s1_b["al_share"] == pytest.approx(2 / 3) and s1_b["switches"] == 2
    assert np.isnan(table.loc[("C", "ballad"), "first_switch"])
    assert len(table) == len(EPISODES)


def test_headline_by_hand_with_a_seeded_bootstrap(rounds):
    episodes = shared.episode_table(rounds)
    head = study.headline(episodes).set_index("agent")
    assert list(head.index) == ["ballad", "ppo-cost"]
    ballad, ppo = head.loc["ballad"], head.loc["ppo-cost"]
    assert ballad["runs"] == 1 and np.isnan(ballad["final_cost_sd_seeds"])
    assert ballad["final_cost"] == pytest.approx(0.3) and ballad["tie"] == 1.0
    assert ballad["diff_ci_low"] == ballad["diff_ci_high"] == 0.0
    assert ballad["never_switch"] == pytest.approx(2 / 3)
    # Per seed: s0 costs (0.1, 0.4, 0.2), s1 (0.3, 0.5, 0.3): means 7/30 and 11/30.
    assert ppo["runs"] == 2 and ppo["final_cost"] == pytest.approx(0.3)
    assert ppo["final_cost_sd_seeds"] == pytest.approx(np.std([7 / 30, 11 / 30], ddof=1))
    assert ppo["vs_ballad_pct"] == pytest.approx(0.0, abs=1e-9)
    # Cells (seeds averaged) minus BALLAD: A 0.2 - 0.2, B 0.45 - 0.4, C 0.25 - 0.3.
    diffs = np.array([0.0, 0.05, -0.05])
    assert ppo["diff_vs_ballad"] == pytest.approx(0.0, abs=1e-12)
    assert ppo["win"] == pytest.approx(2 / 6) and ppo["tie"] == pytest.approx(2 / 6)
    assert ppo["al_share"] == pytest.approx(2 / 9) and ppo["switches"] == pytest.approx(4 / 6)
    # The bootstrap draws ballad's cells first, then these, from default_rng(seed).
    rng = np.random.default_rng(7)
    rng.choice(np.zeros(3), size=(500, 3))
    boot = rng.choice(diffs, size=(500, 3)).mean(axis=1)
    again = study.headline(episodes, n_boot=500, seed=7).set_index("agent").loc["ppo-cost"]
    assert again["diff_ci_low"] == pytest.approx(np.quantile(boot, 0.025))
    assert again["diff_ci_high"] == pytest.approx(np.quantile(boot, 0.975))
    assert -0.05 <= again["diff_ci_low"] < 0 < again["diff_ci_high"] <= 0.05
    assert again["final_cost"] == ppo["final_cost"]


def test_per_dataset_and_by_training_seed(rounds):
    episodes = shared.episode_table(rounds)
    table = study.per_dataset(episodes)
    assert list(table.columns) == ["ballad", "ppo-cost"]
    assert table.loc["B"].tolist() == pytest.approx([0.4, 0.45])
    assert table.loc["C"].tolist() == pytest.approx([0.3, 0.25])
    seeds = shared.by_training_seed(rounds, episodes).set_index("train_seed")
    assert seeds["agent"].tolist() == ["ppo-cost", "ppo-cost"]
    assert seeds.loc[0, "modal_sequence"] == "LLL" and seeds.loc[0, "modal_share"] == 1.0
    assert seeds.loc[1, "modal_sequence"] == "ALA"
    assert seeds.loc[1, "modal_share"] == pytest.approx(2 / 3)
    assert seeds.loc[1, "final_cost"] == pytest.approx(11 / 30)
    assert seeds.loc[1, "switches"] == pytest.approx(4 / 3)


def test_val_cost_bias_keeps_the_rules_and_set_rounds(rounds):
    table = study.val_cost_bias(rounds)
    assert table["group"].tolist() == ["ballad", "ballad"]  # no policy, no round 3
    assert table["round"].tolist() == [1, 2]
    assert table["test_cost"].tolist() == pytest.approx([0.4, 0.3667], abs=1e-4)
    assert table["val_cost"].tolist() == pytest.approx([0.5, 0.5667], abs=1e-4)


def test_training_times_read_both_settings_layouts(tmp_path):
    short = Settings(reward="cost", budget_fraction=0.1)  # 5 rounds per episode
    models = [_fake_policy(tmp_path, "ppo-cost-train2-s1",
                           {"seed": 1, "settings": short.to_dict()}, timesteps=300),
              _fake_policy(tmp_path, "ppo-val_cost-train12-s0",
                           {"seed": 0, "reward": "val_cost", "prior": "iforest"}, 4500)]
    times = shared.training_times(models)
    assert times.to_dict("records") == [
        {"run": "ppo-cost-train2-s1", "algo": "ppo", "reward": "cost", "seed": 1,
         "timesteps": 300, "episodes": 60, "train_seconds": 12.34},
        {"run": "ppo-val_cost-train12-s0", "algo": "ppo", "reward": "val_cost", "seed": 0,
         "timesteps": 4500, "episodes": 300, "train_seconds": 12.34}]
    runs = shared.run_folders(models)
    assert runs == {"ppo-cost": [models[0].parent], "ppo-val_cost": [models[1].parent]}


# --------------------------------------------------------------------------- the whole study
def test_every_option_has_help():
    parser = load_job("scripts.studies.policies.__main__").build_parser()
    subparsers = [a for a in parser._actions if a.dest == "command"][0].choices.values()
    for p in (parser, *subparsers):
        for action in p._actions:
            assert action.help, action.option_strings


@pytest.mark.slow
def test_the_study_at_tiny_size(tmp_path, data_dir, capsys):
    """split, train one policy (300 steps, c_fn = 10), evaluate, add a baseline, report."""
    script = load_job("scripts.studies.policies.__main__")
    base = ["--data-dir", str(data_dir), "--study-dir", str(tmp_path / "study"),
            "--split-file", str(tmp_path / "split.json")]
    settings = ["--prior", "knn", "--c-fn", "10"]
    assert script.main([*base, "split", "--n-blocks", "2"]) == 0
    split = json.loads((tmp_path / "split.json").read_text())
    assert script.main([*base, "train", "--algos", "ppo", "--rewards", "cost", "--train-seeds",
                        "1", "--timesteps", "300", "--n-envs", "1", "--jobs", "1",
                        *settings]) == 0
    model = tmp_path / "study" / "policies" / "ppo-cost-train2-s0" / "ppo-cost-train2-s0.zip"
    assert shared.trained_settings(model) == Settings(reward="cost", prior="knn", c_fn=10.0)
    evaluate = [*base, "evaluate", "--seeds", "1", "--jobs", "1", "--no-progress"]
    assert script.main([*evaluate, "--baselines", "ballad", *settings]) == 0
    first = shared.load_rounds(tmp_path / "study")
    assert set(first["agent"]) == {"ballad", "ppo-cost-train2-s0"}
    assert len(first) == 2 * 2 * 16 and set(first["dataset"]) == set(split["held_out"])
    # A baseline added later runs on the finished cells; the rows already there stay.
    assert script.main([*evaluate, "--baselines", "ballad", "all-in-lr", *settings]) == 0
    second = shared.load_rounds(tmp_path / "study")
    kept = second[second["agent"] != "all-in-lr"].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, first)
    assert len(second) == 3 * 32
    meta = json.loads((tmp_path / "study" / "rounds" / "run.json").read_text())
    assert meta["settings"]["c_fn"] == 10.0 and meta["settings"]["reward"] == "entropy"
    assert script.main([*evaluate, "--prior", "knn"]) == 2  # policies trained with c_fn 10
    assert "trained with settings knn_cost_cfn10" in capsys.readouterr().err
    docs = tmp_path / "docs"
    assert script.main([*base, "report", "--docs", str(docs), "--prefix", "tiny"]) == 0
    for name in ("heldout_summary", "heldout_by_dataset", "by_training_seed",
                 "val_cost_bias", "training_time"):
        assert (docs / "tables" / f"tiny_{name}.md").is_file(), name
    for name in ("cost_by_round", "al_share", "learning_curves"):
        assert (docs / "figures" / f"tiny_{name}.png").is_file(), name
    summary = pd.read_csv(docs / "tables" / "tiny_heldout_summary.csv")
    assert summary["agent"].tolist() == ["ballad", "all-in-lr", "ppo-cost"]
    times = pd.read_csv(docs / "tables" / "tiny_training_time.csv")
    assert times[["run", "reward", "timesteps", "episodes"]].values.tolist() == [
        ["ppo-cost-train2-s0", "cost", 300, 20]]


def test_train_runs_reports_a_failed_run_and_keeps_its_log(tmp_path, capsys):
    """Runs train in the executor (here in this process); one that fails is named, its
    traceback kept in its log, and nothing is raised."""
    from agents.experiments.training.config import TrainConfig

    config = TrainConfig(datasets=("no-such-data-set",), output_dir=str(tmp_path / "p"),
                         run_name="bad", progress_bar=False)
    assert shared.train_runs({"bad": config}, 1, tmp_path / "logs") == ["bad"]
    assert "bad: FAILED (FileNotFoundError" in capsys.readouterr().out
    assert "no-such-data-set" in (tmp_path / "logs" / "bad.log").read_text()


def test_a_rerun_of_the_study_trains_an_interrupted_run_again(tmp_path, monkeypatch):
    """``ballad-env train`` now refuses to clear an unfinished run without ``--overwrite``;
    the study, which trains exactly the runs without a model, replaces an interrupted one
    (and never touches a finished one)."""
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["a", "b"], "held_out": ["c"]}))
    plan = study.TrainPlan(settings=Settings(prior="knn"), algos=("ppo",), rewards=("cost",),
                           train_seeds=2)
    names = list(study.train_configs(plan, split, "data", tmp_path))
    _fake_policy(tmp_path / "policies", names[0], {"settings": {"prior": "knn"}})
    asked: dict = {}
    monkeypatch.setattr(study, "check_trained", lambda done, settings: None)
    monkeypatch.setattr(study, "train_runs", lambda todo, jobs, logs: asked.update(todo) or [])
    assert study.train_policies(plan, split, "data", tmp_path) == []
    assert list(asked) == [names[1]] and asked[names[1]].overwrite
