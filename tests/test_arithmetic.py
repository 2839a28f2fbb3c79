"""The suite's view of the BLAS arithmetic it runs on (``tests/arithmetic.py``)."""

from __future__ import annotations

import os

from arithmetic import on_kernel, openblas_kernels, tolerance


def test_the_running_kernel_is_the_one_openblas_reports() -> None:
    """One kernel for NumPy's and SciPy's OpenBLAS (both follow the CPU, or
    ``OPENBLAS_CORETYPE``), and the tolerance is 1e-12 under it only."""
    (running,) = openblas_kernels()
    assert on_kernel(running) and not on_kernel("NoSuchKernel")
    assert tolerance(running, 1e-7) == 1e-12
    assert tolerance("NoSuchKernel", 1e-7) == 1e-7


def test_openblas_coretype_names_the_kernel_where_it_is_one() -> None:
    """Sandybridge and Haswell run as themselves (Zen runs Haswell's kernel in these
    wheels), so a CI run under ``OPENBLAS_CORETYPE`` runs the kernel it names."""
    forced = os.environ.get("OPENBLAS_CORETYPE", "")
    if forced.lower() in {"sandybridge", "haswell"}:
        assert {kernel.lower() for kernel in openblas_kernels()} == {forced.lower()}
