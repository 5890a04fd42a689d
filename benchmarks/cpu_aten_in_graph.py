"""Do ATen calls run slower inside ember's CPU graphs than inside Inductor's or alone? (issue 24)

One process, one model, every backend compiled side by side; then rounds in rotating order,
each backend's calls timed under torch.profiler, and per round the ATen op's time in each
backend's graph over the same calls replayed alone (its operands as the graphs pass them):
paired ratios, so that drift of the machine cancels. Also printed: the OpenMP runtimes in the
process, the threads and the CPU each used per call (a second pool shows as a thread that
works while ember's kernels run), and whether the backends pass the op the same operands
(shapes, strides, 64-byte alignment).

    python benchmarks/cpu_aten_in_graph.py --threads 2 --rounds 40 [--model mlp] [--json out.json]
    taskset -c 8,9 python benchmarks/cpu_aten_in_graph.py --threads 1,2   # pinned, as the CPU suite

The model: --model vit, a ViT-B block stack (768 wide, 12 heads, MLP 3072) at the CPU suite's
small size of timm_vit_base (2 images of 16 patches + class token: 34 rows); --model mlp, its
Linear+GELU+Linear.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import statistics
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

import ember  # noqa: F401  (registers the backend)
from ember.runtime import openmp


class Block(nn.Module):
    def __init__(self, d=768, heads=12):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class Mlp(nn.Module):
    def __init__(self, d=768):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Operands(TorchDispatchMode):
    """Each ATen call's op and tensor operands: shape, strides, data pointer mod 64."""

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ts = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        self.calls[(str(func), tuple((tuple(t.shape), t.stride(), t.data_ptr() % 64) for t in ts))] += 1
        return func(*args, **kwargs)


def cpu_ns_by_thread() -> dict:
    out = {}
    for d in glob.glob("/proc/self/task/*"):
        try:
            with open(d + "/schedstat") as f:
                out[int(d.rsplit("/", 1)[1])] = int(f.read().split()[0])
        except (OSError, ValueError):
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("vit", "mlp"), default="vit")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--threads", default="2", help="comma-separated thread counts, each measured in turn")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--calls", type=int, default=3, help="calls per backend and round")
    ap.add_argument("--op", default="aten::addmm", help="the profiler name of the ATen op to time")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()

    torch.manual_seed(0)
    model = (nn.Sequential(*[Block() for _ in range(a.layers)]) if a.model == "vit" else Mlp()).eval()
    x = torch.randn(2, 17, 768)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    rows = {768: torch.randn(34, 768), 3072: torch.randn(34, 3072)}

    def alone():  # the graphs' addmm calls with their operands: bias, (34, in), weight.t()
        for m in linears:
            torch.addmm(m.bias, rows[m.in_features], m.weight.t())

    fns = {"eager": lambda: model(x), "alone": alone}
    for backend in ("ember", "inductor"):
        compiled = torch.compile(model, backend=backend)
        fns[backend] = lambda c=compiled: c(x)
    out = {"model": a.model, "layers": a.layers, "op": a.op, "torch": torch.__version__, "by_threads": {}}
    me = threading.get_native_id()
    with torch.no_grad():
        for threads in [int(t) for t in a.threads.split(",")]:
            torch.set_num_threads(threads)
            for fn in fns.values():
                for _ in range(3):
                    fn()
            operands = {}
            for k in ("eager", "ember", "inductor"):
                with Operands() as o:
                    fns[k]()
                operands[k] = {c: n for c, n in o.calls.items() if a.op.replace("::", ".") in c[0]}
            same = operands["ember"] == operands["inductor"] == operands["eager"]
            misaligned = sum(n for c, n in operands["ember"].items() for t in c[1] if t[2] != 0)
            names = list(fns)
            res = {k: {"op_us": [], "wall_us": [], "main_cpu_us": [], "other_cpu_us": []} for k in names}
            for r in range(a.rounds):
                for k in names[r % len(names):] + names[:r % len(names)]:
                    c0 = cpu_ns_by_thread()
                    with profile(activities=[ProfilerActivity.CPU]) as prof:
                        t0 = time.perf_counter()
                        for _ in range(a.calls):
                            fns[k]()
                        t1 = time.perf_counter()
                    c1 = cpu_ns_by_thread()
                    op = sum(e.cpu_time_total for e in prof.events() if e.name == a.op)
                    res[k]["op_us"].append(op / a.calls)
                    res[k]["wall_us"].append((t1 - t0) / a.calls * 1e6)
                    res[k]["main_cpu_us"].append((c1[me] - c0[me]) / 1e3 / a.calls)
                    res[k]["other_cpu_us"].append(sum(v - c0.get(t, 0) for t, v in c1.items() if t != me) / 1e3 / a.calls)
            row = {"openmp_runtimes": openmp.loaded_runtimes(), "threads_in_process": len(cpu_ns_by_thread()),
                   "same_operands": same, "misaligned_operands_in_ember": misaligned, "backends": {}}
            print(f"== {a.model} x{a.layers}, {threads} thread(s), {a.rounds} rounds of {a.calls} calls; "
                  f"OpenMP runtimes {row['openmp_runtimes']}; {row['threads_in_process']} threads; "
                  f"{a.op} operands the same in every backend: {same}; misaligned in ember's: {misaligned}")
            for k in names:
                ratio = [v / b for v, b in zip(res[k]["op_us"], res["alone"]["op_us"])]
                q = statistics.quantiles(ratio, n=4) if len(ratio) > 1 else [ratio[0]] * 3
                med = {m: statistics.median(v) for m, v in res[k].items()}
                row["backends"][k] = dict(med, op_over_alone_median=statistics.median(ratio), op_over_alone_p25=q[0],
                                          op_over_alone_p75=q[2])
                print(f"  {k:9s} {a.op} {med['op_us']:9.0f} us/call, over alone (paired) {statistics.median(ratio):.3f} "
                      f"[{q[0]:.3f}, {q[2]:.3f}]; call {med['wall_us']:9.0f} us; CPU main {med['main_cpu_us']:9.0f} "
                      f"other threads {med['other_cpu_us']:9.0f} us")
            out["by_threads"][threads] = row
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
