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

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import ballad_env
from agents.experiments.lattice_build import store_settings
from agents.experiments.training.bounds import check_training_sizes
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.ppo_batches import (
    PPOHyperparameters,
    Rollout,
    gae,
    policy_outputs,
    ppo_update,
)
from agents.experiments.training.run_folder import run_lock
from agents.experiments.training.sb3 import fresh_run_dir, versions
from agents.experiments.training.vec_adapter import valid
from agents.policy import ALGORITHM_CLASSES
from ballad_env.observation import OBSERVATIONS, check_version
from ballad_env.settings import Settings

#: The algorithms by the names ``train_batched`` takes (the SB3 path's names work too), and
#: the name the run's settings JSON records (``agents.policy.ALGORITHM_CLASSES``).
BATCHED_ALGOS = {"maskable-ppo": "maskable_ppo", "maskable_ppo": "maskable_ppo", "ppo": "ppo"}
#: The trainer's name on the command line (``ballad-env train --trainer batched``).
TRAINER = "batched"
#: The ``info`` key the trainer reads (each episode's final test cost, for the curves).
INFO_KEYS = ("test_cost",)
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


def make_envs(store: str | Path, n_envs: int, settings: Settings, datasets: Sequence[str] | None,
              seeds: Sequence[int] | None, observation: str) -> Any:
    """``n_envs`` replay episodes stepped together (``ReplayVectorEnv``, same-step autoreset,
    only the final test cost in ``info``)."""
    return gym.make_vec(ballad_env.REPLAY_ENV_ID, num_envs=n_envs,
                        vectorization_mode="vector_entry_point", store=str(store),
                        datasets=None if datasets is None else list(datasets),
                        seeds=None if seeds is None else list(seeds), settings=settings,
                        observation=observation, autoreset_mode=AutoresetMode.SAME_STEP,
                        info_keys=INFO_KEYS)


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


