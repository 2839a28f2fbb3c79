"""Train a stable-baselines3 allocation policy on BALLAD data sets (PPO, A2C, DQN, MaskablePPO).

Writes ``<output-dir>/<run>/<run>.zip`` (the model), ``<run>.json`` (its settings),
``monitor/*.monitor.csv`` (one row per training episode), ``logs/progress.csv`` (SB3's
statistics), ``eval/`` and ``checkpoints/`` when asked, and ``curve.png``. The run name
carries the algorithm, reward, data sets, seed and steps; training again under the name of an
earlier run, finished or interrupted (its checkpoints), is refused unless ``--overwrite``.
Compare the result with ``agents.policy.load_policy(path)`` or by giving the ``.zip`` path to
the experiment runner; checkpoints and ``eval/best_model.zip`` work too.

Example::

    ballad-env train --algo maskable_ppo --reward val_cost \\
        --datasets Pima WBC Glass --total-timesteps 3000

``--replay-store DIR`` trains on the replay environment instead: the same episodes, read
from a lattice store built by ``ballad-env lattices`` (200 to 2,000 times faster).
``--trainer batched --replay-store DIR`` trains PPO or MaskablePPO on N replay episodes at
once, batched in torch (``training.batched.train_batched``; ``docs/training.md``): the same
run folder and an SB3 model, several times faster than the SB3 path.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agents.experiments.cli import (
    HelpFormatter,
    add_execution_arguments,
    add_plugin_argument,
    datasets_from,
    import_plugins,
)
from agents.experiments.cli.parsing import JobParser
from agents.experiments.stores.results import RunError
from agents.experiments.training.bounds import check_training_sizes
from agents.experiments.training.config import VEC_ENVS, TrainConfig
from agents.experiments.training.policy_runs import plot_training_curves, train_and_plot
from agents.policy_files import ALGORITHMS
from ballad_env.files import is_disk_full, write_failure
from ballad_env.observation import OBSERVATIONS
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args

#: ``--trainer``: stable-baselines3, or the batched trainer (``training.batched``) with the
#: autograd update or the compiled fused one.
TRAINERS = ("sb3", "batched", "compiled")
#: ``--total-timesteps`` by trainer: a short SB3 run; for the batched trainer, about 66
#: rollouts of N = 1,024 (seconds on a CPU, ``docs/training.md``), not a single one.
TIMESTEPS = {"sb3": 3000, "batched": 1_000_000, "compiled": 1_000_000}
#: The data set of ``--datasets`` when neither it nor a store says which.
DEFAULT_DATASET = "toy"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; every option maps to a ``TrainConfig`` field."""
    p = JobParser(description=__doc__.split("\n\n")[0],
                  formatter_class=HelpFormatter)
    p.add_argument("--trainer", choices=TRAINERS, default="sb3",
                   help="sb3: stable-baselines3 (every algorithm); batched: PPO or MaskablePPO "
                        "on the vector replay environment, batched in torch (--replay-store); "
                        "compiled: the same with one compiled fused minibatch step")
    p.add_argument("--no-overlap", action="store_true",
                   help="compiled (or batched) trainer: play each rollout after the update "
                        "before it in this process, instead of a worker process playing the "
                        "next rollout during the update (the default of compiled)")
    p.add_argument("--algo", choices=ALGORITHMS, default="ppo", help="RL algorithm")
    p.add_argument("--datasets", nargs="+", default=None,
                   help="data sets (names or paths); one is drawn per episode (default: every "
                        "data set of --replay-store, else toy)")
    p.add_argument("--datasets-from", type=Path, default=None,
                   help="JSON with a 'train' list of data sets (e.g. docs/policy_split.json)")
    p.add_argument("--data-dir", default=None, help="folder of data files ($BALLAD_DATA_DIR)")
    p.add_argument("--total-timesteps", type=int, default=None,
                   help=f"environment steps (default: {TIMESTEPS['sb3']:,} for sb3, "
                        f"{TIMESTEPS['batched']:,} for batched and compiled, rounded up to "
                        "whole rollouts)")
    p.add_argument("--seed", type=int, default=0, help="seed of the model and the workers")
    p.add_argument("--n-envs", type=int, default=None,
                   help="parallel environments (default: 2 for sb3, 1024 for batched)")
    p.add_argument("--vec-env", choices=VEC_ENVS, default="subproc",
                   help="subproc: one process per worker; dummy: all in this process; "
                        "vector: the replay environment stepped N at once (--replay-store)")
    p.add_argument("--learning-rate", type=float, default=3e-4, help="optimiser step size")
    p.add_argument("--discount", type=float, default=1.0,
                   help="SB3's gamma (1: the return is the whole cost decrease)")
    p.add_argument("--n-steps", type=int, default=None,
                   help="rollout length per worker (PPO/A2C; default 60 and 15)")
    p.add_argument("--batch-size", type=int, default=None, help="minibatch (PPO 60, DQN 32)")
    p.add_argument("--ent-coef", type=float, default=0.01, help="entropy bonus (PPO/A2C)")
    p.add_argument("--net-arch", type=int, nargs="+", default=[64, 64], help="hidden layers")
    p.add_argument("--n-epochs", type=int, default=10, help="PPO: passes over each rollout")
    p.add_argument("--train-freq", type=int, default=1, help="DQN: vector steps between updates")
    p.add_argument("--gradient-steps", type=int, default=1,
                   help="DQN: gradient steps per update")
    p.add_argument("--observation", choices=tuple(OBSERVATIONS), default="v0",
                   help="observation version the policy reads (v1 adds the validation-sample "
                        "cost and its standard error)")
    p.add_argument("--eval-freq", type=int, default=0,
                   help="evaluate every this many steps (0: never)")
    p.add_argument("--eval-episodes", type=int, default=6, help="episodes per evaluation")
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


