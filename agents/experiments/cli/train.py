"""Train an allocation policy (a stable-baselines3 model) on BALLAD data sets: SB3's PPO, A2C,
DQN or MaskablePPO, or PPO and MaskablePPO batched in torch on the replay environment.

Every trainer writes ``<output-dir>/<run>/<run>.zip`` (the model), ``<run>.json`` (its
settings), ``monitor/*.monitor.csv`` (one row per training episode; the torch trainers', one
per rollout), ``logs/progress.csv`` (the update's statistics), ``eval/`` and
``checkpoints/`` when asked, and ``curve.png``. The run name
carries the algorithm, reward, data sets, seed and steps; training again under the name of an
earlier run, finished or interrupted (its checkpoints), is refused unless ``--overwrite``.
Compare the result with ``agents.policy.load_policy(path)`` or by giving the ``.zip`` path to
the experiment runner; checkpoints and ``eval/best_model.zip`` work too.

Example::

    ballad-env train --algo maskable_ppo --reward val_cost \\
        --datasets Pima WBC Glass --total-timesteps 3000

``--replay-store DIR`` trains on the replay environment instead: the same episodes, read
from a lattice store built by ``ballad-env lattices``, far faster (``docs/REPLAY.md``).
``--trainer batched --replay-store DIR`` (or ``compiled``) trains PPO or MaskablePPO on N
replay episodes at once, batched in torch (``docs/training.md``): the same run folder and an
SB3 model, several times faster than the SB3 trainer. Every trainer takes the one
``TrainConfig`` this command builds (``agents.experiments.training.train``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    add_plugin_argument,
    datasets_from,
    import_plugins,
)
from agents.experiments.cli.parsing import JobParser
from agents.experiments.lattice_build import store_datasets
from agents.experiments.stores.results import RunError
from agents.experiments.training import train_and_plot
from agents.experiments.training.config import (
    SCHEDULES,
    TRAINER_SIZES,
    TRAINERS,
    VEC_ENVS,
    Hyperparameters,
    TrainConfig,
)
from agents.policy_files import ALGORITHMS
from ballad_env.files import is_disk_full, write_failure
from ballad_env.observation import OBSERVATIONS
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args

#: The data set of ``--datasets`` when neither it nor a store says which.
DEFAULT_DATASET = "toy"
#: The hyperparameter options, by their ``Hyperparameters`` names: given ones override the
#: trainer's defaults.
HYPERPARAMETER_OPTIONS = ("learning_rate", "gamma", "n_steps", "batch_size", "ent_coef",
                          "net_arch", "n_epochs", "train_freq", "gradient_steps")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; every option maps to a ``TrainConfig`` field."""
    p = JobParser(description=__doc__.split("\n\n")[0],
                  formatter_class=HelpFormatter)
    sizes = TRAINER_SIZES
    p.add_argument("--trainer", choices=TRAINERS, default="sb3",
                   help="sb3: stable-baselines3 (every algorithm); batched: PPO or MaskablePPO "
                        "on the vector replay environment, batched in torch (--replay-store); "
                        "compiled: the same with one compiled minibatch step")
    p.add_argument("--no-overlap", action="store_true",
                   help="compiled (or batched) trainer: one process, each rollout played "
                        "after the update before it (as --schedule sequential)")
    p.add_argument("--schedule", choices=SCHEDULES, default=None,
                   help="torch trainers: how the second core works: sequential (not at all, "
                        "as --no-overlap), pipelined (a worker plays the next rollout during "
                        "the update; faster than split on a busy machine) or split (two "
                        "processes each play half of the environments and compute half of "
                        "every minibatch's gradient; compiled only, and its default on an "
                        "x86 CPU)")
    p.add_argument("--algo", choices=ALGORITHMS, default="ppo", help="RL algorithm")
    p.add_argument("--datasets", nargs="+", default=None,
                   help="data sets (names or paths); one is drawn per episode (default: every "
                        "data set of --replay-store, else toy)")
    p.add_argument("--datasets-from", type=Path, default=None,
                   help="JSON with a 'train' list of data sets (e.g. docs/policy_split.json)")
    p.add_argument("--data-dir", default=None, help="folder of data files ($BALLAD_DATA_DIR)")
    p.add_argument("--total-timesteps", type=int, default=None,
                   help=f"environment steps (default: {sizes['sb3']['total_timesteps']:,} for "
                        f"sb3, {sizes['batched']['total_timesteps']:,} for batched and "
                        "compiled, rounded up to whole rollouts)")
    p.add_argument("--seed", type=int, default=0, help="seed of the model and the workers")
    p.add_argument("--seeds", type=int, default=None,
                   help="train N policies, at --seed .. --seed + N - 1 (each its own run, "
                        "<name>-seed<k>), and write <name>-seeds.json: the IQM of their "
                        "evaluation cost and its bootstrap interval (needs --replay-store)")
    p.add_argument("--n-envs", type=int, default=None,
                   help=f"parallel environments (default: {sizes['sb3']['n_envs']} for sb3, "
                        f"{sizes['batched']['n_envs']} for batched and compiled)")
    p.add_argument("--vec-env", choices=VEC_ENVS, default="subproc",
                   help="sb3: subproc: one process per worker; dummy: all in this process; "
                        "vector: the replay environment stepped N at once (--replay-store); "
                        "the torch trainers always step vector")
    _add_hyperparameters(p)
    p.add_argument("--observation", choices=tuple(OBSERVATIONS), default="v0",
                   help="observation version the policy reads (v1 adds the validation-sample "
                        "cost and its standard error)")
    p.add_argument("--eval-freq", type=int, default=0,
                   help="evaluate every this many steps (0: never)")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help=f"episodes per evaluation (default: {sizes['sb3']['eval_episodes']} "
                        f"for sb3, {sizes['batched']['eval_episodes']} for batched and "
                        "compiled)")
    p.add_argument("--eval-seed", type=int, default=100_000,
                   help="seed of the (same) evaluation episodes")
    p.add_argument("--checkpoint-freq", type=int, default=0,
                   help="save a checkpoint every this many steps (0: never)")
    p.add_argument("--output-dir", default="results/policies", help="where runs are written")
    p.add_argument("--run-name", default=None, help="override the derived run name")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier run of the same name, finished or interrupted (refused "
                   "otherwise)")
    p.add_argument("--torch-threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--episode-seeds", type=int, default=0,
                   help="0: a fresh seed per training episode; N: draw it from 0..N-1, so "
                        "each reset is computed once per worker and then cached")
    p.add_argument("--replay-store", default=None,
                   help="a lattice store (ballad-env lattices): train on the replay "
                        "environment, from the stored cells of --datasets")
    add_execution_arguments(p, progress=True)
    add_plugin_argument(p)
    add_settings_arguments(p, defaults=Settings(reward="cost"))
    return p.parse_args(argv)


