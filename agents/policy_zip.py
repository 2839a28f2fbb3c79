"""Read a saved stable-baselines3 / sb3-contrib model without running code from the file.

SB3's own ``load`` unpickles every ``:serialized:`` entry of the zip's ``data`` member, so a
crafted policy file runs any code it holds when it is loaded. :func:`load_model_safely`
never does: it reads ``data`` as plain JSON and ignores what is serialized in it, builds the
algorithm from what the project itself knows (the algorithm and observation features of the
run's settings JSON, the environment's spaces: a ``Box`` in [0, 1] of the features' count
and ``Discrete(2)``, the ``MlpPolicy`` of the algorithm, plain-JSON policy and algorithm
arguments), and loads the weights with torch's weights-only loader. What it cannot
interpret is refused with :class:`PolicyFileError`, naming the file, the problem and the
opt-in (``trust_pickle=True``, SB3's full loader, for files from people one trusts).
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any

import torch
from gymnasium import spaces

from ballad_env.files import open_regular, zip_directory_problem
from ballad_env.observation import observation_space

#: Members of the zip the safe loader reads (SB3 writes them all).
DATA, WEIGHTS, OPTIMIZER = "data", "policy.pth", "policy.optimizer.pth"
#: Policy arguments the safe loader passes on when stored as plain JSON; anything else (an
#: activation function, a custom class) is only stored pickled and is refused.
PLAIN_POLICY_KWARGS = frozenset({"net_arch", "ortho_init", "normalize_images",
                                 "share_features_extractor", "log_std_init", "optimizer_kwargs"})
#: The most bytes each member may inflate to (a policy of the project's sizes holds tens of
#: kB of JSON and a few MB of weights); a larger declared size is refused before reading.
MEMBER_CEILINGS = {DATA: 16 << 20, WEIGHTS: 512 << 20, OPTIMIZER: 1 << 30}
#: Plain numbers that size the buffers an algorithm allocates when it is built: each must be
#: a whole number in [1, limit] (10^11 steps would ask numpy for terabytes).
SIZE_LIMITS = {"n_steps": 10**7, "n_envs": 10**4, "buffer_size": 10**7, "batch_size": 10**7}
#: The most steps a rollout buffer may hold: n_steps x n_envs (each within its own limit, the
#: product could ask for terabytes).
ROLLOUT_LIMIT = 10**7
#: The opt-in, as the refusal names it.
OPT_IN = ("if you trust whoever made this file, load it with trust_pickle=True "
          "(--trust-pickle on the command line), which runs any code stored in it")


class PolicyFileError(ValueError):
    """A saved policy the safe loader cannot interpret (or a file that is no saved policy)."""


def _refuse(path: Path, problem: str) -> PolicyFileError:
    return PolicyFileError(f"{path}: {problem}; the safe loader reads only weights and plain "
                           f"JSON from a policy file. {OPT_IN[0].upper()}{OPT_IN[1:]}.")


def _readable(value: Any) -> Any:
    """A value as SB3 writes it beside a pickled entry: itself when it is plain JSON, else
    its ``str`` (``stable_baselines3.common.save_util.data_to_json``)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _plain_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """The readable fields SB3 stores beside a pickled entry (never the pickle itself)."""
    return {k: v for k, v in entry.items() if k not in (":type:", ":serialized:")}


def _is_serialized(value: Any) -> bool:
    return isinstance(value, dict) and ":serialized:" in value


def _read_member(path: Path, archive: zipfile.ZipFile, member: str) -> bytes:
    """A member's bytes, refused by name when it declares more than its ceiling
    (:data:`MEMBER_CEILINGS`); zipfile never inflates a member past its declared size (a
    member that inflates further fails its CRC), so the declared size bounds the memory."""
    declared, ceiling = archive.getinfo(member).file_size, MEMBER_CEILINGS[member]
    if declared > ceiling:
        raise _refuse(path, f"its {member!r} member inflates to {declared} bytes, more than "
                            f"the {ceiling} bytes a policy's {member} may hold (a zip bomb?)")
    with archive.open(member) as handle:
        return handle.read(ceiling + 1)


