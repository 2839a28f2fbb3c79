"""The compiled trainer's flat PPO step (agents.ppo.updates) against SB3's
step under autograd, its fallbacks, and the rollout worker of the overlapped loop
(agents.experiments.training.pipelined)."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from conftest import small_store, train_replay

from agents.experiments.training.config import Hyperparameters
from agents.experiments.training.pipelined import stream_seeds
from agents.experiments.training.torch_trainer import build_model
from agents.policy import load_policy
from agents.ppo import step_cache, updates
from agents.ppo.core import HUGE_NEG, _minibatch_step

HP = Hyperparameters.of("batched", "ppo", {"batch_size": 16, "learning_rate": 3e-3,
                                          "ent_coef": 0.05})
#: Set to 1 to run the test that compiles the step.
COMPILE_TEST_ENV = "BALLAD_TEST_COMPILE"


def _model(algo: str = "maskable_ppo", hp: Hyperparameters = HP, **kwargs: Any) -> Any:
    return build_model(algo, gym.spaces.Box(0, 1, (5,)), 4, hp, seed=3, device="cpu", **kwargs)


def _batch(rows: int, masked: bool, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Observations, masks (a fifth with one action spent), actions (valid ones), old log
    probabilities, advantages and value targets."""
    gen = torch.Generator().manual_seed(seed)
    obs = torch.rand(rows, 5, generator=gen)
    masks = torch.ones(rows, 2, dtype=torch.bool)
    if masked:
        masks[::5, 0] = False
        masks[1::5, 1] = False
    actions = torch.randint(0, 2, (rows,), generator=gen)
    actions = torch.where(masks[torch.arange(rows), actions], actions, 1 - actions)
    old_logp = torch.log(torch.rand(rows, generator=gen) * 0.8 + 0.1)
    return obs, masks, actions, old_logp, torch.randn(rows, generator=gen) * 2, \
        torch.randn(rows, generator=gen)


@pytest.mark.parametrize("masked", [False, True])
def test_two_fused_steps_are_sb3s_steps_under_autograd(masked) -> None:
    """Two minibatch steps of the fused step (hand-written gradient, clipping, Adam on the
    flat vector) give SB3's PPO step's weights (autograd, clip_grad_norm_, torch's Adam),
    statistics and Adam moments to float32 rounding; the large advantages make some ratios
    clip in the second step and the clipping of the gradient norm bind."""
    model = _model()
    reference = copy.deepcopy(model.policy)
    reference.optimizer = torch.optim.Adam(reference.parameters(), lr=HP.learning_rate,
                                           eps=1e-5)
    update = updates.FlatUpdate(model.policy, HP, masked)
    for seed in (0, 1):
        obs, masks, actions, old_logp, adv, targets = _batch(16, masked, seed)
        expected = _minibatch_step(reference, obs, masks if masked else None, actions,
                                   old_logp, adv, targets, HP)
        got = update._step(update.state, update.step,
                           updates.pack(obs, masks, actions, old_logp, adv, targets))
        assert torch.allclose(got, expected, atol=1e-6)
    assert expected[4] > 0  # some ratio was clipped
    want = torch.nn.utils.parameters_to_vector(reference.parameters()).detach()
    assert torch.allclose(update.weights(), want, atol=2e-6)
    assert not torch.allclose(update.weights(), updates.FlatUpdate(
        _model().policy, HP, masked).weights())
    update.finish()
    for param, ref in zip(model.policy.parameters(), reference.parameters(), strict=True):
        mine, theirs = model.policy.optimizer.state[param], reference.optimizer.state[ref]
        assert float(mine["step"]) == float(theirs["step"]) == 2.0
        assert torch.allclose(mine["exp_avg"], theirs["exp_avg"], atol=1e-7)
        assert torch.allclose(mine["exp_avg_sq"], theirs["exp_avg_sq"], atol=1e-9)
        assert param.data.data_ptr() != update.state.data_ptr()  # its own tensor again


@pytest.mark.parametrize(("net_arch", "masked"), [((16, 12), True), ((16, 12), False),
                                                  ((7,), True), ((9, 8, 6), False)])
