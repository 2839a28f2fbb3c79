"""Kernel sums over the near pairs only: ``Settings(kernel_pairs="near")``.

On large data sets the kernel is narrow against the data's spread (donors: eta = 0.0009),
so most (row, label) pairs have a weight that float32's exp rounds to exactly 0: on donors
and http over 95% of them. ``NearRows`` skips them by blocks. Once per reset the rows are
ordered by a recursive median split (a k-d tree's leaf order) into leaves of at most
``NEAR_LEAF`` rows, each with its bounding box. Each round the new labels are split the
same way into groups with boxes, and a (leaf, group) block is computed, by the same
augmented product, exp and per-class sums as ``KernelRows``, only when the two boxes are
close enough for some pair in it to reach an exponent of ``near_exponent(dtype)``: about
-110 for float32 sums, where exp gives 0 below -103.98 (the margin covers the exponent's
rounding). A skipped pair's weight is exactly what the dense path adds for it, 0, so the
sums equal the dense path's up to the order of summation (``docs/scale.md``).

The leaves are label-independent work, done once; the boxes' distances cost (leaves x
groups x d) a round, a small part of the product they spare. A leaf near most of the
labels takes all of them (no gather); a wide kernel so makes every leaf dense, at about
the dense path's cost. Read-only once built, shareable across forks like ``KernelRows``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Which (row, label) pairs the kernel sums visit: all of them (dense), or the blocks
#: near enough for a weight above 0 (``NearRows``).
KERNEL_PAIRS = ("all", "near")
#: Rows per leaf (at most) and labels per group (at most) of the median splits.
NEAR_LEAF = 256
NEAR_GROUP = 64
#: A leaf whose near labels are more than this share of all takes all of them: the gather
#: of columns is then dearer than the zero weights it spares.
_DENSE_SHARE = 0.7
_AXIS_SAMPLE = 1024
#: The float64 exponent's floor: exp is fast down to here (1e-304); below, it slows 5 to
#: 100-fold while the weight is worth nothing next to the prior.
EXP_FLOOR = -700.0
#: ln of the smallest weight that can count, per exp precision, with a margin for the
#: exponent's rounding: float32's exp is 0 below -103.98, float64's below -745.14 (and the
#: dense float64 path clips at -700, adding 1e-304 for such a pair).
_NEAR_EXPONENT = {np.dtype(np.float32): -110.0, np.dtype(np.float64): -760.0}


def near_exponent(exp_dtype: np.dtype[Any]) -> float:
    """The exponent ln w below which a pair is skipped, for exp in ``exp_dtype``."""
    return _NEAR_EXPONENT[np.dtype(exp_dtype)]


def median_order(points: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """An order of ``points`` whose consecutive runs are the leaves of a recursive median
    split (each cut on the widest coordinate of its part), and the leaves' starts (with
    the end appended). Every leaf has at most ``size`` points, and at least half as many
    unless all points are fewer."""
    n = points.shape[0]
    order = np.arange(n)
    starts = [0]
    parts = [(0, n)]
    while parts:
        start, stop = parts.pop()
        if stop - start <= size:
            starts.append(stop)
            continue
        members = order[start:stop]
        # The widest coordinate, judged on at most _AXIS_SAMPLE of the part's points: any
        # axis gives valid leaves; the widest gives tight ones.
        sample = points[members[::max(1, len(members) // _AXIS_SAMPLE)]]
        axis = int(np.argmax(sample.max(axis=0) - sample.min(axis=0)))
        half = (stop - start) // 2
        order[start:stop] = members[np.argpartition(points[members, axis], half)]
        parts += [(start + half, stop), (start, start + half)]  # left part first
    return order, np.asarray(starts[:1] + sorted(starts[1:]), dtype=np.intp)


def leaf_boxes(points: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest coordinates of each run ``points[starts[i]:starts[i + 1]]``."""
    return (np.minimum.reduceat(points, starts[:-1], axis=0),
            np.maximum.reduceat(points, starts[:-1], axis=0))


def box_gaps(lo_a: np.ndarray, hi_a: np.ndarray, lo_b: np.ndarray, hi_b: np.ndarray
             ) -> np.ndarray:
    """Smallest squared distance between every box a and every box b: (len(a), len(b))."""
    gap = np.maximum(lo_b[None, :, :] - hi_a[:, None, :], lo_a[:, None, :] - hi_b[None, :, :])
    np.maximum(gap, 0.0, out=gap)
    return np.einsum("abk,abk->ab", gap, gap)