@dataclass
class Curves:
    """What a run writes as it learns: one monitor row per rollout (the mean return and final
    test cost of the episodes that ended in it; ``l`` its steps, so
    ``policy_runs.read_monitor`` counts the steps) and SB3-style ``logs/progress.csv``."""

    run_dir: Path
    returns: np.ndarray
    start: float

    def open(self) -> None:
        (self.run_dir / "monitor").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        head = json.dumps({"t_start": self.start, "env_id": ballad_env.REPLAY_ENV_ID,
                           "rows": "one per rollout: means over the episodes that ended"})
        (self.run_dir / "monitor" / "batched.monitor.csv").write_text(
            f"#{head}\nr,l,t,test_cost,episodes\n")

    def rollout(self, steps: int, ended: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
        """Append the rollout's row; ``ended`` holds (returns, test costs) per vector step."""
        returns = np.concatenate([r for r, _ in ended]) if ended else np.zeros(0)
        costs = np.concatenate([c for _, c in ended]) if ended else np.zeros(0)
        row = {"r": float(returns.mean()) if returns.size else float("nan"), "l": steps,
               "t": round(time.time() - self.start, 6),
               "test_cost": float(costs.mean()) if costs.size else float("nan"),
               "episodes": int(returns.size)}
        with (self.run_dir / "monitor" / "batched.monitor.csv").open("a") as out:
            out.write(",".join(str(v) for v in row.values()) + "\n")
        return row

    def progress(self, row: Mapping[str, float]) -> None:
        path = self.run_dir / "logs" / "progress.csv"
        new = not path.exists()
        with path.open("a") as out:
            if new:
                out.write(",".join(row) + "\n")
            out.write(",".join(f"{v:.6g}" for v in row.values()) + "\n")


def collect(envs: Any, policy: Any, obs: np.ndarray, buf: Rollout, masked: bool,
            gen: torch.Generator, returns: np.ndarray, timer: dict[str, float]
            ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """One rollout of ``buf.n_steps`` vector steps into ``buf``; the next observations and
    the (returns, final test costs) of the episodes that ended. A truncated episode's
    reward gains ``gamma * V(final observation)``, as SB3 bootstraps it."""
    ended: list[tuple[np.ndarray, np.ndarray]] = []
    device = buf.obs.device
    for t in range(buf.n_steps):
        tick = time.perf_counter()
        masks = envs.unwrapped.action_masks()
        obs_t = torch.as_tensor(obs, device=device)
        mask_t = torch.as_tensor(masks, device=device)
        with torch.inference_mode():
            logits, values = policy_outputs(policy, obs_t, mask_t if masked else None)
            p_lr = torch.softmax(logits, dim=1)[:, 1]
            actions = (torch.rand(p_lr.shape, generator=gen, device=device) < p_lr).long()
            logp = torch.log_softmax(logits, dim=1).gather(1, actions[:, None])[:, 0]
        chosen = actions.cpu().numpy()
        if not masked:  # the environment plays the other action where this one is spent
            chosen = valid(chosen, masks)
        tock = time.perf_counter()
        obs_next, rewards, terminated, truncated, info = envs.step(chosen)
        timer["env"] += time.perf_counter() - tock
        rewards = rewards.astype(np.float32)
        dones = terminated | truncated
        returns += rewards
        cut = np.flatnonzero(truncated & ~terminated)
        if cut.size:
            final = torch.as_tensor(np.stack(info["final_obs"][cut]), device=device)
            with torch.inference_mode():
                _, tail = policy_outputs(policy, final, None)
            rewards[cut] += buf.gamma * tail.cpu().numpy()
        if dones.any():
            done = np.flatnonzero(dones)
            ended.append((returns[done].copy(), info["final_info"]["test_cost"][done]))
            returns[done] = 0.0
        buf.write(t, obs_t, mask_t, actions, logp, values, rewards, dones)
        obs = obs_next
        timer["rollout"] += time.perf_counter() - tick
    return obs, ended


def greedy_episodes(policy: Any, envs: Any, masked: bool, seed: int) -> tuple[float, float]:
    """Mean return and final test cost of one greedy episode in each of ``envs``'s
    environments, reset with ``seed`` (the same episodes at every evaluation)."""
    obs, _ = envs.reset(seed=seed)
    n = envs.num_envs
    returns, costs = np.zeros(n), np.full(n, np.nan)
    running = np.ones(n, dtype=bool)
    device = next(policy.parameters()).device
    while running.any():
        masks = envs.unwrapped.action_masks()
        with torch.inference_mode():
            logits, _ = policy_outputs(policy, torch.as_tensor(obs, device=device),
                                       torch.as_tensor(masks, device=device) if masked else None)
        actions = valid(logits.argmax(dim=1).cpu().numpy(), masks)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        returns[running] += rewards[running]
        done = running & (terminated | truncated)
        if done.any():
            costs[done] = info["final_info"]["test_cost"][done]
            running &= ~done
    return float(returns.mean()), float(costs.mean())


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


def write_settings(run: BatchedRun, hp: PPOHyperparameters, num_timesteps: int,
                   seconds: float, timer: Mapping[str, float], run_dir: Path) -> Path:
    """The run's settings JSON, laid out as the SB3 path's (``training.sb3.settings_dict``), with
    the time split of the run (environment steps, the rest of the rollouts, updates)."""
    path = run_dir / f"{run.run_name}.json"
    record = {"run_name": run.run_name, "algo": run.algo, "trainer": TRAINER,
              "config": asdict(run), "algorithm_kwargs": asdict(hp),
              "observation_features": list(OBSERVATIONS[run.observation]),
              "num_timesteps": int(num_timesteps), "train_seconds": round(seconds, 2),
              "seconds": {k: round(v, 3) for k, v in timer.items()},
              "versions": versions(), "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def _run(algo: str, store: str | Path, settings: Settings, names: Sequence[str],
         seeds: Sequence[int] | None, observation: str, n_envs: int, total_timesteps: int,
         seed: int, device: str, threads: int, eval_freq: int, eval_episodes: int,
         eval_seed: int, output_dir: str | Path, run_name: str | None) -> BatchedRun:
    """The run's options, checked, with its name (the SB3 path's, ``batched-`` before it)."""
    check_version(observation)
    if n_envs < 1 or total_timesteps < 1 or threads < 1 or eval_episodes < 1:
        raise ValueError("n_envs, total_timesteps, threads and eval_episodes must be positive")
    check_training_sizes({"n_envs": n_envs, "total_timesteps": total_timesteps,
                          "torch_threads": threads, "eval_episodes": eval_episodes,
                          "eval_freq": eval_freq})
    if eval_freq < 0:
        raise ValueError(f"eval_freq must be >= 0 (0: never), got {eval_freq}")
    names = list(names)
    config = TrainConfig(algo=algo, datasets=tuple(names), settings=settings,
                         observation=observation, replay_store=str(store), seed=seed,
                         total_timesteps=total_timesteps, output_dir=str(output_dir))
    name = run_name or f"{TRAINER}-{config.name}"
    return BatchedRun(TRAINER, algo, str(store), names, None if seeds is None else list(seeds),
                      settings.to_dict(), observation, n_envs, total_timesteps, seed, device,
                      threads, eval_freq, eval_episodes, eval_seed, str(output_dir), name)


def train_batched(store: str | Path, *, algo: str = "maskable-ppo",
                  datasets: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                  settings: Settings | None = None, observation: str = "v0",
                  reward: str | None = None, n_envs: int = 1024,
                  total_timesteps: int = 1_000_000, seed: int = 0, device: str = "cpu",
                  threads: int | None = None, hyperparameters: Mapping[str, Any] | None = None,
                  eval_freq: int = 0, output_dir: str | Path = "results/policies",
                  run_name: str | None = None, eval_episodes: int = 256,
                  eval_seed: int = 100_000, overwrite: bool = False) -> Path:
    """Train PPO or MaskablePPO on ``n_envs`` replay episodes of ``store`` at once; returns
    the run folder, which holds ``<run>.zip`` (an SB3 model), ``<run>.json`` (settings,
    ``num_timesteps``, ``train_seconds``), ``monitor/`` and ``logs/`` (the curves) and, with
    ``eval_freq`` > 0, ``eval/evaluations.csv`` (greedy episodes every ``eval_freq`` steps).

    ``settings`` picks the stored setting (None: the store's only one); ``reward`` replaces
    its reward (default ``cost``). ``hyperparameters`` override ``PPOHyperparameters``'
    fields. ``threads`` sets torch's intra-op threads for the run (None: 1 on a CPU). A
    rollout is ``n_steps`` vector steps, so a run takes ``total_timesteps`` rounded up to
    whole rollouts of ``n_steps * n_envs`` steps. A finished run of the same name is
    replaced only with ``overwrite``.
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
        run = _run(algo, store, settings, names, seeds, observation, n_envs, total_timesteps,
                   seed, device, threads or DEFAULT_THREADS, eval_freq, eval_episodes,
                   eval_seed, output_dir, run_name)
        config = TrainConfig(algo=run.algo, run_name=run.run_name, output_dir=run.output_dir,
                             overwrite=overwrite)
        if eval_freq > 0:
            eval_envs = make_envs(store, eval_episodes, settings, datasets, seeds, observation)
        torch.set_num_threads(run.torch_threads)
        with run_lock(config.run_dir):  # one run writes a folder at a time
            return _train(run, hp, envs, eval_envs, fresh_run_dir(config))
    finally:
        torch.set_num_threads(threads_before)
        envs.close()
        if eval_envs is not None:
            eval_envs.close()


def _train(run: BatchedRun, hp: PPOHyperparameters, envs: Any, eval_envs: Any,
           run_dir: Path) -> Path:
    """The training loop of :func:`train_batched`: rollouts, GAE, updates, curves, save."""
    space = envs.single_observation_space
    if space.shape != (len(OBSERVATIONS[run.observation]),):
        raise ValueError(f"the replay environment's observations have shape {space.shape}, "
                         f"observation {run.observation} names "
                         f"{len(OBSERVATIONS[run.observation])} features")
    model = build_model(run.algo, space, run.n_envs, hp, run.seed, run.device)
    policy, masked = model.policy, run.algo == "maskable_ppo"
    gen = torch.Generator(device=run.device).manual_seed(run.seed)
    buf = Rollout(hp.n_steps, run.n_envs, space.shape[0], hp.gamma, run.device)
    curves = Curves(run_dir, np.zeros(run.n_envs), time.time())
    curves.open()
    timer = {"env": 0.0, "rollout": 0.0, "update": 0.0}
    obs, _ = envs.reset(seed=run.seed)
    steps, next_eval, start = 0, run.eval_freq, time.perf_counter()
    while steps < run.total_timesteps:
        obs, ended = collect(envs, policy, obs, buf, masked, gen, curves.returns, timer)
        with torch.inference_mode():
            _, last = policy_outputs(policy, torch.as_tensor(obs, device=run.device), None)
        advantages, targets = gae(buf, last, hp.gae_lambda)
        tick = time.perf_counter()
        stats = ppo_update(policy, buf, advantages, targets, hp, masked, gen)
        timer["update"] += time.perf_counter() - tick
        steps += buf.n_steps * run.n_envs
        row = curves.rollout(buf.n_steps * run.n_envs, ended)
        curves.progress({"timesteps": steps, "seconds": time.perf_counter() - start,
                         "ep_rew_mean": row["r"], "test_cost_mean": row["test_cost"], **stats})
        if eval_envs is not None and steps >= next_eval:
            _write_eval(run_dir, steps, *greedy_episodes(policy, eval_envs, masked,
                                                         run.eval_seed))
            next_eval += run.eval_freq
    seconds = time.perf_counter() - start
    timer["rollout"] -= timer["env"]  # the rollouts' own work: forward passes, copies
    model.num_timesteps = steps
    model.save(run_dir / f"{run.run_name}.zip")
    write_settings(run, hp, steps, seconds, timer, run_dir)
    return run_dir


def _write_eval(run_dir: Path, steps: int, mean_return: float, mean_cost: float) -> None:
    """A row of ``eval/evaluations.csv``, the SB3 path's columns."""
    table = run_dir / "eval" / "evaluations.csv"
    table.parent.mkdir(parents=True, exist_ok=True)
    new = not table.exists()
    with table.open("a") as out:
        if new:
            out.write("timesteps,mean_return,mean_test_cost\n")
        out.write(f"{steps},{mean_return:.6f},{mean_cost:.6f}\n")


__all__ = ["BATCHED_ALGOS", "DEFAULT_THREADS", "TRAINER", "BatchedRun", "algo_name",
           "build_model", "collect", "greedy_episodes", "make_envs",
           "train_batched", "write_settings"]