def test_the_hand_gradient_is_autograds_through_sb3s_policy(net_arch, masked) -> None:
    """``updates.gradient`` (the backward pass by hand) equals torch.autograd's gradient of
    SB3's PPO loss computed through the SB3 policy's own modules (``evaluate_actions``),
    with and without masks, at one to three hidden layers."""
    hp = Hyperparameters.of("batched", "ppo", {**HP.__dict__, "net_arch": net_arch})
    policy = _model(hp=hp).policy
    obs, masks, actions, old_logp, adv, targets = _batch(24, masked, seed=5)
    values, logp, entropy = policy.evaluate_actions(obs, actions,
                                                    action_masks=masks if masked else None)
    norm = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - hp.clip_range, 1 + hp.clip_range)
    loss = (-torch.min(norm * ratio, norm * clipped).mean() - hp.ent_coef * entropy.mean()
            + hp.vf_coef * torch.nn.functional.mse_loss(targets, values[:, 0]))
    want = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, policy.parameters())])
    flat = torch.nn.utils.parameters_to_vector(policy.parameters()).detach()
    got, _ = updates.gradient(updates.FlatLayout.of(policy), hp, masked, flat,
                              updates.pack(obs, masks, actions, old_logp, adv, targets))
    assert want.abs().max() > 1e-2  # a gradient worth comparing
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("net_arch", "masked"), [((16, 12), True), ((7,), False)])
def test_the_first_layers_as_one_product_give_the_same_gradient(net_arch, masked) -> None:
    """The update-step study's variant with the actor's and the critic's first layers as one
    product (``fused_layers``) gives ``updates.gradient``'s gradient and statistics."""
    from scripts.studies.training_speed.fused_layers import fused_gradient

    hp = Hyperparameters.of("batched", "ppo", {**HP.__dict__, "net_arch": net_arch})
    policy = _model(hp=hp).policy
    layout = updates.FlatLayout.of(policy)
    flat = torch.nn.utils.parameters_to_vector(policy.parameters()).detach()
    batch = updates.pack(*_batch(20, masked, seed=2))
    (want, want_stats), (got, got_stats) = (f(layout, hp, masked, flat, batch) for f in
                                            (updates.gradient, fused_gradient))
    assert want.abs().max() > 1e-2
    assert torch.allclose(got, want, atol=1e-6) and torch.allclose(got_stats, want_stats)


def test_the_forward_pass_is_the_policys() -> None:
    """``updates.outputs`` on the flat vector gives the SB3 policy's action distribution and
    values (SB3 keeps the logits normalised), masked logits at ``HUGE_NEG``."""
    model = _model()
    update = updates.FlatUpdate(model.policy, HP, True)
    obs, masks, *_ = _batch(10, True)
    logits, values = updates.outputs(update.layout, update.weights(), obs, masks)
    with torch.no_grad():
        dist = model.policy.get_distribution(obs)
        want = model.policy.predict_values(obs)[:, 0]
    raw, _ = updates.outputs(update.layout, update.weights(), obs, None)
    assert torch.allclose(torch.log_softmax(raw, 1), dist.distribution.logits, atol=1e-5)
    assert torch.allclose(values, want, atol=1e-6)
    assert (logits[~masks] == HUGE_NEG).all() and torch.equal(logits[masks], raw[masks])


