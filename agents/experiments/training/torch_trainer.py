"""PPO and MaskablePPO trained on the vector replay environment, batched end to end in torch.

stable-baselines3 steps a ``VecEnv`` one vector step at a time through Python objects (a
forward pass, a ``RolloutBuffer`` write and a list of ``info`` dicts per step) and updates on
minibatches of tens of rows; on the replay environment, which steps all N environments at
once in numpy (``ballad_env.replay.vector``; its speed is ``ballad-env bench --vector``'s),
that overhead is nearly all of a run. :func:`train_torch` keeps the whole loop on
(N,)-shaped arrays: the rollout (one forward pass of all N environments per step, written
into preallocated tensors), the advantages (GAE over the (T, N) rollout), and the updates
(minibatches of thousands of rows).

The network *is* SB3's: the algorithm's own ``MlpPolicy`` (``ActorCriticPolicy`` or
sb3-contrib's ``MaskableActorCriticPolicy``, the same layers, orthogonal initialisation and
Adam), built by SB3 without an environment as :mod:`agents.policy_zip` rebuilds it, and
saved with SB3's ``save``. So a policy trained here is an ordinary SB3 model: it loads with
the safe loader (``agents.policy.load_policy``), plays the live environment as an agent,
``compare`` and SB3's ``evaluate_policy``. The loss is SB3's PPO loss (clipped surrogate,
entropy bonus, unclipped value loss, advantages normalised per minibatch, gradient norm
clipped), with MaskablePPO's masked logits and masked entropy for ``maskable_ppo``.

``docs/training.md`` gives the measured speed against SB3, the learning curves and why the
trainer is written here rather than on skrl or TorchRL.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.experiments.training.config import (
    TORCH_TRAINERS,
    Hyperparameters,
    TrainConfig,
    TrainResult,
)
from agents.experiments.training.pipelined import RolloutWorker, overlapped_loop, stream_seeds
from agents.experiments.training.progress import announce_compile
from agents.experiments.training.record import write_record
from agents.experiments.training.recorder import Recorder
from agents.experiments.training.rollouts import Record, collect, envs_arguments, make_envs
from agents.experiments.training.run_folder import fresh_run_dir, run_lock
from agents.experiments.training.split_schedule import (
    Half,
    Plan,
    SplitHelper,
    SplitUpdate,
    split_loop,
)
from agents.experiments.training.worker_process import WorkerProcess
from agents.policy import ALGORITHM_CLASSES
from agents.ppo.core import Rollout, policy_forward
from agents.ppo.split_step import halves
from agents.ppo.updates import (
    ADAM_EPS,
    AutogradUpdate,
    FlatLayout,
    FlatUpdate,
    update_on,
)
from ballad_env.observation import OBSERVATIONS, observation_space


def build_model(algo: str, observation_space: gym.spaces.Box, n_envs: int,
                hp: Hyperparameters, seed: int, device: str) -> Any:
    """The SB3 algorithm object whose ``policy`` the trainer trains and whose ``save`` writes
    the model zip: built without an environment (as ``agents.policy_zip`` rebuilds it), its
    weights initialised from ``seed`` without touching torch's global generator."""
    algorithm = ALGORITHM_CLASSES[algo]
    model = algorithm("MlpPolicy", env=None, device=device, seed=None, _init_setup_model=False,
                      **hp.ppo_kwargs())
    model.observation_space, model.action_space = observation_space, gym.spaces.Discrete(2)
    model.n_envs = n_envs
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model._setup_model()
    model.rollout_buffer = None  # the trainer keeps its own (T, N) tensors
    # SB3's Adam (eps 1e-5), fused: one kernel per step instead of about ten per parameter;
    # its state loads into SB3's own Adam.
    policy = model.policy
    policy.optimizer = torch.optim.Adam(policy.parameters(), lr=hp.learning_rate, eps=ADAM_EPS,
                                        fused=True)
    return model


