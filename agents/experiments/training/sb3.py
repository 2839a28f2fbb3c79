"""Train stable-baselines3 policies on the BALLAD environment, save them, and plot how they learned.

The pieces a training run needs, each small and usable alone: a seeded vector of monitored
environments (one data set drawn per episode from a list; built in
:mod:`agents.experiments.training.envs`, whose names this module re-exports), callbacks
(a plain-tqdm progress bar, periodic evaluation on fixed seeds that also records the test
cost, checkpoints), the run itself (model ``<run>.zip`` + settings ``<run>.json`` +
monitor CSVs in ``<out>/<run>/``), and the training-curve plot read back from those files.
``ballad-env train`` is the command line over :func:`train`;
:func:`agents.policy.load_policy` reads what it saves.
"""

from __future__ import annotations

import json
import platform
import shutil
import time
import warnings
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

try:
    import sb3_contrib
    import stable_baselines3
    import torch
    from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback, EvalCallback
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.utils import set_random_seed
except ModuleNotFoundError as err:  # torch & co. come with the 'rl' extra
    from agents.extras import missing_extra

    raise missing_extra(err, "policy training") from err
from tqdm.auto import tqdm

import ballad_env
from agents.experiments.stores.results import RunError, writable_folder
from agents.experiments.training.envs import (
    MONITOR_KEYWORDS,
    KeepInfo,
    SeedPool,
    ValidActionWrapper,
    build_env,
    env_factory,
    make_vec_env,
)
from agents.policy import ALGORITHM_CLASSES, ALGORITHMS
from ballad_env.env import BudgetAllocationEnv
from ballad_env.observation import OBSERVATIONS, check_version
from ballad_env.settings import Settings

#: "vector": the replay environment stepped N at a time in numpy (``training.vec_adapter``; needs
#: ``replay_store``), instead of N single environments in subprocesses or in this process.
VEC_ENVS = ("subproc", "dummy", "vector")
#: The sub-folders a run writes; training again under the same run name replaces them.
RUN_FOLDERS = ("monitor", "logs", "eval", "checkpoints")