def test_flops_by_hand_and_other_policies_refused() -> None:
    """The (64, 64) pair on 18 features: forward multiply-adds 18*64 + 64*64 + 64*2 (actor)
    + 18*64 + 64*64 + 64 (critic) = 10,688; backward twice that less the two first layers'
    input gradients (2 x 1,152): 3 x 10,688 - 2,304 = 29,760; x 2 FLOP a row. A sample
    of a 4-epoch PPO: one forward pass in the rollout (21,376) and 4 steps (238,080)."""
    model = build_model("ppo", gym.spaces.Box(0, 1, (18,)), 4, HP, 0, "cpu")
    layout = updates.FlatLayout.of(model.policy)
    assert layout.flops(1) == 59_520 and layout.flops(1024) == 59_520 * 1024
    assert layout.forward_flops(1) == 21_376 and layout.flops_per_sample(4) == 259_456
    assert layout.numel == sum(p.numel() for p in model.policy.parameters())
    assert updates.FlatLayout.mlp_pair(18, (64, 64)).shapes == layout.shapes
    relu = build_model("ppo", gym.spaces.Box(0, 1, (18,)), 4, HP, 0, "cpu")
    relu.policy.mlp_extractor.policy_net[1] = torch.nn.ReLU()
    # Both torch trainers take the layout (the batched one for its rollout worker), so the
    # refusal sends the user to the SB3 trainer, not to the other torch trainer.
    with pytest.raises(ValueError, match="torch trainers run tanh MLPs.*ReLU.*--trainer sb3"):
        updates.FlatLayout.of(relu.policy)


def _rollout_shape(n_steps: int = 2, n_envs: int = 12) -> Any:
    """What ``FlatUpdate.warm`` reads of a rollout: its sizes and observation width."""
    return type("Buf", (), {"n_steps": n_steps, "n_envs": n_envs,
                            "obs": torch.zeros(n_steps, n_envs, 5)})()


def test_compiling_falls_back_to_the_eager_step(monkeypatch) -> None:
    """Switched off by BALLAD_NO_COMPILE (the suite's setting), or the compiled step failing
    to build or load: the eager step runs, and the update says so."""
    update = updates.FlatUpdate(_model().policy, HP, False)
    assert update.warm(_rollout_shape()) == 0.0 and not update.compiled
    monkeypatch.setenv(updates.NO_COMPILE_ENV, "0")

    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(updates, "load_step", broken)
    update = updates.FlatUpdate(_model().policy, HP, False)
    before = update.weights().clone()
    with pytest.warns(RuntimeWarning, match="no compiler here.*runs eagerly"):
        update.warm(_rollout_shape())
    assert not update.compiled and update.compiled_steps == {}
    assert torch.equal(update.weights(), before)  # warming touches copies only


