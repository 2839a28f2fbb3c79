"""The split schedule of the torch trainers (agents.ppo.split_step and
split_schedule): a minibatch's gradient as two halves, the exchange between two processes,
and the two-process run against the same schedule in one process."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from conftest import small_store, train_replay

from agents.experiments.cli.train import config_from_args, parse_args
from agents.experiments.training import config as config_module
from agents.experiments.training.config import Hyperparameters, TrainConfig, stores_in_order
from agents.experiments.training.rollouts import make_envs
from agents.experiments.training.split_schedule import (
    Half,
    Plan,
    SplitUpdate,
    one_process_update,
    split_seeds,
)
from agents.experiments.training.torch_trainer import build_model, envs_arguments
from agents.policy import load_policy
from agents.ppo import exchange as exchange_module
from agents.ppo import updates
from agents.ppo.exchange import Endpoint, Exchange
from agents.ppo.split_step import HalfSteps, apply_halves, half_gradient, halves
from ballad_env.observation import observation_space

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


#: The exchange (and so a split run) needs x86's store order: elsewhere it is refused.
x86_only = pytest.mark.skipif(not stores_in_order(),
                              reason="the split schedule's exchange needs x86's store order")


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("rows", [24, 23])
def test_two_halves_give_the_whole_minibatchs_gradient_and_statistics(masked, rows) -> None:
    """Each half's share, with the whole minibatch's row count and advantage mean and
    standard deviation, adds up to the whole minibatch's gradient and statistics to
    float32 rounding (normalize_advantage on; an odd minibatch too); a half on its own
    (normalised by itself) gives another gradient."""
    layout, flat, table = _flat_and_table(rows, masked)
    grad, stats = updates.gradient(layout, HP, masked, flat, table)
    advantages = table[:, 5 + 4]
    first, second = halves(rows)
    assert (first, second) == ((rows + 1) // 2, rows // 2)
    parts = torch.stack([half_gradient(layout, HP, masked, flat, table[:first], advantages),
                         half_gradient(layout, HP, masked, flat, table[first:], advantages)])
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
        advantages = batch[:, 5 + 4]
        parts = torch.stack([half_gradient(layout, HP, masked, mine[0], batch[:12], advantages),
                             half_gradient(layout, HP, masked, mine[0], batch[12:],
                                           advantages)])
        got = apply_halves(HP, mine, mine_step, parts)
        want = updates.ppo_step(layout, HP, masked, theirs, theirs_step, batch)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-7)
    assert float(mine_step) == float(theirs_step) == 2.0
    assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-7)
    assert not torch.equal(mine[0], flat)


def test_a_package_is_keyed_by_the_code_its_step_calls(monkeypatch, tmp_path) -> None:
    """The half step lives in ``split_step`` but runs ``updates``' gradient and ``core``'s
    forward pass: a change to either module's source gives its package another key, so a
    stale package is never loaded."""
    import functools
    import shutil

    from agents.ppo import split_step, step_cache

    here = step_cache.Path(step_cache.__file__).parent
    for name in step_cache.STEP_SOURCES:
        shutil.copy(here / name, tmp_path / name)
    monkeypatch.setattr(step_cache, "__file__", str(tmp_path / "step_cache.py"))
    layout = updates.FlatLayout.mlp_pair(5, (8, 8))
    function = functools.partial(split_step.half_gradient, layout, HP, False)
    example = (torch.zeros(layout.numel), torch.zeros(16, 11), torch.zeros(32))
    keys = [step_cache.package_key(function, example)]
    for name in step_cache.STEP_SOURCES:
        with open(tmp_path / name, "a") as handle:
            handle.write("# changed\n")
        keys.append(step_cache.package_key(function, example))
    assert len(set(keys)) == 1 + len(step_cache.STEP_SOURCES) == 3


def test_a_packages_key_covers_every_module_its_steps_import() -> None:
    """Every module of ``agents.ppo`` that a compiled step's module imports, directly or
    through another, is in the package's key (``STEP_SOURCES``, or the step's own module), so
    a module the step comes to call cannot be left out of it and a stale package load;
    ``step_cache`` itself, which builds and loads packages and runs in no step, aside."""
    import ast
    import inspect

    from agents.ppo import split_step, step_cache

    folder = Path(step_cache.__file__).parent

    def imported(name: str) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "agents.ppo":
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "agents.ppo."):
                found.add(str(node.module).rsplit(".", 1)[1])
        return found

    keyed = {Path(name).stem for name in step_cache.STEP_SOURCES}
    for step in (updates.ppo_step, split_step.half_gradient, split_step.apply_halves):
        own = Path(str(inspect.getsourcefile(step))).stem
        seen, todo = {own}, [own]
        while todo:
            for name in imported(todo.pop()) - seen:
                seen.add(name)
                todo.append(name)
        assert seen - {"step_cache"} <= keyed | {own}, (step.__name__, seen, keyed)
    assert imported("split_step") >= {"core", "updates", "step_cache"}


def test_a_layout_is_its_shapes_so_both_processes_load_one_package() -> None:
    """SB3's policy's layout (named parameters) and the one built from the sizes alone (the
    helper's, started before the model exists) are equal and key the same package: the
    helper loads what this process built instead of building it again."""
    import functools

    from agents.ppo import split_step, step_cache

    model = build_model("ppo", gym.spaces.Box(0, 1, (5,)), 4, HP, seed=3, device="cpu")
    of_policy = updates.FlatLayout.of(model.policy)
    of_sizes = updates.FlatLayout.mlp_pair(5, (64, 64))
    assert of_policy == of_sizes and of_policy.names != of_sizes.names
    example = (torch.zeros(of_sizes.numel), torch.zeros(16, 11), torch.zeros(32))
    keys = {step_cache.package_key(functools.partial(split_step.half_gradient, layout, HP,
                                                     False), example)
            for layout in (of_policy, of_sizes)}
    assert len(keys) == 1


def _swap_many(exchange: Exchange, side: int, n: int, width: int) -> list[bool]:
    """``n`` exchanges of side ``side``'s vectors (its side and the exchange's number in
    every entry); whether each slot held both sides' vectors of that exchange."""
    endpoint = Endpoint(exchange, side, lambda: True)
    seen = []
    for k in range(1, n + 1):
        slot = endpoint.swap(torch.full((width,), float(side * 1_000_000 + k)))
        seen.append(bool((slot[0] == k).all() and (slot[1] == 1_000_000 + k).all()))
    return seen


