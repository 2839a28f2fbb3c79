"""Which rl-zoo3 hyperparameters our launcher runs: those that hold no code.

rl-zoo3 reads its hyperparameters as data only in part: it ``eval()``s the string values of
``policy_kwargs``, ``replay_buffer_class``, ``replay_buffer_kwargs``, ``monitor_kwargs`` and
``normalize`` as Python, executes a ``.py`` ``--conf-file``, imports a module named as one,
imports and calls the objects that ``env_wrapper``, ``vec_env_wrapper`` and ``callback``
name, and ``--trained-agent`` loads a zip (and its ``vecnormalize.pkl``, ``replay_buffer.pkl``)
by unpickling. So a hyperparameter file is code to rl-zoo3. The launcher
(``python -m agents.interop.zoo``) checks, inside rl-zoo3's own run
(:func:`guarded`), the hyperparameters it is about to use, wherever they came from (the file,
an Optuna study, the command line), and refuses with a ``ValueError`` naming what would run
as code, unless it is given :data:`TRUST_OPTION` (for a file the user wrote or checked). The
files shipped beside this module write mappings where rl-zoo3 would eval strings, so they pass.

A name rl-zoo3 imports and calls is run without the opt-in only if it is one of the
callables the project ships (:data:`ALLOWED_CALLABLES`, by full dotted name): a trusted
package is not enough (``gymnasium.register`` with an entry point ``os:system``, then
``gymnasium.make``, runs a command). A YAML file is first read within bounds
(:mod:`agents.interop.zoo.conf_yaml`), trusted or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agents.interop.zoo.conf_yaml import check_conf_yaml

#: Keys whose string values rl-zoo3 evaluates as Python (``ExperimentManager``).
EVALUATED_KEYS = ("policy_kwargs", "replay_buffer_class", "replay_buffer_kwargs",
                  "monitor_kwargs", "normalize")
#: Keys whose values name objects rl-zoo3 imports and calls (``policy`` when dotted).
NAMED_KEYS = ("env_wrapper", "vec_env_wrapper", "callback", "policy")
#: The callables hyperparameters may name without :data:`TRUST_OPTION`: the wrappers the
#: project ships, under both names they are importable by.
ALLOWED_CALLABLES = frozenset({
    "ballad_env.wrappers.ValidActionWrapper", "ballad_env.wrappers.KeepInfo",
    "agents.experiments.training.envs.ValidActionWrapper",
    "agents.experiments.training.envs.KeepInfo"})
#: The launcher's opt-in: run hyperparameters that hold code, and load a trained agent.
TRUST_OPTION = "--trust-conf-file"


class CodeInConfig(ValueError):
    """Hyperparameters (or a saved agent) that rl-zoo3 would run as code, not trusted."""


def hyperparameter_problems(hyperparams: Mapping[str, Any]) -> list[str]:
    """What in one environment's hyperparameters rl-zoo3 would run as code or import and
    call beyond :data:`ALLOWED_CALLABLES`, one line each (empty: data only)."""
    problems = []
    for key in EVALUATED_KEYS:
        if isinstance(hyperparams.get(key), str):
            problems.append(f"{key} is the string {hyperparams[key]!r}, which rl-zoo3 runs "
                            "as Python: write it as a mapping (key: value lines)")
    for key in NAMED_KEYS:
        for name in _names(hyperparams.get(key)):
            if name not in ALLOWED_CALLABLES and (key != "policy" or "." in name):
                problems.append(f"{key} names {name!r}, which rl-zoo3 imports and calls: "
                                f"only {', '.join(sorted(ALLOWED_CALLABLES))} are run "
                                "without the opt-in")
    return problems


def config_problem(config: str) -> str | None:
    """Why rl-zoo3 would run the ``--conf-file`` ``config`` as code as a whole (a ``.py``
    file is executed, any other name imported as a module) or block on it (a FIFO), or
    ``None`` for a YAML file. The test is rl-zoo3's own, case-sensitive (``ppo.Yaml`` is
    imported as the module ``ppo``, running ``ppo.py``)."""
    if os.path.exists(config) and not os.path.isfile(config):
        return f"the --conf-file {config} is not a regular file (a FIFO or a folder)"
    if str(config).endswith(".yml") or str(config).endswith(".yaml"):
        return None
    return (f"the --conf-file {config} does not end in .yml or .yaml (lower case): rl-zoo3 "
            "executes a .py file and imports a module of any other name")


def _names(value: Any) -> Iterator[str]:
    """The dotted names in a wrapper or callback entry (a name, a mapping or a list)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key in value:
            yield str(key)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _names(item)


def _refuse(what: str, problems: list[str]) -> CodeInConfig:
    return CodeInConfig(f"{what} holds code rl-zoo3 would run:\n  " + "\n  ".join(problems)
                        + f"\nRewrite it as data, or add {TRUST_OPTION} if you wrote or "
                        "checked it (it then runs as code)")


@contextmanager
def guarded(exp_manager: Any, trusted: bool = False) -> Iterator[None]:
    """Within the ``with`` block, rl-zoo3's ``ExperimentManager`` class (``exp_manager``) reads
    a YAML ``--conf-file`` within bounds first (:func:`check_conf_yaml`) and, unless
    ``trusted``, refuses before running any of it a configuration that holds code: a ``.py``
    or module ``--conf-file``, evaluated strings or names beyond :data:`ALLOWED_CALLABLES`
    in the hyperparameters it is about to use, and a ``--trained-agent`` (unpickled)."""
    setup, preprocess = exp_manager.setup_experiment, exp_manager._preprocess_hyperparams

    def setup_experiment(self: Any) -> Any:
        problem = config_problem(self.config) if self.config else None
        if self.config and problem is None:
            check_conf_yaml(self.config)  # before rl-zoo3 loads and prints it
        if trusted:
            return setup(self)
        if problem:
            raise _refuse(f"the hyperparameter file {self.config}", [problem])
        if self.continue_training:
            raise _refuse(f"the trained agent {self.trained_agent}", [
                "stable-baselines3's full loader unpickles it (and its vecnormalize.pkl "
                "and replay_buffer.pkl), running any code stored in them"])
        return setup(self)

    def _preprocess_hyperparams(self: Any, hyperparams: dict[str, Any]) -> Any:
        problems = [] if trusted else hyperparameter_problems(hyperparams)
        if problems:
            raise _refuse(f"the hyperparameters of {self.env_name.gym_id} (from "
                          f"{self.config or 'rl-zoo3'} and the command line)", problems)
        return preprocess(self, hyperparams)

    exp_manager.setup_experiment = setup_experiment
    exp_manager._preprocess_hyperparams = _preprocess_hyperparams
    try:
        yield
    finally:
        exp_manager.setup_experiment = setup
        exp_manager._preprocess_hyperparams = preprocess


__all__ = ["ALLOWED_CALLABLES", "EVALUATED_KEYS", "NAMED_KEYS", "TRUST_OPTION", "CodeInConfig",
           "config_problem", "guarded", "hyperparameter_problems"]