def test_the_step_is_built_once_per_machine_and_loaded_after(monkeypatch, tmp_path) -> None:
    """The package is keyed by what it bakes in: built (after one announced line) where the
    cache lacks it, loaded where it has it; a change of rows or of a hyperparameter is a
    new package. Inductor's cache goes to the user's cache folder unless set."""
    monkeypatch.setenv("BALLAD_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(step_cache.INDUCTOR_CACHE_ENV, raising=False)
    assert step_cache.use_inductor_cache() == str(tmp_path / "inductor")
    monkeypatch.setenv(step_cache.INDUCTOR_CACHE_ENV, str(tmp_path / "mine"))
    assert step_cache.use_inductor_cache() == str(tmp_path / "mine")
    built: list[Path] = []

    def build(function: object, example: object, path: Path) -> None:
        built.append(path)
        path.parent.mkdir(exist_ok=True)
        path.write_text("a package")

    monkeypatch.setattr(step_cache, "build", build)
    monkeypatch.setattr(step_cache, "load_package", lambda path: ("loaded", str(path)))
    layout = updates.FlatLayout.mlp_pair(5, (8, 8))
    function = functools.partial(updates.ppo_step, layout, HP, False)
    state = torch.zeros(3, layout.numel)

    def load(rows: int, hp: Hyperparameters = HP) -> tuple[object, bool]:
        said: list[str] = []
        step, fresh = step_cache.load_step(
            functools.partial(updates.ppo_step, layout, hp, False),
            (state, torch.zeros(()), torch.zeros(rows, 11)), lambda: said.append("compiling"))
        assert said == (["compiling"] if fresh else [])  # announced before a build only
        return step, fresh

    first, fresh = load(16)
    assert fresh and first == ("loaded", str(built[0])) and built[0].parent == tmp_path / "compiled"
    assert load(16) == (first, False) and len(built) == 1
    assert load(8)[1] and load(16, Hyperparameters(batch_size=16, ent_coef=0.0))[1]
    assert len(set(built)) == 3
    key = step_cache.package_key(function, (state, torch.zeros(()), torch.zeros(16, 11)))
    assert built[0].name == f"{key}.pt2"


def test_a_warm_up_that_builds_two_shapes_announces_once(monkeypatch, tmp_path) -> None:
    """A rollout of 24 rows in minibatches of 16 takes two packages (16 rows and the last 8):
    both are built, after one "compiling" line for the run, not one a shape."""
    monkeypatch.setenv(updates.NO_COMPILE_ENV, "0")
    monkeypatch.setenv("BALLAD_DATA_HOME", str(tmp_path))
    built: list[Path] = []
    monkeypatch.setattr(step_cache, "build", lambda function, example, path: built.append(path))
    monkeypatch.setattr(step_cache, "load_package", lambda path: print)
    said: list[str] = []
    update = updates.FlatUpdate(_model().policy, HP, False)
    update.warm(_rollout_shape(2, 12), lambda: said.append("compiling"))
    assert sorted(update.compiled_steps) == [8, 16] and len(built) == 2 and update.built
    assert said == ["compiling"]


def test_a_package_is_keyed_by_the_cpu(monkeypatch) -> None:
    """A package built on a CPU with other vector instructions or feature flags (a cache
    folder shared between machines) is not loaded here: the CPU is part of its key, read
    from the kernel's report, not probed by compiling."""
    layout = updates.FlatLayout.mlp_pair(5, (8, 8))
    function = functools.partial(updates.ppo_step, layout, HP, False)
    example = (torch.zeros(3, layout.numel), torch.zeros(()), torch.zeros(16, 11))
    here = step_cache.package_key(function, example)
    assert step_cache.cpu_features() == step_cache.cpu_features()  # the same on each call
    assert step_cache.cpu_features().startswith(torch.backends.cpu.get_cpu_capability())
    monkeypatch.setattr(step_cache, "cpu_features", lambda: "AVX2-0123456789abcdef")
    assert step_cache.package_key(function, example) != here


def test_a_killed_build_leaves_no_package_and_the_next_build_clears_its_file(
        monkeypatch, tmp_path) -> None:
    """A build writes the package under the project's marked temporary name: a failed
    compile leaves nothing under the package's name (nor the temporary file), and the file
    of a build whose process was killed is removed by the next build."""
    import torch._inductor

    from ballad_env import files

    def compile_into(exported: object, package_path: Any) -> None:
        package_path.write(b"half a package")
        if exported == "fails":
            raise RuntimeError("the compiler died")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_into)
    path = tmp_path / "compiled" / "step.pt2"
    monkeypatch.setattr(torch.export, "export", lambda *args, **kwargs: "fails")
    with pytest.raises(RuntimeError, match="the compiler died"):
        step_cache.build(torch.add, (), path)
    assert list(path.parent.iterdir()) == []
    dead = 99_999_999  # above any pid_max: a writer that is gone
    marker = f"{files.TEMPORARY_MARKER}-{files._host()}-{dead}"
    killed = path.parent / f".{path.name}.{marker}-0123abcd.tmp"
    killed.write_bytes(b"half a package")
    assert files.TEMPORARY_NAME.match(killed.name)
    monkeypatch.setattr(torch.export, "export", lambda *args, **kwargs: "works")
    step_cache.build(torch.add, (), path)
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert path.read_bytes() == b"half a package"


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get(COMPILE_TEST_ENV) != "1",
                    reason=f"compiling takes a minute or more: {COMPILE_TEST_ENV}=1 runs it")
