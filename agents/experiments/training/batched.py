"""PPO and MaskablePPO trained on the vector replay environment, batched end to end in torch.

stable-baselines3 steps a ``VecEnv`` one vector step at a time through Python objects (a
forward pass, a ``RolloutBuffer`` write and a list of ``info`` dicts per step) and updates on
minibatches of tens of rows; on the replay environment, which steps a million environment
steps a second at N = 1,024 (``ballad_env.replay.vector``), that overhead is nearly all of a
run. :func:`train_batched` keeps the whole loop on (N,)-shaped arrays: the rollout (one
forward pass of all N environments per step, written into preallocated tensors), the
advantages (GAE over the (T, N) rollout), and the updates (minibatches of thousands of rows).

The network *is* SB3's: the algorithm's own ``MlpPolicy`` (``ActorCriticPolicy`` or
sb3-contrib's ``MaskableActorCriticPolicy``, the same layers, orthogonal initialisation and
Adam), built by SB3 without an environment as :mod:`agents.policy_zip` rebuilds it, and
saved with SB3's ``save``. So a policy trained here is an ordinary SB3 model: it loads with
the safe loader (``agents.policy.load_policy``), plays the live environment as an agent,
``compare`` and SB3's ``evaluate_policy``. The loss is SB3's PPO loss (clipped surrogate,
entropy bonus, unclipped value loss, advantages normalised per minibatch, gradient norm
clipped), with MaskablePPO's masked logits and masked entropy for ``maskable-ppo``.

``docs/training.md`` gives the measured speed against SB3, the learning curves and why the
trainer is written here rather than on skrl or TorchRL.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.experiments.lattice_build import store_settings
from agents.experiments.training.bounds import check_training_sizes
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.fused import AutogradUpdate, FusedUpdate
from agents.experiments.training.pipelined import RolloutWorker, overlapped_loop, stream_seeds
from agents.experiments.training.ppo_batches import (
    PPOHyperparameters,
    Rollout,
    gae,
    policy_outputs,
)
from agents.experiments.training.rollouts import INFO_KEYS, Forward, collect, make_envs
from agents.experiments.training.run_folder import run_lock
from agents.experiments.training.run_records import Curves, Record, Recorder, greedy_episodes
from agents.experiments.training.sb3 import fresh_run_dir, versions
from agents.policy import ALGORITHM_CLASSES
from ballad_env.observation import OBSERVATIONS, check_version
from ballad_env.settings import Settings

#: The algorithms by the names ``train_batched`` takes (the SB3 path's names work too), and
#: the name the run's settings JSON records (``agents.policy.ALGORITHM_CLASSES``).
BATCHED_ALGOS = {"maskable-ppo": "maskable_ppo", "maskable_ppo": "maskable_ppo", "ppo": "ppo"}
#: The trainer's name on the command line (``ballad-env train --trainer batched``).
TRAINER = "batched"
#: The trainers this loop runs, by their names on the command line: ``batched`` updates the
#: SB3 policy under autograd (``ppo_batches.ppo_update``), ``compiled`` with the fused,
#: compiled minibatch step (``fused.FusedUpdate``, ``docs/training.md``, "Speed").
TORCH_TRAINERS = (TRAINER, "compiled")
#: torch intra-op threads on a CPU when ``threads`` is None: one. On the 2-core machine two
#: threads made the forward and backward passes of the 64-64 MLP several times slower
#: (``docs/training.md``, "Threads").
DEFAULT_THREADS = 1


def algo_name(algo: str) -> str:
    """The SB3 name (``maskable_ppo``, ``ppo``) of an algorithm the trainer runs."""
    if algo not in BATCHED_ALGOS:
        raise ValueError(f"the batched trainer runs {sorted(set(BATCHED_ALGOS))}, not {algo!r}: "
                         "train A2C or DQN with --trainer sb3")
    return BATCHED_ALGOS[algo]


def build_model(algo: str, observation_space: gym.spaces.Box, n_envs: int,
                hp: PPOHyperparameters, seed: int, device: str) -> Any:
    """The SB3 algorithm object whose ``policy`` the trainer trains and whose ``save`` writes
    the model zip: built without an environment (as ``agents.policy_zip`` rebuilds it), its
    weights initialised from ``seed`` without touching torch's global generator."""
    algorithm = ALGORITHM_CLASSES[algo]
    model = algorithm("MlpPolicy", env=None, device=device, seed=None,
                      policy_kwargs={"net_arch": list(hp.net_arch)}, _init_setup_model=False,
                      **hp.sb3_kwargs())
    model.observation_space, model.action_space = observation_space, gym.spaces.Discrete(2)
    model.n_envs = n_envs
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model._setup_model()
    model.rollout_buffer = None  # the trainer keeps its own (T, N) tensors
    # SB3's Adam (eps 1e-5), fused: one kernel per step instead of ~10 per parameter (52
    # against 198 us a step on this machine); its state loads into SB3's own Adam.
    policy = model.policy
    policy.optimizer = torch.optim.Adam(policy.parameters(), lr=hp.learning_rate, eps=1e-5,
                                        fused=True)
    return model


