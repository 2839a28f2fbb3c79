"""Memory from small files (issue 39, items 14 and 18): a data or lattice file's arrays are
sized from its headers before anything is inflated, against a ceiling
($BALLAD_MAX_ARRAY_BYTES), and a lattice whose payload holds no episode of its header is a
``StoreError`` naming it."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from agents.experiments.lattice_build import build_store
from ballad_env import files
from ballad_env.data import Dataset, load_dataset
from ballad_env.replay.store import LatticeStore, StoreError, load_lattice
from ballad_env.settings import Settings

SETTING = Settings(prior="knn", budget_fraction=0.1)


def xy(n: int = 80) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = np.zeros(n, dtype=np.int8)
    y[:8] = 1
    return rng.normal(size=(n, 2)), y


def test_a_sparse_mat_of_a_few_bytes_declaring_gigabytes_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("scipy")
    import scipy.io
    import scipy.sparse

    path = tmp_path / "bomb.mat"
    scipy.io.savemat(path, {"X": scipy.sparse.csr_matrix((15_000, 15_000)),
                            "y": scipy.sparse.csr_matrix((15_000, 1))}, do_compression=True)
    assert path.stat().st_size < 4096
    with pytest.raises(ValueError, match=r"bomb.mat: its variables X and y \(dense\) would "
                                         r"take 1,800,120,000 bytes.*BALLAD_MAX_ARRAY_BYTES"):
        load_dataset(path)


def test_an_npz_is_sized_from_its_headers(tmp_path: Path, monkeypatch) -> None:
    X, y = xy()
    path = tmp_path / "d.npz"
    np.savez_compressed(path, X=X, y=y)
    assert load_dataset(path).n_samples == 80
    monkeypatch.setenv(files.ARRAY_BYTES_ENV, "1000")
    with pytest.raises(ValueError, match=r"d.npz: its arrays would take 1,360 bytes in memory, "
                                         r"more than the ceiling of 1,000"):
        load_dataset(path)
    monkeypatch.setenv(files.ARRAY_BYTES_ENV, "-5")
    with pytest.raises(ValueError, match=r"\$BALLAD_MAX_ARRAY_BYTES is '-5'"):
        load_dataset(path)


def test_a_forged_npy_header_is_refused_before_allocating(tmp_path: Path) -> None:
    """A member declaring 10^12 float64 values over a few bytes of data."""
    head = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    head["shape"] = (10**12,)
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, head)
    member.write(b"\0" * 64)
    path = tmp_path / "forged.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("X.npy", member.getvalue())
        archive.writestr("y.npy", member.getvalue())
    with pytest.raises(ValueError, match=r"forged.npz: its arrays would take "
                                         r"16,000,000,000,000 bytes"):
        load_dataset(path)


def test_text_files_are_sized_before_they_are_parsed(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "d.csv"
    X, y = xy()
    rows = "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y, strict=True))
    path.write_text("a,b,label\n" + rows)
    monkeypatch.setenv(files.ARRAY_BYTES_ENV, str(path.stat().st_size))
    with pytest.raises(ValueError, match=r"d.csv: its values, parsed from text, would take"):
        load_dataset(path)


def built(tmp_path: Path) -> Path:
    build_store(tmp_path, [Dataset("z", *xy())], [0], [SETTING], progress=False)
    return LatticeStore(tmp_path).path("z", 0, SETTING)


def test_a_lattice_is_sized_from_its_headers(tmp_path: Path, monkeypatch) -> None:
    path = built(tmp_path)
    monkeypatch.setenv(files.ARRAY_BYTES_ENV, "100")
    with pytest.raises(StoreError, match=r"seed0.npz.*more than the ceiling of 100"):
        load_lattice(path)


def test_a_lattice_with_a_zeroed_payload_is_refused_by_name(tmp_path: Path) -> None:
    path = built(tmp_path)
    with np.load(path) as data:
        header, packed = str(data["header"]), data["packed"]
    np.savez_compressed(path, header=np.array(header), packed=np.zeros_like(packed))
    with pytest.raises(StoreError, match=r"seed0.npz holds no episode of its header"):
        load_lattice(path)
