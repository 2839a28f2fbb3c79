"""The split schedule of the torch trainers (agents.experiments.training.split_step and
split_schedule): a minibatch's gradient as two halves, the exchange between two processes,
and the two-process run against the same schedule in one process."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from agents.experiments.training import updates
from agents.experiments.training.config import Hyperparameters
from agents.experiments.training.split_step import apply_halves, half_gradient, halves
from agents.experiments.training.torch_trainer import build_model

HP = Hyperparameters.of("compiled", "ppo", {"batch_size": 24, "learning_rate": 3e-3,
                                           "ent_coef": 0.05})


def _flat_and_table(rows: int, masked: bool, seed: int = 0) -> tuple[updates.FlatLayout,
                                                                     torch.Tensor, torch.Tensor]:
    """A policy's layout and flat weights (5 features), and ``rows`` packed rows: masks
    with one action spent in a fifth of them (where ``masked``), valid actions, large
    advantages (so some ratios clip)."""
    model = build_model("maskable_ppo", gym.spaces.Box(0, 1, (5,)), 4, HP, seed=3, device="cpu")
    layout = updates.FlatLayout.of(model.policy)
    flat = torch.nn.utils.parameters_to_vector(model.policy.parameters()).detach()
    gen = torch.Generator().manual_seed(seed)
    obs = torch.rand(rows, 5, generator=gen)
    masks = torch.ones(rows, 2, dtype=torch.bool)
    if masked:
        masks[::5, 0] = False
    actions = torch.randint(0, 2, (rows,), generator=gen)
    actions = torch.where(masks[torch.arange(rows), actions], actions, 1 - actions)
    old_logp = torch.log(torch.rand(rows, generator=gen) * 0.8 + 0.1)
    table = updates.pack(obs, masks, actions, old_logp, torch.randn(rows, generator=gen) * 3,
                         torch.randn(rows, generator=gen))
    return layout, flat, table


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("rows", [24, 23])
def test_two_halves_give_the_whole_minibatchs_gradient_and_statistics(masked, rows) -> None:
    """Each half's share, with the whole minibatch's row count and advantage mean and
    standard deviation, adds up to the whole minibatch's gradient and statistics to
    float32 rounding (normalize_advantage on; an odd minibatch too); a half on its own
    (normalised by itself) gives another gradient."""
    layout, flat, table = _flat_and_table(rows, masked)
    grad, stats = updates.gradient(layout, HP, masked, flat, table)
    whole = updates.whole_minibatch(HP, table[:, 5 + 4])
    first, second = halves(rows)
    assert (first, second) == ((rows + 1) // 2, rows // 2)
    parts = torch.stack([half_gradient(layout, HP, masked, flat, table[:first], whole),
                         half_gradient(layout, HP, masked, flat, table[first:], whole)])
    total = parts[0] + parts[1]
    assert torch.allclose(total[:layout.numel], grad, rtol=1e-5, atol=1e-7)
    assert torch.allclose(total[layout.numel:], stats, rtol=1e-5, atol=1e-7)
    assert stats[4] > 0  # some ratio was clipped
    alone = updates.gradient(layout, HP, masked, flat, table[:first])[0]
    assert not torch.allclose(alone, grad, rtol=1e-3)


def test_the_whole_minibatch_without_normalising_and_of_one_row() -> None:
    """Not normalising (or one row: nothing to normalise by) divides by the rows alone."""
    advantages = torch.tensor([1.0, 2.0, 6.0])
    mean_std = updates.whole_minibatch(HP, advantages)
    assert mean_std.tolist() == pytest.approx([3.0, 3.0, float(advantages.std()) + 1e-8])
    off = Hyperparameters.of("compiled", "ppo", {"normalize_advantage": False})
    assert updates.whole_minibatch(off, advantages).tolist() == [3.0, 0.0, 1.0]
    assert updates.whole_minibatch(HP, advantages[:1]).tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("masked", [False, True])
def test_applying_two_halves_is_the_whole_step(masked) -> None:
    """Adding the halves, clipping and Adam (``apply_halves``) is the whole minibatch's
    step (``ppo_step``) to float32 rounding: weights, moments, step count and statistics,
    over two steps (the clipping of the gradient norm binds at these advantages)."""
    layout, flat, table = _flat_and_table(24, masked)
    state = torch.stack([flat, torch.zeros_like(flat), torch.zeros_like(flat)])
    mine, mine_step = state.clone(), torch.zeros(())
    theirs, theirs_step = state.clone(), torch.zeros(())
    for batch in (table[:24], table.flip(0)):
        whole = updates.whole_minibatch(HP, batch[:, 5 + 4])
        parts = torch.stack([half_gradient(layout, HP, masked, mine[0], batch[:12], whole),
                             half_gradient(layout, HP, masked, mine[0], batch[12:], whole)])
        got = apply_halves(HP, mine, mine_step, parts)
        want = updates.ppo_step(layout, HP, masked, theirs, theirs_step, batch)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-7)
    assert float(mine_step) == float(theirs_step) == 2.0
    assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-7)
    assert not torch.equal(mine[0], flat)


def test_a_package_is_keyed_by_the_code_its_step_calls(monkeypatch, tmp_path) -> None:
    """The half step lives in ``split_step`` but runs ``updates``' gradient and ``ppo``'s
    forward pass: a change to either module's source gives its package another key, so a
    stale package is never loaded."""
    import functools
    import shutil

    from agents.experiments.training import split_step, step_cache

    here = step_cache.Path(step_cache.__file__).parent
    for name in step_cache.STEP_SOURCES:
        shutil.copy(here / name, tmp_path / name)
    monkeypatch.setattr(step_cache, "__file__", str(tmp_path / "step_cache.py"))
    layout = updates.FlatLayout.mlp_pair(5, (8, 8))
    function = functools.partial(split_step.half_gradient, layout, HP, False)
    example = (torch.zeros(layout.numel), torch.zeros(16, 11), torch.zeros(3))
    keys = [step_cache.package_key(function, example)]
    for name in step_cache.STEP_SOURCES:
        with open(tmp_path / name, "a") as handle:
            handle.write("# changed\n")
        keys.append(step_cache.package_key(function, example))
    assert len(set(keys)) == 1 + len(step_cache.STEP_SOURCES) == 3
