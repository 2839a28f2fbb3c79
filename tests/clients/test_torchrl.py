"""TorchRL (the ``clients`` extra): ``GymEnv`` on our ids passes ``check_env_specs`` (it
passes ``frameskip`` and retries without it on Python's wording), and a rollout over one
and mixed data sets, live and replay, returns the environment's rewards."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from clients.conftest import LIVE, MIXED, REPLAY, direct_rewards, env_kwargs

torch = pytest.importorskip("torch")
_START_METHOD = multiprocessing.get_start_method(allow_none=True)
pytest.importorskip("torchrl")
# Importing torchrl makes "spawn" every process's start method; the rest of the suite (an
# AsyncVectorEnv whose workers call gym.make on an id) expects the platform's.
multiprocessing.set_start_method(_START_METHOD, force=True)
from torchrl.envs import GymEnv, SerialEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402


def alternate(td: Any) -> Any:
    """LR, AL, LR, ... by the step count kept in the observation (budget_used): one-hot."""
    budget_used = td["observation"][..., 6]
    lr = (torch.round(budget_used * 3) % 2 == 0).long()
    td["action"] = torch.nn.functional.one_hot(lr, 2)
    return td


@pytest.mark.parametrize("env_id", [LIVE, REPLAY])
@pytest.mark.parametrize("datasets", [["WBC"], MIXED], ids=["one", "mixed"])
def test_gym_env_specs_and_returns(env_id: str, datasets: list[str],
                                   mixed_store: Path) -> None:
    kwargs = env_kwargs(env_id, mixed_store, datasets)
    env = GymEnv(env_id, **kwargs)
    check_env_specs(env)
    env.set_seed(4)  # resets with seed 4; the rollout resets again, from that generator
    td = env.rollout(3, policy=alternate)
    actions = td["action"].argmax(-1).tolist()
    assert actions == [1, 0, 1] and bool(td["next", "terminated"][-1])
    expected = direct_rewards(env_id, kwargs, 4, actions, resets=2)
    assert td["next", "reward"].flatten().tolist() == pytest.approx(expected, abs=1e-6)


def test_serial_env_with_one_data_set_per_worker(mixed_store: Path) -> None:
    """Two workers on data sets whose rounds differ in size, stacked by TorchRL."""
    makers = [lambda name=name: GymEnv(REPLAY, **env_kwargs(REPLAY, mixed_store, [name]))
              for name in MIXED]
    env = SerialEnv(2, makers)
    td = env.rollout(3, policy=alternate)
    assert td.batch_size == torch.Size([2, 3]) and td["next", "terminated"][:, -1].all()
    env.close()
