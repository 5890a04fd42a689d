"""Small-batch convolutions (and any suite model) on the CPU, eager / TorchInductor / ember side by side (issue 24).

    python benchmarks/cpu_conv.py [--cases conv512,conv512_pad,resnet18] [--backends eager,inductor,ember]
        [--threads 1] [--cpus 0] [--rounds 15] [--calls 10] [--profile] [--json out.json]

Cases:
    conv512      Conv2d(512, 512, 3) on 2x512x4x4: a convolution whose weight (9.4 MB)
                 outweighs its input, as in the last stage of a ResNet at a small batch
    conv512_pad  the same with padding 1 (ResNet's own 3x3 convolutions)
    resnet18     the suite's hand-written ResNet-18 (benchmarks/suite/models_blocks.py),
                 batch 2 at 64x64 (the CPU suite's size), inference
    NAME         any other suite model (benchmarks/suite/run.py list), at its CPU size:
                 an interleaved side-by-side check of a suite row

All backends run in one process (compiled first, then interleaved: each round times
`--calls` calls of every backend, in a rotating order), so that the machine's drift does
not become a speedup; the median and the minimum of the per-round means are printed, with
ratios to eager. Inference under torch.no_grad(), fp32. Each backend's first output is
checked against eager's (max relative error). --profile prints, per backend, the ops that
took the time over a few calls (ember's kernel groups named as the suite's profile names
them). --cpus pins the process (os.sched_setaffinity), --threads sets torch's threads.
--clock cpu times the calling thread's CPU time (time.thread_time) instead of wall time:
with one thread all the work runs on that thread, and time the machine gives to other
processes is not counted, so a loaded machine gives steadier ratios (it still shares caches
and memory bandwidth); it is refused with more than one thread.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))


def build(case: str):
    import torch

    torch.manual_seed(0)
    if case in ("conv512", "conv512_pad"):
        model = torch.nn.Conv2d(512, 512, 3, padding=1 if case == "conv512_pad" else 0)
        return model.eval(), (torch.randn(2, 512, 4, 4),)
    from suite import registry

    model, inputs = registry.get(case).build("cpu", torch.float32, "small")  # an unknown name lists the known
    return model.eval(), inputs


def compiled(backend: str, model):
    import torch

    if backend == "eager":
        return model
    if backend == "inductor":
        return torch.compile(model)
    import ember  # noqa: F401  registers the backend

    return torch.compile(model, backend="ember")


def profile_of(fn, inputs, calls: int = 5, rows: int = 12) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from suite import profiling

    from suite.registry import call

    with profiling.named_cpu_kernels():
        call(fn, inputs)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(calls):
                call(fn, inputs)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def run_case(case: str, backends: list[str], args) -> dict:
    import torch

    model, inputs = build(case)
    fns, first_s, errs = {}, {}, {}
    from suite.registry import call, tensors

    with torch.no_grad():
        ref = tensors(call(model, inputs))[0]
        for b in backends:
            fn = compiled(b, model)
            t0 = time.perf_counter()
            out = tensors(call(fn, inputs))[0]
            first_s[b] = round(time.perf_counter() - t0, 3)
            errs[b] = float(((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item())
            fns[b] = fn
        for fn in fns.values():  # warm up
            for _ in range(3):
                call(fn, inputs)
        clock = time.thread_time if args.clock == "cpu" else time.perf_counter
        per_round = {b: [] for b in backends}
        for r in range(args.rounds):
            order = backends[r % len(backends):] + backends[:r % len(backends)]
            for b in order:
                fn = fns[b]
                t0 = clock()
                for _ in range(args.calls):
                    call(fn, inputs)
                per_round[b].append(1000 * (clock() - t0) / args.calls)
        if args.profile:
            for b in backends:
                print(f"--- {case} {b}: profile of 5 calls\n{profile_of(fns[b], inputs)}", flush=True)
    stats = {b: {"median_ms": round(statistics.median(v), 4), "min_ms": round(min(v), 4),
                 "first_call_s": first_s[b], "max_rel_err": float(f"{errs[b]:.3e}")} for b, v in per_round.items()}
    if "eager" in stats:
        for b in backends:
            stats[b]["vs_eager"] = round(stats["eager"]["median_ms"] / stats[b]["median_ms"], 3)
    return stats


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default="conv512,conv512_pad,resnet18")
    p.add_argument("--backends", default="eager,inductor,ember")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cpus", default="", help="pin the process to these CPUs (e.g. 0 or 0,1)")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=10, help="calls per backend per round")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="cpu: the calling thread's CPU time (one thread only)")
    p.add_argument("--profile", action="store_true", help="print each backend's top ops")
    p.add_argument("--json", default="", help="write the results here")
    args = p.parse_args(argv)
    if args.clock == "cpu" and args.threads != 1:
        raise SystemExit("--clock cpu times the calling thread: use it with --threads 1")
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    import torch

    torch.set_num_threads(args.threads)
    from suite import measure

    env = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "cpu": measure._cpu_name(), "clock": args.clock,
           "capability": torch.backends.cpu.get_cpu_capability(), "threads": args.threads,
           "cpus": sorted(os.sched_getaffinity(0)), "torch": torch.__version__, "load": os.getloadavg()[0]}
    print(f"{env['date']}, {env['cpu']} ({env['capability']}), {args.threads} thread(s) on CPUs {env['cpus']}, "
          f"{args.clock} clock, "
          f"torch {env['torch']}, load {env['load']:.1f}", flush=True)
    backends = args.backends.split(",")
    results = {}
    print(f"| case | backend | median ms | min ms | vs eager | first call s | max rel err |\n|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        results[case] = run_case(case, backends, args)
        for b, s in results[case].items():
            print(f"| {case} | {b} | {s['median_ms']:.3f} | {s['min_ms']:.3f} | {s.get('vs_eager', 0):.2f}x | "
                  f"{s['first_call_s']} | {s['max_rel_err']:.1e} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": env, "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
