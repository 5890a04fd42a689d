"""Where a compiled step's host time goes: one suite model, one backend, its steady-state
steps under cProfile (Python functions, and the C functions they call: ATen ops, kernel
launches, allocations, autograd), next to the step's wall time and the device's.

A step is host-bound when its wall time exceeds its kernels' device time (T5's training
step on an H200: 51.7 ms a step for 21.0 ms of ember kernels and ATen calls, where
Inductor's took 31.4 ms for 19.2). The suite's profile counts the device side; this
script says which host work fills the rest, the same way for every backend:

    python benchmarks/host_profile.py --model t5 --variant train --backend ember --device cuda
    python benchmarks/host_profile.py --model t5 --variant train --backend inductor --device cuda

It prints the wall median of --steps plain steps, then the functions with the most time
of their own (tottime) and the most in all (cumtime) over --profile-steps steps under
cProfile (which slows Python code, not C code: compare backends, not absolute figures),
and writes the table as JSON with --json.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def where(func) -> str:
    """A pstats key as file:line(name), the file relative to site-packages or this repo."""
    file, line, name = func
    for marker in ("site-packages/", "/python/ember/", "/benchmarks/"):
        if marker in file:
            file = marker.strip("/") + "/" + file.split(marker, 1)[1]
            break
    return f"{name}" if file == "~" else f"{file}:{line}({name})"


def top(stats: pstats.Stats, key: str, n: int, steps: int) -> list[dict]:
    rows = []
    for func, (cc, nc, tt, ct, _callers) in stats.stats.items():
        rows.append({"where": where(func), "calls_per_step": nc / steps, "own_us_per_step": tt * 1e6 / steps,
                     "all_us_per_step": ct * 1e6 / steps})
    order = "own_us_per_step" if key == "tottime" else "all_us_per_step"
    return sorted(rows, key=lambda r: -r[order])[:n]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a suite model (benchmarks/suite/run.py list)")
    p.add_argument("--variant", choices=("infer", "train"), default="infer")
    p.add_argument("--backend", choices=("eager", "inductor", "ember"), default="ember")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--size", help="full on the GPU, small on the CPU by default")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20, help="plain steps timed for the wall median")
    p.add_argument("--profile-steps", type=int, default=10)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--json", default="", help="write the result here")
    args = p.parse_args(argv)

    import torch

    from suite import measure, registry

    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    train = args.variant == "train"
    entry = registry.get(args.model)
    dtype = torch.bfloat16 if cuda and not train else torch.float32
    model, inputs = entry.build(args.device, dtype, args.size or ("full" if cuda else "small"))
    model.train(train)
    fn = measure.compile_for(args.backend, "default", measure.loss_module(model) if train else model, args.device)
    step = measure.make_step(fn, model, inputs, train, args.device)
    for _ in range(args.warmup):
        step()
    sync()
    walls = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        sync()
        walls.append(time.perf_counter() - t0)
    wall_ms = statistics.median(walls) * 1e3

    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(args.profile_steps):
        step()
    sync()
    prof.disable()
    profiled_ms = (time.perf_counter() - t0) * 1e3 / args.profile_steps
    stats = pstats.Stats(prof)
    result = {"model": args.model, "variant": args.variant, "backend": args.backend, "device": args.device,
              "torch": torch.__version__, "wall_ms": round(wall_ms, 3), "profiled_ms": round(profiled_ms, 3),
              "own": top(stats, "tottime", args.top, args.profile_steps),
              "all": top(stats, "cumtime", args.top, args.profile_steps)}
    print(f"{args.model} {args.variant} {args.backend} on {args.device}: wall median {wall_ms:.3f} ms a step "
          f"({args.steps} steps); under cProfile {profiled_ms:.3f} ms")
    for title, key, rows in (("most time of their own", "own_us_per_step", result["own"]),
                             ("most time in all", "all_us_per_step", result["all"])):
        print(f"\n  {title} (us a step, calls a step):")
        for r in rows:
            print(f"  {r[key]:10.1f} {r['calls_per_step']:8.1f}  {r['where']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
