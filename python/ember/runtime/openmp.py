"""Whether ember's CPU kernels share PyTorch's OpenMP runtime, said once per process.

The kernels' launchers split rows with `#pragma omp parallel` and the C compiler links them
against its OpenMP runtime by soname (gcc: libgomp.so.1). PyTorch's pip wheels ship their
own libgomp.so.1, already loaded, so the kernels bind to it: one runtime, one team of
torch.get_num_threads() threads, kept hot between ATen's calls and ember's kernels
(tests/python/test_cpu_threads.py). A kernel library linked against another runtime (clang's
libomp, or a torch built with Intel's libiomp5) brings a second pool of workers, sized by
its own defaults rather than torch.set_num_threads, whose spinning workers take the cores
from ATen's next call; the first CPU graph whose kernels load then warns, with the fix, and
`ember doctor` reports the same.
"""
from __future__ import annotations

import os
import re
import warnings

# Runtimes a C compiler links by name (gcc: libgomp.so.1, clang: libomp.so.5, Intel:
# libiomp5.so), as their files are named. Copies that wheels vendor under a hashed name
# (scikit-learn's libgomp-<hash>.so.1) serve their own library, never ember's kernels.
_RUNTIME_FILE = re.compile(r"^lib(gomp|omp|iomp5)\.so(\.\d+)*$")
_checked = [False]


def loaded_runtimes() -> list[str]:
    """The OpenMP runtime libraries mapped into this process (real paths; [] where /proc
    cannot be read)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if path.startswith("/") and _RUNTIME_FILE.match(os.path.basename(path)):
                    found.add(os.path.realpath(path))
    except OSError:
        return []
    return sorted(found)


def advice(runtimes: list[str]) -> str:
    return (f"{len(runtimes)} OpenMP runtimes are loaded ({', '.join(runtimes)}): ember's CPU kernels and "
            "PyTorch's ATen calls may run on two thread pools that compete for the cores. Build the kernels "
            "with a C compiler that uses PyTorch's runtime (gcc's libgomp for the pip wheels: EMBER_CC=gcc), "
            "or make idle workers sleep (OMP_WAIT_POLICY=passive).")


def check_once() -> None:
    """Called when a CPU graph's kernels are loaded: warns (RuntimeWarning) the first time
    more than one OpenMP runtime is mapped."""
    if _checked[0]:
        return
    _checked[0] = True
    runtimes = loaded_runtimes()
    if len(runtimes) > 1:
        warnings.warn("ember: " + advice(runtimes), RuntimeWarning, stacklevel=2)