def train_torch(config: TrainConfig, *, process: WorkerProcess | None = None) -> TrainResult:
    """Train PPO or MaskablePPO on ``config.n_envs`` replay episodes of
    ``config.replay_store`` at once, with ``config.trainer``'s update (``batched``:
    autograd's; ``compiled``: the flat step, compiled before the clock starts). The run
    folder holds what the SB3 trainer's does: ``<run>.zip`` (an SB3 model), ``<run>.json``
    (``training.record``), ``monitor/`` and ``logs/`` (the curves), ``eval/evaluations.csv``
    and ``eval/best_model.zip`` with ``eval_freq`` > 0 and SB3's checkpoints with
    ``checkpoint_freq`` > 0. A rollout is
    ``n_steps`` vector steps, so a run takes ``total_timesteps`` rounded up to whole
    rollouts of ``n_steps * n_envs`` steps. A finished run of the same name is replaced only
    with ``overwrite``. A pipelined or split run's second process runs in ``process`` where
    one was started earlier (``worker_process``; its starter ends it), else in one started
    (and ended) here.
    """
    if config.trainer not in TORCH_TRAINERS:
        raise ValueError(f"train_torch runs {TORCH_TRAINERS}, not {config.trainer!r}: train "
                         "with agents.experiments.training.train")
    threads_before = torch.get_num_threads()
    # The second process starts first: it imports and builds its environments while this
    # process builds the model and loads (or compiles) the step. Pipelined, this process
    # steps no environment of its own (only the evaluation's); split, half of them.
    with _second_process(config, process) as helper:
        own = {"pipelined": 0, "split": halves(config.n_envs)[0]}.get(config.run_schedule,
                                                                       config.n_envs)
        envs = make_envs(*envs_arguments(config, own)) if own else None
        eval_envs = None
        try:
            if config.eval_freq > 0:
                eval_envs = make_envs(*envs_arguments(config, config.eval_episodes))
            torch.set_num_threads(config.torch_threads)
            with run_lock(config.run_dir):  # one run writes a folder at a time
                return _train(config, envs, eval_envs, fresh_run_dir(config), helper)
        finally:
            torch.set_num_threads(threads_before)
            for opened in (envs, eval_envs):
                if opened is not None:
                    opened.close()


@contextlib.contextmanager
def _second_process(config: TrainConfig, process: WorkerProcess | None
                    ) -> Iterator[RolloutWorker | SplitHelper | None]:
    """The run's second process (``config.run_schedule``'s: a rollout worker or the split
    schedule's helper), given its work (in ``process``, or a process started now; None
    where the run is sequential); ended on leaving."""
    if not config.second_process:
        yield None
        return
    hp, n_features = config.hp, len(OBSERVATIONS[config.observation])
    layout = FlatLayout.mlp_pair(n_features, hp.net_arch)
    masked = config.algo == "maskable_ppo"
    started = process or WorkerProcess()  # ended here only where started here
    helper: RolloutWorker | SplitHelper
    if config.run_schedule == "split":
        plan = Plan.of(layout, hp, masked, config.n_envs, config.seed)
        helper = SplitHelper(plan, envs_arguments(config, len(plan.envs_of(1))),
                             _rollouts(config), config.torch_threads, process=started)
    else:
        helper = RolloutWorker(envs_arguments(config, config.n_envs), layout, hp,
                               config.n_envs, n_features, masked, config.seed,
                               config.torch_threads, process=started)
    try:
        with helper:
            yield helper
    finally:
        if process is None:
            started.end()


