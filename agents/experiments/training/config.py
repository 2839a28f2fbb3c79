"""What a training run depends on (:class:`TrainConfig`, saved with the model as its settings
JSON) and what it leaves (:class:`TrainResult`), for every trainer: stable-baselines3
(``trainer="sb3"``) and the two torch trainers on the vector replay environment
(``"batched"``, ``"compiled"``). One module, so the trainers and the environments they step
import it, not each other.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agents.experiments.training.bounds import TRAINING_BOUNDS, check_training_sizes
from agents.experiments.training.run_folder import check_run_name
from agents.policy_files import ALGORITHMS
from ballad_env.observation import check_version
from ballad_env.settings import Settings

#: "vector": the replay environment stepped N at a time in numpy (``training.vec_adapter``; needs
#: ``replay_store``), instead of N single environments in subprocesses or in this process.
VEC_ENVS = ("subproc", "dummy", "vector")
#: The trainers: stable-baselines3 (every algorithm, every environment), and PPO or
#: MaskablePPO batched in torch on the vector replay environment with autograd's update
#: (``batched``) or the flat, compiled one (``compiled``; ``docs/training.md``).
TRAINERS = ("sb3", "batched", "compiled")
TORCH_TRAINERS = ("batched", "compiled")
#: How a torch trainer uses the second core: not at all (``sequential``: rollouts and
#: updates one after the other in one process), a worker process playing the next rollout
#: during each update (``pipelined``, ``training.pipelined``), or two processes each playing
#: half of the environments and computing half of every minibatch's gradient (``split``,
#: ``training.split_schedule``; the compiled trainer's step only).
SCHEDULES = ("sequential", "pipelined", "split")
#: The machines (``platform.machine()``, lower case) whose CPUs keep one thread's stores in
#: order (x86's total store order), which the split schedule's exchange relies on
#: (``agents.ppo.exchange``); elsewhere (ARM's weaker order) it is refused.
STORE_ORDERED_MACHINES = ("x86_64", "amd64")


def stores_in_order() -> bool:
    """Whether this machine's CPU keeps stores in order (:data:`STORE_ORDERED_MACHINES`)."""
    return platform.machine().lower() in STORE_ORDERED_MACHINES
#: The algorithms the torch trainers run.
TORCH_ALGORITHMS = ("ppo", "maskable_ppo")
#: The run's sizes by trainer where :class:`TrainConfig`'s own defaults (SB3's) do not fit:
#: the torch trainers step 1,024 replay episodes at once and take about 66 rollouts.
TRAINER_SIZES: dict[str, dict[str, int]] = {
    "sb3": {"n_envs": 2, "total_timesteps": 3000, "eval_episodes": 6},
    "batched": {"n_envs": 1024, "total_timesteps": 1_000_000, "eval_episodes": 256},
    "compiled": {"n_envs": 1024, "total_timesteps": 1_000_000, "eval_episodes": 256},
}


@dataclass(frozen=True)
class Hyperparameters:
    """The algorithm's hyperparameters, by SB3's names and meanings.

    The defaults are the SB3 trainer's, sized for 15-step episodes and a few thousand steps
    (``n_steps`` 60: four episodes per worker per update). :data:`TRAINER_DEFAULTS` changes
    a few by trainer and algorithm: the torch trainers take a rollout of 15 vector steps
    (one whole episode per environment) of N = 1,024, minibatches of 1,024 rows,
    ``n_epochs`` 4 and a learning rate of 1e-3 (a sixth of the SB3 trainer's
    gradient steps per sample, so each one larger; ``docs/training.md`` shows they learn
    what SB3's PPO learns on the same store and budget).
    """

    n_steps: int = 60  # rollout length per environment (PPO, A2C)
    batch_size: int = 60  # minibatch rows (PPO, DQN)
    n_epochs: int = 10  # PPO: passes over each rollout
    learning_rate: float = 3e-4
    gamma: float = 1.0  # the discount (1: the return is the whole cost decrease)
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.01  # entropy bonus (PPO, A2C)
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    normalize_advantage: bool = True
    net_arch: tuple[int, ...] = (64, 64)  # hidden layers of the actor and of the critic
    train_freq: int = 1  # DQN: vector steps between updates
    gradient_steps: int = 1  # DQN: gradient steps per update

    def __post_init__(self) -> None:
        object.__setattr__(self, "net_arch", tuple(self.net_arch))
        check_training_sizes({f.name: getattr(self, f.name) for f in fields(self)})
        if not (self.learning_rate > 0 and self.clip_range > 0 and self.max_grad_norm > 0):
            raise ValueError("learning_rate, clip_range and max_grad_norm must be positive, "
                             f"got {self.learning_rate}, {self.clip_range} and "
                             f"{self.max_grad_norm}")
        if not (0 <= self.gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError(f"gamma and gae_lambda must be in [0, 1], got {self.gamma} and "
                             f"{self.gae_lambda}")

    @classmethod
    def of(cls, trainer: str, algo: str, given: Mapping[str, Any]) -> Hyperparameters:
        """The trainer's defaults for ``algo`` with ``given`` over them; an unknown name is
        an error naming the known ones."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"unknown hyperparameters {unknown}: use some of {known}")
        defaults = TRAINER_DEFAULTS.get((trainer, algo), TRAINER_DEFAULTS.get((trainer, "*"), {}))
        return cls(**{**defaults, **given})

    def ppo_kwargs(self) -> dict[str, Any]:
        """SB3's ``PPO`` (and ``MaskablePPO``) constructor arguments."""
        return {**{name: getattr(self, name) for name in PPO_ARGUMENTS},
                "policy_kwargs": {"net_arch": list(self.net_arch)}}


#: The hyperparameters SB3's PPO constructor takes from :class:`Hyperparameters`.
PPO_ARGUMENTS = ("n_steps", "batch_size", "n_epochs", "learning_rate", "gamma", "gae_lambda",
                 "clip_range", "ent_coef", "vf_coef", "max_grad_norm", "normalize_advantage")
_TORCH = {"n_steps": 15, "batch_size": 1024, "n_epochs": 4, "learning_rate": 1e-3}
#: :class:`Hyperparameters` that differ from its defaults, by (trainer, algorithm); ``*``:
#: any algorithm.
TRAINER_DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("sb3", "a2c"): {"n_steps": 15}, ("sb3", "dqn"): {"batch_size": 32},
    ("batched", "*"): _TORCH, ("compiled", "*"): _TORCH,
}


