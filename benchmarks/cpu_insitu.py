"""ember's and Inductor's CPU kernels timed where they run: inside a suite model's real steps,
by the thread's CPU clock around each kernel call, with no profiler (issue 24).

    taskset -c 1 python benchmarks/cpu_insitu.py --model bart [--steps 300] [--threads 1]

Per kernel (ember: each kernel step's launch, the call into C++; Inductor: each cpp_fused_*
call from its output code), the median thread-CPU time of a call and the mean time a step.
Why not torch.profiler: a range opened from Python is timed from its own enter to its own
exit, so whatever those cost lands in the kernel's figure; Inductor's C++ kernels time
themselves from C++. The suite's profile once charged each ember kernel step ~13-30 us this
way (benchmarks/suite/profiling.py, named_cpu_kernels). Here both backends' calls are timed
the same way from Python, each figure including its binding call (~1 us).

Kernels called back to back (benchmarks/cpu_kernels.py, or ctypes on the shared object)
run with hot caches; in a step, a kernel that follows matmuls finds its data in L3 or
memory, and the first kernel of a step runs 2-3x its back-to-back time on either backend.
"""
from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def time_ember(fn, call, steps):
    from ember.runtime.runner import GraphRunner

    times = collections.defaultdict(list)
    names = {}
    original = GraphRunner._call_context

    def timed(self, plan):
        free, launch, extra = original(self, plan)
        kernels = self.cg.kernels

        def run(si, ptrs, *args):
            t = time.thread_time_ns()
            r = launch(si, ptrs, *args)
            times[(id(self), si)].append(time.thread_time_ns() - t)
            if (id(self), si) not in names:
                names[(id(self), si)] = "+".join(kernels[k]["name"] for k in self.cg.steps[si][1])
            return r
        return free, run, extra

    GraphRunner._call_context = timed
    try:
        for _ in range(20):
            call(fn)
        times.clear()
        for _ in range(steps):
            call(fn)
    finally:
        GraphRunner._call_context = original
    return {f"{names[k]} (step {k[1]})": v for k, v in times.items()}


def time_inductor(fn, call, steps):
    call(fn)
    times = collections.defaultdict(list)
    modules = {id(m): m for m in gc.get_objects() if type(m).__name__ == "module"
               and any(k.startswith("cpp_fused") for k in vars(m))}
    for m in modules.values():
        for name in [k for k in vars(m) if k.startswith("cpp_fused")]:
            kernel = vars(m)[name]

            def timed(*args, _kernel=kernel, _name=name):
                t = time.thread_time_ns()
                r = _kernel(*args)
                times[_name].append(time.thread_time_ns() - t)
                return r
            setattr(m, name, timed)
    for _ in range(20):
        call(fn)
    times.clear()
    for _ in range(steps):
        call(fn)
    return dict(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bart")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backends", default="inductor,ember")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from benchmarks.suite import registry

    torch.manual_seed(0)
    model, inputs = registry.get(args.model).build("cpu", torch.float32, "small")
    model.eval()

    def call(f):
        return registry.call(f, inputs)

    with torch.no_grad():
        for backend in args.backends.split(","):
            torch._dynamo.reset()
            if backend == "ember":
                import ember  # noqa: F401  registers the backend
                times = time_ember(torch.compile(model, backend="ember"), call, args.steps)
            else:
                times = time_inductor(torch.compile(model), call, args.steps)
            total = sum(sum(v) for v in times.values()) / args.steps / 1e3
            print(f"== {args.model} {backend}, {args.threads} thread(s), {args.steps} steps: "
                  f"its kernels {total:.1f} us a step (thread CPU time)")
            for name, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
                print(f"  {sum(v) / args.steps / 1e3:8.1f} us/step {len(v) / args.steps:4.1f} calls "
                      f"median {statistics.median(v) / 1e3:7.1f} us  {name[:100]}")


if __name__ == "__main__":
    main()
