"""Tests for ballad_env.data: loaders, lookup, validation and built-in data sets."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from ballad_env.data import (
    BUILTIN_DATASETS,
    DATA_DIR_ENV,
    Dataset,
    adbench,
    available_datasets,
    bundled,
    data_card,
    dataset_name,
    load_dataset,
    make_toy,
    make_wdbc,
    validate_xy,
    verify_bundled,
)
from ballad_env.data.bundled import bundled_names

# 20 rows, 3 features, 2 anomalies (rows 3 and 11).
X_SMALL = np.arange(60, dtype=np.float64).reshape(20, 3) / 7.0
Y_SMALL = np.zeros(20, dtype=np.int8)
Y_SMALL[[3, 11]] = 1


@pytest.fixture(autouse=True)
def _no_env_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep a data directory configured in the shell from leaking into tests."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)


def _assert_small(ds: Dataset, name: str) -> None:
    assert ds.name == name
    assert ds.X.dtype == np.float64 and ds.X.flags.c_contiguous
    assert ds.y.dtype == np.int8
    np.testing.assert_allclose(ds.X, X_SMALL)
    np.testing.assert_array_equal(ds.y, Y_SMALL)
    assert ds.n_samples == 20 and ds.n_features == 3
    assert ds.contamination == pytest.approx(0.1)


def _write_npz(path: Path, X: np.ndarray = X_SMALL, y: np.ndarray = Y_SMALL) -> Path:
    np.savez(path, X=X, y=y)
    return path


def _write_mat(path: Path) -> Path:
    scipy.io.savemat(path, {"X": X_SMALL, "y": Y_SMALL.astype(np.float64).reshape(-1, 1)})
    return path


def _write_arff(path: Path) -> Path:
    lines = [
        "% DAMI-style test file",
        "@RELATION small",
        "@ATTRIBUTE 'a' REAL",
        "@ATTRIBUTE 'b' NUMERIC",
        "@ATTRIBUTE 'c' REAL",
        "@ATTRIBUTE 'ID' INTEGER",
        "@ATTRIBUTE 'Outlier' {'yes','no'}",
        "@DATA",
    ]
    for i, (row, label) in enumerate(zip(X_SMALL, Y_SMALL, strict=True)):
        values = ",".join(repr(float(v)) for v in row)
        lines.append(f"{values},{i + 1},'{'yes' if label else 'no'}'")
    path.write_text("\n".join(lines) + "\n")
    return path


def _write_csv(path: Path, label_col: str = "label", words: tuple[str, str] = ("0", "1")) -> Path:
    rows = ["f1,f2," + label_col + ",f3"]
    for row, label in zip(X_SMALL, Y_SMALL, strict=True):
        rows.append(f"{float(row[0])!r},{float(row[1])!r},{words[int(label)]},{float(row[2])!r}")
    path.write_text("\n".join(rows) + "\n")
    return path


# --------------------------------------------------------------------------- loaders


def test_npz_roundtrip(tmp_path: Path) -> None:
    _assert_small(load_dataset(_write_npz(tmp_path / "small.npz")), "small")


def test_mat_roundtrip_with_column_vector_labels(tmp_path: Path) -> None:
    _assert_small(load_dataset(_write_mat(tmp_path / "small.mat")), "small")


def test_arff_roundtrip_drops_id_column(tmp_path: Path) -> None:
    ds = load_dataset(str(_write_arff(tmp_path / "small.arff")))
    _assert_small(ds, "small")  # 3 features: the ID column is gone


@pytest.mark.parametrize(
    "words", [("0", "1"), ("no", "yes"), ("False", "True"), ("0.0", "1.0")], ids=str
)
def test_csv_roundtrip_label_spellings(tmp_path: Path, words: tuple[str, str]) -> None:
    ds = load_dataset(_write_csv(tmp_path / "small.csv", words=words))
    # Feature order is preserved with the label column removed from the middle.
    _assert_small(ds, "small")


def test_csv_label_column_priority(tmp_path: Path) -> None:
    path = tmp_path / "prio.csv"
    # "Label" (first in priority) beats "class", which then counts as a feature.
    lines = ["x,class,Label"] + [f"{i},{i % 3},{int(i == 4)}" for i in range(10)]
    path.write_text("\n".join(lines) + "\n")
    ds = load_dataset(path)
    assert ds.n_features == 2
    np.testing.assert_array_equal(ds.y, np.arange(10) == 4)


def test_csv_without_label_column_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "nolabel.csv"
    path.write_text("a,b\n1,2\n3,4\n")
    with pytest.raises(ValueError, match="no label column"):
        load_dataset(path)


def test_arff_nominal_feature_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "nominal.arff"
    path.write_text(
        "@RELATION r\n@ATTRIBUTE colour {red,blue}\n@ATTRIBUTE x REAL\n"
        "@ATTRIBUTE outlier {yes,no}\n@DATA\nred,1.0,no\nblue,2.0,yes\nred,3.0,no\n"
    )
    with pytest.raises(ValueError, match="colour"):
        load_dataset(path)


def test_mat_v73_gives_conversion_hint(tmp_path: Path) -> None:
    # Header of a MATLAB v7.3 file: 116 text bytes, 8 subsystem bytes, version 0x0200, "IM".
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5"
    blob = header.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02IM"
    path = tmp_path / "big.mat"
    path.write_bytes(blob.ljust(512, b"\x00") + b"\x89HDF\r\n\x1a\n" + b"\x00" * 64)
    with pytest.raises(ValueError, match=r"v7\.3.*npz"):
        load_dataset(path)


def test_npz_missing_arrays(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, data=X_SMALL, labels=Y_SMALL)
    with pytest.raises(ValueError, match="lacks"):
        load_dataset(path)


def test_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothere"):
        load_dataset(tmp_path / "nothere.npz")


# --------------------------------------------------------------------------- lookup


def test_lookup_by_name_via_data_dir_is_case_insensitive(tmp_path: Path) -> None:
    _write_npz(tmp_path / "MyData.npz")
    for name in ("MyData", "mydata", "MYDATA"):
        ds = load_dataset(name, data_dir=tmp_path)
        assert ds.name == "MyData"
        np.testing.assert_array_equal(ds.y, Y_SMALL)


def test_lookup_by_name_via_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_csv(tmp_path / "Sensors.csv")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert load_dataset("sensors").n_samples == 20
    assert "Sensors" in available_datasets()


def test_argument_overrides_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _write_npz(tmp_path / "b" / "only_b.npz")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "a"))
    assert load_dataset("only_b", data_dir=tmp_path / "b").name == "only_b"
    with pytest.raises(FileNotFoundError):
        load_dataset("only_b")


def test_extension_preference(tmp_path: Path) -> None:
    # Same stem in every format, but only the npz file holds 2 anomalies out of 20.
    _write_csv(tmp_path / "dup.csv")
    _write_arff(tmp_path / "dup.arff")
    _write_mat(tmp_path / "dup.mat")
    y_npz = np.zeros(20, dtype=np.int8)
    y_npz[:2] = 1
    _write_npz(tmp_path / "DUP.npz", y=y_npz)
    np.testing.assert_array_equal(load_dataset("dup", data_dir=tmp_path).y, y_npz)
    (tmp_path / "DUP.npz").unlink()
    assert load_dataset("dup", data_dir=tmp_path).X.shape == (20, 3)  # mat is next
    scipy.io.savemat(tmp_path / "dup.mat", {"X": X_SMALL[:10], "y": Y_SMALL[:10]})
    assert load_dataset("dup", data_dir=tmp_path).n_samples == 10
    assert [n for n in available_datasets(tmp_path) if n.lower() == "dup"] == ["dup"]


def test_unknown_name_lists_available(tmp_path: Path) -> None:
    _write_npz(tmp_path / "alpha.npz")
    _write_csv(tmp_path / "Beta.csv")
    (tmp_path / "notes.txt").write_text("ignored")
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("gamma", data_dir=tmp_path)
    message = str(info.value)
    assert "'gamma'" in message and str(tmp_path) in message
    for name in ("alpha", "Beta", "toy", "wdbc"):
        assert name in message
    assert "notes" not in message


def test_unknown_name_without_data_dir() -> None:
    with pytest.raises(FileNotFoundError, match=DATA_DIR_ENV):
        load_dataset("gamma")


def test_missing_data_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset("gamma", data_dir=tmp_path / "absent")


def test_available_datasets(tmp_path: Path) -> None:
    """Built-ins and the folder's files, then the paper's 18 bundled, then ADBench's 47."""
    names = available_datasets()
    assert names[:2] == sorted(BUILTIN_DATASETS)
    assert names[2:20] == bundled_names() and len(names[2:20]) == 18
    assert names[20:] == [f"adbench/{row['name']}" for row in adbench.registry()["datasets"]]
    assert len(names[20:]) == 47
    _write_npz(tmp_path / "zeta.npz")
    _write_csv(tmp_path / "Alpha.csv")
    _write_npz(tmp_path / "Alpha.npz")
    _write_npz(tmp_path / "TOY.npz")  # a file beside the built-in, not hidden by it
    _write_npz(tmp_path / "glass.npz")  # the user's file hides the bundled Glass
    mine = available_datasets(tmp_path)
    assert mine[:6] == ["Alpha", "glass", "TOY", "toy", "wdbc", "zeta"]
    assert "Glass" not in mine and "WDBC" in mine and len(mine) == 6 + 17 + 47


