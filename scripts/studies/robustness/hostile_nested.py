"""Hostile files by class, at every level a reader goes through, for the robustness sweep
(``python -m scripts.studies.robustness --files``).

**Archives at every nesting level.** Every archive's central directory is bounded before a
zip reader parses it (:func:`directory_rewrites` on the ``.npz`` data files and a lattice
file: one declaring 64 MB, one of 25,000 empty members). A saved policy is a zip whose
weights members are zips of their own (torch's format): :func:`nested_policy_rewrites`
forges each level's headers (a record of the inner zip declaring gigabytes, an inner or
outer central directory of megabytes, an inner zip of tens of thousands of members, a
weights member in torch's older stream format) and each must be refused, naming the file,
from headers alone, before torch reads a byte of it.

**YAML before any library parses it.** An rl-zoo3 hyperparameter file is read by our
launcher before rl-zoo3 loads (and prints) it: :func:`yaml_outcome` plays alias bombs,
``!!python`` tags, recursive aliases, deep nesting, a huge file and broken YAML through
``python -m agents.interop.zoo`` with rl-zoo3's own reading replaced by a
tripwire, so a case it reaches is a failure, never a gigabyte.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from scripts.studies.robustness.damaged_files import FileKind, Outcome, check_damages
from scripts.studies.robustness.hostile_files import Rewrite, rezip, with_declared_size

#: The zip members torch writes its weights into (SB3's ``policy.pth`` and optimizer).
WEIGHT_MEMBERS = ("policy.pth", "policy.optimizer.pth")


def _first_record(inner: bytes) -> str:
    """The name of the inner zip's largest record (a tensor's bytes)."""
    with zipfile.ZipFile(io.BytesIO(inner)) as archive:
        return max(archive.infolist(), key=lambda info: info.file_size).filename


def _inner_declares(member: str, size: int, data: bytes) -> bytes:
    """The policy zip with the largest record of ``member``'s inner zip declaring ``size``."""
    def change(name: str, body: bytes) -> bytes:
        return with_declared_size(body, _first_record(body), size) if name == member else body
    return rezip(data, change)


def _many_members(member: str, count: int, data: bytes) -> bytes:
    """The policy zip with ``count`` empty records added to ``member``'s inner zip (its
    directory grows by about 60 bytes a record)."""
    def change(name: str, body: bytes) -> bytes:
        if name != member:
            return body
        out = io.BytesIO(body)
        with zipfile.ZipFile(out, "a") as inner:
            for k in range(count):
                inner.writestr(f"archive/extra/{k}", b"")
        return out.getvalue()
    return rezip(data, change)


def with_directory_size(data: bytes, size: int) -> bytes:
    """The zip ``data`` whose end record declares a central directory of ``size`` bytes (its
    zip64 end record too, where it has one: torch writes both)."""
    raw = bytearray(data)
    at = raw.rfind(b"PK\x05\x06")
    raw[at + 12: at + 16] = struct.pack("<I", size)
    at64 = raw.rfind(b"PK\x06\x06")
    if at64 >= 0:
        raw[at64 + 40: at64 + 48] = struct.pack("<Q", size)
    return bytes(raw)


def _inner_directory(member: str, size: int, data: bytes) -> bytes:
    return rezip(data, lambda name, body: with_directory_size(body, size)
                  if name == member else body)


def _legacy(member: str, data: bytes) -> bytes:
    """``member`` in torch's older format: a pickle stream, not a zip."""
    import torch

    def change(name: str, body: bytes) -> bytes:
        if name != member:
            return body
        out = io.BytesIO()
        torch.save({}, out, _use_new_zipfile_serialization=False)
        return out.getvalue()
    return rezip(data, change)


def _padded(count: int, data: bytes) -> bytes:
    """The zip ``data`` with ``count`` empty members appended (a directory of ~55 bytes
    each)."""
    out = io.BytesIO(data)
    with zipfile.ZipFile(out, "a") as archive:
        for k in range(count):
            archive.writestr(f"pad/{k:05d}", b"")
    return out.getvalue()


def directory_rewrites() -> list[Rewrite]:
    """An archive's central directory too large to parse: declared as 64 MB in its end
    records, or made of 25,000 empty members (1.4 MB)."""
    return [Rewrite("its directory declares 64 MB",
                    functools.partial(with_directory_size, size=64 << 20)),
            Rewrite("25,000 empty members appended", functools.partial(_padded, 25_000))]


def archive_kinds(folder: Path) -> list[FileKind]:
    """The archives read as data: the sample ``.npz`` data files (plain and compressed) and
    a lattice file."""
    from scripts.studies.robustness.damaged_files import data_kinds, lattice_kinds

    npz = [kind for kind in data_kinds(folder) if kind.path.suffix == ".npz"]
    return [*npz, lattice_kinds(folder)[0]]