@dataclass(frozen=True)
class BatchedRun:
    """A batched run's options, saved in its settings JSON as ``config``."""

    trainer: str
    algo: str
    replay_store: str
    datasets: list[str]
    seeds: list[int] | None
    settings: dict[str, Any]
    observation: str
    n_envs: int
    total_timesteps: int
    seed: int
    device: str
    torch_threads: int
    eval_freq: int
    eval_episodes: int
    eval_seed: int
    output_dir: str
    run_name: str
    overlap: bool
    checkpoint_freq: int


def write_settings(run: BatchedRun, hp: PPOHyperparameters, num_timesteps: int,
                   seconds: float, timer: Mapping[str, float], run_dir: Path,
                   update: Mapping[str, Any] | None = None) -> Path:
    """The run's settings JSON, laid out as the SB3 path's (``training.sb3.settings_dict``), with
    the time split of the run (environment steps, the rest of the rollouts, updates; ``cpu``:
    the CPU seconds of the training, a worker's included) and ``update`` (whether the step
    ran compiled, the seconds compiling and starting the worker took before the clock)."""
    path = run_dir / f"{run.run_name}.json"
    record = {"run_name": run.run_name, "algo": run.algo, "trainer": run.trainer,
              "config": asdict(run), "algorithm_kwargs": asdict(hp),
              "observation_features": list(OBSERVATIONS[run.observation]),
              "num_timesteps": int(num_timesteps), "train_seconds": round(seconds, 2),
              "cpu_seconds": round(timer.get("cpu", 0.0), 2),
              "seconds": {k: round(v, 3) for k, v in timer.items() if k != "cpu"},
              "update": dict(update or {}),
              "versions": versions(), "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _run(trainer: str, algo: str, store: str | Path, settings: Settings, names: Sequence[str],
         seeds: Sequence[int] | None, observation: str, n_envs: int, total_timesteps: int,
         seed: int, device: str, threads: int, eval_freq: int, eval_episodes: int,
         eval_seed: int, output_dir: str | Path, run_name: str | None, overlap: bool | None,
         checkpoint_freq: int) -> BatchedRun:
    """The run's options, checked, with its name (the SB3 path's, ``batched-`` before it)."""
    check_version(observation)
    if trainer not in TORCH_TRAINERS:
        raise ValueError(f"unknown trainer {trainer!r}: use one of {TORCH_TRAINERS}")
    if n_envs < 1 or total_timesteps < 1 or threads < 1 or eval_episodes < 1:
        raise ValueError("n_envs, total_timesteps, threads and eval_episodes must be positive")
    check_training_sizes({"n_envs": n_envs, "total_timesteps": total_timesteps,
                          "torch_threads": threads, "eval_episodes": eval_episodes,
                          "eval_freq": eval_freq})
    if eval_freq < 0 or checkpoint_freq < 0:
        raise ValueError(f"eval_freq and checkpoint_freq must be >= 0 (0: never), got "
                         f"{eval_freq} and {checkpoint_freq}")
    names = list(names)
    config = TrainConfig(algo=algo, datasets=tuple(names), settings=settings,
                         observation=observation, replay_store=str(store), seed=seed,
                         total_timesteps=total_timesteps, output_dir=str(output_dir))
    name = run_name or f"{trainer}-{config.name}"
    return BatchedRun(trainer, algo, str(store), names, None if seeds is None else list(seeds),
                      settings.to_dict(), observation, n_envs, total_timesteps, seed, device,
                      threads, eval_freq, eval_episodes, eval_seed, str(output_dir), name,
                      _overlap(trainer, device, overlap), checkpoint_freq)


