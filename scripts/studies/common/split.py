"""The allocation study's data split (``docs/allocation_split.json``) and the reserved sets.

Sixteen of ADBench's Classical sets are reserved for an external check of the allocator
(issue 31): nothing may be fitted, chosen or tuned on them. :data:`RESERVED` names them, and
:func:`refuse_reserved` is the one gate that the studies fitting allocators call on
every data-set name they are given (``adbench/<name>``, a sample ``<name>@<rows>``, any case).

The split of the rest of the pool was drawn by :func:`draw_split` and committed before any
fitting. Several ADBench sets are the same data as one of the paper's 18 (or a subset of
it), so the pool is split by *group* (:data:`GROUPS`): one data never lies on both sides.
Groups that share data with a reserved set are never fitted on (:data:`NEAR_RESERVED`: held
out, or left out of the pool where the paper does not need them).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ballad_env.data.sampling import parse_sample
from scripts.studies.common.options import REPO

#: ADBench's Classical sets reserved for the external check: never fitted, chosen or tuned on.
RESERVED = ("breastw", "cardio", "fault", "Ionosphere", "landsat", "letter", "Lymphography",
            "mammography", "musk", "optdigits", "satimage-2", "thyroid", "vertebral", "vowels",
            "wine", "yeast")
#: ADBench's Classical sets missing from the local snapshot (not in the pool at all).
MISSING = ("fraud", "speech", "backdoor", "census")
#: The seed of the split's draw.
SPLIT_SEED = 2031
#: The split's file in the repository.
SPLIT_FILE = REPO / "docs" / "allocation_split.json"

#: Groups of the same data: the first member is the one the pool plays (the paper's file
#: where the paper has the data), the others are dropped from the pool as duplicates,
#: except where marked as sampled members below.
GROUPS: dict[str, tuple[str, ...]] = {
    "WPBC": ("WPBC", "adbench/WPBC"), "Glass": ("Glass", "adbench/glass"),
    "WBC": ("WBC", "adbench/WBC"), "Arrhythmia": ("Arrhythmia",),
    "Stamps": ("Stamps", "adbench/Stamps"), "WDBC": ("WDBC", "adbench/WDBC"),
    "Pima": ("Pima", "adbench/Pima"), "Shuttle": ("Shuttle", "adbench/shuttle"),
    "InternetAds": ("InternetAds", "adbench/InternetAds"),
    "Cardiotocography": ("Cardiotocography", "adbench/Cardiotocography"),
    "SpamBase": ("SpamBase", "adbench/SpamBase"), "Waveform": ("Waveform", "adbench/Waveform"),
    "Wilt": ("Wilt", "adbench/Wilt"), "PageBlocks": ("PageBlocks", "adbench/PageBlocks"),
    "PenDigits": ("PenDigits", "adbench/pendigits"),
    "Annthyroid": ("Annthyroid", "adbench/annthyroid"), "ALOI": ("ALOI", "adbench/ALOI"),
    # http and smtp are subsets of the KDD Cup 1999 data: one group with the paper's file.
    "KDDCup99": ("KDDCup99", "adbench/http", "adbench/smtp"),
    "campaign": ("adbench/campaign",), "celeba": ("adbench/celeba",),
    "cover": ("adbench/cover",), "donors": ("adbench/donors",),
    "Hepatitis": ("adbench/Hepatitis",), "magic.gamma": ("adbench/magic.gamma",),
    "mnist": ("adbench/mnist",), "skin": ("adbench/skin",),
    "satellite": ("adbench/satellite",),
}
#: Groups that share data with a reserved set, and the reserved set they share it with.
NEAR_RESERVED = {"WBC": "breastw", "Cardiotocography": "cardio", "Annthyroid": "thyroid",
                 "satellite": "landsat, satimage-2"}
#: Near-reserved groups the paper's 18 need: held out (scored, never fitted); the others
#: are left out of the pool.
NEAR_RESERVED_HELD_OUT = ("WBC", "Cardiotocography", "Annthyroid")
#: Rows of each group (its first member's full file), which order the draw.
GROUP_ROWS = {"WPBC": 160, "Glass": 214, "WBC": 223, "Arrhythmia": 271, "Stamps": 340,
              "WDBC": 367, "Pima": 526, "Shuttle": 1013, "InternetAds": 1682,
              "Cardiotocography": 1734, "SpamBase": 2661, "Waveform": 3443, "Wilt": 4655,
              "PageBlocks": 5393, "PenDigits": 6727, "Annthyroid": 7200, "ALOI": 12384,
              "KDDCup99": 48113, "campaign": 41188, "celeba": 202599, "cover": 286048,
              "donors": 619326, "Hepatitis": 80, "magic.gamma": 19020, "mnist": 7603,
              "skin": 245057, "satellite": 6435}
#: Group members that play only as a seeded sample of this many rows (``sample_rows``, seed
#: 0: lattices of the full file cost too much on this machine); named ``<member>@<rows>``.
SAMPLES = {"adbench/celeba": 20000, "adbench/cover": 20000, "adbench/donors": 20000,
           "adbench/http": 20000, "adbench/skin": 20000, "adbench/smtp": 20000}
#: The split's rule, word for word as the file records it.
RULE = (
    "Pool: the paper's 18 and ADBench's Classical sets present locally, less the 16 reserved "
    "and the 4 missing (fraud, speech, backdoor, census). ADBench sets that are the paper's "
    "data join the paper's group and are not played twice; http and smtp (KDD Cup 1999 "
    "subsets) join KDDCup99's group. Groups sharing data with a reserved set are never "
    "fitted on: WBC (breastw), Cardiotocography (cardio) and Annthyroid (thyroid) are held "
    "out; satellite (landsat, satimage-2) is left out. The other groups are sorted by rows "
    "(ties by name), cut into consecutive blocks of 3 (the last may be shorter), and one "
    "group per block is held out, drawn with numpy.random.default_rng(2031).integers(block "
    "size) in block order. Written before any allocator was fitted.")


#: Endings a data file may have, in any case (``wine.CSV``, ``45_wine.NPZ``).
_SUFFIXES = (".npz", ".mat", ".csv", ".arff")
#: ADBench's file names start with their number (``45_wine.npz``).
_NUMBER = re.compile(r"^\d+_")


def base_name(name: str) -> str:
    """What reservation compares: a data-set name without the ``adbench/`` prefix, a sample
    suffix (``@rows[:seed]``), a file's folder, its data-file ending(s) or ADBench's number
    prefix (``45_``), in any case or Unicode spelling (NFKC, case-folded, spaces stripped)."""
    text = unicodedata.normalize("NFKC", str(name)).strip()
    sample = parse_sample(text)
    if sample is not None:
        text = sample[0]
    text = text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip().casefold()
    while text.endswith(_SUFFIXES):
        text = text[:text.rindex(".")]
    return _NUMBER.sub("", text.rstrip(". "))


def reserved_in(names: Iterable[Any]) -> list[str]:
    """The names among ``names`` that are (samples of) a reserved set: by name in any
    spelling (:func:`base_name`), the path a symbolic link points to, or a file holding a
    reserved set's registered bytes under another name."""
    return [str(n) for n in names if isinstance(n, str | Path) and _is_reserved(str(n))]