def _add_hyperparameters(p: argparse.ArgumentParser) -> None:
    """The hyperparameter options (``Hyperparameters``' fields; not given: the trainer's
    default, which the help names)."""
    sb3, torch = Hyperparameters(), Hyperparameters.of("batched", "ppo", {})
    p.add_argument("--learning-rate", type=float, default=None,
                   help=f"optimiser step size (default {sb3.learning_rate} for sb3, "
                        f"{torch.learning_rate} for batched and compiled)")
    p.add_argument("--gamma", "--discount", dest="gamma", type=float, default=None,
                   help=f"the discount (default {sb3.gamma}: the return is the whole cost "
                        "decrease)")
    p.add_argument("--n-steps", type=int, default=None,
                   help=f"rollout length per environment (PPO, A2C; default {sb3.n_steps} and "
                        f"15 for sb3, {torch.n_steps} for batched and compiled)")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"minibatch (default: PPO {sb3.batch_size}, DQN 32 for sb3; "
                        f"{torch.batch_size} for batched and compiled)")
    p.add_argument("--ent-coef", type=float, default=None,
                   help=f"entropy bonus (PPO, A2C; default {sb3.ent_coef})")
    p.add_argument("--net-arch", type=int, nargs="+", default=None,
                   help=f"hidden layers (default {' '.join(map(str, sb3.net_arch))})")
    p.add_argument("--n-epochs", type=int, default=None,
                   help=f"PPO: passes over each rollout (default {sb3.n_epochs} for sb3, "
                        f"{torch.n_epochs} for batched and compiled)")
    p.add_argument("--train-freq", type=int, default=None,
                   help=f"DQN: vector steps between updates (default {sb3.train_freq})")
    p.add_argument("--gradient-steps", type=int, default=None,
                   help=f"DQN: gradient steps per update (default {sb3.gradient_steps})")


