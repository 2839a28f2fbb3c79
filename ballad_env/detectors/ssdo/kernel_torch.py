"""The torch kernel backend: ``KernelRows.sums`` and the sampled eta's neighbour search on a
torch device (a GPU when there is one), for ``Settings(kernel_backend="torch")``.

It mirrors the numpy code of ``ballad_env.detectors.ssdo.kernel`` step for step: the same augmented
rows
(centred, with their scaled squared norms and a one), the same product with the labels'
side, exp and per-class sums; the exponent in the precision the numpy path chose, exp and
sums in float32 (or float64 with ``kernel_dtype="float64"``). Only the order of the sums'
additions differs, so the sums agree with numpy's within about 1e-6 relative to
1 + da + dn (``tests/test_kernel_torch.py``, ``docs/scale.md``). torch is an optional
extra (``pip install -e '.[torch]'`` in the clone): this module is imported only when the torch
backend is asked for, and ``require_torch`` names the extra when it is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ballad_env.compute import episode_threads
from ballad_env.detectors.ssdo.kernel_near import (
    EXP_FLOOR,  # the float64 path clips its exponent there
)

#: What to install for the torch backend.
TORCH_EXTRA = "pip install -e '.[torch]' in the clone"
#: Elements of one block of the exponent on a GPU (256 MiB in float32); on a CPU the
#: numpy path's cache-sized blocks (``kernel._CHUNK_ELEMENTS``) are used.
_GPU_CHUNK_ELEMENTS = 1 << 26
#: float32 exponents are clipped here: exp(-87) = 1.6e-38 is float32's smallest normal
#: range, and torch's CPU exp is 5 to 10 times slower on the subnormal and zero results
#: below it (measured: 60 against 8 ns a pair). Each sum moves by under 1.6e-38 a label.
_EXP_FLOOR_32 = -87.0


def require_torch() -> Any:
    """The torch module, or an ImportError that names the extra to install."""
    try:
        import torch
    except ImportError as err:
        raise ImportError(f"kernel_backend='torch' needs PyTorch, which is not installed: "
                          f"{TORCH_EXTRA} (or pip install torch), or use "
                          "kernel_backend='numpy'") from err
    return torch


def resolve_device(device: str | None) -> str:
    """The device a ``kernel_device`` setting means: None is "cuda" when torch sees a GPU,
    else "cpu"; a named device is checked to exist (a clear error if it does not)."""
    torch = require_torch()
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"kernel_device {device!r} is not a torch device: use cpu, cuda, "
                         "cuda:N or mps (or leave it unset: cuda when there is one)") from err
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"kernel_device {device!r}: torch sees no CUDA GPU on this machine "
                         "(use kernel_device='cpu', or leave it unset)")
    return str(parsed)


@contextmanager
def _cpu_threads(device: Any) -> Iterator[None]:
    """On a CPU device, torch's own thread pool limited to ``episode_threads()`` (as numpy's
    BLAS is during an episode); restored afterwards. Nothing on a GPU."""
    threads = episode_threads()
    torch = require_torch()
    if device.type != "cpu" or threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class DeviceRows:
    """``KernelRows``' augmented rows held on a torch device, copied there once."""

    def __init__(self, augmented: np.ndarray, device: str) -> None:
        torch = require_torch()
        self.device = torch.device(device)
        self.rows = torch.from_numpy(np.ascontiguousarray(augmented)).to(self.device)

    def sums(self, labels: np.ndarray, indicator: np.ndarray, exp_dtype: np.dtype,
             chunk_elements: int) -> np.ndarray:
        """(n, 2) sums over the labels' columns of exp(rows @ labels) by class.

        ``labels``: the labels' side of the product, in the rows' dtype; ``indicator``:
        (n_lab, 2) class indicators; ``exp_dtype``: float32 (the exponent rounded once to
        float32, then exp and sums in float32, as numpy's float32 path) or float64 (exp and
        sums in float64, the exponent clipped to [-700, 0] as ``kernel_sums``). A float32
        exponent is clipped at ``_EXP_FLOOR_32`` from below.
        """
        torch = require_torch()
        wide = np.dtype(exp_dtype) == np.float64
        exp_type = torch.float64 if wide else torch.float32
        n, n_lab = self.rows.shape[0], labels.shape[1]
        block = max(1, (_GPU_CHUNK_ELEMENTS if self.device.type != "cpu" else chunk_elements)
                    // n_lab)
        with torch.inference_mode(), _cpu_threads(self.device):
            side = torch.from_numpy(np.ascontiguousarray(labels)).to(self.device)
            # Held transposed: (n, n_lab) @ (2, n_lab).T runs 5 times faster than a product
            # with an (n_lab, 2) matrix in torch's CPU build (measured: 0.18 against 0.88 s).
            classes = torch.from_numpy(np.ascontiguousarray(indicator.T, dtype=exp_dtype)).to(
                self.device).T
            out = torch.empty((n, 2), dtype=exp_type, device=self.device)
            for start in range(0, n, block):
                e = self.rows[start:start + block] @ side
                w = e.to(exp_type)  # a no-op when it already is: rounded once, as numpy
                if wide:
                    w.clamp_(EXP_FLOOR, 0.0)
                else:
                    w.clamp_(min=_EXP_FLOOR_32)
                w.exp_()
                torch.matmul(w, classes, out=out[start:start + block])
            return out.to(torch.float64).cpu().numpy()


def nearest_candidates(X: np.ndarray, queries: np.ndarray, k: int, device: str,
                       dtype: str = "float64") -> np.ndarray:
    """Indices (len(queries), k) of each query's k nearest rows of X by a brute-force search
    on ``device`` (|x|^2 + |z|^2 - 2 x.z in ``dtype``, so near-ties may order differently
    from scikit-learn's; ``kernel_width`` recomputes the distances exactly afterwards)."""
    torch = require_torch()
    target = torch.device(device)
    kind = np.dtype(dtype)
    m = queries.shape[0]
    with torch.inference_mode(), _cpu_threads(target):
        rows = torch.from_numpy(np.array(X, dtype=kind)).to(target)  # a writable copy
        q = torch.from_numpy(np.array(queries, dtype=kind)).to(target)
        q_norms = (q * q).sum(1, keepdim=True)
        block = max(k, (_GPU_CHUNK_ELEMENTS if target.type != "cpu" else 1 << 22) // m)
        best_d = torch.empty((m, 0), dtype=rows.dtype, device=target)
        best_i = torch.empty((m, 0), dtype=torch.int64, device=target)
        for start in range(0, rows.shape[0], block):
            chunk = rows[start:start + block]
            d2 = q_norms + (chunk * chunk).sum(1)[None, :] - 2.0 * (q @ chunk.T)
            take = min(k, chunk.shape[0])
            vals, idx = torch.topk(d2, take, dim=1, largest=False, sorted=False)
            both_d = torch.cat([best_d, vals], dim=1)
            both_i = torch.cat([best_i, idx + start], dim=1)
            keep = min(k, both_d.shape[1])
            best_d, order = torch.topk(both_d, keep, dim=1, largest=False, sorted=False)
            best_i = torch.gather(both_i, 1, order)
        return best_i.cpu().numpy()


__all__ = ["TORCH_EXTRA", "DeviceRows", "nearest_candidates", "require_torch", "resolve_device"]