def test_the_compiled_step_is_the_eager_one(monkeypatch, tmp_path) -> None:
    """The step exported and compiled by AOTInductor on 16 rows: the same weights and
    statistics as the eager step; a second update loads the package instead of building
    it and steps the same. Compiling takes a minute or more, so CI leaves it out;
    ``BALLAD_TEST_COMPILE=1`` runs it."""
    monkeypatch.setenv(updates.NO_COMPILE_ENV, "0")
    monkeypatch.setenv("BALLAD_DATA_HOME", str(tmp_path))
    batch = updates.pack(*_batch(16, True))
    eager = updates.FlatUpdate(_model().policy, HP, True, compile=False)
    expected = eager._step(eager.state, eager.step, batch)
    for build in (True, False):
        compiled = updates.FlatUpdate(_model().policy, HP, True)
        compiled.warm(_rollout_shape(2, 8))
        assert compiled.compiled and compiled.built == build
        got = compiled._step(compiled.state, compiled.step, batch)
        assert torch.allclose(got, expected, atol=1e-6)
        assert torch.allclose(compiled.state, eager.state, atol=1e-6)
        assert compiled.step.item() == 1


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return small_store(tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("store"))


def test_the_sequential_compiled_trainer_trains_the_batched_trainers_weights(store,
                                                                             tmp_path) -> None:
    """Without the worker (sequential) the compiled trainer draws the batched trainer's
    actions and minibatches from the same seed: the same weights after two rollouts, to
    float32 rounding."""
    kwargs = {"algo": "ppo", "n_envs": 4, "total_timesteps": 120, "output_dir": tmp_path}
    runs = [train_replay(store, run_name=name, trainer=name, schedule="sequential", **kwargs)
            for name in ("batched", "compiled")]
    a, b = (load_policy(d / f"{d.name}.zip").model.policy.state_dict() for d in runs)
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    assert not all(torch.equal(a[k], b[k]) for k in a)  # two different computations


def test_the_worker_is_refused_off_the_cpu(store, tmp_path) -> None:
    with pytest.raises(ValueError, match="pipelined schedule's second process runs on the CPU"):
        train_replay(store, trainer="compiled", schedule="pipelined", device="cuda",
                     output_dir=tmp_path)


