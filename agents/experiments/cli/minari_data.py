"""Record replay episodes as a Minari dataset (offline RL): a policy played on a lattice store.

Every stored cell once (or ``--episodes N`` drawn by the environment), played by
``--policy``: ``optimal`` / ``optimal-final`` (the lattice's hindsight optima), an agent name
(``oracle``, ``ballad``, ``all-in-lr``, ...) or a saved policy ``<run>.zip``. The dataset
holds observations, actions, rewards, terminations, truncations and the numeric ``info``
(the test cost among them), and the environment's spec, so
``agents.interop.minari_datasets.recover_recorded(ID)`` rebuilds the replay
environment (its spec checked first: Minari's own ``recover_environment`` runs whatever
entry point a dataset's metadata names).
Datasets go to ``$MINARI_DATASETS_PATH`` (``--minari-path``), else ``~/.minari/datasets``.

Example::

    ballad-env minari --store results/lattices --policy optimal \\
        --dataset-id ballad/replay-optimal-v0
"""

from __future__ import annotations

import argparse
import os
import sys

from agents.experiments.cli import HelpFormatter
from agents.experiments.cli.parsing import JobParser
from ballad_env.observation import OBSERVATIONS
from ballad_env.replay.store import StoreError
from ballad_env.settings import Settings
from ballad_env.settings.cli import add_settings_arguments, settings_from_args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = JobParser(description=__doc__.split("\n\n")[0],
                  formatter_class=HelpFormatter)
    p.add_argument("--store", required=True, help="a lattice store (ballad-env lattices)")
    p.add_argument("--policy", required=True,
                   help="optimal, optimal-final, an agent name or a saved policy .zip")
    p.add_argument("--dataset-id", required=True,
                   help="the Minari dataset id, e.g. ballad/replay-optimal-v0")
    p.add_argument("--datasets", nargs="+", default=None, help="stored data sets (default: all)")
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="stored episode seeds (default: all)")
    p.add_argument("--episodes", type=int, default=None,
                   help="episodes drawn by the environment (default: every cell once)")
    p.add_argument("--seed", type=int, default=0, help="first reset seed with --episodes")
    p.add_argument("--observation", choices=tuple(OBSERVATIONS), default="v0",
                   help="observation version")
    p.add_argument("--minari-path", default=None,
                   help="Minari's dataset folder (sets $MINARI_DATASETS_PATH)")
    p.add_argument("--author", default=None, help="the dataset's author")
    p.add_argument("--trust-pickle", action="store_true",
                   help="load a saved policy with SB3's full loader (runs code stored in it)")
    add_settings_arguments(p, defaults=Settings(reward="cost"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Record the dataset and say where it went; a bad option returns 2."""
    args = parse_args(argv)
    if args.minari_path is not None:  # absolute: the folder it names from here
        os.environ["MINARI_DATASETS_PATH"] = os.path.abspath(os.path.expanduser(args.minari_path))
    from agents.experiments.stores.results import RunError
    from agents.interop.minari_datasets import minari_folder, record_dataset

    settings = settings_from_args(args)[0]
    chosen = None if settings == settings_from_args(parse_args(
        ["--store", ".", "--policy", ".", "--dataset-id", "."]))[0] else settings
    try:
        dataset = record_dataset(args.store, args.policy, args.dataset_id,
                                 settings=chosen, observation=args.observation,
                                 datasets=args.datasets, seeds=args.seeds,
                                 episodes=args.episodes, seed=args.seed,
                                 trust_pickle=args.trust_pickle, author=args.author)
    except (StoreError, RunError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"recorded {dataset.total_episodes} episodes ({dataset.total_steps} steps) as "
          f"{args.dataset_id} in {minari_folder()}")
    return 0
