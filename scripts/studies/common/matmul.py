"""The machine's matrix-product peak, which the timing studies report their trainers'
arithmetic against."""

from __future__ import annotations

import time


def matmul_peak(repeats: int = 2000) -> dict[str, float]:
    """GFLOP a CPU second of one thread's float32 matrix products: the (1,024 x 64) x
    (64 x 64) of the MLPs' widest layer and a 512-cube (the core's peak); CPU seconds, so a
    loaded machine moves it less than wall-clock."""
    import torch

    torch.set_num_threads(1)
    out: dict[str, float] = {}
    for name, (m, k, n) in {"1024x64x64": (1024, 64, 64), "512^3": (512, 512, 512)}.items():
        a, b = torch.rand(m, k), torch.rand(k, n)
        count = max(repeats * 64 * 64 // (k * n), 20)
        for _ in range(count // 5):
            a @ b
        start = time.process_time()
        for _ in range(count):
            a @ b
        out[name] = 2 * m * k * n * count / (time.process_time() - start) / 1e9
    return out


__all__ = ["matmul_peak"]
