"""ADBench's CV and NLP embedding sets as new training sources of the allocation study
(docs/studies/ALLOCATION.md, "Eighth round").

ADBench publishes image classes, MVTec-AD categories and text corpora as embeddings
(ResNet-18 and ViT for images, BERT and RoBERTa for text): each file a real anomaly task.
:func:`link_sources` gives every file of a local copy of ADBench's folders a name of its own
in one data folder (``<stem>_<embedding>.npz``, a symbolic link), so the harness loads it by
name (``$BALLAD_DATA_DIR`` or ``data_dir``) and tasks are drawn from it by name
(``task/<name>/real-<k>``). Nothing under ``ballad_env`` changes.

Group discipline (:func:`source_group`): a group is the data a task is drawn from. One
MVTec-AD category is one group (its ResNet-18 and ViT files embed the same images); the
CIFAR10 classes share their images (one group), likewise SVHN and 20news (BERT and RoBERTa
together). None of these groups is in ``docs/allocation_split.json`` (a collision is an
error), so they only ever join the training side: never a held-out or reserved set.

    python -m scripts.studies.allocation.embedding_sources --mirror <ADBench copy> \\
        --data-dir /tmp/embeddings --out /tmp/s2fit-study --seeds 5 --tasks 40
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from agents.experiments.lattice_build import build_cells
from ballad_env.data.lookup import task_costs
from ballad_env.data.tasks import parse_task, task_name
from ballad_env.replay.store import LatticeStore
from ballad_env.settings import Settings
from scripts.studies.allocation.tasks_cells import LEVELS, cell_row
from scripts.studies.common.split import load_split

#: ADBench's embedding folders and the tag each file's name gets.
EMBEDDINGS = {"CV_by_ResNet18": "r18", "CV_by_ViT": "vit", "NLP_by_BERT": "bert",
              "NLP_by_RoBERTa": "roberta"}
#: A linked file's name: ADBench's stem, then the embedding's tag.
_NAME = re.compile(r"^(?P<stem>.+)_(?P<tag>" + "|".join(EMBEDDINGS.values()) + ")$")
#: Sources whose files are one data set per class of one image or text collection.
SHARED_DATA = ("CIFAR10", "SVHN", "20news", "MNIST-C", "FashionMNIST", "agnews", "amazon",
               "imdb", "yelp")


def source_group(name: str) -> str:
    """The group of a linked source, a sample of one or a task of one: the MVTec-AD
    category (``MVTec-AD_bottle``) or the collection whose classes share their data
    (``CIFAR10``, ``SVHN``, ``20news``); a name not made by :func:`link_sources` is a
    ``ValueError``."""
    if name.startswith("task/"):
        name = parse_task(name)[0]
    match = _NAME.match(name.split("@", 1)[0])
    if match is None:
        raise ValueError(f"{name!r} is no linked embedding source: names are "
                         f"<ADBench stem>_<{'|'.join(EMBEDDINGS.values())}>")
    stem = match["stem"]
    collection = stem.rsplit("_", 1)[0]
    return collection if collection in SHARED_DATA else stem


def link_sources(mirror: Path, folder: Path) -> dict[str, str]:
    """Link every ``.npz`` file of ``mirror``'s embedding folders (:data:`EMBEDDINGS`) into
    ``folder`` as ``<stem>_<tag>.npz``; returns {source name: group}, sorted by name. A
    group that is also a group of the allocation split is refused (it would cross sides)."""
    folder.mkdir(parents=True, exist_ok=True)
    sources: dict[str, str] = {}
    for sub, tag in EMBEDDINGS.items():
        for path in sorted((Path(mirror) / sub).glob("*.npz")):
            name = f"{path.stem}_{tag}"
            link = folder / f"{name}.npz"
            if not link.is_symlink() or os.readlink(link) != str(path.resolve()):
                link.unlink(missing_ok=True)
                link.symlink_to(path.resolve())
            sources[name] = source_group(name)
    if not sources:
        raise FileNotFoundError(f"no .npz file under {mirror}/{{{','.join(EMBEDDINGS)}}}: "
                                "point --mirror at a copy of ADBench's datasets folder")
    clash = sorted(set(sources.values()) & set(load_split()["groups"]))
    if clash:
        raise ValueError(f"embedding groups {clash} are groups of docs/allocation_split.json: "
                         "rename them so no data lies on both sides")
    return dict(sorted(sources.items()))


def linked_sources(folder: Path) -> dict[str, str]:
    """{source name: group} of the sources :func:`link_sources` linked into ``folder``,
    sorted by name (what a later run reads back)."""
    names = sorted(path.stem for path in Path(folder).glob("*.npz") if _NAME.match(path.stem))
    if not names:
        raise FileNotFoundError(f"no linked embedding source in {folder}: run "
                                "embedding_sources --mirror ... --data-dir it first")
    return {name: source_group(name) for name in names}


def real_cells(names: Sequence[str], seeds: int) -> list[tuple[str, int, Settings]]:
    """The sources' own cells: every seed below ``seeds`` at the three cost levels."""
    return [(name, seed, settings) for seed in range(seeds) for name in names
            for settings in LEVELS.values()]