@dataclass
class TrainConfig:
    """Everything a training run depends on, for every trainer; saved with the model as its
    settings JSON (``training.record``)."""

    #: Which trainer runs it (:data:`TRAINERS`).
    trainer: str = "sb3"
    algo: str = "ppo"
    datasets: tuple[str, ...] = ("toy",)
    data_dir: str | None = None
    #: The environment's options (reward, costs, budget, prior, threshold search, ...).
    settings: Settings = field(default_factory=lambda: Settings(reward="cost"))
    total_timesteps: int = 3000
    seed: int = 0
    n_envs: int = 2
    #: How the SB3 trainer steps its environments (:data:`VEC_ENVS`); the torch trainers
    #: always step the vector replay environment ("vector").
    vec_env: str = "subproc"
    #: The hyperparameters that differ from the trainer's defaults (:class:`Hyperparameters`'
    #: names); :attr:`hp` is the whole block.
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
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
    #: (``ballad_env.replay.env``), the same episodes far faster (``docs/REPLAY.md``); the
    #: data sets are then stored ones, and ``episode_seeds`` N keeps the store's seeds 0..N-1.
    replay_store: str | None = None
    #: The torch trainers' device ("cpu", "cuda", ...).
    device: str = "cpu"
    #: The torch trainers' :data:`SCHEDULES` entry; None: the trainer's default
    #: (:attr:`run_schedule`).
    schedule: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.settings, dict):  # read back from a settings JSON
            self.settings = Settings.from_dict(self.settings)
        self.datasets = tuple(self.datasets)
        self.hyperparameters = {name: tuple(value) if name == "net_arch" else value
                                for name, value in self.hyperparameters.items()}
        self.output_dir = str(self.output_dir)  # paths as strings: the config is saved as JSON
        if self.replay_store is not None:
            self.replay_store = str(self.replay_store)
        if self.data_dir is not None:
            self.data_dir = str(self.data_dir)
        if self.trainer not in TRAINERS:
            raise ValueError(f"unknown trainer {self.trainer!r}: use one of {TRAINERS}")
        if self.algo not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algo!r}: use one of {ALGORITHMS}")
        if self.vec_env not in VEC_ENVS:
            raise ValueError(f"unknown vec_env {self.vec_env!r}: use one of {VEC_ENVS}")
        if not self.datasets:
            raise ValueError("datasets: give at least one data set")
        if self.run_name is not None:
            check_run_name(self.run_name)
        if self.trainer in TORCH_TRAINERS:
            self._check_torch_trainer()
        if self.vec_env == "vector" and self.replay_store is None:
            raise ValueError("vec_env='vector' steps the replay environment: give "
                             "replay_store (--replay-store DIR), or use 'dummy' or 'subproc'")
        hp = self.hp  # its own sizes checked; the rollout's n_steps x n_envs here
        sizes = {f: getattr(self, f) for f in TRAINING_BOUNDS if hasattr(self, f)}
        check_training_sizes({**sizes, "n_steps": hp.n_steps}, self.vec_env)
        check_version(self.observation)
        self._check_batches(hp)
        if self.episode_seeds < 0:
            raise ValueError(f"episode_seeds must be >= 0 (0: a fresh seed per episode), got "
                             f"{self.episode_seeds}")

    def _check_torch_trainer(self) -> None:
        """What the torch trainers run: PPO or MaskablePPO on the vector replay environment,
        the rollout worker on the CPU."""
        if self.algo not in TORCH_ALGORITHMS:
            raise ValueError(f"the {self.trainer} trainer runs {list(TORCH_ALGORITHMS)}, not "
                             f"{self.algo!r}: train A2C or DQN with --trainer sb3")
        if self.replay_store is None:
            raise ValueError(f"--trainer {self.trainer} trains on the replay environment: give "
                             "--replay-store DIR (a store built with ballad-env lattices)")
        self.vec_env = "vector"
        self._check_schedule()

    def _check_schedule(self) -> None:
        """A known schedule that the run can take."""
        if self.schedule is None:
            return
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}: use one of {SCHEDULES}")
        if self.schedule == "split" and self.trainer != "compiled":
            raise ValueError("the split schedule runs the compiled trainer's flat step in two "
                             f"halves: use --trainer compiled, not {self.trainer}")
        if self.schedule != "sequential" and self.device != "cpu":
            raise ValueError(f"the {self.schedule} schedule's second process runs on the CPU: "
                             f"on device {self.device!r} use --schedule sequential")
        if self.schedule == "split" and not stores_in_order():
            raise ValueError("the split schedule's exchange relies on x86's store order, and "
                             f"this machine is {platform.machine()!r}: use --schedule "
                             "pipelined")
        if self.schedule == "split" and self.n_envs < 2:
            raise ValueError("the split schedule gives each process half of the environments: "
                             f"give --n-envs 2 or more, not {self.n_envs}")

    def _check_batches(self, hp: Hyperparameters) -> None:
        """Rollout and minibatch sizes SB3 would refuse with a bare ``AssertionError``."""
        if self.algo not in TORCH_ALGORITHMS:
            return
        if hp.normalize_advantage and hp.batch_size < 2:
            raise ValueError("batch_size must be at least 2 for PPO (it normalises the "
                             f"advantages over each minibatch), got {hp.batch_size}")
        if hp.n_steps * self.n_envs < 2:
            raise ValueError("PPO needs a rollout of at least 2 steps: n_steps x n_envs = "
                             f"{hp.n_steps} x {self.n_envs}")

    @property
    def hp(self) -> Hyperparameters:
        """The whole hyperparameter block: the trainer's defaults for the algorithm with
        :attr:`hyperparameters` over them."""
        return Hyperparameters.of(self.trainer, self.algo, self.hyperparameters)

    @property
    def episode_seed_range(self) -> range | None:
        """The seeds training episodes draw from (``episode_seeds`` of them), or ``None`` for
        a fresh seed per episode."""
        return range(self.episode_seeds) if self.episode_seeds > 0 else None

    @property
    def run_schedule(self) -> str:
        """The torch trainer's schedule (:data:`SCHEDULES`): :attr:`schedule` where given,
        else ``split`` for ``compiled`` on an x86 CPU with two environments or more (the fastest
        on an otherwise idle machine, and PPO with no policy lag: ``docs/training.md``),
        ``pipelined`` for ``compiled`` on other CPUs, and ``sequential`` for the rest."""
        if self.schedule is not None:
            return self.schedule
        if self.trainer != "compiled" or self.device != "cpu":
            return "sequential"
        if not stores_in_order():
            return "pipelined"
        return "split" if self.n_envs >= 2 else "sequential"

    @property
    def run_overlapped(self) -> bool:
        """Whether a worker process plays the rollouts (the ``pipelined`` schedule)."""
        return self.run_schedule == "pipelined"

    @property
    def second_process(self) -> bool:
        """Whether the run starts a second process (pipelined or split)."""
        return self.trainer in TORCH_TRAINERS and self.run_schedule != "sequential"

    @property
    def name(self) -> str:
        """The run name: the trainer (but SB3's), algorithm, reward, data sets, any other
        non-default setting, the seed and the training steps (or the name given), so runs
        under other settings or of other lengths never share a folder."""
        if self.run_name:
            return self.run_name
        one = Path(str(self.datasets[0])).stem  # a name, or a path's file stem
        sets = one if len(self.datasets) == 1 else f"{len(self.datasets)}sets"
        reward = self.settings.reward
        others = self.settings.replace(reward=Settings().reward)  # the reward is named already
        tag = "" if others == Settings() else f"-{others.name}"
        replay = "-replay" if self.replay_store else ""
        version = "" if self.observation == "v0" else f"-{self.observation}"
        trainer = "" if self.trainer == "sb3" else f"{self.trainer}-"
        return (f"{trainer}{self.algo}-{reward}-{sets}{tag}{version}{replay}-s{self.seed}"
                f"-{self.total_timesteps}steps")

    @property
    def run_dir(self) -> Path:
        """Folder holding everything this run writes."""
        return Path(self.output_dir) / self.name

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON values (its settings with their name, ``Settings.to_dict``);
        ``TrainConfig(**config.to_dict())`` is the config again."""
        values = asdict(self)
        values["settings"] = self.settings.to_dict()
        return values


@dataclass(frozen=True)
class TrainResult:
    """Where a finished run put its files, and how long it took."""

    model_path: Path
    settings_path: Path
    run_dir: Path
    seconds: float


__all__ = ["PPO_ARGUMENTS", "SCHEDULES", "TORCH_ALGORITHMS", "TORCH_TRAINERS", "TRAINERS",
           "TRAINER_DEFAULTS", "TRAINER_SIZES", "VEC_ENVS", "Hyperparameters", "TrainConfig",
           "TrainResult"]