def test_lower_case_builtin_names_are_ambiguous_beside_a_file_of_that_name(
        tmp_path: Path) -> None:
    ds = load_dataset("toy", data_dir=tmp_path, seed=3)
    assert ds.n_samples == 1000
    np.testing.assert_array_equal(ds.X, make_toy(3).X)
    _write_npz(tmp_path / "TOY.npz")
    with pytest.raises(ValueError, match=r"'toy' is ambiguous: it is a built-in data set"):
        load_dataset("toy", data_dir=tmp_path, seed=3)
    _assert_small(load_dataset("TOY", data_dir=tmp_path), "TOY")


def test_dataset_and_tuple_sources() -> None:
    ds = load_dataset((X_SMALL.tolist(), Y_SMALL.astype(bool)))
    _assert_small(ds, "arrays")
    assert load_dataset(ds) is ds
    raw = Dataset("raw", X_SMALL.astype(np.float32), Y_SMALL.astype(np.int64))
    _assert_small(load_dataset(raw), "raw")
    with pytest.raises(ValueError, match="contamination"):
        load_dataset(Dataset("bad", X_SMALL, np.ones(20, dtype=np.int8) - (np.arange(20) < 5)))
    with pytest.raises(TypeError):
        load_dataset(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- validation


def _with(X: np.ndarray | None = None, y: np.ndarray | None = None) -> tuple:
    return (X_SMALL.copy() if X is None else X, Y_SMALL.copy() if y is None else y)


def _nan_x() -> np.ndarray:
    X = X_SMALL.copy()
    X[[1, 2], 0] = np.nan
    X[2, 1] = np.nan
    return X


def _inf_x() -> np.ndarray:
    X = X_SMALL.copy()
    X[5, 2] = -np.inf
    return X


def _contaminated_y() -> np.ndarray:
    y = np.zeros(20, dtype=np.int8)
    y[:12] = 1
    return y


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (_with(X=_nan_x()), r"NaN in 2 of 20 rows"),
        (_with(X=_inf_x()), r"inf in 1 "),
        (_with(y=np.arange(20) % 3), r"found \[0, 1, 2\]"),
        (_with(y=np.array(["a", "b"] * 10)), r"must be 0 \(normal\) or 1 \(anomaly\)"),
        (_with(y=np.zeros(20)), r"no anomalies"),
        (_with(y=np.ones(20)), r"no normals"),
        (_with(y=_contaminated_y()), r"contamination 0\.60 is not below 0\.5"),
        (_with(y=np.r_[Y_SMALL, 0]), r"length mismatch"),
        (_with(y=Y_SMALL.reshape(-1, 1)), r"1-D"),
        (_with(X=X_SMALL.ravel()), r"2-D"),
        ((np.empty((0, 3)), np.empty(0)), r"empty"),
    ],
    ids=[
        "nan",
        "inf",
        "non-binary",
        "strings",
        "no-anomalies",
        "no-normals",
        "contamination",
        "length",
        "y-2d",
        "x-1d",
        "empty",
    ],
)
def test_validation_errors(args: tuple, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern) as info:
        validate_xy(*args, name="mydata")
    assert "mydata" in str(info.value)