def _child(exchange: Exchange, n: int, width: int) -> None:
    os._exit(0 if all(_swap_many(exchange, 1, n, width)) else 1)


@x86_only
def test_two_processes_swap_vectors_in_step() -> None:
    """Two processes (one forked here) meet 2,000 times: every exchange's slot holds both
    sides' vectors of that exchange, never a vector of the one before or after (the slots
    alternate, so the side ahead never overwrites what the other still reads)."""
    exchange = Exchange(64)
    child = multiprocessing.get_context("fork").Process(target=_child,
                                                        args=(exchange, 2000, 64))
    child.start()
    try:
        assert all(_swap_many(exchange, 0, 2000, 64))
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0


def test_a_wait_ends_when_the_other_side_fails_or_dies(monkeypatch) -> None:
    """A side waiting for the other raises where the other marked the run failed, or
    where the other process is gone, instead of waiting for ever."""
    monkeypatch.setattr(exchange_module, "ALIVE_EVERY", 0.01)
    failed = Exchange(4)
    Endpoint(failed, 1, lambda: True).fail()
    with pytest.raises(RuntimeError, match="other process of the split schedule failed"):
        Endpoint(failed, 0, lambda: True).swap(torch.ones(4))
    with pytest.raises(RuntimeError, match="ended without finishing"):
        Endpoint(Exchange(4), 0, lambda: False).swap()
    with pytest.raises(ValueError, match="sides 0 and 1, not 2"):
        Endpoint(failed, 2, lambda: True)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return small_store(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("store"))


