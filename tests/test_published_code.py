"""The published-code runner (issue 12): its split is ours, its loop follows the published
one on a stand-in for ``BALLAD.py``, its output resumes and reads back, and a missing
dependency is named. The published code itself (anomatools) is not needed here."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ballad_env.protocol import split_and_scale
from scripts.studies.authors_code import published as published_code
from scripts.studies.authors_code.published import (
    PublishedCodeError,
    episode_order,
    finished_episodes,
    load_published,
    play_published,
    published_split,
    run_published,
)


@pytest.mark.parametrize("seed", [0, 5])
def test_published_split_is_our_authors_split(small_xy, seed: int) -> None:
    X, y = small_xy
    theirs = published_split(X, y, seed)
    ours = split_and_scale(X, y, np.random.default_rng(0), "authors", random_state=seed)
    for part in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(theirs, f"X_{part}"), getattr(ours, f"X_{part}"))
        np.testing.assert_array_equal(getattr(theirs, f"y_{part}"),
                                      np.where(getattr(ours, f"y_{part}") == 1, 1, -1))
    assert theirs.contamination == pytest.approx(20 / 200)


# ----------------------------------------------------------------------------- the loop
class _Detector:
    """A stand-in detector: the probability of x is its first feature; labels ignored."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> _Detector:
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.column_stack([1 - X[:, 0], X[:, 0]])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.where(X[:, 0] > 0.5, 1, -1)


def _stand_in_code(al_reward: float, lr_reward: float) -> types.ModuleType:
    """A module with the published functions' signatures: labels bought in index order,
    tau = 0.25 once V has labels, fixed rewards, and the cost the share of rejections."""
    code = types.ModuleType("stand_in_ballad")

    def buy(known: np.ndarray, y: np.ndarray, budget: int) -> np.ndarray:
        chosen = np.flatnonzero(known == 0)[:budget]
        known[chosen] = y[chosen]
        return known

    code.initialize_loop = lambda X, *args: ("al0", "lr0")
    code.add_training_labels = lambda known, y, ranking, budget: buy(known, y, budget)
    code.add_validation_labels = buy
    code.set_rejection_threshold = lambda p, y, *costs: 0.25
    code.measure_rewards = lambda pred, p, tau, old_al, old_lr, metric: (
        al_reward, lr_reward, f"al after {old_al}", f"lr after {old_lr}")
    code.reject = lambda pred, p, tau: np.flatnonzero(2 * np.abs(p - 0.5) < tau)
    code.cost_function = lambda y, pred, *costs: (np.mean(pred == 2), 0.0, 0.0,
                                                  np.mean(pred == 2))
    return code


def _toy_split() -> published_code.PublishedSplit:
    """50 training points (b = 1), 10 validation and 4 test points at 0.1, 0.45, 0.55, 0.9:
    tau = 0.25 rejects the middle two."""
    X_test = np.array([[0.1], [0.45], [0.55], [0.9]])
    return published_code.PublishedSplit(
        np.linspace(0, 1, 50)[:, None], np.ones(50, int), np.linspace(0, 1, 10)[:, None],
        -np.ones(10, int), X_test, np.array([-1, -1, 1, 1]), 0.1)


@pytest.fixture
def stand_in_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(published_code, "new_detector", lambda contamination: _Detector())


def test_forced_al_rejects_nothing_without_validation_labels(stand_in_detector) -> None:
    rounds = play_published(_stand_in_code(0.5, 0.5), _toy_split(), 0, "AL", n_rounds=3)
    assert [r["action"] for r in rounds] == ["AL"] * 3
    assert [r["new"] for r in rounds] == [[0], [1], [2]]
    assert all(r["tau"] == 0.0 and r["test_cost"] == 0.0 for r in rounds)


