"""Which kernels make a dynamic=True compile slower than the static one at a shape: the
device time of each kernel, ember static against ember dynamic=True, one process (issue 21).

    python benchmarks/dynamic_kernels.py [--models bloom,falcon] [--shapes 2x2048,8x512]
        [--size full] [--dtype bf16] [--calls 10] [--top 15] [--out FILE.json]

Per model the suite's registry builds it (random weights); the dynamic variant is compiled
at the first shape of the model's dynamic_llm shapes list (4x128; --compile-shape), then
every listed shape is profiled (torch.profiler, `--calls` calls after a warmup) for both
variants, the static one compiled at that shape. Kernels are matched by name with the
graph's counter stripped (ember_red_softmax_add_58 -> ember_red_softmax_add: one row per
kernel kind, all layers summed); ATen's kernels are summed under their own names. Per
shape: total device time of both, then the kinds whose time differs most. On the CPU the
kernel steps' profiler ranges stand in for device kernels (their names list the step's
kernels).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from suite import registry  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def kind(name: str) -> str:
    """A kernel's name without its number in the graph (ember_poi_add_12 -> ember_poi_add)."""
    return re.sub(r"_\d+$", "", name)


def profile(fn, calls: int, cuda: bool) -> dict:
    """Kernel kind -> microseconds per call."""
    from torch.profiler import ProfilerActivity, profile as prof

    for _ in range(3):
        fn()
    if cuda:
        torch.cuda.synchronize()
    acts = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with prof(activities=acts) as p:
        for _ in range(calls):
            fn()
        if cuda:
            torch.cuda.synchronize()
    out = collections.Counter()
    for e in p.events():
        if cuda and e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if not cuda and not e.name.startswith("ember_"):
            continue
        out[kind(e.name)] += (e.device_time if cuda else e.cpu_time) / calls
    return dict(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="bloom,falcon")
    p.add_argument("--shapes", default="2x2048,8x512")
    p.add_argument("--compile-shape", default="4x128")
    p.add_argument("--size", default=None, choices=("full", "small"))
    p.add_argument("--dtype", default=None, choices=sorted(DTYPES))
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import ember  # noqa: F401  registers the backend

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    size = args.size or ("full" if cuda else "small")
    dtype = DTYPES[args.dtype or ("bf16" if cuda else "fp32")]
    if not cuda:
        torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    first = tuple(int(x) for x in args.compile_shape.split("x"))
    rows = []
    for name in args.models.split(","):
        entry = registry.get(name)
        model, _ = entry.build(device, dtype, size)
        model.eval()
        with torch.no_grad():
            torch._dynamo.reset()
            dynamic = torch.compile(model, backend="ember", dynamic=True)
            registry.call(dynamic, entry.dynamic_inputs(*first, device, size))
            per_shape = {shape: entry.dynamic_inputs(*shape, device, size) for shape in shapes}
            dyn = {shape: profile(lambda x=x: registry.call(dynamic, x), args.calls, cuda)
                   for shape, x in per_shape.items()}
            for shape, inputs in per_shape.items():
                torch._dynamo.reset()
                static = torch.compile(model, backend="ember", dynamic=False)
                stat = profile(lambda: registry.call(static, inputs), args.calls, cuda)
                d_us = dyn[shape]
                label = f"{shape[0]}x{shape[1]}"
                total_s, total_d = sum(stat.values()), sum(d_us.values())
                print(f"{name} {label}: kernels' time per call, static {total_s / 1000:.3f} ms, "
                      f"dynamic {total_d / 1000:.3f} ms ({total_d / max(total_s, 1e-9):.3f}x)")
                diffs = sorted(set(stat) | set(d_us), key=lambda k: -abs(d_us.get(k, 0) - stat.get(k, 0)))
                for k in diffs[:args.top]:
                    s_, d_ = stat.get(k, 0.0), d_us.get(k, 0.0)
                    print(f"  {d_ - s_:+10.1f} us  static {s_:9.1f}  dynamic {d_:9.1f}  {k[:110]}")
                rows.append({"model": name, "shape": label, "static_us": stat, "dynamic_us": d_us})
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if cuda else "cpu", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