def _is_reserved(name: str) -> bool:
    reserved = {r.casefold() for r in RESERVED}
    if base_name(name) in reserved:
        return True
    sample = parse_sample(name)
    path = Path(sample[0] if sample is not None else name).expanduser()
    try:
        if not path.is_file():
            return False
        if base_name(str(path.resolve())) in reserved:
            return True
        return _holds_reserved_bytes(path)
    except OSError:
        return False


def _holds_reserved_bytes(path: Path) -> bool:
    """Whether ``path`` holds the registered bytes of a reserved ADBench file (hashed only
    when its size is one of theirs)."""
    from ballad_env.data.adbench import registry
    from ballad_env.data.download import file_hashes

    reserved = {r.casefold() for r in RESERVED}
    rows = [row for row in registry()["datasets"] if row["name"].casefold() in reserved]
    size = path.stat().st_size
    candidates = [row for row in rows if row.get("size") in (None, size)]
    if not candidates:
        return False
    found = file_hashes(path)
    return any(row.get("sha256") == found["sha256"]
               or row.get("git_blob_sha1") == found["git_blob_sha1"] for row in candidates)


def refuse_reserved(names: Iterable[Any], what: str) -> None:
    """A ``ValueError`` naming every reserved data set among ``names`` (``what`` says who
    refuses: "the allocation study", "the allocator study")."""
    found = reserved_in(names)
    if found:
        raise ValueError(
            f"{what} refuses the reserved data set(s) {', '.join(found)}: they are kept for the "
            f"external check of the allocator (docs/allocation_split.json, 'reserved') and may "
            "not be used to fit, choose or tune anything; pick data sets from its 'train' list")