def test_ballad_starts_with_lr_then_follows_the_larger_reward(stand_in_detector) -> None:
    """Initial rewards 0.99 (AL) and 1 (LR): LR first; it then measures 0.2, below AL's 0.99,
    so AL; AL measures 0.5, above LR's 0.2, so AL again."""
    rounds = play_published(_stand_in_code(0.5, 0.2), _toy_split(), 0, "ballad", n_rounds=3)
    assert [r["action"] for r in rounds] == ["LR", "AL", "AL"]
    assert [r["reward"] for r in rounds] == [0.2, 0.5, 0.5]
    assert all(r["tau"] == 0.25 and r["test_cost"] == 0.5 for r in rounds)
    with pytest.raises(ValueError, match="unknown strategy"):
        play_published(_stand_in_code(0.5, 0.2), _toy_split(), 0, "random")


# ----------------------------------------------------------------------------- the file
def test_episodes_are_stored_resume_and_read_back(tmp_path: Path, stand_in_detector,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Episodes go into a ResultStore as they finish; a rerun plays only the missing ones,
    and one of another length is refused; ``load_published`` gives each one's mean cost."""
    monkeypatch.setattr(published_code, "_code", lambda path: _stand_in_code(0.5, 0.2))
    monkeypatch.setattr(published_code, "_split", lambda *key: _toy_split())
    monkeypatch.setattr(published_code, "file_digest", lambda path: "digest")
    out = tmp_path / "published"
    assert finished_episodes(out, 2) == set()
    assert run_published("BALLAD.py", out, ["Glass"], [0], ["LR"], n_rounds=2,
                         progress=False) == 1
    assert run_published("BALLAD.py", out, ["Glass"], [0], ["LR", "ballad"], n_rounds=2,
                         progress=False) == 1  # LR is stored: only ballad runs
    assert finished_episodes(out, 2) == {("Glass", 0, "LR"), ("Glass", 0, "ballad")}
    with pytest.raises(PublishedCodeError, match="has 2 rounds, not 15"):
        finished_episodes(out, 15)
    rounds = published_code.stored_episodes(out)[1]
    assert list(rounds["round"]) == [1, 2] and list(rounds["action"]) == ["LR", "AL"]
    assert set(rounds["ballad_py"]) == {"digest"}
    table = load_published(out).set_index("agent")
    assert list(table.index) == ["all-in-lr", "ballad"]
    assert table.loc["ballad", "test_cost"] == pytest.approx(0.5)


def test_episodes_run_seed_after_seed() -> None:
    assert list(episode_order(["a", "b"], [0, 1], ["LR"])) == [
        ("a", 0, "LR"), ("b", 0, "LR"), ("a", 1, "LR"), ("b", 1, "LR")]


# ----------------------------------------------------------------------------- errors
def _main() -> Any:
    """The study's ``main``, from its entry point."""
    from scripts.studies.authors_code.__main__ import main

    return main


def test_published_command_names_what_is_missing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    main = _main()
    monkeypatch.setitem(sys.modules, "anomatools", None)  # import anomatools fails
    ballad_py = tmp_path / "BALLAD.py"
    out = str(tmp_path / "published")
    with pytest.raises(SystemExit, match=r"BALLAD.py .*no such file.*anomatools==3.0.3"):
        main(["published", "--ballad-py", str(ballad_py), "--published", out,
              "--datasets", "Glass"])
    ballad_py.write_text("# not the published code\n")
    with pytest.raises(SystemExit, match=r"needs the package\(s\) anomatools==3.0.3 .*pip "
                                         r"install anomatools==3.0.3"):
        main(["published", "--ballad-py", str(ballad_py), "--published", out])
    with pytest.raises(SystemExit, match="--ballad-py"):
        main(["published", "--published", out])
    assert not Path(out).exists()


def test_load_ballad_names_missing_functions(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(published_code, "missing_dependencies", lambda: [])
    ballad_py = tmp_path / "BALLAD.py"
    ballad_py.write_text("def reject(predictions, probs, threshold):\n    return []\n")
    with pytest.raises(PublishedCodeError, match="lacks the published function.*initialize_loop"):
        published_code.load_ballad(ballad_py)


# ----------------------------------------------------------------------------- the stream
def _drawing_code() -> types.ModuleType:
    """The stand-in whose validation labels are drawn from numpy's global stream, as the
    published ``add_validation_labels`` draws them."""
    code = _stand_in_code(0.5, 0.2)

    def draw(known: np.ndarray, y: np.ndarray, budget: int) -> np.ndarray:
        chosen = np.random.choice(np.flatnonzero(known == 0), budget, replace=False)  # noqa: NPY002
        known[chosen] = y[chosen]
        return known

    code.add_validation_labels = draw
    return code


def test_published_stream_is_seeded_331_or_with_the_split_seed(stand_in_detector) -> None:
    """By default numpy's stream is seeded 331 whatever the split seed, as the published
    ``load_dataset`` seeds it; ``stream_seed=None`` seeds it with the split seed. The split's
    V has 10 points and b = 1: each LR round draws one of the unlabeled ones."""
    def drawn(seed: int, stream_seed: int | None) -> list[int]:
        rounds = play_published(_drawing_code(), _toy_split(), seed, "LR", n_rounds=3,
                                stream_seed=stream_seed)
        return [r["new"][0] for r in rounds]

    def expected(stream: int) -> list[int]:
        rng = np.random.RandomState(stream)  # noqa: NPY002
        unlabeled = list(range(10))
        picks = []
        for _ in range(3):
            pick = int(rng.choice(np.array(unlabeled), 1, replace=False)[0])
            unlabeled.remove(pick)
            picks.append(pick)
        return picks

    assert published_code.PUBLISHED_STREAM_SEED == 331
    assert drawn(0, 331) == drawn(5, 331) == expected(331)
    assert drawn(5, None) == expected(5) != expected(331)


def test_a_store_keeps_one_stream_seed(tmp_path: Path, stand_in_detector,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The store records its stream seed; episodes drawn from another are refused by name,
    and a store written before the record existed counts as split-seeded."""
    monkeypatch.setattr(published_code, "_code", lambda path: _stand_in_code(0.5, 0.2))
    monkeypatch.setattr(published_code, "_split", lambda *key: _toy_split())
    monkeypatch.setattr(published_code, "file_digest", lambda path: "digest")
    out = tmp_path / "published"
    run_published("BALLAD.py", out, ["Glass"], [0], ["LR"], n_rounds=2, progress=False)
    assert published_code.stored_stream_seed(out) == 331
    with pytest.raises(PublishedCodeError, match=r"seeded with 331, not the split seed.*"
                                                 r"--stream-seed 331"):
        run_published("BALLAD.py", out, ["Glass"], [1], ["LR"], n_rounds=2, progress=False,
                      stream_seed=None)
    old = tmp_path / "old"
    run_published("BALLAD.py", old, ["Glass"], [0], ["LR"], n_rounds=2, progress=False,
                  stream_seed=None)
    manifest = json.loads((old / "run.json").read_text())
    assert manifest.pop("stream_seed") == "split"
    (old / "run.json").write_text(json.dumps(manifest))  # as the runner wrote it before
    assert published_code.stored_stream_seed(old) is None
    with pytest.raises(PublishedCodeError, match="seeded with the split seed, not 331"):
        run_published("BALLAD.py", old, ["Glass"], [1], ["LR"], n_rounds=2, progress=False)


def test_agreement_refuses_a_query_seed_other_than_the_published_runs(
        tmp_path: Path, stand_in_detector, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(published_code, "_code", lambda path: _stand_in_code(0.5, 0.2))
    monkeypatch.setattr(published_code, "_split", lambda *key: _toy_split())
    monkeypatch.setattr(published_code, "file_digest", lambda path: "digest")
    out = tmp_path / "published"
    run_published("BALLAD.py", out, ["Glass"], [0], ["LR"], n_rounds=2, progress=False)
    with pytest.raises(SystemExit, match=r"--query-seed split: .*seeded with 331"):
        _main()(["agreement", "--published", str(out), "--query-seed", "split",
                 "--output", str(tmp_path / "ours")])