def test_validation_accepts_bool_and_float_labels() -> None:
    for y in (Y_SMALL.astype(bool), Y_SMALL.astype(np.float32), Y_SMALL.tolist()):
        X, y_out = validate_xy(X_SMALL.astype(np.int32), y)
        assert X.dtype == np.float64 and y_out.dtype == np.int8
        np.testing.assert_array_equal(y_out, Y_SMALL)
    with pytest.raises(ValueError, match=r"found \[0, 0\.5, 1\]"):
        validate_xy(X_SMALL, np.where(np.arange(20) == 0, 0.5, Y_SMALL))


def test_file_validation_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "holes.csv"
    path.write_text("a,b,label\n1,2,0\n,4,0\n5,6,1\n7,8,0\n9,10,0\n")
    with pytest.raises(ValueError, match=r"holes\.csv: X contains NaN in 1 of 5 rows"):
        load_dataset(path)


# --------------------------------------------------------------------------- built-ins


def test_toy() -> None:
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    ds = make_toy(0)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert ds.name == "toy"
    assert ds.X.shape == (1000, 2) and int(ds.y.sum()) == 100
    assert ds.contamination == pytest.approx(0.1)
    anomalies = ds.X[ds.y == 1]
    assert anomalies.min() >= -3.0 and anomalies.max() <= 3.0
    again = make_toy(0)
    np.testing.assert_array_equal(ds.X, again.X)
    np.testing.assert_array_equal(ds.y, again.y)
    other = make_toy(1)
    assert not np.array_equal(ds.X[ds.y == 0], other.X[other.y == 0])
    assert not np.array_equal(anomalies, other.X[other.y == 1])
    np.testing.assert_array_equal(load_dataset("toy", seed=1).X, other.X)