def _overlap(trainer: str, device: str, overlap: bool | None) -> bool:
    """Whether a worker process plays the rollouts: by default for ``compiled`` on a CPU
    (the worker's buffers and forward passes are on the CPU)."""
    if overlap is None:
        return trainer == "compiled" and device == "cpu"
    if overlap and device != "cpu":
        raise ValueError(f"the rollout worker runs on the CPU: on device {device!r} train "
                         "with overlap=False (--no-overlap)")
    return overlap


def train_batched(store: str | Path, *, algo: str = "maskable-ppo",
                  datasets: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                  settings: Settings | None = None, observation: str = "v0",
                  reward: str | None = None, n_envs: int = 1024,
                  total_timesteps: int = 1_000_000, seed: int = 0, device: str = "cpu",
                  threads: int | None = None, hyperparameters: Mapping[str, Any] | None = None,
                  eval_freq: int = 0, output_dir: str | Path = "results/policies",
                  run_name: str | None = None, eval_episodes: int = 256,
                  eval_seed: int = 100_000, overwrite: bool = False,
                  trainer: str = TRAINER, overlap: bool | None = None,
                  checkpoint_freq: int = 0) -> Path:
    """Train PPO or MaskablePPO on ``n_envs`` replay episodes of ``store`` at once; returns
    the run folder, which holds ``<run>.zip`` (an SB3 model), ``<run>.json`` (settings,
    ``num_timesteps``, ``train_seconds``), ``monitor/`` and ``logs/`` (the curves) and, with
    ``eval_freq`` > 0, ``eval/evaluations.csv`` (greedy episodes every ``eval_freq`` steps).

    ``settings`` picks the stored setting (None: the store's only one); ``reward`` replaces
    its reward (default ``cost``). ``hyperparameters`` override ``PPOHyperparameters``'
    fields. ``trainer`` picks the update (``TORCH_TRAINERS``: ``compiled`` runs the fused
    step, compiled before the clock starts); ``overlap`` plays the next rollout in a worker
    process while this one updates (``training.pipelined``; None: for ``compiled`` on a CPU).
    ``checkpoint_freq`` > 0 saves the model every that many steps as SB3's checkpoints
    (``checkpoints/<run>_<steps>_steps.zip``). ``threads`` sets torch's intra-op threads for
    the run (None: 1 on a CPU). A rollout is ``n_steps`` vector steps, so a run takes
    ``total_timesteps`` rounded up to whole rollouts of ``n_steps * n_envs`` steps. A
    finished run of the same name is replaced only with ``overwrite``.
    """
    algo = algo_name(algo)
    hp = PPOHyperparameters.from_mapping(hyperparameters or {})
    settings = store_settings(store, settings, reward)
    envs = make_envs(store, n_envs, settings, datasets, seeds, observation)
    eval_envs = None
    threads_before = torch.get_num_threads()
    try:
        names = datasets if datasets is not None else sorted(
            {d for d, _ in envs.unwrapped.cells})
        run = _run(trainer, algo, store, settings, names, seeds, observation, n_envs,
                   total_timesteps, seed, device, threads or DEFAULT_THREADS, eval_freq,
                   eval_episodes, eval_seed, output_dir, run_name, overlap, checkpoint_freq)
        config = TrainConfig(algo=run.algo, run_name=run.run_name, output_dir=run.output_dir,
                             overwrite=overwrite)
        if eval_freq > 0:
            eval_envs = make_envs(store, eval_episodes, settings, datasets, seeds, observation)
        torch.set_num_threads(run.torch_threads)
        with run_lock(config.run_dir):  # one run writes a folder at a time
            return _train(run, hp, envs, eval_envs, fresh_run_dir(config),
                          (store, n_envs, settings, datasets, seeds, observation))
    finally:
        torch.set_num_threads(threads_before)
        envs.close()
        if eval_envs is not None:
            eval_envs.close()


