"""How often the safe split's lower bound holds on data sets the fit never saw
(docs/studies/ALLOCATION.md, "Fifth round").

On the allocation study's folds of the training sets, each fold's real cells are scored by a
fit on the other folds (``tasks_fit.fit_safe``, the out-of-bag residual kept). For every
cell, the split of the largest predicted mean gain is the one the allocator would play;
the table says, per level and bound width z, how often that split's realised gain lies at
or above its bound: the ensemble's spread alone, or the spread and the out-of-bag residual
together, against the one-sided normal coverage z promises. A bound that covers less than
it promises lets the allocator leave All-in-LR on tasks with no room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import erf, sqrt
from typing import Any

import numpy as np
import pandas as pd

from scripts.studies.allocation import tasks_fit as F

#: The bound widths of the table.
WIDTHS = (0.5, 1.0, 1.5, 2.0)


def out_of_fold(real: pd.DataFrame, tasks: pd.DataFrame, settings: Mapping[str, Any]
                ) -> pd.DataFrame:
    """Per real cell, scored by the fit on the other folds' cells and tasks: the split of
    the largest mean gain, its mean, spread over the ensemble, out-of-bag residual and
    realised gain (per unit of the largest unit cost)."""
    both = pd.concat([real, tasks], ignore_index=True)
    arrays = F.design(both)
    n = len(real)
    out = pd.DataFrame(index=real.index, columns=["mean", "spread", "residual", "gain"],
                       dtype=float)
    for fold in F.folds(list(real["dataset"])):
        held = real["dataset"].isin(fold).to_numpy()
        train = ~np.isin(arrays["groups"], list(set(real["group"][held])))
        params = F.fit_safe(both[train], arrays={k: v[train] for k, v in arrays.items()},
                            **{**settings, "residual": True})
        Z = (arrays["X"][:n][held] - np.asarray(params["center"])) / np.asarray(params["scale"])
        gains = np.asarray(params["intercept"])[:, None, :] + np.einsum(
            "msf,rf->mrs", np.asarray(params["coef"]), Z)
        mean = gains.mean(axis=0)
        best = np.argmax(mean, axis=1)
        rows = np.arange(len(best))
        out.loc[held, "mean"] = mean[rows, best]
        out.loc[held, "spread"] = gains.std(axis=0)[rows, best]
        out.loc[held, "residual"] = np.asarray(params["residual"])[best]
        out.loc[held, "gain"] = arrays["Y"][:n][held][rows, best]
    return out.assign(level=real["level"].to_numpy())


def coverage(scored: pd.DataFrame, widths: Sequence[float] = WIDTHS) -> pd.DataFrame:
    """Per level (and all cells) and width z: the share of cells whose realised gain is at
    or above mean - z * spread and at or above mean - z * sqrt(spread^2 + residual^2),
    beside the one-sided normal coverage z promises."""
    rows = []
    for level, part in [*scored.groupby("level"), ("all", scored)]:
        wide = np.hypot(part["spread"], part["residual"])
        for z in widths:
            rows.append({"level": level, "z": z, "promised": 0.5 * (1 + erf(z / sqrt(2))),
                         "spread": float(np.mean(part["gain"] >= part["mean"] - z
                                                 * part["spread"])),
                         "spread and residual": float(np.mean(part["gain"] >= part["mean"]
                                                              - z * wide)),
                         "cells": len(part)})
    return pd.DataFrame(rows)


__all__ = ["WIDTHS", "coverage", "out_of_fold"]
