"""Data sets for the BALLAD environment.

Tabular anomaly-detection data from four places, validated into a :class:`Dataset` of
float64 features and int8 labels (1 = anomaly, 0 = normal):

- built-in generators, ``toy`` and ``wdbc`` (:mod:`~ballad_env.data.builtin`);
- the paper's 18 benchmark data sets, shipped in the package (:mod:`~ballad_env.data.bundled`,
  with a data card each);
- ADBench's 47 classical data sets as ``adbench/<name>``, downloaded once into a cache and
  verified against pinned hashes (:mod:`~ballad_env.data.adbench`,
  :mod:`~ballad_env.data.download`);
- the user's own files (ADBench ``.npz``, ODDS ``.mat``, DAMI ``.arff``, ``.csv``;
  :mod:`~ballad_env.data.formats`) in ``data_dir=`` or ``$BALLAD_DATA_DIR``
  (:mod:`~ballad_env.data.folder`).

:mod:`~ballad_env.data.lookup` resolves names (its docstring states the rule);
``"<name>@<rows>[:<seed>]"`` names a seeded, stratified sample of a data set's rows
(:mod:`~ballad_env.data.sampling`), which is never taken unless asked for;
:mod:`~ballad_env.data.validation` checks what every source returns.
"""

from ballad_env.data.adbench import DATA_HOME_ENV, MIRROR_ENV
from ballad_env.data.builtin import BUILTIN_DATASETS, make_toy, make_wdbc
from ballad_env.data.bundled import data_card, verify_bundled
from ballad_env.data.download import DownloadError, IntegrityError
from ballad_env.data.folder import DATA_DIR_ENV
from ballad_env.data.lookup import (
    DatasetInfo,
    available_datasets,
    data_file,
    dataset_name,
    load_dataset,
)
from ballad_env.data.sampling import sample_rows
from ballad_env.data.validation import Dataset, DataWarning, validate_xy

__all__ = [
    "BUILTIN_DATASETS",
    "DATA_DIR_ENV",
    "DATA_HOME_ENV",
    "MIRROR_ENV",
    "DataWarning",
    "Dataset",
    "DatasetInfo",
    "DownloadError",
    "IntegrityError",
    "available_datasets",
    "data_card",
    "data_file",
    "dataset_name",
    "load_dataset",
    "make_toy",
    "make_wdbc",
    "sample_rows",
    "validate_xy",
    "verify_bundled",
]