def chosen_datasets(args: argparse.Namespace) -> list[str] | None:
    """The data sets the command line names (``--datasets`` or ``--datasets-from``), or
    ``None`` when it names none."""
    if args.datasets_from is not None:
        return list(datasets_from(args.datasets_from))
    return None if args.datasets is None else list(args.datasets)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's configuration from the parsed command line, for every trainer: each option
    named as a ``TrainConfig`` field is that field; the sizes not given are the trainer's
    (``TRAINER_SIZES``), the hyperparameters given override its defaults."""
    settings = settings_from_args(args)[0]
    datasets = chosen_datasets(args)
    if datasets is None:  # every data set of the store, or toy
        datasets = [DEFAULT_DATASET] if args.replay_store is None else store_datasets(
            args.replay_store, settings)
    options = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    sizes = {name: default if getattr(args, name) is None else getattr(args, name)
             for name, default in TRAINER_SIZES[args.trainer].items()}
    given = {name: getattr(args, name) for name in HYPERPARAMETER_OPTIONS
             if getattr(args, name) is not None}
    return TrainConfig(**{**options, **sizes, "datasets": tuple(datasets), "settings": settings,
                          "hyperparameters": given, "progress_bar": not args.no_progress,
                          "schedule": chosen_schedule(args)})


def chosen_schedule(args: argparse.Namespace) -> str | None:
    """``--schedule``, or ``sequential`` for ``--no-overlap`` (its other name); both at
    once must agree."""
    if not args.no_overlap:
        return args.schedule
    if args.schedule not in (None, "sequential"):
        raise ValueError(f"--no-overlap is --schedule sequential, not {args.schedule}: give "
                         "one of --no-overlap and --schedule")
    return "sequential"


def _sweep(config: TrainConfig, n_seeds: int) -> int:
    """``--seeds N``: the sweep (``training.seed_sweep``), its runs and its summary."""
    from agents.experiments.training.seed_sweep import train_seeds

    results, path = train_seeds(config, n_seeds)
    summary = json.loads(path.read_text())
    for result, cost in zip(results, summary["mean_cost_by_seed"], strict=True):
        print(f"model    {result.model_path} (evaluation cost {cost:.4f})")
    low, high = summary["iqm_interval"]
    print(f"IQM of the evaluation cost over {n_seeds} seeds: {summary['iqm_cost']:.4f} "
          f"(95% interval {low:.4f} to {high:.4f})")
    print(f"summary  {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Train, plot the curves and say where everything went; a bad option returns 2."""
    import_plugins(argv)
    args = parse_args(argv)
    try:
        config = config_from_args(args)
        if args.seeds is not None:
            return _sweep(config, args.seeds)
        result, curve = train_and_plot(config)
    except (RunError, ValueError, FileNotFoundError) as err:  # StoreError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a checkpoint, log or model written to a full disk
        if not is_disk_full(err):
            raise
        print(f"error: {write_failure(args.output_dir, err, 'give another --output-dir')}",
              file=sys.stderr)
        return 2
    steps = json.loads(result.settings_path.read_text())["num_timesteps"]
    print(f"trained {config.name} in {result.seconds:.1f} s "
          f"({steps / max(result.seconds, 1e-9):,.0f} steps/s)")
    print(f"model    {result.model_path}")
    print(f"settings {result.settings_path}")
    print(f"curve    {curve}")
    return 0

