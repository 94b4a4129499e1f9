"""nbval's kernels run the notebooks on another instruction set and thread count than ``make notebooks``.

A notebook's stored outputs come from ``make notebooks``, run at the full instruction set of the
machine that executed it (AVX2 here, AVX-512 or AMX on a recent Xeon) and its thread count. The
kernels nbval starts get the x86-64 baseline instead (ATen without AVX, oneDNN at SSE4.1, MKL at
SSE4.2) and one thread: the same sums, rounded in another order, as a learner's CPU would. So an
output that prints rounding noise (a loss to the last digit, an error of 1e-7) fails here, on
every machine, and not only on someone else's laptop. Stored outputs print what is stable instead:
a verdict against a stated tolerance, or a figure rounded where it cannot flip (issue 17).
Only the kernels get this environment (the ranks they launch inherit it); unit tests run as usual.
"""

from __future__ import annotations

import os
import platform

import pytest

NBVAL_KERNEL_ENV = {"OMP_NUM_THREADS": "1"}
if platform.machine().lower() in ("x86_64", "amd64"):
    NBVAL_KERNEL_ENV |= {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
                         "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A notebook's first cell sets up its IPyNbFile, which starts the kernel: in this environment."""
    if not type(item).__module__.startswith("nbval"):
        yield
        return
    saved = {k: os.environ.get(k) for k in NBVAL_KERNEL_ENV}
    os.environ.update(NBVAL_KERNEL_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
