"""Resident memory (RSS) across many compiles and many runs: ember must not leak.

    python benchmarks/leak_check.py                     # 1,000 compiles, 10,000 runs
    python benchmarks/leak_check.py --compiles 200 --runs 2000 --json out.json

Phase 1 compiles and runs distinct small graphs (each a new C source, so a new shared
object: generate, compile, load, run, drop). Phase 2 runs one compiled graph many
times. Each phase warms up first (allocator pools, torch's and the loader's one-time
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

    results = [phase("compile+run distinct graphs", args.compiles, min(100, args.compiles // 5), compile_and_run,
                     report)]
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
