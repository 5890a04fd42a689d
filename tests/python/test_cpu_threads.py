"""ember's CPU kernels run on PyTorch's own OpenMP threads: the same runtime, the same team, as
many threads as torch.set_num_threads says. A second thread pool (kernels linked against another
OpenMP runtime, or launched from a thread of ember's own) would compete with ATen's threads for
the cores and slow the ATen calls between the kernels (issue 24).

The checks count CPU time per thread (/proc/self/task/*/schedstat), not wall time, so they hold
on a loaded machine and on any CPU."""
import os
import sys

import pytest
import torch

from helpers import compile_fresh

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.exists("/proc/self/task"),
                                reason="reads threads and mappings from /proc (Linux)")


def cpu_ns_by_thread() -> dict:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile
    return out


def cpu_during(fn, calls: int) -> tuple[int, dict]:
    """(the calling thread's CPU ns, {other thread: CPU ns}) spent while fn runs `calls` times."""
    me = __import__("threading").get_native_id()
    before = cpu_by = cpu_ns_by_thread()
    for _ in range(calls):
        fn()
    cpu_by = cpu_ns_by_thread()
    return cpu_by[me] - before[me], {t: ns - before.get(t, 0) for t, ns in cpu_by.items() if t != me}


@pytest.fixture
def two_threads():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(saved)


def gelu_graph():
    # 256 rows of 4096: the launcher splits the rows over the OpenMP team (rows > grain).
    x = torch.randn(256, 4096)
    fn = compile_fresh(lambda t: torch.nn.functional.gelu(t) * 2.0)
    fn(x)
    return lambda: fn(x)


def test_kernels_share_torchs_openmp_runtime(two_threads):
    gelu = gelu_graph()
    gelu()
    runtimes = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            name = os.path.basename(path)
            if name.startswith(("libgomp", "libomp", "libiomp")) and ".so" in name:
                runtimes.add(os.path.realpath(path))
    assert len(runtimes) == 1, f"more than one OpenMP runtime loaded: {sorted(runtimes)}"


def test_kernels_run_on_torchs_threads(two_threads):
    """While ember's kernels run, only the threads ATen's own parallel calls use may work, and
    torch's second thread must do part of the kernels' work."""
    gelu = gelu_graph()  # compiling may start threads of its own (the C compiler's); they end or idle
    gelu()
    a = torch.randn(512, 512)
    me = __import__("threading").get_native_id()
    _, aten = cpu_during(lambda: torch.mm(a, a).exp_(), calls=10)
    team = {t for t, ns in aten.items() if ns > 0}
    main_ns, others = cpu_during(gelu, calls=20)
    total = main_ns + sum(others.values())
    foreign = {t: ns for t, ns in others.items() if t not in team and ns > 0}
    assert team and me not in team
    assert sum(foreign.values()) < 0.05 * total, \
        f"threads outside torch's team ran during ember's kernels (a second thread pool): {foreign} ns " \
        f"of {total} ns; torch's team: {sorted(team)}"
    assert sum(others[t] for t in team if t in others) > 0.05 * total, \
        f"torch's worker thread did no work in ember's kernels at 2 threads: {others}, main {main_ns} ns"


def test_kernels_follow_set_num_threads(two_threads):
    """At torch.set_num_threads(1) the kernels run on the calling thread alone."""
    gelu = gelu_graph()
    gelu()
    torch.set_num_threads(1)
    gelu()
    main_ns, others = cpu_during(gelu, calls=20)
    assert sum(others.values()) < 0.05 * main_ns, \
        f"other threads worked at torch.set_num_threads(1): {others} ns, main thread {main_ns} ns"


def test_a_second_openmp_runtime_is_told_once(monkeypatch):
    """Kernels that would run on another runtime than torch's: the first CPU graph whose kernels
    load warns, naming the runtimes and the fix; later graphs do not repeat it."""
    from ember.runtime import openmp

    monkeypatch.setattr(openmp, "_checked", [False])
    monkeypatch.setattr(openmp, "loaded_runtimes", lambda: ["/usr/lib/libgomp.so.1.0.0", "/opt/torch/lib/libomp.so"])
    x = torch.randn(8, 8)
    with pytest.warns(RuntimeWarning, match=r"2 OpenMP runtimes .*libomp.so.*EMBER_CC"):
        compile_fresh(lambda t: t.sin() + 1)(x)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compile_fresh(lambda t: t.cos() + 2)(x)

