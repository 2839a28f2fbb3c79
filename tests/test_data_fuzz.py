"""Corrupt data files: every damaged file loads or fails with an error naming the file.

Single-byte changes and truncations of small ``.npz`` (stored and compressed), ``.mat``,
``.arff`` and ``.csv`` files, at seeded positions. A ``.npz`` member carries a CRC, so a
damaged ``.npz`` either loads the very same arrays (the byte was in a field nothing reads)
or fails. The other formats carry no checksum: a changed digit loads as a different, valid
data set, which is all a reader can do; what must never happen is a parser's own
exception (``zlib.error``, ``IndexError``, ``UnicodeDecodeError``, ...) with no file name.
``scripts/robustness_sweep.py``-sized runs of the same check take longer; these stay fast.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from ballad_env.data import DataWarning, load_dataset

X = np.round(np.random.default_rng(0).normal(size=(24, 3)), 3)
Y = (np.arange(24) < 3).astype(np.int8)


def _npz(path: Path) -> None:
    np.savez(path, X=X, y=Y)


def _npz_compressed(path: Path) -> None:
    np.savez_compressed(path, X=X, y=Y)


def _mat(path: Path) -> None:
    scipy.io.savemat(path, {"X": X, "y": Y.reshape(-1, 1)})


def _arff(path: Path) -> None:
    rows = "\n".join(f"{a},{b},{c},{'yes' if label else 'no'}"
                     for (a, b, c), label in zip(X.tolist(), Y.tolist(), strict=True))
    path.write_text("@RELATION fuzz\n@ATTRIBUTE a NUMERIC\n@ATTRIBUTE b NUMERIC\n"
                    "@ATTRIBUTE c NUMERIC\n@ATTRIBUTE outlier {no,yes}\n@DATA\n" + rows + "\n")


def _csv(path: Path) -> None:
    rows = "\n".join(f"{a},{b},{c},{label}"
                     for (a, b, c), label in zip(X.tolist(), Y.tolist(), strict=True))
    path.write_text("a,b,c,label\n" + rows + "\n")


WRITERS: dict[str, tuple[str, Callable[[Path], None], bool]] = {
    # kind: (file ending, writer, whether any change is detected)
    "npz": (".npz", _npz, True),
    "npz-compressed": (".npz", _npz_compressed, True),
    "mat": (".mat", _mat, False),
    "arff": (".arff", _arff, False),
    "csv": (".csv", _csv, False),
}


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


@pytest.mark.parametrize("kind", list(WRITERS))
def test_single_byte_changes_and_truncations(tmp_path: Path, kind: str) -> None:
    ending, write, checksummed = WRITERS[kind]
    original = tmp_path / f"original{ending}"
    write(original)
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
