"""Which BLAS arithmetic the suite runs on, for the tests that compare with recorded floats.

OpenBLAS picks a kernel for the CPU it runs on (``OPENBLAS_CORETYPE`` overrides the choice),
and its kernels sum a matrix product in different orders: a product's last bits, and every
number computed from them, depend on the kernel. A fixture recorded from a computation that
goes through a BLAS product names the kernel it was recorded under; its tests compare with it
bit for bit (1e-12) under that kernel and to a tolerance measured across kernels elsewhere
(``docs/studies/REPRODUCTION.md``, "Which arithmetic repeats the published episodes").
"""

from __future__ import annotations


def openblas_kernels() -> frozenset[str]:
    """The kernels (threadpoolctl's ``architecture``) of NumPy's and SciPy's OpenBLAS (two
    libraries in the wheels; scikit-learn's products run in SciPy's)."""
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS, whichever test runs first)
    from threadpoolctl import threadpool_info

    return frozenset(str(lib.get("architecture")) for lib in threadpool_info()
                     if lib.get("internal_api") == "openblas")


def on_kernel(recorded: str) -> bool:
    """Whether NumPy's and SciPy's OpenBLAS both run the ``recorded`` kernel."""
    return openblas_kernels() == {recorded}


def tolerance(recorded: str, elsewhere: float) -> float:
    """1e-12 under the ``recorded`` kernel (the arithmetic is the recorded one); otherwise
    ``elsewhere``, the tolerance the fixture's tests measured across kernels."""
    return 1e-12 if on_kernel(recorded) else elsewhere


__all__ = ["on_kernel", "openblas_kernels", "tolerance"]
