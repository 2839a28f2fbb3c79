"""Every trainer shows its progress on a terminal (steps, steps/s, the latest figures) and
nothing in a log; the compiled trainer says so before it compiles
(agents.experiments.training.progress)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from conftest import small_store, train_replay

from agents.experiments.training.progress import progress_bar
from ballad_env.settings import Settings


class Terminal(io.StringIO):
    """Standard error as a terminal would be: text that says it is a tty."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return small_store(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("store"))


def test_the_torch_trainer_shows_steps_rate_and_evaluation_on_a_terminal(
        store, tmp_path, monkeypatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    train_replay(store, n_envs=4, total_timesteps=120, eval_freq=60, eval_episodes=2,
                 output_dir=tmp_path, progress_bar=True)
    shown = terminal.getvalue()
    assert "100%" in shown and "step/s" in shown
    assert "eval=0." in shown and "cost=0." in shown


def test_the_sb3_trainer_shows_its_evaluation_on_a_terminal(tmp_path, monkeypatch) -> None:
    from agents.experiments.training import train
    from agents.experiments.training.config import TrainConfig

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    train(TrainConfig(datasets=("toy",), settings=Settings(prior="knn", reward="cost"),
                      total_timesteps=60, n_envs=1, vec_env="dummy", eval_freq=30,
                      eval_episodes=1, hyperparameters={"n_steps": 30, "batch_size": 30},
                      output_dir=str(tmp_path), progress_bar=True))
    shown = terminal.getvalue()
    assert "100%" in shown and "step/s" in shown and "eval=0." in shown


def test_nothing_is_drawn_where_standard_error_is_not_a_terminal(store, tmp_path,
                                                                 capsys) -> None:
    """In a log (here pytest's captured stream, which is no tty) the bar stays off, even
    with progress asked for."""
    bar = progress_bar(100)
    bar.update(50)
    bar.close()
    train_replay(store, n_envs=4, total_timesteps=60, output_dir=tmp_path, progress_bar=True)
    assert bar.disable and capsys.readouterr().err == ""


def test_a_compile_is_announced_before_it_starts(capsys) -> None:
    from agents.experiments.training.torch_trainer import _warm

    said: list[str] = []

    class Compiling:
        compiled = built = True  # built: not in the cache, so compiled now

        def warm(self, buf: object, announce=None) -> float:
            if announce is not None and self.built:
                announce()
            said.append(capsys.readouterr().err)  # what was said before compiling
            return 12.0

    setup: dict = {"timeline": {}}
    _warm(Compiling(), None, setup, announce=True)
    assert said[-1].startswith("compiling the update, about 90 s the first time; cached")
    loaded_at = setup["timeline"].pop("step_loaded")  # when the step was ready (time.time)
    assert isinstance(loaded_at, float)
    assert setup == {"compile_seconds": 12.0, "compiled": True, "compile_built": True,
                     "timeline": {}}
    _warm(Compiling(), None, setup, announce=False)  # progress off: nothing said
    Compiling.built = False  # loaded from the cache: nothing said
    _warm(Compiling(), None, setup, announce=True)
    assert said[1:] == ["", ""] and setup["compile_built"] is False