def _one_process_weights(config: TrainConfig, n_rollouts: int) -> torch.Tensor:
    """The split schedule of ``config`` computed in this process: side 0's and side 1's
    rollouts one after the other, then every minibatch's two halves one after the other
    (``one_process_update``); the weights after ``n_rollouts`` updates."""
    hp, masked = config.hp, config.algo == "maskable_ppo"
    space = observation_space(config.observation)
    model = build_model(config.algo, space, config.n_envs, hp, config.seed, "cpu")
    update = SplitUpdate(model.policy, hp, masked)
    plan = Plan.of(update.layout, hp, masked, config.n_envs, config.seed)
    sides = [Half(plan, side, make_envs(*envs_arguments(config, len(plan.envs_of(side)))),
                  update.halves, (update.state, update.step)) for side in (0, 1)]
    gen = torch.Generator().manual_seed(split_seeds(config.seed)[2])
    timer = {"env": 0.0, "rollout": 0.0}
    for _ in range(n_rollouts):
        for side in sides:
            side.rollout(timer)
        one_process_update(sides[0], gen)
    return update.weights().clone()


@x86_only
def test_the_two_process_run_is_the_one_process_schedule_bit_for_bit(store, tmp_path) -> None:
    """Two rollouts of MaskablePPO on 5 environments (3 and 2: an odd split, and 75-row
    rollouts cut into minibatches of 32, 32 and 11 rows: odd halves) in two processes give
    the weights of the same schedule computed in one process, bit for bit: the two copies
    never drifted (the run checks their checksums every rollout) and timing changed
    nothing."""
    run = train_replay(store, trainer="compiled", schedule="split", algo="maskable_ppo",
                       n_envs=5, total_timesteps=150, output_dir=tmp_path)
    record = json.loads((run / f"{run.name}.json").read_text())
    assert record["num_timesteps"] == 150 and record["update"]["schedule"] == "split"
    saved = load_policy(run / f"{run.name}.zip").model.policy
    got = torch.nn.utils.parameters_to_vector(saved.parameters()).detach()
    config = TrainConfig(**record["config"])
    threads = torch.get_num_threads()
    torch.set_num_threads(config.torch_threads)  # the run's: threads change the rounding
    try:
        want = _one_process_weights(config, 2)
    finally:
        torch.set_num_threads(threads)
    assert (got - want).abs().max() == 0
    first = build_model(config.algo, observation_space(config.observation), 5, config.hp, 0,
                        "cpu")
    assert not torch.equal(got, torch.nn.utils.parameters_to_vector(
        first.policy.parameters()).detach())


def test_the_schedule_is_resolved_and_checked(store, monkeypatch) -> None:
    """Compiled runs split unless told on an x86 CPU (sequential with one environment or off
    the CPU); the one schedule field says the rest (--no-overlap is --schedule sequential,
    and clashes with another); split is refused for the autograd trainer, off the CPU and
    for one environment."""
    monkeypatch.setattr(config_module.platform, "machine", lambda: "x86_64")
    base: dict[str, Any] = {"replay_store": str(store), "datasets": ("large",)}
    assert TrainConfig(trainer="compiled", **base).run_schedule == "split"
    assert TrainConfig(trainer="compiled", n_envs=1, **base).run_schedule == "sequential"
    assert TrainConfig(trainer="compiled", device="cuda", **base).run_schedule == "sequential"
    assert TrainConfig(trainer="batched", **base).run_schedule == "sequential"
    for schedule in ("sequential", "pipelined"):
        assert TrainConfig(trainer="compiled", schedule=schedule, **base
                           ).run_schedule == schedule
    assert "overlap" not in TrainConfig(**base).to_dict()  # one field says the schedule
    cli = ["--replay-store", str(store), "--datasets", "large", "--trainer", "compiled"]
    assert config_from_args(parse_args([*cli, "--no-overlap"])).schedule == "sequential"
    with pytest.raises(ValueError, match="give one of --no-overlap and --schedule"):
        config_from_args(parse_args([*cli, "--no-overlap", "--schedule", "split"]))
    split = TrainConfig(trainer="compiled", schedule="split", **base)
    assert split.run_schedule == "split" and split.second_process and not split.run_overlapped
    for options, message in (({"trainer": "batched"}, "use --trainer compiled"),
                             ({"device": "cuda"}, "use --schedule sequential"),
                             ({"n_envs": 1}, "--n-envs 2 or more")):
        with pytest.raises(ValueError, match=message):
            TrainConfig(**{"trainer": "compiled", "schedule": "split", **base, **options})
    with pytest.raises(ValueError, match="unknown schedule 'halves'"):
        TrainConfig(trainer="compiled", schedule="halves", **base)


