"""What a training run depends on (:class:`TrainConfig`, saved with the model as its settings
JSON) and what it leaves (:class:`TrainResult`): one module, so the trainers
(:mod:`~agents.experiments.training.sb3`, :mod:`~agents.experiments.training.batched`) and the
environments they step (:mod:`~agents.experiments.training.envs`) import it, not each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agents.experiments.training.bounds import TRAINING_BOUNDS, check_training_sizes
from agents.experiments.training.run_folder import check_run_name
from agents.policy_files import ALGORITHMS
from ballad_env.observation import check_version
from ballad_env.settings import Settings

#: "vector": the replay environment stepped N at a time in numpy (``training.vec_adapter``; needs
#: ``replay_store``), instead of N single environments in subprocesses or in this process.
VEC_ENVS = ("subproc", "dummy", "vector")


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
        if self.run_name is not None:
            check_run_name(self.run_name)
        if self.vec_env == "vector" and self.replay_store is None:
            raise ValueError("vec_env='vector' steps the replay environment: give "
                             "replay_store (--replay-store DIR), or use 'dummy' or 'subproc'")
        if self.n_envs < 1 or self.total_timesteps < 1:
            raise ValueError("n_envs and total_timesteps must be positive")
        check_training_sizes({f: getattr(self, f) for f in (*TRAINING_BOUNDS, "net_arch")},
                             self.vec_env)
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


__all__ = ["VEC_ENVS", "TrainConfig", "TrainResult"]