def _check_directory(path: Path, what: str, handle: IO[bytes]) -> None:
    """Refuse ``what`` (the archive, or a zip inside a member) when its central directory
    passes ``ballad_env.files.MAX_ZIP_DIRECTORY_BYTES``, before a zip reader parses it."""
    problem = zip_directory_problem(handle)
    if problem:
        raise _refuse(path, f"{what}: {problem}")


def check_inner_archive(path: Path, member: str, blob: bytes) -> None:
    """Bound the archive nested in a weights member before torch reads it. torch saves
    tensors as a zip of its own (a pickle and one record per tensor) and ``torch.load``
    inflates each record to the size its headers declare: the declared sizes, read from
    those headers before anything is inflated, must sum to at most the member's ceiling
    (:data:`MEMBER_CEILINGS`), and its directory is bounded as the outer one's
    (``ballad_env.files``). torch's
    older format, a stream whose storages declare their sizes as they are read, is
    refused: stable-baselines3 has saved the zip format since torch 1.6."""
    if not blob.startswith(b"PK"):
        raise _refuse(path, f"its {member} is not plain tensors in torch's zip format")
    inner = io.BytesIO(blob)
    _check_directory(path, f"the zip in its {member}", inner)
    with zipfile.ZipFile(inner) as archive:
        declared = sum(info.file_size for info in archive.infolist())
    if declared > MEMBER_CEILINGS[member]:
        raise _refuse(path, f"the zip in its {member} member inflates to {declared} bytes, "
                            f"more than the {MEMBER_CEILINGS[member]} bytes a policy's "
                            f"{member} may hold (a zip bomb?)")


def read_archive(path: Path) -> tuple[dict[str, Any], bytes, bytes | None]:
    """The zip's ``data`` as plain JSON (nothing deserialised), the weights' bytes and the
    optimizer state's bytes (``None`` when absent); every nesting level is bounded from its
    headers before it is inflated (:func:`check_inner_archive`)."""
    try:
        with open_regular(path, "policy file") as handle:
            _check_directory(path, "the archive", handle)
            with zipfile.ZipFile(handle) as archive:
                names = set(archive.namelist())
                missing = [m for m in (DATA, WEIGHTS) if m not in names]
                if missing:
                    raise _refuse(path, f"the archive has no {' and no '.join(missing)} "
                                        "member (not a stable-baselines3 model?)")
                data = json.loads(_read_member(path, archive, DATA))
                weights = _read_member(path, archive, WEIGHTS)
                optimizer = (_read_member(path, archive, OPTIMIZER) if OPTIMIZER in names
                             else None)
        check_inner_archive(path, WEIGHTS, weights)
        if optimizer is not None:
            check_inner_archive(path, OPTIMIZER, optimizer)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError,
            zlib.error) as err:
        if isinstance(err, PolicyFileError):
            raise
        # a flipped byte gives BadZipFile (CRC), zlib.error or undecodable JSON
        raise PolicyFileError(f"{path}: not a readable stable-baselines3 model zip "
                              f"({type(err).__name__}: {err}); the file is damaged or is no "
                              "saved policy") from err
    if not isinstance(data, dict):
        raise _refuse(path, f"its {DATA!r} member is not a JSON object")
    return data, weights, optimizer