def _rollouts(config: TrainConfig) -> int:
    """The run's rollouts: ``total_timesteps`` rounded up to whole rollouts."""
    return -(-config.total_timesteps // (config.hp.n_steps * config.n_envs))


def _train(config: TrainConfig, envs: Any, eval_envs: Any, run_dir: Path,
           helper: RolloutWorker | SplitHelper | None) -> TrainResult:
    """The training of :func:`train_torch`: the model, the update, the loop (here, on
    ``envs``, overlapped with the started rollout worker, or split with the started
    helper), the saved model and settings. The settings' ``update`` block holds the
    schedule and the setup: its seconds, and its ``timeline`` (``time.time`` when the
    second process started, had imported its code and was ready, the model was built, the
    step loaded and the clock started; and the CPU seconds each process had spent by then,
    from its start)."""
    space = observation_space(config.observation)
    if envs is not None and envs.single_observation_space != space:
        raise ValueError(f"the replay environment's observations are "
                         f"{envs.single_observation_space}, observation {config.observation} "
                         f"names {space}")
    hp = config.hp
    model = build_model(config.algo, space, config.n_envs, hp, config.seed, config.device)
    timeline = {"model_built": time.time()}
    policy, masked = model.policy, config.algo == "maskable_ppo"
    buf = Rollout(hp.n_steps, config.n_envs, space.shape[0], hp.gamma, config.device)
    updater = make_update(config, policy, hp, masked)
    setup: dict[str, Any] = {"schedule": config.run_schedule, "timeline": timeline}
    if helper is not None and updater.layout.shapes != helper.layout.shapes:
        raise ValueError(f"the policy's parameters have shapes {updater.layout.shapes}, "
                         f"the second process's {helper.layout.shapes}")
    _warm(updater, buf, setup, config.progress_bar)
    if helper is not None:
        timeline.update(helper.ready(space))
        setup["setup_seconds"] = round(time.perf_counter() - helper.started, 2)
    record = Recorder(config, run_dir, model, updater, eval_envs)
    timeline.update(clock_started=time.time(), main_cpu_seconds=time.process_time())
    if isinstance(helper, SplitHelper):
        helper.start(updater.state, updater.step, updater.compiled)
        half = Half(helper.plan, 0, envs, updater.halves, (updater.state, updater.step))
        steps, seconds, timer = split_loop(helper, half, _rollouts(config), record)
    elif isinstance(helper, RolloutWorker):
        steps, seconds, timer = overlapped_loop(helper, updater, hp, _rollouts(config),
                                                stream_seeds(config.seed)[1], record)
    else:
        steps, seconds, timer = _loop(config, envs, policy, buf, updater, record)
    record.close()
    updater.finish()
    model.num_timesteps = steps
    model_path = run_dir / f"{config.name}.zip"
    model.save(model_path)
    cpu = timer.pop("cpu")
    path = write_record(config, num_timesteps=steps, seconds=seconds, cpu_seconds=cpu,
                        parts=timer, update=setup)
    return TrainResult(model_path, path, run_dir, seconds)


def _warm(updater: Any, buf: Rollout, setup: dict[str, Any], announce: bool) -> None:
    """Load the compiled update from the user's cache, or compile it there (the first run
    on a machine: said first on standard error when ``announce``), or fall back, before
    the clock; its seconds, outcome and end (``time.time``, in the setup's timeline)."""
    setup["compile_seconds"] = round(updater.warm(buf, announce_compile if announce else None),
                                     2)
    setup["timeline"]["step_loaded"] = time.time()
    setup["compiled"] = updater.compiled  # False where compiling fell back
    setup["compile_built"] = getattr(updater, "built", False)  # False: loaded from the cache


def _loop(config: TrainConfig, envs: Any, policy: Any, buf: Rollout, updater: Any,
          record: Record) -> tuple[int, float, dict[str, float]]:
    """Rollouts and updates one after the other in this process (one generator draws the
    actions and the minibatches); the steps, seconds and time split."""
    masked = config.algo == "maskable_ppo"
    gen = torch.Generator(device=config.device).manual_seed(config.seed)
    forward = policy_forward(policy)
    returns = np.zeros(config.n_envs)
    timer = {"env": 0.0, "rollout": 0.0, "update": 0.0}
    obs, _ = envs.reset(seed=config.seed)
    steps, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while steps < config.total_timesteps:
        obs, ended = collect(envs, forward, obs, buf, masked, gen, returns, timer)
        with torch.inference_mode():
            _, last = forward(torch.as_tensor(obs, device=config.device), None)
        stats = update_on(updater, buf, last, gen, timer)
        steps += buf.n_steps * config.n_envs
        record(steps, ended, stats)
    timer["rollout"] -= timer["env"]  # the rollouts' own work: forward passes, copies
    timer["cpu"] = time.process_time() - cpu_start
    return steps, time.perf_counter() - start, timer


def make_update(config: TrainConfig, policy: Any, hp: Hyperparameters, masked: bool) -> Any:
    """The update the run's trainer and schedule run: autograd's (``batched``), the flat
    step's (``compiled``), or the flat step in two halves (the ``split`` schedule)."""
    if config.run_schedule == "split":
        return SplitUpdate(policy, hp, masked)
    if config.trainer == "compiled":
        return FlatUpdate(policy, hp, masked)
    return AutogradUpdate(policy, hp, masked)


__all__ = ["build_model", "envs_arguments", "make_update", "train_torch"]
