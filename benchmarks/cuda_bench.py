"""GPU phase 1 check and first timings: every cuda_cases.py graph against eager (max error,
and whether it took the CUDA path), then median latency of eager, Inductor and ember for
LayerNorm+GELU and softmax in bf16 at a few sizes.

    python benchmarks/cuda_bench.py [--no-timing]     (on a machine with a CUDA device)
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))

import ember  # noqa: E402
from ember import _core  # noqa: E402
from cuda_cases import CASES  # noqa: E402


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return []


def errors(expected, actual):
    """Max absolute error and max error relative to max |expected|, over all float outputs."""
    worst_abs, worst_rel = 0.0, 0.0
    for e, a in zip(_flat(expected), _flat(actual)):
        if e.is_floating_point():
            nan_ok = bool(torch.equal(e.isnan(), a.isnan()))
            d = (e.double() - a.double()).abs().nan_to_num(0.0 if nan_ok else float("inf"))
            d = d.max().item() if d.numel() else 0.0
            scale = e.double().abs().nan_to_num(0.0).max().item() if e.numel() else 1.0
            worst_abs, worst_rel = max(worst_abs, d), max(worst_rel, d / max(scale, 1e-30))
        elif not torch.equal(e, a):
            worst_abs = worst_rel = float("inf")
    return worst_abs, worst_rel


def check_cases():
    print(f"{'case':24} {'cuda graphs':>11} {'fallbacks':>9} {'max abs err':>12} {'max rel err':>12}")
    for name in sorted(CASES):
        fn, args = CASES[name]("cuda")
        torch._dynamo.reset()
        with torch.no_grad():
            expected = fn(*args)
            fb, cg = ember.stats()["eager_fallbacks"], _core.cuda_compile_counts()["graphs"]
            try:
                actual = torch.compile(fn, backend="ember")(*args)
                torch.cuda.synchronize()
            except Exception as e:  # report and go on: this is a survey
                print(f"{name:24} ERROR {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                continue
        a, r = errors(expected, actual)
        print(f"{name:24} {_core.cuda_compile_counts()['graphs'] - cg:>11} {ember.stats()['eager_fallbacks'] - fb:>9} "
              f"{a:>12.3e} {r:>12.3e}")


def median_ms(fn, *args, iters=200):
    for _ in range(10):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def ln_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b), approximate="tanh")


def softmax(x):
    return torch.softmax(x, -1)


def timings():
    dt = torch.bfloat16
    rows = []
    for (n, d) in [(8 * 512, 768), (16 * 512, 1024), (8 * 512, 4096)]:
        x = torch.randn(n, d, device="cuda", dtype=dt)
        w = torch.randn(d, device="cuda", dtype=dt)
        b = torch.randn(d, device="cuda", dtype=dt)
        rows.append((f"layernorm+gelu {n}x{d}", ln_gelu, (x, w, b), 2 * x.numel() * 2))
    for (n, d) in [(8 * 12 * 512, 512), (4096, 4096), (8 * 128, 50257)]:
        x = torch.randn(n, d, device="cuda", dtype=dt)
        rows.append((f"softmax {n}x{d}", softmax, (x,), 2 * x.numel() * 2))
    print(f"\n{'bf16 kernel':30} {'eager ms':>9} {'inductor ms':>11} {'ember ms':>9} {'ember GB/s':>10} {'ember/ind':>9} {'err':>9}")
    for name, fn, args, nbytes in rows:
        torch._dynamo.reset()
        with torch.no_grad():
            eager = median_ms(fn, *args)
            ind = torch.compile(fn, backend="inductor")
            ind_ms = median_ms(ind, *args)
            torch._dynamo.reset()
            t0 = time.perf_counter()
            em = torch.compile(fn, backend="ember")
            em(*args)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            em_ms = median_ms(em, *args)
            err = errors(fn(*args), em(*args))[1]
        print(f"{name:30} {eager:>9.4f} {ind_ms:>11.4f} {em_ms:>9.4f} {nbytes / em_ms / 1e6:>10.0f} "
              f"{em_ms / ind_ms:>9.2f} {err:>9.1e}   (ember first call {first:.2f} s)")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--no-timing", action="store_true")
    a = p.parse_args()
    print(torch.__version__, torch.cuda.get_device_name(), ember.runtime.cuda.nvrtc_info()["identity"])
    check_cases()
    if not a.no_timing:
        timings()