@pytest.mark.slow
def test_the_overlapped_run_is_reproducible(store, tmp_path) -> None:
    """The worker's schedule is fixed, not timed: the same seed gives the same weights; the
    worker and the minibatches draw from two streams of the seed."""
    kwargs = {"algo": "ppo", "n_envs": 4, "total_timesteps": 180, "output_dir": tmp_path,
              "trainer": "compiled", "schedule": "pipelined"}
    runs = [train_replay(store, run_name=name, **kwargs) for name in ("a", "b")]
    a, b = (load_policy(d / f"{d.name}.zip").model.policy.state_dict() for d in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((runs[0] / "a.json").read_text())["update"]["schedule"] == "pipelined"
    assert len(set(stream_seeds(0))) == 2 and stream_seeds(0) == stream_seeds(0)


def test_the_training_report_gives_ratios_and_the_share_of_the_peak() -> None:
    """Hand-made medians: SB3 at 1,000 and 2,000 steps/s, the compiled trainer at 30,000 (30
    and 15 times); 30,000 x 259,456 FLOP = 7.8 GFLOP/s, 2.6% of two cores at 150."""
    from scripts.studies.timings.training import training_report

    def row(trainer: str, speed: float) -> dict:
        return {"trainer": trainer, "n_envs": 16, "steps": 60_000, "seconds": 60_000 / speed,
                "steps_per_s": speed, "cpu_seconds": 60_000 / speed,
                "parts": {"env": 1.0, "rollout": 1.0, "update": 2.0}, "load": 1.0}

    result = {"threads": [], "peak": {"1024x64x64": 100.0, "512^3": 150.0}, "store": "s",
              "cells": 3, "rows": {"sb3-study": [row("SB3", 1000)], "sb3-256": [row("SB3", 2000)],
                                   "compiled-ppo-1024": [row("compiled ppo", 30_000)]}}
    line = next(x for x in training_report(result).splitlines() if x.startswith("compiled"))
    assert line.split()[6:11] == ["30.0", "15.0", "30,000", "7.8", "2.6%"]
    assert "goal: 10 x SB3 PPO at 256 environments (20,000 steps/s): met (best 15.0 x)" in \
        training_report(result)


def test_a_worker_process_ends_when_told_or_when_its_pipe_closes() -> None:
    """``pipelined.serve``, a started worker process's life: ``None`` instead of work ends
    it, and so does the main process's end of the pipe closing."""
    import multiprocessing

    from agents.experiments.training import pipelined

    ours, theirs = multiprocessing.Pipe()
    ours.send(None)
    assert pipelined.serve(theirs) is None
    ours.close()
    assert pipelined.serve(theirs) is None


@pytest.mark.slow
def test_the_worker_started_before_the_trainer_plays_the_same_run(store, tmp_path,
                                                                  monkeypatch) -> None:
    """``training.train`` starts the worker's process before importing the trainer; a
    process started inside ``train_torch`` instead trains the same weights. The run's
    record holds its setup's timeline in order. A run that fails before its worker gets
    work still ends the process."""
    from agents.experiments.training import torch_trainer, worker_process
    from agents.experiments.training.config import TrainConfig
    from agents.experiments.training.run_folder import RunError

    started: list[worker_process.WorkerProcess] = []

    class Recorded(worker_process.WorkerProcess):
        def __init__(self) -> None:
            super().__init__()
            started.append(self)

    monkeypatch.setattr(worker_process, "WorkerProcess", Recorded)
    monkeypatch.setattr(torch_trainer, "WorkerProcess", Recorded)
    kwargs = {"algo": "ppo", "n_envs": 4, "total_timesteps": 180, "output_dir": tmp_path,
              "trainer": "compiled"}
    early = train_replay(store, run_name="early", **kwargs)
    assert len(started) == 1 and not started[0].process.is_alive()
    times = json.loads((early / "early.json").read_text())["update"]["timeline"]
    order = ["worker_started", "worker_imported", "worker_ready", "clock_started"]
    assert [times[k] for k in order] == sorted(times[k] for k in order)
    assert times["worker_started"] <= times["model_built"] <= times["step_loaded"] \
        <= times["clock_started"]
    config = TrainConfig(**{**json.loads((early / "early.json").read_text())["config"],
                            "run_name": "late"})
    late = torch_trainer.train_torch(config).run_dir
    assert len(started) == 2  # the late run's process was started by train_torch
    a, b = (load_policy(d / f"{d.name}.zip").model.policy.state_dict() for d in (early, late))
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(RunError, match="finished run of this name"):
        train_replay(store, run_name="early", **kwargs)  # not overwritten
    assert len(started) == 3 and not started[2].process.is_alive()


def test_the_learning_report_gives_each_trainers_iqm_and_interval() -> None:
    """Hand-made held-out costs (3 seeds x 4 cells): each trainer's row at each step count
    all its seeds reached, the IQM over seeds x cells with an interval around it, the mean,
    each seed's mean; All-in-LR's row from key 0."""
    import numpy as np

    from agents.reports.policy_stats import iqm
    from scripts.studies.training_speed.learning import report

    lr = [0.03, 0.02, 0.04, 0.03]
    sb3 = [{0: lr, 200: [0.03, 0.02, 0.04, 0.03]}, {0: lr, 200: [0.05, 0.02, 0.04, 0.05]},
           {0: lr, 200: [0.03, 0.03, 0.04, 0.02], 400: [0.1] * 4}]
    fast = [{0: lr, 100: [0.01 * (s + 1)] * 4,
             200: [0.02 + 0.01 * s, 0.02 + 0.005 * s, 0.01, 0.02 - 0.005 * s]}
            for s in range(3)]
    lines = report({"SB3 PPO": sb3, "fast": fast}).splitlines()
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in lines[2:]}
    assert set(rows) == {("All-in-LR", ""), ("SB3 PPO", "200"), ("fast", "100"),
                         ("fast", "200")}  # 400 only in one seed's run: no row
    matrix = np.array([s[200] for s in fast])
    value, low, high = (float(x) for x in re.findall(
        r"([\d.]+) \[([\d.]+), ([\d.]+)\]", rows[("fast", "200")])[0])
    assert value == pytest.approx(iqm(matrix), abs=5e-5) and low <= value <= high
    assert low < high  # the seeds differ: the bootstrap interval has width
    assert rows[("fast", "100")].endswith("| 0.0100 0.0200 0.0300 |")
