"""Train stable-baselines3 policies on the BALLAD environment, save them, and plot how they learned.

The pieces a training run needs, each small and usable alone: its configuration
(:mod:`agents.experiments.training.config`), a seeded vector of monitored environments (one
data set drawn per episode from a list; :mod:`agents.experiments.training.envs`), callbacks
(a plain-tqdm progress bar, periodic evaluation on fixed seeds that also records the test
cost, checkpoints), the run itself (model ``<run>.zip`` + settings ``<run>.json`` +
monitor CSVs in ``<out>/<run>/``), and the training-curve plot read back from those files.
``ballad-env train`` is the command line over :func:`train`;
:func:`agents.policy.load_policy` reads what it saves.
"""

from __future__ import annotations

import json
import platform
import time
import warnings
from dataclasses import fields, replace
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
from agents.experiments.stores.results import writable_folder
from agents.experiments.training.config import TrainConfig, TrainResult
from agents.experiments.training.envs import build_env, make_vec_env
from agents.experiments.training.run_folder import clear_earlier_run, run_lock
from agents.policy import ALGORITHM_CLASSES, ALGORITHMS
from ballad_env.env import BudgetAllocationEnv
from ballad_env.observation import OBSERVATIONS

#: The sub-folders a run writes; training again under the same run name replaces them.
RUN_FOLDERS = ("monitor", "logs", "eval", "checkpoints")


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


def settings_dict(config: TrainConfig, model: Any, seconds: float,
                  cpu_seconds: float | None = None) -> dict[str, Any]:
    """The settings JSON: the config, the algorithm arguments, features, timing (wall-clock
    and this process's CPU seconds of the training, which a loaded machine moves less) and
    versions."""
    kwargs = algorithm_kwargs(config)
    return {"run_name": config.name, "algo": config.algo, "config": config_dict(config),
            "algorithm_kwargs": kwargs,
            "observation_features": list(OBSERVATIONS[config.observation]),
            "num_timesteps": int(model.num_timesteps), "train_seconds": round(seconds, 2),
            **({} if cpu_seconds is None else {"cpu_seconds": round(cpu_seconds, 2)}),
            "versions": versions(), "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def check_data(config: TrainConfig) -> None:
    """Load every training data set here, before worker processes start: an unknown name,
    a bad file or settings the data cannot support is then an error that names it, not a
    worker's crash (``ConnectionResetError``). With a replay store, open it and find the
    data sets' lattices instead. Environments built in this process need no such check:
    their own errors name the cause."""
    if config.replay_store is not None:
        build_env(config.datasets, config.data_dir, config.settings, None,
                  config.episode_seeds, config.replay_store, config.observation)
        return
    BudgetAllocationEnv(list(config.datasets), data_dir=config.data_dir,
                        settings=config.settings, observation=config.observation)


def fresh_run_dir(config: TrainConfig) -> Path:
    """The run's folder, cleared of what an earlier run under the same name wrote (model,
    settings, curve, monitor files, logs, evaluations, checkpoints) only with
    ``config.overwrite``: nothing of it may mix with this run's, and nothing is lost
    unasked. Otherwise an earlier run, finished or interrupted, or a link among those
    entries is a ``RunError`` naming ``--overwrite`` (``run_folder.clear_earlier_run``)."""
    run_dir = writable_folder(config.run_dir, "--output-dir")
    clear_earlier_run(run_dir, config.name, RUN_FOLDERS, config.overwrite)
    return run_dir


def write_settings(config: TrainConfig, model: Any, seconds: float,
                   cpu_seconds: float | None = None) -> Path:
    """Write the run's settings JSON ``<run>/<run>.json`` (see :func:`settings_dict`)."""
    path = config.run_dir / f"{config.name}.json"
    path.write_text(json.dumps(settings_dict(config, model, seconds, cpu_seconds), indent=2)
                    + "\n")
    return path


def train(config: TrainConfig) -> TrainResult:
    """Train one policy and write ``<run>.zip``, ``<run>.json`` and monitor CSVs to its folder.

    An earlier run under the same name, finished or not, is refused unless
    ``config.overwrite``, which replaces it (:func:`fresh_run_dir`). The settings
    JSON is written when training starts too, so the checkpoints of an interrupted run load
    as agents; it is completed at the end.
    """
    if config.vec_env == "subproc" and config.n_envs > 1:
        check_data(config)  # in this process, the environments' own errors name the cause
    with run_lock(config.run_dir):  # one run writes a folder at a time
        return _train_locked(config)


def _train_locked(config: TrainConfig) -> TrainResult:
    """:func:`train` once the data is checked and the run folder held."""
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
        start, cpu_start = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            # The evaluation env is deliberately a one-worker DummyVecEnv.
            warnings.filterwarnings("ignore", message="Training and eval env are not of the same")
            model.learn(total_timesteps=config.total_timesteps,
                        callback=make_callbacks(config, run_dir))
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        env.close()
    model_path = run_dir / f"{config.name}.zip"
    model.save(model_path)
    return TrainResult(model_path, write_settings(config, model, seconds, cpu_seconds), run_dir,
                       seconds)


__all__ = ["RUN_FOLDERS", "TqdmProgress", "algorithm_class", "algorithm_kwargs", "check_data",
           "config_dict", "eval_callback", "fresh_run_dir", "make_callbacks", "settings_dict",
           "train", "versions", "write_settings"]