class NearRows:
    """Rows (already centred) ordered into median-split leaves with their boxes, and their
    augmented form (``KernelRows``'s: the centred row, scale |x - c|^2, 1) in that order."""

    def __init__(self, centred: np.ndarray, augmented: np.ndarray, leaf: int = NEAR_LEAF
                 ) -> None:
        self.order, self.starts = median_order(centred, leaf)
        self.lo, self.hi = leaf_boxes(centred[self.order], self.starts)
        self.rows = np.ascontiguousarray(augmented[self.order])
        for array in (self.order, self.starts, self.lo, self.hi, self.rows):
            array.setflags(write=False)

    @property
    def nbytes(self) -> int:
        return int(self.order.nbytes + self.starts.nbytes + self.lo.nbytes + self.hi.nbytes
                   + self.rows.nbytes)

    def near_blocks(self, centred_labels: np.ndarray, scale: float, exp_dtype: np.dtype[Any],
                    group: int = NEAR_GROUP) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The labels' order into groups, the groups' starts, and which (leaf, group)
        blocks can hold a pair whose exponent reaches ``near_exponent(exp_dtype)``."""
        order, starts = median_order(centred_labels, group)
        lo, hi = leaf_boxes(centred_labels[order], starts)
        # exponent = scale |x - z|^2 with scale < 0: near while scale * gap >= the floor.
        near = scale * box_gaps(self.lo, self.hi, lo, hi) >= near_exponent(exp_dtype)
        return order, starts, near


def near_sums(rows: NearRows, labels: np.ndarray, indicator: np.ndarray, near: np.ndarray,
              label_order: np.ndarray, label_starts: np.ndarray, exp_dtype: np.dtype[Any],
              chunk: int, in_blocks: Any) -> np.ndarray:
    """(n, 2) per-class kernel sums of the rows (in their original order) over the labels:
    ``labels`` the labels' side of the augmented product, ``indicator`` their classes,
    ``near`` from ``NearRows.near_blocks``; ``in_blocks(n_leaves, 1, work)`` shares the leaves
    among threads."""
    out = np.zeros((rows.rows.shape[0], 2))
    if near.mean() > _DENSE_SHARE:  # a wide kernel: every pair, in blocks of rows
        step = max(1, chunk // labels.shape[1])
        in_blocks(len(out), step, lambda begin, end: block_sums(rows.rows[begin:end], labels,
                                                             indicator, exp_dtype, out[begin:end]))
        return _unordered(out, rows.order)
    lab_all = np.ascontiguousarray(labels[:, label_order])
    ind_all = np.ascontiguousarray(indicator[label_order])
    sizes = np.diff(label_starts)
    m = lab_all.shape[1]
    starts = rows.starts

    def work(first: int, stop: int) -> None:
        for leaf in range(first, stop):
            mask = near[leaf]
            if not mask.any():
                continue
            cols = np.repeat(mask, sizes)
            lab, ind = lab_all, ind_all
            if np.count_nonzero(cols) <= _DENSE_SHARE * m:
                lab, ind = lab_all[:, cols], ind_all[cols]
            step = max(1, chunk // lab.shape[1])
            for begin in range(starts[leaf], starts[leaf + 1], step):
                end = min(begin + step, starts[leaf + 1])
                block_sums(rows.rows[begin:end], lab, ind, exp_dtype, out[begin:end])

    in_blocks(len(starts) - 1, 1, work)
    return _unordered(out, rows.order)


def block_sums(rows: np.ndarray, labels: np.ndarray, indicator: np.ndarray,
           exp_dtype: np.dtype[Any], out: np.ndarray) -> None:
    """``out`` = per-class sums of the weights of ``rows`` x ``labels``, as ``KernelRows``
    computes them: the exponent rounded once to ``exp_dtype``; float64's clipped to
    [-700, 0] as ``kernel.kernel_sums`` does."""
    e = rows @ labels
    w = e if e.dtype == exp_dtype else e.astype(exp_dtype)
    if exp_dtype == np.float64:
        np.clip(w, EXP_FLOOR, 0.0, out=w)
    np.exp(w, out=w)
    out[:] = w @ indicator


def _unordered(sums: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rows' sums held in ``order`` put back in the rows' own order."""
    result = np.empty_like(sums)
    result[order] = sums
    return result


__all__ = ["EXP_FLOOR", "KERNEL_PAIRS", "NEAR_GROUP", "NEAR_LEAF", "NearRows", "block_sums",
           "box_gaps", "leaf_boxes", "median_order", "near_exponent", "near_sums"]