@dataclass
class TrainConfig:
    """Everything a training run depends on; saved with the model as its settings JSON."""

    algo: str = "ppo"
    datasets: tuple[str, ...] = ("toy",)
    data_dir: str | None = None
    #: The environment's options (reward, costs, budget, prior, threshold search, ...).
    settings: Settings = field(default_factory=lambda: Settings(reward="cost"))
    total_timesteps: int = 3000
    seed: int = 0
    n_envs: int = 2
    vec_env: str = "subproc"
    # Algorithm settings (None: the per-algorithm default in ``algorithm_kwargs``).
    learning_rate: float = 3e-4
    discount: float = 1.0  # SB3's gamma (not the contamination)
    n_steps: int | None = None
    batch_size: int | None = None
    ent_coef: float = 0.01
    net_arch: tuple[int, ...] = (64, 64)
    n_epochs: int = 10  # PPO: passes over each rollout
    train_freq: int = 1  # DQN: vector steps between updates
    gradient_steps: int = 1  # DQN: gradient steps per update
    #: The observation version the policy reads (``ballad_env.observation.OBSERVATIONS``).
    observation: str = "v0"
    # Evaluation, checkpoints and output.
    eval_freq: int = 0
    eval_episodes: int = 6
    eval_seed: int = 100_000
    checkpoint_freq: int = 0
    output_dir: str = "results/policies"
    run_name: str | None = None
    torch_threads: int = 1
    progress_bar: bool = True
    #: Replace a finished run of the same name (its ``<run>.zip``); refused otherwise.
    overwrite: bool = False
    #: 0: every training episode a fresh seed (the default). N: training episodes draw their
    #: seed from 0..N-1, so each (data set, seed) reset is computed once per worker and then
    #: comes from the reset cache (``ballad_env.compute``); evaluation episodes never do.
    episode_seeds: int = 0
    #: A lattice store (``ballad-env lattices``): train on the replay environment
    #: (``ballad_env.replay.env``), the same episodes 200 to 2,000 times faster; the data sets are
    #: then stored ones, and ``episode_seeds`` N keeps the store's seeds 0..N-1.
    replay_store: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.settings, dict):  # read back from a settings JSON
            self.settings = Settings.from_dict(self.settings)
        self.datasets = tuple(self.datasets)
        if self.replay_store is not None:
            self.replay_store = str(self.replay_store)
        self.net_arch = tuple(self.net_arch)
        if self.algo not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algo!r}: use one of {ALGORITHMS}")
        if self.vec_env not in VEC_ENVS:
            raise ValueError(f"unknown vec_env {self.vec_env!r}: use one of {VEC_ENVS}")
        if not self.datasets:
            raise ValueError("datasets: give at least one data set")
        if self.vec_env == "vector" and self.replay_store is None:
            raise ValueError("vec_env='vector' steps the replay environment: give "
                             "replay_store (--replay-store DIR), or use 'dummy' or 'subproc'")
        if self.n_envs < 1 or self.total_timesteps < 1:
            raise ValueError("n_envs and total_timesteps must be positive")
        self._check_batches()
        check_version(self.observation)
        if min(self.n_epochs, self.train_freq, self.gradient_steps) < 1:
            raise ValueError("n_epochs, train_freq and gradient_steps must be positive")
        if self.episode_seeds < 0:
            raise ValueError(f"episode_seeds must be >= 0 (0: a fresh seed per episode), got "
                             f"{self.episode_seeds}")

    def _check_batches(self) -> None:
        """Rollout and minibatch sizes SB3 would refuse with a bare ``AssertionError``."""
        if self.n_steps is not None and self.n_steps < 1:
            raise ValueError(f"n_steps must be positive, got {self.n_steps}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        if self.algo not in ("ppo", "maskable_ppo"):
            return
        if self.batch_size is not None and self.batch_size < 2:
            raise ValueError("batch_size must be at least 2 for PPO (it normalises the "
                             f"advantages over each minibatch), got {self.batch_size}")
        if self.n_steps is not None and self.n_steps * self.n_envs < 2:
            raise ValueError("PPO needs a rollout of at least 2 steps: n_steps x n_envs = "
                             f"{self.n_steps} x {self.n_envs}")

    @property
    def name(self) -> str:
        """The run name: algorithm, reward, data sets, any other non-default setting, the
        seed and the training steps (or the name given), so runs under other settings or of
        other lengths never share a folder."""
        if self.run_name:
            return self.run_name
        one = Path(str(self.datasets[0])).stem  # a name, or a path's file stem
        sets = one if len(self.datasets) == 1 else f"{len(self.datasets)}sets"
        reward = self.settings.reward
        others = self.settings.replace(reward=Settings().reward)  # the reward is named already
        tag = "" if others == Settings() else f"-{others.name}"
        replay = "-replay" if self.replay_store else ""
        version = "" if self.observation == "v0" else f"-{self.observation}"
        return (f"{self.algo}-{reward}-{sets}{tag}{version}{replay}-s{self.seed}"
                f"-{self.total_timesteps}steps")

    @property
    def run_dir(self) -> Path:
        """Folder holding everything this run writes."""
        return Path(self.output_dir) / self.name


@dataclass(frozen=True)
class TrainResult:
    """Where a finished run put its files, and how long it took."""

    model_path: Path
    settings_path: Path
    run_dir: Path
    seconds: float


# --------------------------------------------------------------------------- algorithms
def algorithm_class(algo: str) -> type:
    """The SB3 / sb3-contrib class for an algorithm name."""
    if algo not in ALGORITHM_CLASSES:
        raise ValueError(f"unknown algorithm {algo!r}: use one of {ALGORITHMS}")
    return ALGORITHM_CLASSES[algo]


def algorithm_kwargs(config: TrainConfig) -> dict[str, Any]:
    """Constructor arguments; defaults sized for 15-step episodes and a few thousand steps."""
    common = {"learning_rate": config.learning_rate, "gamma": config.discount,
              "policy_kwargs": {"net_arch": list(config.net_arch)}}
    if config.algo in ("ppo", "maskable_ppo"):
        n_steps = config.n_steps or 60  # 4 episodes per worker per update
        return {**common, "n_steps": n_steps, "ent_coef": config.ent_coef,
                "batch_size": config.batch_size or 60, "n_epochs": config.n_epochs,
                "gae_lambda": 0.95}
    if config.algo == "a2c":
        return {**common, "n_steps": config.n_steps or 15, "ent_coef": config.ent_coef}
    # DQN: a short warm-up and exploration so that learning starts within a few hundred steps.
    return {**common, "batch_size": config.batch_size or 32, "buffer_size": 50_000,
            "learning_starts": min(100, config.total_timesteps // 2),
            "train_freq": config.train_freq, "gradient_steps": config.gradient_steps,
            "target_update_interval": 150,
            "exploration_fraction": 0.3, "exploration_final_eps": 0.05}


# --------------------------------------------------------------------------- callbacks
class TqdmProgress(BaseCallback):
    """A plain-tqdm progress bar (SB3's own needs ``rich``) showing recent return and test cost."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.bar: Any = None
        self._shown: object = None  # the newest episode the figures include

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=self.total, unit="step", dynamic_ncols=True)

    def _show_recent(self) -> None:
        """Mean return and final test cost of the 20 latest episodes, when one has ended
        since the last update (SB3 adds an episode to its buffer after this callback's
        step, so the check runs at every step and once more at the end)."""
        buffer = self.model.ep_info_buffer
        if not buffer or buffer[-1] is self._shown:
            return
        self._shown = buffer[-1]
        recent = list(buffer)[-20:]
        self.bar.set_postfix(ret=f"{np.mean([e['r'] for e in recent]):.4f}",
                             cost=f"{np.mean([e['test_cost'] for e in recent]):.4f}")

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        self._show_recent()
        return True

    def _on_training_end(self) -> None:
        self._show_recent()
        self.bar.close()


def eval_callback(config: TrainConfig, eval_env: Any, log_dir: Path):
    """An EvalCallback (the maskable one for MaskablePPO) that evaluates on the same seeded
    episodes every time and also logs their mean final test cost to ``evaluations.csv``.
    """
    base: Any = MaskableEvalCallback if config.algo == "maskable_ppo" else EvalCallback

    class CostEvalCallback(base):
        def __init__(self) -> None:
            super().__init__(eval_env, n_eval_episodes=config.eval_episodes,
                             eval_freq=max(config.eval_freq // config.n_envs, 1),
                             log_path=str(log_dir), best_model_save_path=str(log_dir),
                             deterministic=True, verbose=0)
            self.costs: list[float] = []
            self.table = log_dir / "evaluations.csv"

        def _log_success_callback(self, locals_: dict, globals_: dict) -> None:
            super()._log_success_callback(locals_, globals_)
            if locals_["done"]:
                self.costs.append(float(locals_["info"]["test_cost"]))

        def _on_step(self) -> bool:
            due = self.eval_freq > 0 and self.n_calls % self.eval_freq == 0
            if due:
                self.costs = []
                self.eval_env.seed(config.eval_seed)  # the same episodes at every evaluation
            keep_going = super()._on_step()
            if due:
                self._write_row()
            return keep_going

        def _write_row(self) -> None:
            new = not self.table.exists()
            with self.table.open("a") as out:
                if new:
                    out.write("timesteps,mean_return,mean_test_cost\n")
                out.write(f"{self.num_timesteps},{self.last_mean_reward:.6f},"
                          f"{np.mean(self.costs):.6f}\n")

    return CostEvalCallback()


def make_callbacks(config: TrainConfig, run_dir: Path) -> list[Any]:
    """Progress bar, periodic evaluation and checkpoints, as the settings ask."""
    callbacks: list[Any] = []
    if config.progress_bar:
        callbacks.append(TqdmProgress(config.total_timesteps))
    if config.eval_freq > 0:
        eval_config = replace(config, vec_env="dummy", episode_seeds=0)
        eval_env = make_vec_env(eval_config, monitor_dir=None, n_envs=1)
        callbacks.append(eval_callback(config, eval_env, run_dir / "eval"))
    if config.checkpoint_freq > 0:
        callbacks.append(CheckpointCallback(max(config.checkpoint_freq // config.n_envs, 1),
                                            str(run_dir / "checkpoints"), name_prefix=config.name))
    return callbacks


# --------------------------------------------------------------------------- the run
def versions() -> dict[str, str]:
    """Versions of the packages a saved model depends on."""
    return {"ballad_env": ballad_env.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__,
            "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def config_dict(config: TrainConfig) -> dict[str, Any]:
    """The config as JSON values; its settings with their name (``Settings.to_dict``)."""
    return {f.name: (config.settings.to_dict() if f.name == "settings"
                     else getattr(config, f.name)) for f in fields(config)}


def settings_dict(config: TrainConfig, model: Any, seconds: float) -> dict[str, Any]:
    """The settings JSON: the config, the algorithm arguments, features, timing and versions."""
    kwargs = algorithm_kwargs(config)
    return {"run_name": config.name, "algo": config.algo, "config": config_dict(config),
            "algorithm_kwargs": kwargs,
            "observation_features": list(OBSERVATIONS[config.observation]),
            "num_timesteps": int(model.num_timesteps), "train_seconds": round(seconds, 2),
            "versions": versions(), "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def check_data(config: TrainConfig) -> None:
    """Load every training data set here, before any worker process starts: an unknown name,
    a bad file or settings the data cannot support is then an error that names it, not a
    worker's crash (``ConnectionResetError``). With a replay store, open it and find the
    data sets' lattices instead."""
    if config.replay_store is not None:
        build_env(config.datasets, config.data_dir, config.settings, None,
                  config.episode_seeds, config.replay_store, config.observation)
        return
    BudgetAllocationEnv(list(config.datasets), data_dir=config.data_dir,
                        settings=config.settings, observation=config.observation)


def fresh_run_dir(config: TrainConfig) -> Path:
    """The run's folder, cleared of what an earlier run under the same name wrote (model,
    settings, curve, monitor files, logs, evaluations, checkpoints): nothing of it may mix
    with this run's. A finished run (its ``<run>.zip``) is replaced only with
    ``config.overwrite``; otherwise ``RunError`` says so (an interrupted one, without its
    model, is replaced)."""
    model = config.run_dir / f"{config.name}.zip"
    if model.exists() and not config.overwrite:
        raise RunError(f"{model} is a finished run of this name: training again would replace "
                       "it. Pass --overwrite (overwrite=True) to replace it, or name the new "
                       "run apart (--run-name, --seed, --output-dir)")
    run_dir = writable_folder(config.run_dir, "--output-dir")
    for folder in RUN_FOLDERS:
        shutil.rmtree(run_dir / folder, ignore_errors=True)
    for name in (f"{config.name}.zip", f"{config.name}.json", "curve.png"):
        (run_dir / name).unlink(missing_ok=True)
    return run_dir


def write_settings(config: TrainConfig, model: Any, seconds: float) -> Path:
    """Write the run's settings JSON ``<run>/<run>.json`` (see :func:`settings_dict`)."""
    path = config.run_dir / f"{config.name}.json"
    path.write_text(json.dumps(settings_dict(config, model, seconds), indent=2) + "\n")
    return path


def train(config: TrainConfig) -> TrainResult:
    """Train one policy and write ``<run>.zip``, ``<run>.json`` and monitor CSVs to its folder.

    A finished run under the same name is refused unless ``config.overwrite``, which
    replaces it (:func:`fresh_run_dir`). The settings
    JSON is written when training starts too, so the checkpoints of an interrupted run load
    as agents; it is completed at the end.
    """
    check_data(config)
    # Seeding, in one place: Python/NumPy/torch here; the model seeds the action space
    # and the vector env (worker i resets first with seed + i, then draws from its RNG).
    torch.set_num_threads(config.torch_threads)
    set_random_seed(config.seed)

    run_dir = fresh_run_dir(config)
    env = make_vec_env(config, monitor_dir=run_dir / "monitor")
    try:
        model = algorithm_class(config.algo)("MlpPolicy", env, seed=config.seed, verbose=0,
                                             device="cpu", **algorithm_kwargs(config))
        model.set_logger(configure(str(run_dir / "logs"), ["csv"]))
        write_settings(config, model, 0.0)
        start = time.perf_counter()
        with warnings.catch_warnings():
            # The evaluation env is deliberately a one-worker DummyVecEnv.
            warnings.filterwarnings("ignore", message="Training and eval env are not of the same")
            model.learn(total_timesteps=config.total_timesteps,
                        callback=make_callbacks(config, run_dir))
        seconds = time.perf_counter() - start
    finally:
        env.close()
    model_path = run_dir / f"{config.name}.zip"
    model.save(model_path)
    return TrainResult(model_path, write_settings(config, model, seconds), run_dir, seconds)


__all__ = ["ALGORITHMS", "KeepInfo", "MONITOR_KEYWORDS", "RUN_FOLDERS", "SeedPool", "TrainConfig",
           "TrainResult", "ValidActionWrapper", "algorithm_class", "algorithm_kwargs",
           "build_env", "check_data", "fresh_run_dir", "make_callbacks", "make_vec_env",
           "train", "write_settings"]


__all__ = ["MONITOR_KEYWORDS", "RUN_FOLDERS", "VEC_ENVS", "KeepInfo", "SeedPool", "TqdmProgress",
           "TrainConfig", "TrainResult", "ValidActionWrapper", "algorithm_class",
           "algorithm_kwargs", "build_env", "check_data", "config_dict", "env_factory",
           "eval_callback", "fresh_run_dir", "make_callbacks", "make_vec_env", "settings_dict",
           "train", "versions", "write_settings"]