def task_cells(names: Sequence[str], per_source: int, data_dir: Path
               ) -> list[tuple[str, int, Settings]]:
    """The first ``per_source`` real-anomaly tasks of each source at their own costs
    (seed 0), in the order the study builds and reads them (task by task)."""
    return [(task, 0, Settings().replace(**task_costs(task, data_dir)))
            for k in range(per_source) for name in names
            for task in [task_name(name, k, real=True)]]


def build(out: Path, data_dir: Path, names: Sequence[str], seeds: int, per_source: int,
          n_jobs: int = 1) -> None:
    """Build every missing lattice: the sources' cells, then their tasks, one task per
    source at a time (resumable). The eighth round built them so because the store's
    preparation then visited every (data set, setting) pair of a call, which grew with the
    square of the tasks; ``build_cells`` now prepares only the cells asked for, so one call
    would do as well, and the batches are kept as the round ran them."""
    root = Path(out) / "lattices"
    build_cells(root, real_cells(names, seeds), data_dir=data_dir, n_jobs=n_jobs)
    cells = task_cells(names, per_source, data_dir)
    for start in range(0, len(cells), len(names)):
        build_cells(root, cells[start:start + len(names)], data_dir=data_dir, n_jobs=n_jobs,
                    progress=False)


def read_rows(out: Path, data_dir: Path, names: Sequence[str], kind: str, count: int
              ) -> pd.DataFrame:
    """Rows (``tasks_cells.cell_row``, group :func:`source_group`) of the sources' cells
    at ``count`` seeds (``kind="real"``) or of their first ``count`` tasks (``"tasks"``,
    with ``k``), read from the store once and cached as ``<out>/rows8_<kind>_<count>.pkl``;
    a cell not built yet is an error."""
    path = Path(out) / f"rows8_{kind}_{count}.pkl"
    if path.exists():
        return pd.read_pickle(path)
    store = LatticeStore(Path(out) / "lattices")
    rows = []
    if kind == "real":
        for name, seed, settings in real_cells(names, count):
            level = next(k for k, v in LEVELS.items() if v == settings)
            rows.append(cell_row(store.load(name, seed, settings), level, source_group(name)))
    elif kind == "tasks":
        for name, seed, settings in task_cells(names, count, data_dir):
            row = cell_row(store.load(name, seed, settings), "task", source_group(name))
            rows.append(row | {"k": int(name.rsplit("-", 1)[1])})
    else:
        raise ValueError(f"kind {kind!r}: use 'real' (the sources' cells) or 'tasks'")
    frame = pd.DataFrame(rows)
    frame.to_pickle(path)
    return frame


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (the module docstring): link, then build."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mirror", type=Path, required=True,
                   help="a copy of ADBench's datasets folder (holding CV_by_ResNet18, ...)")
    p.add_argument("--data-dir", type=Path, required=True,
                   help="the folder the sources are linked into (pass it to every run)")
    p.add_argument("--out", type=Path, required=True, help="the study's folder")
    p.add_argument("--seeds", type=int, default=5, help="seeds per source cell")
    p.add_argument("--tasks", type=int, default=40, help="real-anomaly tasks per source")
    p.add_argument("--n-jobs", type=int, default=1, help="local build workers")
    args = p.parse_args(argv)
    sources = link_sources(args.mirror, args.data_dir)
    print(f"{len(sources)} sources in {len(set(sources.values()))} groups")
    build(args.out, args.data_dir, list(sources), args.seeds, args.tasks, args.n_jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
