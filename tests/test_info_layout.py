"""``info`` has one layout on every data set, in the live and the replay environment, so that
Gymnasium's vector envs stack sub-environments playing data sets of different sizes; and an
unknown keyword is refused in Python's own words, which libraries such as TorchRL retry on."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ballad_env import ENV_ID, BudgetAllocationEnv
from ballad_env.replay.env import BudgetAllocationReplayEnv
from ballad_env.settings import Settings
from ballad_env.snapshot import QUERIED_WIDTH

REPLAY_ID = "ballad_env/BudgetAllocationReplay-v0"
#: Three rounds on the kNN prior: whole episodes in well under a second.
FAST = {"prior": "knn", "budget_fraction": 0.06, "round_fraction": 0.02}
#: Two bundled data sets whose rounds buy different numbers of labels (2 and 3).
MIXED = ("WBC", "wdbc")


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lattice store of WBC and wdbc, seed 0, under ``FAST``."""
    from agents.experiments.lattice_build import build_store

    root = tmp_path_factory.mktemp("mixed-store")
    build_store(root, list(MIXED), [0], [Settings(**FAST)], progress=False)
    return root


def layout(info: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each key's type (an array's dtype) and shape: what a vector env stacks by."""
    return {key: (str(value.dtype) if isinstance(value, np.ndarray | np.generic)
                  else type(value).__name__, np.shape(value)) for key, value in info.items()}


def episode_layouts(env: gym.Env, actions: tuple[int, ...]) -> list[dict[str, Any]]:
    """The layout of ``info`` at a reset and after each of ``actions``."""
    env.reset(seed=0)
    return [layout(env.reset(seed=0)[1]), *(layout(env.step(a)[4]) for a in actions)]


def test_info_layout_is_one_on_every_data_set_live_and_replay(mixed_store: Path) -> None:
    """Every key, not only ``queried``: the same type and shape at reset and after AL and LR
    rounds, on WBC and on wdbc, in the live and in the replay environment."""
    actions = (0, 1, 0)
    seen = [episode_layouts(BudgetAllocationEnv(name, **FAST), actions) for name in MIXED]
    seen += [episode_layouts(BudgetAllocationReplayEnv(mixed_store, datasets=[name], **FAST),
                             actions) for name in MIXED]
    first = seen[0][0]
    assert first["queried"] == ("int64", (QUERIED_WIDTH,))
    assert first["action_mask"] == ("bool", (2,)) and first["dataset"] == ("str", ())
    for layouts in seen:
        for got in layouts:
            assert got == first


def test_queried_is_padded_with_minus_one_and_can_be_widened() -> None:
    env = BudgetAllocationEnv("wdbc", queried_width=5, **FAST)
    _, info = env.reset(seed=0)
    assert info["queried"].tolist() == [-1] * 5
    _, _, _, _, info = env.step(0)
    bought = env.snapshot().queried
    assert len(bought) == 3 and info["queried"].tolist() == [*bought.tolist(), -1, -1]
    with pytest.raises(ValueError, match="buys up to 3 labels.*at least 3"):
        BudgetAllocationEnv("wdbc", queried_width=2, **FAST)


def make(name: str) -> Any:
    """A factory of the made environment on data set ``name`` (``FAST`` settings)."""
    return lambda: gym.make(ENV_ID, dataset=name, **FAST)


@pytest.mark.parametrize("vector", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_vector_envs_with_one_data_set_each_play_whole_episodes(vector: Any) -> None:
    """WBC and wdbc in one vector env (it used to fail stacking ``queried``), with no warning
    at reset or after: two whole episodes each, autoreset included."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envs = vector([make(name) for name in MIXED])
        try:
            _, info = envs.reset(seed=0)
            assert info["dataset"].tolist() == list(MIXED)
            assert info["queried"].shape == (2, QUERIED_WIDTH) and (info["queried"] == -1).all()
            ended = np.zeros(2, dtype=int)
            for step in range(8):  # 3 rounds, the autoreset step, 3 rounds, ...
                _, _, terminated, _, info = envs.step(np.array([step % 2, 1 - step % 2]))
                ended += terminated
            assert ended.tolist() == [2, 2]
        finally:
            envs.close()


def test_make_vec_over_a_list_of_data_sets(mixed_store: Path) -> None:
    """``gym.make_vec(..., dataset=[...])`` draws a data set per episode in each sub-env, live
    and replay; ``info`` stacks whichever they drew."""
    for env_id, kwargs in ((ENV_ID, {"dataset": list(MIXED)}),
                           (REPLAY_ID, {"store": mixed_store})):
        envs = gym.make_vec(env_id, num_envs=3, vectorization_mode="sync", **kwargs, **FAST)
        _, info = envs.reset(seed=1)
        drawn = set(info["dataset"].tolist())
        for _ in range(8):
            _, _, _, _, info = envs.step(np.zeros(3, dtype=int))
            drawn |= set(info["dataset"].tolist())
        assert drawn == set(MIXED) and info["queried"].shape == (3, QUERIED_WIDTH)
        envs.close()


@pytest.mark.parametrize("cls", [BudgetAllocationEnv, BudgetAllocationReplayEnv])
def test_unknown_keyword_in_pythons_words(cls: type, mixed_store: Path) -> None:
    """TorchRL's ``GymEnv`` passes ``frameskip`` and retries without it only on Python's own
    wording; the valid names follow it."""
    first = "toy" if cls is BudgetAllocationEnv else mixed_store
    with pytest.raises(TypeError) as caught:
        cls(first, frameskip=1, colour="red")
    message = str(caught.value)
    assert message.startswith(f"{cls.__name__}.__init__() got an unexpected keyword "
                              "argument 'frameskip'; use ")
    assert "queried_width, unavailable_action or a Settings field" in message
    assert "c_fn" in message
    with pytest.raises(TypeError, match="argument 'c_fnn' .did you mean 'c_fn'.."):
        cls(first, c_fnn=2)


def test_every_numeric_info_value_averages_at_reset_without_a_warning() -> None:
    """PufferLib averages each numeric ``info`` entry over its environments; an empty
    ``queried`` at reset gave "Mean of empty slice" there."""
    _, info = BudgetAllocationEnv("WBC", **FAST).reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        means = {key: float(np.mean(value)) for key, value in info.items()
                 if not isinstance(value, str)}
    assert means["queried"] == -1.0 and set(means) == set(info) - {"dataset", "action"}
