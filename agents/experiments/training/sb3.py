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

import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

try:
    import torch
    from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback, EvalCallback
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.utils import set_random_seed
except ModuleNotFoundError as err:  # torch & co. come with the 'rl' extra
    from agents.extras import missing_extra

    raise missing_extra(err, "policy training") from err

from agents.experiments.training.config import TrainConfig, TrainResult
from agents.experiments.training.envs import build_env, make_vec_env
from agents.experiments.training.progress import progress_bar, show_costs
from agents.experiments.training.record import algorithm_kwargs, write_eval, write_record
from agents.experiments.training.recorder import Evaluation
from agents.experiments.training.rollouts import envs_arguments, make_envs
from agents.experiments.training.run_folder import fresh_run_dir, run_lock
from agents.experiments.training.vec_adapter import valid
from agents.policy import ALGORITHM_CLASSES  # TrainConfig checks the name
from ballad_env.env import BudgetAllocationEnv


# --------------------------------------------------------------------------- callbacks
class TqdmProgress(BaseCallback):
    """A plain-tqdm progress bar (SB3's own needs ``rich``), on a terminal only
    (``training.progress``): steps, steps/s, the recent episodes' final test cost and the
    latest held-out evaluation's (of ``evaluation``, when the run evaluates)."""

    def __init__(self, total: int,
                 evaluation: CostEvalCallback | ReplayEvalCallback | None = None) -> None:
        super().__init__()
        self.total, self.evaluation = total, evaluation
        self.bar: Any = None
        self.figures: dict[str, str] = {}  # the latest figures, drawn or not
        self._shown: object = None  # the newest episode the figures include

    def _on_training_start(self) -> None:
        self.bar = progress_bar(self.total)

    def _show_recent(self) -> None:
        """Mean return and final test cost of the 20 latest episodes, when one has ended
        since the last update (SB3 adds an episode to its buffer after this callback's
        step, so the check runs at every step and once more at the end)."""
        buffer = self.model.ep_info_buffer
        if not buffer or buffer[-1] is self._shown:
            return
        self._shown = buffer[-1]
        recent = list(buffer)[-20:]
        self.figures = show_costs(
            self.bar, float(np.mean([e["test_cost"] for e in recent])),
            None if self.evaluation is None else self.evaluation.latest_cost)

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        self._show_recent()
        return True

    def _on_training_end(self) -> None:
        self._show_recent()
        self.bar.close()


