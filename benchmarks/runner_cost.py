"""ember's runner alone, a static compile against a symbolic one (dynamic=True) of the same
model at the same shape, in one process: what a call of the symbolic plan costs the host
that the static plan's does not (issue 21).

    python benchmarks/runner_cost.py [--models gpt2,falcon] [--size small] [--shape 4x32]
        [--rounds 30] [--calls 20] [--clock cpu|wall] [--out FILE.json]

Each variant is compiled on its own copy of the model (the suite's registry, random weights,
fp32, one thread) and called once while ember's runners record the arguments Dynamo hands
them; then the runners are called directly with those arguments, the variants interleaved
round by round, each call timed alone on the calling thread's CPU clock. Rows per variant
(medians, and minimums, over all calls, in microseconds):

    runner   every graph's runner called with its recorded arguments: what ember does per
             call, the kernels' own run included (on the CPU they run on this thread)
    python   the same with each kernel step's launch a no-op: the runner's Python (buffers,
             ATen calls and their checks, output views), no kernel
    frame    the whole compiled model called as a user does (Dynamo's guards and frame, the
             model's Python around the graphs, the runners)

`runner` less `python` is the kernel steps' part (their launches and, on the CPU, the
kernels' own run: a symbolic graph's C loops have run-time bounds). Kernel steps are not
timed alone: replayed without the ATen calls between them, they would read stale values
(infinities and NaNs slow some of them down).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from suite import registry  # noqa: E402


def record_runners(call):
    """[(runner, args)] of the ember graphs one call of `call` runs, in order."""
    from ember.runtime.runner import GraphRunner

    seen = []
    original = GraphRunner.run

    def run(self, args, step_names=None):
        seen.append((self, list(args)))
        return original(self, args, step_names)

    GraphRunner.run = run
    try:
        call()
    finally:
        GraphRunner.run = original
    return seen


def _no_launch(*_):
    return None


def python_only(runner):
    """runner.run with every kernel step's launch a no-op (the plan's Python alone)."""
    context = runner._call_context

    def call(args):
        runner._call_context = lambda plan: (lambda c: (c[0], _no_launch, c[2]))(context(plan))
        try:
            return runner.run(args)
        finally:
            del runner._call_context

    return call


def measure(name: str, args) -> list[dict]:
    import ember

    entry = registry.get(name)
    model, _ = entry.build("cpu", torch.float32, args.size)
    model.eval()
    batch, seq = (int(x) for x in args.shape.split("x"))
    inputs = entry.dynamic_inputs(batch, seq, "cpu", args.size)
    other = entry.dynamic_inputs(batch + 1, seq + 3, "cpu", args.size)
    variants = {}
    with torch.no_grad():
        for variant in args.variants.split(","):
            m = copy.deepcopy(model)
            dynamic = variant.startswith("dynamic")
            fn = ember.compile(m, dynamic=dynamic)
            with torch._dynamo.config.patch(specialize_float=variant == "dynamic-sf" or
                                            torch._dynamo.config.specialize_float):
                if dynamic:
                    registry.call(fn, other)  # the symbolic plans serve two sizes
                registry.call(fn, inputs)
            graphs = record_runners(lambda: registry.call(fn, inputs))
            calls = {
                "runner": lambda g=graphs: [r(a) for r, a in g],
                "python": (lambda fs=[(python_only(r), a) for r, a in graphs]: [f(a) for f, a in fs]),
                "frame": lambda fn=fn: registry.call(fn, inputs),
            }
            variants[variant] = (calls, graphs)
        clock = time.thread_time if args.clock == "cpu" else time.perf_counter
        times = {(v, part): [] for v in variants for part in variants[v][0]}
        keys = list(times)
        for r in range(args.rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in order:
                fn = variants[key[0]][0][key[1]]
                out = times[key]
                for _ in range(args.calls):
                    t0 = clock()
                    fn()
                    out.append((clock() - t0) * 1e6)
    rows = []
    for (variant, part), ts in times.items():
        graphs = variants[variant][1]
        kernel_steps = sum(sum(1 for kind, *_ in r.cg.steps if kind == "kernels") for r, _ in graphs)
        rows.append({"model": name, "shape": args.shape, "variant": variant, "part": part,
                     "median_us": round(statistics.median(ts), 2), "min_us": round(min(ts), 2),
                     "graphs": len(graphs), "kernel_steps": kernel_steps,
                     "steps": sum(len(r.cg.steps) for r, _ in graphs)})
    return rows


def table(rows) -> str:
    lines = [f"{'model':<8} {'shape':>6} {'part':<7} " + " ".join(f"{v:>24}" for v in _variants(rows))]
    base = _variants(rows)[0]
    for (model, part) in dict.fromkeys((r["model"], r["part"]) for r in rows):
        cells = []
        ref = next(r for r in rows if (r["model"], r["part"], r["variant"]) == (model, part, base))
        for v in _variants(rows):
            r = next(r for r in rows if (r["model"], r["part"], r["variant"]) == (model, part, v))
            d = r["median_us"] - ref["median_us"]
            cells.append(f"{r['median_us']:>9.1f} ({r['min_us']:>7.1f}) {d:+6.1f}")
        lines.append(f"{model:<8} {ref['shape']:>6} {part:<7} " + " ".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def _variants(rows):
    return list(dict.fromkeys(r["variant"] for r in rows))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gpt2")
    p.add_argument("--size", default="small", choices=("small", "full"))
    p.add_argument("--shape", default="4x32")
    p.add_argument("--variants", default="static,dynamic",
                   help="static, dynamic (dynamic=True), dynamic-sf (dynamic=True, specialize_float)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--clock", default="cpu", choices=("cpu", "wall"))
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 16)
    rows = []
    for name in args.models.split(","):
        rows += measure(name, args)
    print("median us (min) and the difference from the first variant's median")
    print(table(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": {"torch": torch.__version__, "clock": args.clock, "rounds": args.rounds,
                                "calls": args.calls, "time": time.strftime("%Y-%m-%d %H:%M:%S")}, "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
