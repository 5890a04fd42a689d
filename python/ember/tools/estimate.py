"""The speedup estimate of `ember explain`, next to the measured speedup.

A rough model in the spirit of the "compile speedup estimator" (launch-bound share,
fusion potential, graph breaks), fed with measurements from this machine:

  eager time T    the measured eager median
  launch share    eager's top-level ATen ops per call x the measured cost of one tiny
                  op (dispatch, allocation), as a share of T
  library share   time in matmul / convolution / attention ops (torch profiler, top-level
                  ops): compiling does not make these faster
  fused work      the rest of T: element-wise and reduction work. Fusing N eager ops into
                  K ember kernels leaves about K/N of its memory passes
  ember time      T x library share + T x fused-work share x K/N
                  + ember steps x tiny-op cost + graphs x frame cost
  frame cost      measured: a one-op function compiled by ember minus the op in eager
                  (guards, frame entry, AOTAutograd's wrapper, ember's runner); each graph
                  break adds a graph and so a frame cost

  estimated speedup = T / ember time

It ignores what the model cannot see (vectorization quality, cache effects, thread
scheduling), so it says which regime a model is in, not its exact speedup.
"""
from __future__ import annotations

import contextlib
import os
import re
import statistics
import time

import torch

# ATen ops that run library kernels (oneDNN, BLAS, fused attention), by name after "aten::".
LIBRARY_OPS = re.compile(r"(mm|addmm|bmm|baddbmm|matmul|linear|einsum|lstm|gru|conv.*|_convolution.*|mkldnn_.*"
                         r"|.*scaled_dot_product.*|.*flash_attention.*)$")


def _is_library(op: str) -> bool:
    return LIBRARY_OPS.match(op.split("::", 1)[-1]) is not None


def interleaved_medians(fns, args, budget_s=1.0, min_calls=5, max_calls=500) -> list[float]:
    """Median seconds per call of each function, calling them in turn so that a machine
    whose speed drifts (other load, frequency changes) affects all of them alike."""
    for fn in fns:
        for _ in range(3):
            fn(*args)
    times = [[] for _ in fns]
    start = time.perf_counter()
    while len(times[0]) < min_calls or (time.perf_counter() - start < budget_s and len(times[0]) < max_calls):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn(*args)
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def tiny_op_seconds() -> float:
    a, b, out = torch.ones(1), torch.ones(1), torch.empty(1)
    ts = []
    for _ in range(500):
        t0 = time.perf_counter()
        torch.add(a, b, out=out)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def frame_overhead_seconds() -> float:
    """What a compiled graph costs per call beyond its kernels: Dynamo's guards and frame
    entry, AOTAutograd's wrapper, ember's runner."""
    x = torch.ones(1)
    fn = torch.compile(lambda t: t + 1, backend="ember")
    compiled, plain = interleaved_medians([fn, lambda t: t + 1], (x,), budget_s=0.1)
    return max(0.0, compiled - plain)


@contextlib.contextmanager
def _quiet_stderr():
    """The profiler's C++ side prints start/stop lines on fd 2."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_eager(fn, args, calls=3) -> dict:
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn(*args)
    top = [e for e in prof.events() if e.cpu_parent is None and e.name.startswith("aten::")]
    total = sum(e.cpu_time_total for e in top) or 1.0
    library = sum(e.cpu_time_total for e in top if _is_library(e.name))
    return {"ops_per_call": len(top) / calls, "library_share": library / total}


def estimate_speedup(fn, compiled, args, graphs: list[dict]) -> dict:
    eager_s, ember_s = interleaved_medians([fn, compiled], args)
    tiny = tiny_op_seconds()
    frame = frame_overhead_seconds()
    prof = profile_eager(fn, args)
    fused_ops = sum(len(k["ops"]) for g in graphs for k in g["kernels"])
    kernels = sum(len(g["kernels"]) for g in graphs)
    steps = sum(g.get("steps", 0) for g in graphs)
    eager_graphs = sum(1 for g in graphs if g["fallback_reason"])

    launch_share = min(1.0, prof["ops_per_call"] * tiny / eager_s)
    library_share = min(prof["library_share"] * (1 - launch_share), 1.0 - launch_share)
    fused_share = max(0.0, 1.0 - launch_share - library_share)
    fusion_potential = 1.0 - kernels / fused_ops if fused_ops else 0.0
    # Graphs ember runs eagerly keep their ops (and launches); weigh them out of the win.
    compiled_fraction = 1.0 - eager_graphs / len(graphs) if graphs else 0.0
    est_ember_s = (eager_s * library_share
                   + eager_s * fused_share * (1.0 - fusion_potential * compiled_fraction)
                   + eager_s * launch_share * (1.0 - compiled_fraction)
                   + steps * tiny + len(graphs) * frame)
    return {
        "eager_ms": 1000 * eager_s,
        "ember_ms": 1000 * ember_s,
        "measured_speedup": eager_s / ember_s,
        "estimated_speedup": eager_s / est_ember_s,
        "launch_share": launch_share,
        "library_share": library_share,
        "fused_work_share": fused_share,
        "fusion_potential": fusion_potential,
        "eager_ops_per_call": prof["ops_per_call"],
        "tiny_op_us": 1e6 * tiny,
        "frame_us": 1e6 * frame,
        "fused_ops": fused_ops,
        "kernels": kernels,
        "graphs": len(graphs),
        "graphs_run_eagerly": eager_graphs,
        "graph_breaks": None,
    }


def format_estimate(e: dict) -> list[str]:
    breaks = e.get("graph_breaks")
    return [
        f"speedup: estimated {e['estimated_speedup']:.2f}x, measured {e['measured_speedup']:.2f}x "
        f"(eager {e['eager_ms']:.3f} ms, ember {e['ember_ms']:.3f} ms per call)",
        f"  launch-bound share   {100 * e['launch_share']:5.1f}%  "
        f"({e['eager_ops_per_call']:.0f} eager ops per call x {e['tiny_op_us']:.1f} us)",
        f"  library-bound share  {100 * e['library_share']:5.1f}%  (matmul, convolution, attention: unchanged by compiling)",
        f"  fusion potential     {100 * e['fusion_potential']:5.1f}%  "
        f"({e['fused_ops']} ATen ops fused into {e['kernels']} ember kernels)",
        f"  graph breaks         {breaks if breaks is not None else 'n/a':>5}   "
        f"({e['graphs']} graph(s) per call at {e['frame_us']:.0f} us each, {e['graphs_run_eagerly']} run eagerly)",
    ]