def nested_policy_rewrites() -> list[Rewrite]:
    """A saved policy forged at each nesting level (see the module docstring)."""
    rewrites = [Rewrite("the archive's directory declares 64 MB",
                        functools.partial(with_directory_size, size=64 << 20))]
    for member in WEIGHT_MEMBERS:
        for size in (3_200_000_000, 2**32 - 1):
            rewrites.append(Rewrite(f"{member}'s inner record declares {size} bytes",
                                    functools.partial(_inner_declares, member, size)))
        rewrites.append(Rewrite(f"{member}'s inner directory declares 64 MB",
                                functools.partial(_inner_directory, member, 64 << 20)))
        rewrites.append(Rewrite(f"{member}'s inner zip holds 20,000 more members",
                                functools.partial(_many_members, member, 20_000)))
        rewrites.append(Rewrite(f"{member} in torch's legacy format",
                                functools.partial(_legacy, member)))
    return rewrites


# ------------------------------------------------------------------------------ YAML
def alias_bomb(levels: int) -> str:
    """Anchors each aliasing the one before twice: 2^levels leaves in a few hundred bytes."""
    lines = ["a0: &a0 [x, x]"] + [f"a{k}: &a{k} [*a{k - 1}, *a{k - 1}]"
                                  for k in range(1, levels)]
    return "\n".join(lines) + "\n"


#: Hyperparameter files that must be refused before rl-zoo3 reads them, by label.
YAML_CASES = {
    "28 nested aliases (billion laughs)": alias_bomb(28),
    "a mapping bomb of 9 levels": "a0: &a0 {k0: x, k1: x, k2: x, k3: x, k4: x, k5: x, k6: x, "
                                  "k7: x, k8: x, k9: x}\n" + "".join(
        f"a{k}: &a{k} {{{', '.join(f'k{j}: *a{k - 1}' for j in range(10))}}}\n"
        for k in range(1, 9)),
    "a !!python/object/apply tag": "x: !!python/object/apply:os.getcwd []\n",
    "a !!python/name tag": "x: !!python/name:os.system\n",
    "an unknown tag": "x: !custom 1\n",
    "a recursive alias": "x: &r [1, *r]\n",
    "nesting 1,000 deep": "x: " + "[" * 1000 + "]" * 1000 + "\n",
    "2 MB of text": "x: '" + "y" * (2 << 20) + "'\n",
    "broken YAML": "x: [\n",
    "not UTF-8": "x: \udcff\n",
}


class _Reached(BaseException):
    """rl-zoo3 was about to read a file the launcher should have refused."""


def yaml_outcome(folder: Path) -> Outcome:
    """Each of :data:`YAML_CASES` through the zoo launcher, trusted or not: refused with one
    line naming the file, exit 2, before rl-zoo3 reads it."""
    from rl_zoo3.exp_manager import ExperimentManager

    from agents.interop.zoo import main

    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    original = ExperimentManager.read_hyperparameters

    def tripwire(self: object) -> None:
        raise _Reached

    ExperimentManager.read_hyperparameters = tripwire  # type: ignore[method-assign,assignment]
    try:
        for label, text in YAML_CASES.items():
            for trust in ([], ["--trust-conf-file"]):
                path = folder / "hyper.yml"
                path.write_bytes(text.encode("utf-8", "surrogateescape"))
                ended = _zoo(main, ["--conf-file", str(path), *trust,
                                    "-f", str(folder / "logs")])
                case = f"{label}{' (trusted)' if trust else ''}"
                if ended[0] == 2 and str(path) in ended[1] and "\n" not in ended[1].strip():
                    counts["refused, naming the file"] += 1
                else:
                    failures.append(f"zoo YAML, {case}: exit {ended[0]}, {ended[1][-200:]!r}")
    finally:
        ExperimentManager.read_hyperparameters = original  # type: ignore[method-assign]
    return Outcome("zoo YAML before rl-zoo3", counts, failures)


def _zoo(main: Callable[[list[str]], int], args: list[str]) -> tuple[int | str, str]:
    """The launcher's exit status (or what stopped it) and its standard error."""
    import ballad_env

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code: int | str = main(["--algo", "ppo", "--env", ballad_env.ENV_ID, *args])
        except _Reached:
            code = "rl-zoo3 read the file"
    return code, err.getvalue()


def nested_outcomes(folder: Path, policy: bool = True) -> Iterator[Outcome]:
    """The policy zip forged at every nesting level (if ``policy``: it needs the ``rl`` extra
    and trains a few seconds) and the zoo YAML cases (if rl-zoo3 is installed)."""
    folder.mkdir(parents=True, exist_ok=True)
    counts: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    for kind in archive_kinds(folder):
        outcome = check_damages(kind, directory_rewrites())
        counts.update(outcome.counts)
        failures += outcome.failures
    yield Outcome("archive directories (.npz data, lattice file)", counts, failures)
    if policy:
        from scripts.studies.robustness.damaged_files import policy_kind

        outcome = check_damages(policy_kind(folder), nested_policy_rewrites())
        yield Outcome("policy zip, every nesting level", outcome.counts, outcome.failures)
    try:
        import rl_zoo3  # noqa: F401 - the zoo extra
    except ModuleNotFoundError:
        return
    yield yaml_outcome(folder)


__all__ = ["WEIGHT_MEMBERS", "YAML_CASES", "alias_bomb", "archive_kinds", "directory_rewrites",
           "nested_outcomes",
           "nested_policy_rewrites", "with_directory_size", "yaml_outcome"]