def _train(run: BatchedRun, hp: PPOHyperparameters, envs: Any, eval_envs: Any,
           run_dir: Path, envs_args: tuple[Any, ...]) -> Path:
    """The training of :func:`train_batched`: the model, the update, the loop (here or
    overlapped with a rollout worker: ``envs_args`` are its ``make_envs`` arguments), the
    saved model and settings."""
    space = envs.single_observation_space
    if space.shape != (len(OBSERVATIONS[run.observation]),):
        raise ValueError(f"the replay environment's observations have shape {space.shape}, "
                         f"observation {run.observation} names "
                         f"{len(OBSERVATIONS[run.observation])} features")
    model = build_model(run.algo, space, run.n_envs, hp, run.seed, run.device)
    policy, masked = model.policy, run.algo == "maskable_ppo"
    buf = Rollout(hp.n_steps, run.n_envs, space.shape[0], hp.gamma, run.device)
    updater = make_update(run.trainer, policy, hp, masked)
    setup: dict[str, Any] = {}
    if not run.overlap:
        _warm(updater, buf, setup)
        record = Recorder(run, run_dir, model, updater, masked, eval_envs)
        steps, seconds, timer = _loop(run, hp, envs, policy, masked, buf, updater, record)
    else:
        tick = time.perf_counter()
        rollouts = -(-run.total_timesteps // (hp.n_steps * run.n_envs))
        # The worker imports and builds its environments while this process compiles.
        with RolloutWorker(envs_args, updater.layout, hp, run.n_envs, space.shape[0], masked,
                           run.seed, run.torch_threads) as worker:
            _warm(updater, buf, setup)
            worker.ready()
            setup["setup_seconds"] = round(time.perf_counter() - tick, 2)
            record = Recorder(run, run_dir, model, updater, masked, eval_envs)
            steps, seconds, timer = overlapped_loop(worker, updater, hp, rollouts,
                                                    stream_seeds(run.seed)[1], record)
    updater.finish()
    model.num_timesteps = steps
    model.save(run_dir / f"{run.run_name}.zip")
    write_settings(run, hp, steps, seconds, timer, run_dir, setup)
    return run_dir


def _warm(updater: Any, buf: Rollout, setup: dict[str, Any]) -> None:
    """Compile the update (or fall back) before the clock; its seconds and outcome."""
    setup["compile_seconds"] = round(updater.warm(buf), 2)
    setup["compiled"] = updater.compiled  # False where compiling fell back
    setup["compile_built"] = getattr(updater, "built", False)  # False: loaded from the cache


def _loop(run: BatchedRun, hp: PPOHyperparameters, envs: Any, policy: Any, masked: bool,
          buf: Rollout, updater: Any, record: Record) -> tuple[int, float, dict[str, float]]:
    """Rollouts and updates one after the other in this process (one generator draws the
    actions and the minibatches); the steps, seconds and time split."""
    gen = torch.Generator(device=run.device).manual_seed(run.seed)
    forward = functools.partial(policy_outputs, policy)
    returns = np.zeros(run.n_envs)
    timer = {"env": 0.0, "rollout": 0.0, "update": 0.0}
    obs, _ = envs.reset(seed=run.seed)
    steps, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while steps < run.total_timesteps:
        obs, ended = collect(envs, forward, obs, buf, masked, gen, returns, timer)
        with torch.inference_mode():
            _, last = forward(torch.as_tensor(obs, device=run.device), None)
        advantages, targets = gae(buf, last, hp.gae_lambda)
        tick = time.perf_counter()
        stats = updater.update(buf, advantages, targets, gen)
        timer["update"] += time.perf_counter() - tick
        steps += buf.n_steps * run.n_envs
        record(steps, ended, stats)
    timer["rollout"] -= timer["env"]  # the rollouts' own work: forward passes, copies
    timer["cpu"] = time.process_time() - cpu_start
    return steps, time.perf_counter() - start, timer


def make_update(trainer: str, policy: Any, hp: PPOHyperparameters, masked: bool) -> Any:
    """The update ``trainer`` runs: autograd's (``batched``) or the fused step's."""
    if trainer == "compiled":
        return FusedUpdate(policy, hp, masked)
    return AutogradUpdate(policy, hp, masked)


__all__ = ["BATCHED_ALGOS", "DEFAULT_THREADS", "INFO_KEYS", "TORCH_TRAINERS", "TRAINER",
           "BatchedRun", "Forward",
           "Curves", "algo_name", "build_model", "collect", "greedy_episodes", "make_envs",
           "make_update", "train_batched", "write_settings"]
