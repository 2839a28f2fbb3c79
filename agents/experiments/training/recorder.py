"""What a batched run writes as it learns: the monitor and progress rows after each update,
the greedy evaluations and the checkpoints (:class:`Recorder`), for
:mod:`agents.experiments.training.torch_trainer`'s loops, here or overlapped with a rollout worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import ballad_env
from agents.experiments.training.config import TrainConfig
from agents.experiments.training.progress import progress_bar, show_costs
from agents.experiments.training.record import append_row, write_eval
from agents.experiments.training.rollouts import Ended
from agents.experiments.training.vec_adapter import valid
from agents.ppo.core import policy_outputs


@dataclass
class Curves:
    """What a run writes as it learns: one monitor row per rollout (the mean return and final
    test cost of the episodes that ended in it; ``l`` its steps, so
    ``curves.read_monitor`` counts the steps) and SB3-style ``logs/progress.csv``."""

    run_dir: Path
    start: float

    def open(self) -> None:
        (self.run_dir / "monitor").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        head = json.dumps({"t_start": self.start, "env_id": ballad_env.REPLAY_ENV_ID,
                           "rows": "one per rollout: means over the episodes that ended"})
        (self.run_dir / "monitor" / "batched.monitor.csv").write_text(
            f"#{head}\nr,l,t,test_cost,episodes\n")

    def rollout(self, steps: int, ended: Ended) -> dict[str, float]:
        """Append the rollout's row; ``ended`` holds (returns, test costs) per vector step."""
        returns = np.concatenate([r for r, _ in ended]) if ended else np.zeros(0)
        costs = np.concatenate([c for _, c in ended]) if ended else np.zeros(0)
        row = {"r": float(returns.mean()) if returns.size else float("nan"), "l": steps,
               "t": round(time.time() - self.start, 6),
               "test_cost": float(costs.mean()) if costs.size else float("nan"),
               "episodes": int(returns.size)}
        append_row(self.run_dir / "monitor" / "batched.monitor.csv", list(row),
                   [str(v) for v in row.values()])  # its header written by :meth:`open`
        return row

    def progress(self, row: Mapping[str, float]) -> None:
        """Append SB3's ``logs/progress.csv`` row (its header from the first row's keys)."""
        append_row(self.run_dir / "logs" / "progress.csv", list(row),
                   [f"{v:.6g}" for v in row.values()])


#: A greedy policy over N environments: (observations, action masks) -> valid actions.
Act = Callable[[np.ndarray, np.ndarray], np.ndarray]


def policy_act(policy: Any, masked: bool) -> Act:
    """The greedy actions of an SB3 ``MlpPolicy`` of tanh MLPs (``core.policy_outputs``'
    argmax, masked logits with ``masked``), an action spent swapped for the other."""
    device = next(policy.parameters()).device

    def act(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            logits, _ = policy_outputs(policy, torch.as_tensor(obs, device=device),
                                       torch.as_tensor(masks, device=device) if masked else None)
        return valid(logits.argmax(dim=1).cpu().numpy(), masks)

    return act


def greedy_costs(act: Act, envs: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The return and final test cost of one episode of ``act`` in each of ``envs``'s
    environments, reset with ``seed`` (the same episodes at every evaluation)."""
    obs, _ = envs.reset(seed=seed)
    n = envs.num_envs
    returns, costs = np.zeros(n), np.full(n, np.nan)
    running = np.ones(n, dtype=bool)
    while running.any():
        actions = act(obs, envs.unwrapped.action_masks())
        obs, rewards, terminated, truncated, info = envs.step(actions)
        returns[running] += rewards[running]
        done = running & (terminated | truncated)
        if done.any():
            costs[done] = info["final_info"]["test_cost"][done]
            running &= ~done
    return returns, costs


class Evaluation:
    """The held-out evaluation every trainer on a replay store records: one greedy episode in
    each of ``envs``'s environments, reset with ``seed``; its row in ``eval/evaluations.csv``,
    and the model saved as ``eval/best_model`` when its mean return beats every earlier
    evaluation's (SB3's ``EvalCallback``'s rule: by return, the first of equals)."""

    def __init__(self, envs: Any, seed: int, run_dir: Path) -> None:
        self.envs, self.seed, self.run_dir = envs, seed, run_dir
        self.best_return = -np.inf
        #: The latest evaluation's mean final test cost (None before the first).
        self.latest_cost: float | None = None

    def __call__(self, act: Act, steps: int, save: Callable[[Path], None]) -> None:
        """Evaluate ``act`` after ``steps`` steps; ``save(path)`` saves the model."""
        returns, costs = greedy_costs(act, self.envs, self.seed)
        mean_return, self.latest_cost = float(returns.mean()), float(costs.mean())
        write_eval(self.run_dir, steps, mean_return, self.latest_cost)
        if mean_return > self.best_return:
            self.best_return = mean_return
            save(self.run_dir / "eval" / "best_model")


class Recorder:
    """What runs after each update: the monitor and progress rows, the greedy evaluation
    every ``eval_freq`` steps (:class:`Evaluation`), a checkpoint every ``checkpoint_freq``
    and the progress bar (``training.progress``; :meth:`close` ends it)."""

    def __init__(self, config: TrainConfig, run_dir: Path, model: Any, updater: Any,
                 eval_envs: Any) -> None:
        self.config, self.run_dir, self.model = config, run_dir, model
        self.act = policy_act(model.policy, config.algo == "maskable_ppo")
        self.updater = updater
        self.evaluation = None if eval_envs is None else Evaluation(eval_envs, config.eval_seed,
                                                                    run_dir)
        self.next_eval, self.steps = config.eval_freq, 0
        self.next_checkpoint = config.checkpoint_freq
        self.curves = Curves(run_dir, time.time())
        self.curves.open()
        rollout = config.hp.n_steps * config.n_envs  # a run takes whole rollouts
        self.bar = progress_bar(-(-config.total_timesteps // rollout) * rollout,
                                config.progress_bar)
        self.start = time.perf_counter()

    def __call__(self, steps: int, ended: Ended,
                 stats: dict[str, float]) -> None:
        row = self.curves.rollout(steps - self.steps, ended)
        self.bar.update(steps - self.steps)
        self.steps = steps
        self.curves.progress({"timesteps": steps, "seconds": time.perf_counter() - self.start,
                              "ep_rew_mean": row["r"], "test_cost_mean": row["test_cost"],
                              **stats})
        if self.evaluation is not None and steps >= self.next_eval:
            self.evaluation(self.act, steps, lambda path: self._save(path, steps))
            self.next_eval += self.config.eval_freq
        show_costs(self.bar, None if np.isnan(row["test_cost"]) else row["test_cost"],
                   None if self.evaluation is None else self.evaluation.latest_cost)
        if self.config.checkpoint_freq and steps >= self.next_checkpoint:
            self._save(self.run_dir / "checkpoints" / f"{self.config.name}_{steps}_steps",
                       steps)
            self.next_checkpoint += self.config.checkpoint_freq

    def _save(self, path: Path, steps: int) -> None:
        """The model as it is after ``steps`` steps, saved (SB3's ``save``) to ``path``."""
        self.updater.sync()
        self.model.num_timesteps = steps
        path.parent.mkdir(exist_ok=True)
        self.model.save(path)

    def close(self) -> None:
        """End the progress bar."""
        self.bar.close()


__all__ = ["Act", "Curves", "Evaluation", "Recorder", "greedy_costs", "policy_act"]