def test_wdbc() -> None:
    ds = make_wdbc(0)
    assert ds.name == "wdbc"
    assert ds.X.shape == (367, 30) and int(ds.y.sum()) == 10
    assert ds.contamination == pytest.approx(10 / 367)
    np.testing.assert_array_equal(make_wdbc(0).X, ds.X)
    other = make_wdbc(1)
    assert not np.array_equal(ds.X[ds.y == 1], other.X[other.y == 1])
    # The 357 benign rows are the same whatever the seed.
    np.testing.assert_array_equal(ds.X[ds.y == 0], other.X[other.y == 0])


# --------------------------------------------------------------------------- benchmarks


def _benchmark_dir() -> Path:
    candidates = []
    if os.environ.get(DATA_DIR_ENV):
        candidates.append(Path(os.environ[DATA_DIR_ENV]))
    candidates.append(bundled.BUNDLED_DIR)
    for directory in candidates:
        if (directory / "WBC.npz").is_file() and (directory / "manifest.json").is_file():
            return directory
    pytest.skip("benchmark folder with WBC.npz and manifest.json not found")


# Read the env var before the autouse fixture clears it.
_BENCH_ENV = os.environ.get(DATA_DIR_ENV)


def test_benchmark_wbc(monkeypatch: pytest.MonkeyPatch) -> None:
    if _BENCH_ENV:
        monkeypatch.setenv(DATA_DIR_ENV, _BENCH_ENV)
    directory = _benchmark_dir()
    manifest = json.loads((directory / "manifest.json").read_text())
    ds = load_dataset("wbc", data_dir=directory)
    assert ds.name == "WBC"
    assert ds.X.shape == (223, 9)
    assert ds.X.shape == (manifest["WBC"]["n"], manifest["WBC"]["d"])
    assert abs(ds.contamination - manifest["WBC"]["contamination"]) < 1e-3
    assert "WBC" in available_datasets(directory)


# --------------------------------------------------------------------------- bundled


def test_bundled_files_match_their_manifest() -> None:
    """Every shipped file has the SHA256 and size its manifest records."""
    assert verify_bundled() == {}
    assert len(bundled_names()) == 18


def test_bundled_data_sets_load_by_name_without_a_folder(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The paper's 18 play by name (any case) with no folder and no variable; n, d and
    contamination are the manifest's."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    entries = bundled.manifest()
    for name in bundled_names():
        ds = load_dataset(name[0].lower() + name[1:].upper())  # "wdbc" is the built-in
        assert ds.name == name and dataset_name(name.upper()) == name
        entry = entries[name]
        assert ds.X.shape == (entry["n"], entry["d"])
        assert abs(ds.contamination - entry["contamination"]) < 5e-4


def test_a_folder_file_comes_before_the_bundled_one(tmp_path: Path) -> None:
    _write_npz(tmp_path / "glass.npz")
    assert load_dataset("Glass", data_dir=tmp_path).n_samples == 20
    assert load_dataset("Glass").n_samples == 214


def test_ambiguous_folder_name_lists_the_files(tmp_path: Path) -> None:
    _write_npz(tmp_path / "Sensors.npz")
    _write_npz(tmp_path / "sensors.npz")
    with pytest.raises(ValueError, match=r"ambiguous.*Sensors\.npz, sensors\.npz"):
        load_dataset("SENSORS", data_dir=tmp_path)


def test_data_card_sets_the_copy_beside_the_paper() -> None:
    card = data_card("kddcup99")
    assert card.startswith("KDDCup99 (bundled")
    assert "16_http.npz" in card and "3 features" in card
    assert re.search(r"d\s+3\s+40\s+\(differs\)", card)
    assert "(differs)" not in data_card("Glass")
    assert re.search(r"contamination\s+0.02\s+0.0199\s+\(rounding\)", data_card("wilt"))
    with pytest.raises(KeyError, match="ALOI"):
        data_card("cover")
