"""rl-zoo3 on the BALLAD environments: its hyperparameter files, and MaskablePPO by name.

``ppo.yml``, ``ppo_mask.yml`` and ``dqn.yml`` (beside this module; :func:`conf_file`) hold
rl-zoo3 hyperparameters for both environment ids, ``ballad_env/BudgetAllocationReplay-v0``
and ``ballad_env/BudgetAllocation-v0``::

    python -m rl_zoo3.train --algo ppo --env ballad_env/BudgetAllocationReplay-v0 \\
        --gym-packages ballad_env --conf-file agents/interop/zoo/ppo.yml \\
        --env-kwargs store:"'results/lattices'" reward:"'cost'"

rl-zoo3 2.9.2 has no MaskablePPO among its algorithms; ``python -m agents.interop.zoo``
takes rl-zoo3's ``train`` arguments, adds sb3-contrib's ``MaskablePPO`` as ``ppo_mask`` to
rl-zoo3's table of algorithms, fills in ``--gym-packages ballad_env`` and this folder's
``--conf-file`` for the algorithm when they are not given, and runs rl-zoo3's ``train``.

rl-zoo3 runs parts of a hyperparameter file as Python (``eval`` of ``policy_kwargs`` strings
and others, a ``.py`` file executed): the launcher refuses hyperparameters holding code, and
a ``--trained-agent`` (unpickled), unless ``--trust-conf-file`` is given
(:mod:`agents.interop.zoo.trust`; ``docs/trust.md``). This folder's files hold
data only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from agents.interop.zoo.conf_yaml import ConfYamlError
from agents.interop.zoo.trust import TRUST_OPTION, CodeInConfig, guarded

#: The algorithms this folder holds hyperparameters for (rl-zoo3's names).
ZOO_ALGOS = ("ppo", "ppo_mask", "dqn")


def conf_file(algo: str) -> Path:
    """The rl-zoo3 hyperparameter file of ``algo`` (``ppo``, ``ppo_mask`` or ``dqn``)."""
    if algo not in ZOO_ALGOS:
        raise ValueError(f"no rl-zoo3 hyperparameters for {algo!r}: use one of {ZOO_ALGOS}")
    return Path(__file__).with_name(f"{algo}.yml")


def add_maskable_ppo() -> None:
    """Register sb3-contrib's MaskablePPO in rl-zoo3's algorithms as ``ppo_mask``."""
    from rl_zoo3.utils import ALGOS
    from sb3_contrib import MaskablePPO

    ALGOS.setdefault("ppo_mask", MaskablePPO)


def zoo_argv(argv: Sequence[str]) -> list[str]:
    """rl-zoo3's ``train`` arguments with ``--gym-packages ballad_env`` and this folder's
    ``--conf-file`` for the algorithm added where absent."""
    args = list(argv)
    if "--gym-packages" not in args:
        args += ["--gym-packages", "ballad_env"]
    if "--conf-file" not in args and "-conf" not in args:
        algo = next((args[k + 1] for k, a in enumerate(args[:-1]) if a == "--algo"), None)
        if algo in ZOO_ALGOS:
            args += ["--conf-file", str(conf_file(algo))]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run rl-zoo3's ``train`` with MaskablePPO added and the project's defaults; without
    ``--trust-conf-file``, hyperparameters holding code are refused (exit 2, one line); a
    YAML file past its bounds is refused either way."""
    try:
        from rl_zoo3.exp_manager import ExperimentManager
        from rl_zoo3.train import train
    except ModuleNotFoundError as err:
        from agents.extras import missing_extra

        raise missing_extra(err, "rl-zoo3 training") from err
    args = list(sys.argv[1:] if argv is None else argv)
    trusted = TRUST_OPTION in args
    add_maskable_ppo()
    sys.argv = ["rl_zoo3.train", *zoo_argv([a for a in args if a != TRUST_OPTION])]
    try:
        with guarded(ExperimentManager, trusted):
            train()
    except (CodeInConfig, ConfYamlError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


__all__ = ["ZOO_ALGOS", "add_maskable_ppo", "conf_file", "main", "zoo_argv"]