class CostEvalCallback(EvalCallback):
    """SB3's ``EvalCallback`` that evaluates on the same seeded episodes every time and also
    records their mean final test cost in ``evaluations.csv`` (``record.write_eval``)."""

    def __init__(self, config: TrainConfig, eval_env: Any, run_dir: Path) -> None:
        log_dir = run_dir / "eval"
        super().__init__(eval_env, n_eval_episodes=config.eval_episodes,
                         eval_freq=max(config.eval_freq // config.n_envs, 1),
                         log_path=str(log_dir), best_model_save_path=str(log_dir),
                         deterministic=True, verbose=0)
        self.costs: list[float] = []
        self.eval_seed, self.run_dir = config.eval_seed, run_dir
        self.latest_cost: float | None = None

    def _log_success_callback(self, locals_: dict, globals_: dict) -> None:
        super()._log_success_callback(locals_, globals_)
        if locals_["done"]:
            self.costs.append(float(locals_["info"]["test_cost"]))

    def _on_step(self) -> bool:
        due = self.eval_freq > 0 and self.n_calls % self.eval_freq == 0
        if due:
            self.costs = []
            self.eval_env.seed(self.eval_seed)  # the same episodes at every evaluation
        keep_going = super()._on_step()
        if due:
            self.latest_cost = float(np.mean(self.costs))
            write_eval(self.run_dir, self.num_timesteps, float(self.last_mean_reward),
                       self.latest_cost)
        return keep_going


class MaskableCostEvalCallback(CostEvalCallback, MaskableEvalCallback):
    """:class:`CostEvalCallback` for MaskablePPO (it evaluates with the action masks)."""


class ReplayEvalCallback(BaseCallback):
    """On a replay store, the torch trainers' evaluation (``recorder.Evaluation``: one greedy
    episode in each of ``eval_episodes`` replay environments reset with ``eval_seed``, its
    row and the best model), so an evaluation of the SB3 trainer's run plays the episodes
    the torch trainers' play and its cost compares with theirs."""

    def __init__(self, config: TrainConfig, run_dir: Path) -> None:
        super().__init__()
        self.envs = make_envs(*envs_arguments(config, config.eval_episodes))
        self.evaluation = Evaluation(self.envs, config.eval_seed, run_dir)
        self.every = max(config.eval_freq // config.n_envs, 1)
        self.maskable = config.algo == "maskable_ppo"

    @property
    def latest_cost(self) -> float | None:
        """The latest evaluation's mean final test cost (None before the first)."""
        return self.evaluation.latest_cost

    def _act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """The model's greedy actions (masked for MaskablePPO), a spent one swapped."""
        model: Any = self.model  # MaskablePPO's predict takes the masks
        extra = {"action_masks": masks} if self.maskable else {}
        return valid(model.predict(obs, deterministic=True, **extra)[0], masks)

    def _on_step(self) -> bool:
        if self.n_calls % self.every == 0:
            self.evaluation(self._act, self.num_timesteps, self.model.save)
        return True

    def _on_training_end(self) -> None:
        self.envs.close()


def eval_callback(config: TrainConfig, eval_env: Any, run_dir: Path) -> CostEvalCallback:
    """The evaluation callback of ``config``'s algorithm (the maskable one for MaskablePPO)."""
    kind = MaskableCostEvalCallback if config.algo == "maskable_ppo" else CostEvalCallback
    return kind(config, eval_env, run_dir)


def make_callbacks(config: TrainConfig, run_dir: Path) -> list[Any]:
    """Progress bar, periodic evaluation (on a replay store the torch trainers', else SB3's
    on the live environment) and checkpoints, as the settings ask."""
    callbacks: list[Any] = []
    evaluation: CostEvalCallback | ReplayEvalCallback | None = None
    if config.eval_freq > 0 and config.replay_store is not None:
        evaluation = ReplayEvalCallback(config, run_dir)
        callbacks.append(evaluation)
    elif config.eval_freq > 0:
        eval_config = replace(config, vec_env="dummy", episode_seeds=0)
        eval_env = make_vec_env(eval_config, monitor_dir=None, n_envs=1)
        evaluation = eval_callback(config, eval_env, run_dir)
        callbacks.append(evaluation)
    if config.progress_bar:
        callbacks.append(TqdmProgress(config.total_timesteps, evaluation))
    if config.checkpoint_freq > 0:
        callbacks.append(CheckpointCallback(max(config.checkpoint_freq // config.n_envs, 1),
                                            str(run_dir / "checkpoints"), name_prefix=config.name))
    return callbacks


# --------------------------------------------------------------------------- the run
def check_data(config: TrainConfig) -> None:
    """Load every training data set here, before worker processes start: an unknown name,
    a bad file or settings the data cannot support is then an error that names it, not a
    worker's crash (``ConnectionResetError``). With a replay store, open it and find the
    data sets' lattices instead. Environments built in this process need no such check:
    their own errors name the cause."""
    if config.replay_store is not None:
        build_env(config)
        return
    BudgetAllocationEnv(list(config.datasets), data_dir=config.data_dir,
                        settings=config.settings, observation=config.observation)


def train(config: TrainConfig) -> TrainResult:
    """Train one policy and write ``<run>.zip``, ``<run>.json`` and monitor CSVs to its folder.

    An earlier run under the same name, finished or not, is refused unless
    ``config.overwrite``, which replaces it (``run_folder.fresh_run_dir``). The settings
    JSON is written when training starts too, so the checkpoints of an interrupted run load
    as agents; it is completed at the end.
    """
    if config.trainer != "sb3":
        raise ValueError(f"training.sb3.train runs the sb3 trainer, not {config.trainer!r}: "
                         "train with agents.experiments.training.train")
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
    logger = None
    try:
        model = ALGORITHM_CLASSES[config.algo]("MlpPolicy", env, seed=config.seed, verbose=0,
                                             device="cpu", **algorithm_kwargs(config))
        logger = configure(str(run_dir / "logs"), ["csv"])
        model.set_logger(logger)
        write_record(config, num_timesteps=0, seconds=0.0)
        start, cpu_start = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            # The evaluation env is deliberately a one-worker DummyVecEnv.
            warnings.filterwarnings("ignore", message="Training and eval env are not of the same")
            model.learn(total_timesteps=config.total_timesteps,
                        callback=make_callbacks(config, run_dir))
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        env.close()
        if logger is not None:  # its progress.csv, closed now rather than whenever collected
            logger.close()
    model_path = run_dir / f"{config.name}.zip"
    model.save(model_path)
    record = write_record(config, num_timesteps=model.num_timesteps, seconds=seconds,
                          cpu_seconds=cpu_seconds)
    return TrainResult(model_path, record, run_dir, seconds)


__all__ = ["CostEvalCallback", "MaskableCostEvalCallback", "ReplayEvalCallback",
           "TqdmProgress", "check_data",
           "eval_callback", "make_callbacks", "train"]