def chosen_datasets(args: argparse.Namespace) -> list[str] | None:
    """The data sets the command line names (``--datasets`` or ``--datasets-from``), or
    ``None`` when it names none."""
    if args.datasets_from is not None:
        return list(datasets_from(args.datasets_from))
    return None if args.datasets is None else list(args.datasets)


def store_datasets(store: str, settings: Settings) -> list[str]:
    """Every data set the lattice store holds under ``settings`` (the SB3 path's default on
    a store, the batched trainer's too); ``ValueError`` when it holds none."""
    from ballad_env.replay.store import LatticeStore

    names = sorted({name for name, _ in LatticeStore(store).cells(settings)})
    if not names:
        raise ValueError(f"the store {store} has no lattice of setting {settings.name}: "
                         "build one with ballad-env lattices, or pass the setting it holds "
                         "(--prior, --c-fn, ...)")
    return names


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's settings from the parsed command line."""
    datasets = chosen_datasets(args)
    if datasets is None:  # the store's data sets, as the batched trainer takes them
        datasets = [DEFAULT_DATASET] if args.replay_store is None else store_datasets(
            args.replay_store, settings_from_args(args)[0])
    return TrainConfig(
        algo=args.algo, datasets=tuple(datasets), data_dir=args.data_dir,
        settings=settings_from_args(args)[0],
        total_timesteps=args.total_timesteps or TIMESTEPS["sb3"], seed=args.seed,
        n_envs=args.n_envs or 2, vec_env=args.vec_env, learning_rate=args.learning_rate,
        discount=args.discount, n_steps=args.n_steps, batch_size=args.batch_size,
        ent_coef=args.ent_coef, net_arch=tuple(args.net_arch), n_epochs=args.n_epochs,
        train_freq=args.train_freq, gradient_steps=args.gradient_steps,
        observation=args.observation, eval_freq=args.eval_freq,
        eval_episodes=args.eval_episodes, eval_seed=args.eval_seed,
        checkpoint_freq=args.checkpoint_freq, output_dir=args.output_dir,
        run_name=args.run_name, torch_threads=args.torch_threads, overwrite=args.overwrite,
        episode_seeds=args.episode_seeds, replay_store=args.replay_store,
        progress_bar=not args.no_progress)


#: The batched trainer's hyperparameters the SB3 path's options set, when given.
BATCHED_OPTIONS = {"learning_rate": "learning_rate", "discount": "gamma", "n_steps": "n_steps",
                   "batch_size": "batch_size", "ent_coef": "ent_coef", "net_arch": "net_arch",
                   "n_epochs": "n_epochs"}


def train_batched_from_args(args: argparse.Namespace) -> int:
    """``--trainer batched`` or ``compiled``: the batched trainer with the SB3 path's options
    where they apply (hyperparameters only where given on the command line)."""
    from agents.experiments.training.batched import train_batched

    if args.replay_store is None:
        raise ValueError(f"--trainer {args.trainer} trains on the replay environment: give "
                         "--replay-store DIR (a store built with ballad-env lattices)")
    check_training_sizes({"n_steps": args.n_steps, "batch_size": args.batch_size,
                          "n_epochs": args.n_epochs, "net_arch": args.net_arch,
                          "n_envs": args.n_envs})
    defaults = parse_args([])
    hyper = {name: getattr(args, option) for option, name in BATCHED_OPTIONS.items()
             if getattr(args, option) != getattr(defaults, option)}
    datasets = chosen_datasets(args)  # None: every data set of the store
    seeds = range(args.episode_seeds) if args.episode_seeds else None
    run_dir = train_batched(args.replay_store, algo=args.algo, datasets=datasets, seeds=seeds,
                            settings=settings_from_args(args)[0], observation=args.observation,
                            n_envs=args.n_envs or 1024,
                            total_timesteps=args.total_timesteps or TIMESTEPS[args.trainer],
                            seed=args.seed, threads=args.torch_threads, hyperparameters=hyper,
                            eval_freq=args.eval_freq, output_dir=args.output_dir,
                            run_name=args.run_name, eval_seed=args.eval_seed,
                            overwrite=args.overwrite, trainer=args.trainer,
                            overlap=False if args.no_overlap else None,
                            checkpoint_freq=args.checkpoint_freq,
                            **({"eval_episodes": args.eval_episodes}
                               if args.eval_episodes != defaults.eval_episodes else {}))
    record = json.loads((run_dir / f"{run_dir.name}.json").read_text())
    curve = plot_training_curves({run_dir.name: [run_dir]}, run_dir / "curve.png",
                                 title=run_dir.name)
    print(f"trained {run_dir.name} in {record['train_seconds']:.1f} s "
          f"({record['num_timesteps'] / max(record['train_seconds'], 1e-9):,.0f} steps/s)")
    print(f"model    {run_dir / run_dir.name}.zip")
    print(f"settings {run_dir / run_dir.name}.json")
    print(f"curve    {curve}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Train, plot the curves and say where everything went; a bad option returns 2."""
    import_plugins(argv)
    try:
        args = parse_args(argv)
        if args.trainer != "sb3":
            return train_batched_from_args(args)
        config = config_from_args(args)
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
    print(f"trained {config.name} in {result.seconds:.1f} s")
    print(f"model    {result.model_path}")
    print(f"settings {result.settings_path}")
    print(f"curve    {curve}")
    return 0