def policy_kwargs(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The policy's arguments from ``data``: plain JSON as they are, or, when SB3 pickled
    them (A2C adds its optimizer class), the plain readable fields beside the pickle, to be
    checked against what the algorithm builds (:func:`check_policy_kwargs`)."""
    if "policy_kwargs" not in data:
        raise _refuse(path, "its data member records no policy_kwargs")
    stored = data["policy_kwargs"]
    fields = _plain_fields(stored) if _is_serialized(stored) else stored
    if not isinstance(fields, dict):
        raise _refuse(path, f"its policy_kwargs are not a JSON object: {stored!r}")
    kwargs = {k: v for k, v in fields.items() if k in PLAIN_POLICY_KWARGS}
    other = sorted(set(fields) - set(kwargs) - {"optimizer_class"})
    if other:
        raise _refuse(path, f"its policy_kwargs hold {', '.join(other)}, which only a pickle "
                            "can restore")
    return kwargs


def check_policy_kwargs(path: Path, data: dict[str, Any], built: dict[str, Any]) -> None:
    """A pickled policy_kwargs entry must describe what the algorithm built (its readable
    fields equal), so nothing only the pickle knows (an optimizer class of its own) is lost."""
    stored = data["policy_kwargs"]
    if not _is_serialized(stored):
        return
    fields, rebuilt = _plain_fields(stored), {k: _readable(v) for k, v in built.items()}
    if fields != rebuilt:
        raise _refuse(path, f"its pickled policy_kwargs {fields} differ from those rebuilt "
                            f"without the pickle {rebuilt}")


def check_spaces(path: Path, data: dict[str, Any], observation: spaces.Box,
                 action: spaces.Discrete) -> None:
    """The spaces' readable fields in ``data`` (when there) must be the environment's."""
    checks = (("observation_space", "_shape", str(list(observation.shape))),
              ("action_space", "n", str(int(action.n))))
    for key, field, expected in checks:
        entry = data.get(key)
        if isinstance(entry, dict) and field in entry and str(entry[field]) != expected:
            raise _refuse(path, f"its {key} has {field} {entry[field]}, the environment's "
                                f"is {expected}")


def check_policy_class(path: Path, data: dict[str, Any], expected: type) -> None:
    """The recorded policy class (its readable module, when there) must be the algorithm's
    ``MlpPolicy``: the safe loader builds no other."""
    entry = data.get("policy_class")
    module = entry.get("__module__") if isinstance(entry, dict) else None
    if module is not None and module != expected.__module__:
        raise _refuse(path, f"its policy class comes from {module}, not "
                            f"{expected.__module__} ({expected.__name__}, the MlpPolicy built)")


def _plain_number(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float)


def copy_plain_attributes(path: Path, model: Any, data: dict[str, Any]) -> None:
    """Set the algorithm's numeric settings saved as plain JSON (gamma, exploration rates,
    step counts, ...) on the fresh model, as SB3's loader does; only attributes the fresh
    model has with a number (or None), so no entry can put anything else there, and the
    buffer sizes only as whole numbers within :data:`SIZE_LIMITS`."""
    for key, value in data.items():
        if (not key.startswith("__") and _plain_number(value) and hasattr(model, key)
                and _plain_number(getattr(model, key))):
            limit = SIZE_LIMITS.get(key)
            if limit is not None and not (isinstance(value, int) and not isinstance(value, bool)
                                          and 1 <= value <= limit):
                raise _refuse(path, f"its {key} is {value}, which must be a whole number in "
                                    f"[1, {limit}]")
            setattr(model, key, value)
    steps, envs = data.get("n_steps"), data.get("n_envs")
    if isinstance(steps, int) and isinstance(envs, int) and steps * envs > ROLLOUT_LIMIT:
        raise _refuse(path, f"its rollout of n_steps x n_envs = {steps} x {envs} = "
                            f"{steps * envs:,} steps passes {ROLLOUT_LIMIT:,} (the buffer "
                            "alone would take gigabytes)")


def _layer_lists(path: Path, net_arch: Any) -> list[list[int]]:
    """The hidden layers of each branch ``net_arch`` declares (a list of sizes, or a dict of
    them by branch), refused unless every size is a positive whole number."""
    branches = list(net_arch.values()) if isinstance(net_arch, dict) else [net_arch]
    for layers in branches:
        if not (isinstance(layers, list) and all(
                isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in layers)):
            raise _refuse(path, f"its policy_kwargs declare net_arch {net_arch!r}, which is "
                                "not lists of positive layer sizes")
    return branches


def check_network_size(path: Path, kwargs: dict[str, Any], state: Any, n_inputs: int) -> None:
    """Refuse a declared network the weights cannot fill, before it is built: every layer of
    ``net_arch`` is in the rebuilt policy, so its weights and biases (from ``n_inputs``
    features on) are at most the saved tensors' elements. A file declaring a network of
    10^8 parameters beside weights of 10^4 would otherwise allocate gigabytes first."""
    if "net_arch" not in kwargs:
        return
    held = sum(int(t.numel()) for t in state.values() if isinstance(t, torch.Tensor)) \
        if isinstance(state, dict) else 0
    declared = 0
    for layers in _layer_lists(path, kwargs["net_arch"]):
        sizes = [n_inputs, *layers]
        declared += sum(a * b + b for a, b in zip(sizes, sizes[1:], strict=False))
    if declared > held:
        raise _refuse(path, f"its policy_kwargs declare net_arch {kwargs['net_arch']}, at "
                            f"least {declared} parameters, but its weights hold {held}")


def _load_tensors(path: Path, blob: bytes, member: str) -> Any:
    try:
        return torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, ... here
        raise _refuse(path, f"its {member} is not plain tensors ({type(err).__name__}: "
                            f"{str(err).splitlines()[0] if str(err) else ''})") from err


def load_model_safely(path: str | Path, algorithm: type[Any], version: str,
                      recorded: dict[str, Any] | None = None) -> Any:
    """An SB3 ``algorithm`` object with the saved weights of ``path``, built without
    deserialising anything from the file (see the module docstring).

    ``version`` is the observation version the policy reads (from the settings JSON's
    ``observation_features``), which fixes the observation space.
    """
    path = Path(path)
    data, weights, optimizer = read_archive(path)
    obs_space = observation_space(version)
    act_space = spaces.Discrete(2)
    check_spaces(path, data, obs_space, act_space)
    policy_class = algorithm.policy_aliases["MlpPolicy"]
    check_policy_class(path, data, policy_class)
    kwargs = policy_kwargs(path, data)
    state = _load_tensors(path, weights, WEIGHTS)
    check_network_size(path, kwargs, state, int(obs_space.shape[0]))
    model = algorithm("MlpPolicy", env=None, device="cpu", policy_kwargs=kwargs,
                      _init_setup_model=False)
    check_policy_kwargs(path, data, model.policy_kwargs)
    model.n_envs = 1  # SB3's loader takes it from the file (plain JSON) too
    copy_plain_attributes(path, model, data)
    train_freq = (recorded or {}).get("train_freq")
    if hasattr(model, "train_freq") and isinstance(train_freq, int):
        model.train_freq = train_freq
    model.observation_space, model.action_space = obs_space, act_space
    try:
        model._setup_model()
    except (ValueError, TypeError, AttributeError, RuntimeError) as err:
        raise _refuse(path, f"the {algorithm.__name__} MlpPolicy cannot be rebuilt from "
                            f"arguments {kwargs} and the plain settings of the file "
                            f"({type(err).__name__}: {err})") from err
    try:
        model.policy.load_state_dict(state, strict=True)
        if optimizer is not None:
            model.policy.optimizer.load_state_dict(_load_tensors(path, optimizer, OPTIMIZER))
    except (RuntimeError, ValueError, TypeError, KeyError, AttributeError) as err:
        if isinstance(err, PolicyFileError):
            raise
        raise _refuse(path, f"its weights do not fit the {algorithm.__name__} MlpPolicy "
                            f"rebuilt for {obs_space.shape[0]} observation features and "
                            f"arguments {kwargs} ({type(err).__name__}: "
                            f"{str(err).splitlines()[0]})") from err
    return model


__all__ = ["MEMBER_CEILINGS", "OPT_IN", "PLAIN_POLICY_KWARGS",
           "ROLLOUT_LIMIT", "SIZE_LIMITS", "PolicyFileError", "check_inner_archive",
           "load_model_safely", "read_archive"]