@pytest.mark.parametrize("machine", ["arm64", "aarch64"])
def test_cpus_without_x86s_store_order_default_to_pipelined_and_refuse_split(
        store, monkeypatch, machine) -> None:
    """The exchange relies on x86's store order: elsewhere the compiled trainer's default is
    the pipelined schedule, and asking for the split names the machine and the fix."""
    monkeypatch.setattr(config_module.platform, "machine", lambda: machine)
    base: dict[str, Any] = {"replay_store": str(store), "datasets": ("large",),
                            "trainer": "compiled"}
    assert TrainConfig(**base).run_schedule == "pipelined"
    with pytest.raises(ValueError, match=f"this machine is '{machine}': use --schedule "
                                         "pipelined"):
        TrainConfig(schedule="split", **base)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("BALLAD_TEST_COMPILE") != "1",
                    reason="compiling takes a minute or more: BALLAD_TEST_COMPILE=1 runs it")
def test_the_compiled_half_steps_are_the_eager_ones(monkeypatch, tmp_path) -> None:
    """The half and apply steps built by AOTInductor (12-row halves) give the eager steps'
    vectors, weights and statistics to float32 rounding; a second warm loads them."""
    monkeypatch.setenv(updates.NO_COMPILE_ENV, "0")
    monkeypatch.setenv("BALLAD_DATA_HOME", str(tmp_path))
    layout, flat, table = _flat_and_table(24, True)
    advantages = table[:, -2]
    results: list[tuple[torch.Tensor, ...]] = []
    for compiled in (False, True, True):
        steps = HalfSteps(layout, HP, True, compile=compiled)
        steps.warm({(12, 24)}, 5)
        assert steps.compiled == compiled and steps.built == (compiled and not results[1:])
        state = torch.stack([flat, torch.zeros_like(flat), torch.zeros_like(flat)])
        parts = torch.stack([steps.half(state[0], table[:12], advantages),
                             steps.half(state[0], table[12:], advantages)])
        results.append((parts, steps.apply(state, torch.zeros(()), parts), state))
    for got in results[1:]:
        for mine, eager in zip(got, results[0], strict=True):
            assert torch.allclose(mine, eager, rtol=1e-5, atol=1e-7)


def test_a_failure_in_the_helper_is_raised_with_its_traceback() -> None:
    """Where the helper failed first (this side then fails waiting for it), the error
    raised is the helper's, with the traceback it sent; else this side's own."""
    from types import SimpleNamespace

    from agents.experiments.training.split_schedule import SplitHelper

    ours, theirs = multiprocessing.Pipe()
    process = SimpleNamespace(conn=ours, process=SimpleNamespace(is_alive=lambda: True,
                                                                 exitcode=None),
                              started=0.0, started_at=0.0)
    plan = Plan.of(updates.FlatLayout.mlp_pair(5, (8, 8)), HP, False, 4, 0)
    helper = SplitHelper(plan, (), 1, 1, process=process)
    own = RuntimeError("the other process of the split schedule failed")
    assert helper.why(own, seconds=0.01) is own
    theirs.send(([], 0, {}, 0.0))  # a rollout's message, then the failure
    theirs.send(("error", "Traceback: ValueError: boom"))
    raised = helper.why(own, seconds=0.01)
    assert isinstance(raised, RuntimeError) and "boom" in str(raised)
    assert "second process failed" in str(raised)


def test_a_package_refuses_a_strided_view(monkeypatch) -> None:
    """A loaded package reads its inputs as laid out when it was built: a strided view (a
    table's column) is refused by name instead of read as other memory; contiguous
    tensors go through."""
    from types import SimpleNamespace

    from agents.ppo import step_cache

    calls: list[int] = []

    def boxed_run(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        calls.append(len(tensors))
        return tensors

    fake = SimpleNamespace(get_call_spec=lambda: ["", '[1, {"type": null}]'], boxed_run=boxed_run)
    monkeypatch.setattr(torch._C._aoti, "AOTIModelPackageLoader", lambda *args: fake)
    step = step_cache.load_package(Path("step.pt2"))
    table = torch.zeros(8, 4)
    assert step(table[:, 0].contiguous(), table[2:4]) is not None and calls == [2]
    with pytest.raises(ValueError, match="step.pt2 takes contiguous tensors"):
        step(table[:, 0])