def draw_split(seed: int = SPLIT_SEED) -> dict[str, Any]:
    """The split by :data:`RULE`: blocks of 3 groups by rows, one held out per block."""
    drawn = sorted((g for g in GROUPS if g not in NEAR_RESERVED), key=lambda g: (GROUP_ROWS[g], g))
    blocks = [drawn[k:k + 3] for k in range(0, len(drawn), 3)]
    rng = np.random.default_rng(seed)
    held = [block[int(rng.integers(len(block)))] for block in blocks]
    held_out = sorted([*held, *NEAR_RESERVED_HELD_OUT], key=lambda g: (GROUP_ROWS[g], g))
    train = [g for g in drawn if g not in held]
    return {
        "rule": RULE, "seed": seed, "reserved": list(RESERVED), "missing": list(MISSING),
        "near_reserved": dict(NEAR_RESERVED), "left_out": [g for g in NEAR_RESERVED
                                                           if g not in NEAR_RESERVED_HELD_OUT],
        "blocks": blocks, "train": train, "held_out": held_out,
        "groups": {g: list(GROUPS[g]) for g in GROUPS},
        "samples": dict(SAMPLES), "rows": dict(GROUP_ROWS),
    }


def played_names(groups: Iterable[str], split: Mapping[str, Any] | None = None) -> list[str]:
    """The data-set names the pool plays for ``groups``: each group's first member and its
    non-duplicate members (http, smtp), as seeded samples where :data:`SAMPLES` says so."""
    split = split or load_split()
    names = []
    for group in groups:
        members = split["groups"][group]
        playing = [members[0], *(m for m in members[1:] if group == "KDDCup99")]
        names += [f"{m}@{split['samples'][m]}" if m in split["samples"] else m
                  for m in playing]
    refuse_reserved(names, "the allocation pool")
    return names


def load_split(path: Path | None = None) -> dict[str, Any]:
    """The committed split file, checked (:func:`check_split`)."""
    target = path or SPLIT_FILE
    split = json.loads(target.read_text())
    check_split(split, target)
    return split


def check_split(split: Any, path: Path) -> None:
    """A ``ValueError`` naming ``path`` unless its groups are lists of names none of which is
    a reserved set (in any spelling), and its train and held-out sides are groups of it."""
    groups = split.get("groups") if isinstance(split, dict) else None
    if not isinstance(groups, dict) or not all(
            isinstance(m, list) and m and all(isinstance(n, str) for n in m)
            for m in groups.values()):
        raise ValueError(f"{path}: 'groups' must map each group to a list of data-set names")
    found = reserved_in(n for members in groups.values() for n in members)
    if found:
        raise ValueError(f"{path}: its groups hold the reserved data set(s) {', '.join(found)}, "
                         "which may never be fitted on: remove them from 'groups'")
    for side in ("train", "held_out"):
        sides = split.get(side)
        if not isinstance(sides, list) or any(g not in groups for g in sides):
            raise ValueError(f"{path}: '{side}' must be a list of the file's groups")


def write_split(path: Path | None = None) -> Path:
    """Write :func:`draw_split` to ``path`` (default: the repository's split file)."""
    target = path or SPLIT_FILE
    target.write_text(json.dumps(draw_split(), indent=2) + "\n")
    return target


__all__ = ["GROUPS", "MISSING", "NEAR_RESERVED", "RESERVED", "RULE", "SAMPLES", "SPLIT_FILE",
           "SPLIT_SEED", "base_name", "check_split", "draw_split", "load_split", "played_names",
           "refuse_reserved", "reserved_in", "write_split"]
