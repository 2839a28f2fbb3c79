"""Corrupt data files: every damaged file loads or fails with an error naming the file.

Single-byte changes and truncations of small ``.npz`` (stored and compressed), ``.mat``,
``.arff`` and ``.csv`` files, at seeded positions. A ``.npz`` member carries a CRC, so a
damaged ``.npz`` either loads the very same arrays (the byte was in a field nothing reads)
or fails. The other formats carry no checksum: a changed digit loads as a different, valid
data set, which is all a reader can do; what must never happen is a parser's own
exception (``zlib.error``, ``IndexError``, ``UnicodeDecodeError``, ...) with no file name.
``python -m scripts.studies.robustness``-sized runs of the same check take longer; these stay fast.
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

from ballad_env.data import DataWarning, load_dataset
from ballad_env.data.mat5 import mat5_problem
from scripts.studies.robustness.damaged_files import (
    DATA_FORMATS,
    check_damages,
    damages,
    data_kinds,
    write_mat,
    write_npz_compressed,
)

X = np.round(np.random.default_rng(0).normal(size=(24, 3)), 3)
Y = (np.arange(24) < 3).astype(np.int8)


def _npz_compressed(path: Path) -> None:
    write_npz_compressed(path, X, Y)


def _mat(path: Path) -> None:
    write_mat(path, X, Y)


def test_every_data_format_through_the_sweeps_checker(tmp_path: Path) -> None:
    """The robustness sweep's data kinds (``corruption.data_kinds``): a sample of damages of
    each format, every one read identically, as other valid data where the format has no
    checksum, or refused naming the file."""
    for kind in data_kinds(tmp_path):
        outcome = check_damages(kind, damages(kind.path.stat().st_size, 25, 10, seed=1))
        assert not outcome.failures, outcome.failures[:3]
        assert outcome.counts["refused, naming the file"] > 0, kind.name
        if kind.checksummed:
            assert "read as other valid data (no checksum)" not in outcome.counts


def _check(path: Path, checksummed: bool) -> str:
    """Load ``path``: "same", "other" (a valid, different data set) or "error" (named)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            ds = load_dataset(path)
    except (ValueError, FileNotFoundError) as err:
        assert str(path) in str(err), f"{type(err).__name__} without the file: {err}"
        return "error"
    same = ds.X.shape == X.shape and np.array_equal(ds.X, X) and np.array_equal(ds.y, Y)
    assert same or not checksummed, f"{path.name}: damaged .npz loaded other data"
    return "same" if same else "other"


@pytest.mark.parametrize("kind", list(DATA_FORMATS))
def test_single_byte_changes_and_truncations(tmp_path: Path, kind: str) -> None:
    ending, write, checksummed = DATA_FORMATS[kind]
    original = tmp_path / f"original{ending}"
    write(original, X, Y)
    content = original.read_bytes()
    rng = np.random.default_rng(sum(map(ord, kind)))
    target = tmp_path / f"damaged{ending}"
    outcomes = []
    for position in rng.choice(len(content), size=min(60, len(content)), replace=False):
        damaged = bytearray(content)
        damaged[position] ^= int(rng.integers(1, 256))
        target.write_bytes(bytes(damaged))
        outcomes.append(_check(target, checksummed))
    for length in [0, 1, 7, 64, 127, *rng.integers(128, len(content), size=10).tolist()]:
        target.write_bytes(content[:length])
        outcomes.append(_check(target, checksummed))
    assert "error" in outcomes  # the damage was noticed at least once


def test_flipped_byte_in_a_compressed_member_names_the_file(tmp_path: Path) -> None:
    """A corrupted deflate stream raised a bare ``zlib.error`` (no file name) before."""
    path = tmp_path / "packed.npz"
    _npz_compressed(path)
    content = path.read_bytes()
    start = content.index(b"X.npy") + len(b"X.npy")  # X's member: extra field, then data
    causes = set()
    for offset in range(start, start + 200):
        damaged = bytearray(content)
        damaged[offset] ^= 0xFF
        path.write_bytes(bytes(damaged))
        try:
            ds = load_dataset(path)
        except ValueError as err:
            assert str(err).startswith(f"{path}: not a readable .npz file"), err
            causes.add(type(err.__cause__).__name__)
        else:
            assert np.array_equal(ds.X, X) and np.array_equal(ds.y, Y)
    assert "error" in causes  # zlib.error among them: the case of the bug report


def test_mat_file_shorter_than_its_header_names_the_file(tmp_path: Path) -> None:
    """scipy reads a 128-byte header: a shorter file gave a bare ``IndexError`` before."""
    path = tmp_path / "short.mat"
    _mat(path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"short\.mat: not a readable MATLAB \.mat file"):
        load_dataset(path)


def test_csv_that_is_not_utf8_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("température,label\n1,0\n2,0\n3,1\n4,0\n5,0\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv: not UTF-8 text \(byte 0xe9 at offset 4"
                       r".*Save the CSV file as UTF-8"):
        load_dataset(path)


def test_mat_tag_with_an_unknown_type_is_refused_before_scipy_reads_it(tmp_path: Path) -> None:
    """scipy's compiled reader crashed the process (segmentation fault) on a data element
    whose type code was changed: the real part's miDOUBLE (9) XOR 0x30 gives 57."""
    path = tmp_path / "tag.mat"
    _mat(path)
    content = bytearray(path.read_bytes())
    real_part = content.index(bytes([9, 0, 0, 0]), 128)  # the first miDOUBLE tag
    content[real_part] ^= 0x30
    path.write_bytes(bytes(content))
    with pytest.raises(ValueError, match=rf"tag\.mat: not a readable MATLAB \.mat file .*"
                       rf"byte {real_part} .* unknown data type 57"):
        load_dataset(path)


def test_mat5_problem_by_hand() -> None:
    """A hand-made level-5 file: a header, then one miMATRIX holding a small miINT8 element
    (type 1, 2 bytes, in the 4-byte small format) and an 8-byte miDOUBLE element."""
    header = b"MATLAB 5.0".ljust(124, b" ") + b"\x00\x01IM"
    small = struct.pack("<I", (2 << 16) | 1) + b"ab\x00\x00"
    double = struct.pack("<II", 9, 8) + struct.pack("<d", 1.5)
    matrix = struct.pack("<II", 14, len(small + double)) + small + double
    assert mat5_problem(header + matrix) is None
    assert mat5_problem(b"\x00" * 64) is None  # too short: scipy refuses it itself
    bad_type = header + matrix.replace(struct.pack("<II", 9, 8), struct.pack("<II", 10, 8))
    assert mat5_problem(bad_type) == ("the data element at byte 144 of the data element at "
                                      "byte 128 of the file has the unknown data type 10")
    too_long = header + matrix[:4] + struct.pack("<I", 999) + matrix[8:]
    assert mat5_problem(too_long) == ("the data element at byte 128 of the file declares 999 "
                                      "bytes, past the end of the file")
    big_small = header + struct.pack("<II", 14, 8) + struct.pack("<I", (6 << 16) | 1) + b"abcd"
    assert "small element of 6 bytes" in str(mat5_problem(big_small))
