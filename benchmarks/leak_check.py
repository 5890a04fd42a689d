"""Resident memory (RSS) across many compiles and many runs: ember must not leak.

    python benchmarks/leak_check.py                     # 1,000 compiles, 10,000 runs
    python benchmarks/leak_check.py --compiles 200 --runs 2000 --json out.json

Phase 1 compiles graph text with ember's C++ alone and runs it (each a new C source,
so a new shared object: lower, generate, compile, load, run, drop). Phase 2 does the
same through the backend (torch.fx.symbolic_trace, AOTAutograd, FX import, runner),
which adds PyTorch's own per-graph state (FX keeps each graph's generated Python
source in linecache). Phase 3 runs one compiled graph many times. Each phase warms up first (allocator pools, torch's and the loader's one-time
state), then measures RSS growth over the rest, after gc and malloc_trim. Graphs go
through ember's AOTAutograd backend directly (torch.fx.symbolic_trace, no Dynamo), so
the figures are ember's, not Dynamo's caches'. The kernel cache is a fresh temporary
directory.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import tempfile
import time

import torch
import torch.fx


def rss_mb() -> float:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def _graph(i: int):
    """A small function whose generated code differs with i: a pointwise chain, a
    reduction and a softmax, so that every compile goes through every pass."""
    a, b = 1.0 + i * 1e-3, float(i % 97)

    def f(x, y):
        z = torch.relu(x * a + y) - b
        return (torch.softmax(z, -1) + z.sum(0, keepdim=True), z.amax(-1))

    return f


def compile_one(fn, inputs, cache_dir):
    from ember.backend import make_backend

    gm = torch.fx.symbolic_trace(fn)
    return make_backend(None, {"fallback_on_error": False, "cache_dir": cache_dir})(gm, inputs)


CORE_GRAPH = """graph {{
  %0 = input(0) : f32[33,65]{{65,1}}
  %1 = input(1) : f32[65]{{1}}
  %2 = aten.mul.Tensor(%0, {a}) : f32[33,65]{{65,1}}
  %3 = aten.add.Tensor(%2, %1, 1) : f32[33,65]{{65,1}}
  %4 = aten.relu.default(%3) : f32[33,65]{{65,1}}
  %5 = aten.sum.dim_IntList(%4, [1], false, none) : f32[33]{{1}}
  return (%4, %5)
}}
"""


def core_compile_and_run(i, x, y, cache_dir):
    """ember's C++ alone: compile graph text (a new shared object per i), load it, run its
    kernels on torch buffers, drop it. No FX, no AOTAutograd."""
    from ember import _core

    a = 1.0 + i * 1e-3
    cg = _core.compile(CORE_GRAPH.format(a=repr(a)), cache_dir=cache_dir)
    bufs = {}
    for b in cg.buffers:
        if b["kind"] == "input":
            bufs[b["id"]] = (x, y)[b["input_index"]]
        else:
            assert b["arena_offset"] < 0
            bufs[b["id"]] = torch.empty_strided(b["sizes"], b["strides"], dtype=torch.float32)
    for si, (kind, _, args) in enumerate(cg.steps):
        assert kind == "kernels"
        cg.run_step(si, [bufs[b].data_ptr() for b in args])
    if i % 100 == 0:
        out = [bufs[b].as_strided(sizes, strides, offset) for b, _, sizes, strides, offset in cg.outputs]
        ref = torch.relu(x * a + y)
        torch.testing.assert_close(out[0], ref)
        torch.testing.assert_close(out[1], ref.sum(1))


def phase(name, total, warmup, step, report):
    """Runs step(i) for i in range(total); RSS after `warmup` steps and at the end."""
    t0 = time.perf_counter()
    for i in range(warmup):
        step(i)
    base = rss_mb()
    samples = [(warmup, base)]
    for i in range(warmup, total):
        step(i)
        if (i + 1) % max(1, (total - warmup) // 5) == 0:
            samples.append((i + 1, rss_mb()))
    end = rss_mb()
    grown = end - base
    n = total - warmup
    result = {
        "phase": name, "iterations": total, "warmup": warmup, "rss_after_warmup_mb": round(base, 1),
        "rss_end_mb": round(end, 1), "growth_mb": round(grown, 2), "growth_kb_per_iteration": round(grown * 1024 / n, 3),
        "seconds": round(time.perf_counter() - t0, 1), "samples_mb": [(i, round(m, 1)) for i, m in samples],
    }
    report(result)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compiles", type=int, default=1000)
    p.add_argument("--runs", type=int, default=10000)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)

    torch.manual_seed(0)
    torch.set_num_threads(1)
    cache = os.path.join(tempfile.mkdtemp(prefix="ember-leak-"), "cache")
    x, y = torch.randn(33, 65), torch.randn(65)
    start = rss_mb()

    def report(r):
        print(f"{r['phase']}: {r['iterations']} iterations ({r['warmup']} warm-up) in {r['seconds']} s; "
              f"RSS {r['rss_after_warmup_mb']} MB after warm-up -> {r['rss_end_mb']} MB: "
              f"{r['growth_mb']:+.2f} MB ({r['growth_kb_per_iteration']:+.3f} KB per iteration)", flush=True)
        print("  samples (iteration, MB): " + ", ".join(f"({i}, {m})" for i, m in r["samples_mb"]), flush=True)

    def compile_and_run(i):
        fn = _graph(i)
        compiled = compile_one(fn, [x, y], cache)
        out = compiled(x, y)
        if i % 100 == 0:
            ref = fn(x, y)
            for a, e in zip(out, ref):
                torch.testing.assert_close(a, e)

    warm = min(100, args.compiles // 5)
    results = [phase("ember core: compile+load+run distinct graph texts", args.compiles, warm,
                     lambda i: core_compile_and_run(i, x, y, cache), report),
               phase("backend: compile+run distinct graphs (AOTAutograd + ember)", args.compiles, warm,
                     lambda i: compile_and_run(args.compiles + i), report)]
    one = compile_one(_graph(10_000), [x, y], cache)
    results.append(phase("runs of one graph", args.runs, min(500, args.runs // 5), lambda i: one(x, y), report))
    summary = {"rss_start_mb": round(start, 1), "phases": results, "torch": torch.__version__,
               "machine": f"{os.cpu_count()} CPUs"}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main()
