"""Per-kernel profile of ember on the GPU workloads (issue 5, criterion 4): for each ember
kernel, its time per call and the bandwidth it achieves against the device's measured
copy bandwidth; and per workload, the GPU time split between ember's kernels, ATen's
kernels and idle gaps.

Bytes per kernel are the compulsory traffic: every buffer the kernel takes, read or
written once (a broadcast operand re-read from cache counts once). Bandwidth is bytes over
the kernel's median device time under torch.profiler. Copy bandwidth: a device-to-device
copy of 1 GiB, bytes read plus bytes written over its time; and, per kernel, a copy of
the kernel's own byte count (a small kernel is also judged against what a copy of its size
reaches).

    python benchmarks/gpu_kernels.py [--models gpt2,resnet50] [--top 12] [--json out.json]
"""
import argparse
import datetime
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_models import MODELS, EmberRecorder, build, make_step  # noqa: E402

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "bool": 1}


def copy_bandwidth_gbs() -> float:
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * src.numel() / statistics.median(times) / 1e9


def same_size_copy_gbs(byte_counts, reps=20) -> dict:
    """Bytes -> GB/s of a device-to-device copy moving as many bytes (half read, half
    written), from DRAM, median device time under torch.profiler as the kernels are timed. A kernel
    of a few MB cannot reach the 1 GiB copy's rate (launch and the last wave's tail weigh
    more): this says how far it is from what a copy of its size achieves."""
    sizes = sorted({max(2, b // 2) for b in byte_counts})
    # Each rep copies between buffers not touched for a while: the pairs cycled through
    # take four times the L2 cache, so a copy of a few MB runs from DRAM as the 1 GiB one does
    # (repeated on one pair it would run from L2, at up to twice the rate).
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) or (50 << 20)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for n in sizes:
            pairs = [(torch.empty(n, dtype=torch.uint8, device="cuda"), torch.empty(n, dtype=torch.uint8, device="cuda"))
                     for _ in range(min(reps, max(1, -(-4 * l2 // (2 * n)))))]
            for i in range(reps):
                src, dst = pairs[i % len(pairs)]
                dst.copy_(src)
            del pairs
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    if len(events) != reps * len(sizes):
        return {}
    out = {}
    for i, n in enumerate(sizes):
        us = statistics.median(e.time_range.elapsed_us() for e in events[i * reps:(i + 1) * reps])
        out[n] = 2 * n / (us * 1e-6) / 1e9 if us > 0 else 0.0
    return {b: out[max(2, b // 2)] for b in byte_counts}


def kernel_bytes(cg, kernel) -> int:
    sizes = {b["id"]: b for b in cg.buffers}
    total = 0
    for b in kernel["args"]:
        buf = sizes.get(b)
        if buf is None:
            continue
        n = 1
        for s in buf["sizes"]:
            n *= s
        total += n * DTYPE_BYTES.get(buf["dtype"], 4)
    return total


def node_ops(cg) -> dict:
    """Graph node id -> short op name ("add", "var_mean"), from the graph text."""
    ops = {}
    for line in cg.graph_text.splitlines():
        m = re.match(r"\s*%(\d+) = (?:aten\.)?([\w.]+)\(", line)
        if m:
            ops[int(m.group(1))] = m.group(2).split(".")[0]
    return ops


def launch_order(cg):
    """(kernel, launch name, function launched) in launch order: a column split launches
    <name>_partial first, and so does a scatter-add (its buffer's zeroing); a kernel that shares another's code launches that one's function
    (the name the profiler sees)."""
    kernels = cg.kernels
    out = []
    for kind, payload, _ in cg.steps:
        if kind != "kernels":
            continue
        for k in payload:
            if kernels[k]["grid"] == 0:
                continue
            fn = kernels[k].get("function", kernels[k]["name"])
            if kernels[k].get("partial_grid"):
                out.append((kernels[k], kernels[k]["name"] + "_partial", fn + "_partial"))
            out.append((kernels[k], kernels[k]["name"], fn))
    return out


def profile_workload(name, iters, copy_gbs, top):
    import ember
    from ember.runtime.cuda import CudaGraphRunner

    model, inputs, train = build(name, quick=False)
    torch._dynamo.reset()
    ember.config.cache_dir = tempfile.mkdtemp(prefix="ember-prof-")
    with EmberRecorder() as rec:
        fn = torch.compile(model, backend="ember")
        step = make_step(fn, model, inputs, train)
        for _ in range(5):
            step()
        torch.cuda.synchronize()

    calls = []
    original = CudaGraphRunner.__call__

    def logged(self, args):
        calls.append(self)
        return original(self, args)

    CudaGraphRunner.__call__ = logged
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                step()
            torch.cuda.synchronize()
    finally:
        CudaGraphRunner.__call__ = original

    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    gpu.sort(key=lambda e: e.time_range.start)
    kernels = [e for e in gpu if "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    ember_events = [e for e in kernels if e.name.startswith("ember_")]
    orders = {}
    expected = [(id(r), k, launch, fn) for r in calls for k, launch, fn in orders.setdefault(id(r), launch_order(r.cg))]
    if len(expected) != len(ember_events):
        raise SystemExit(f"{name}: {len(ember_events)} ember kernels profiled, {len(expected)} launched")
    per, kernel_of = {}, {}
    for (rid, k, launch, fn), ev in zip(expected, ember_events):
        if ev.name != fn:
            raise SystemExit(f"{name}: launch order mismatch: {ev.name} vs {fn}")
        per.setdefault((rid, launch), []).append(ev.time_range.elapsed_us())
        kernel_of[(rid, launch)] = k
    runners = {id(r): r for r in calls}
    graph_index = {rid: i for i, rid in enumerate(dict.fromkeys(id(r) for r in calls))}
    resources = {}
    for rid, r in runners.items():
        res = getattr(r.cg, "kernel_resources", None) or []
        resources[rid] = {k["name"]: res[i] for i, k in enumerate(r.cg.kernels) if i < len(res)}
    rows = []
    for (rid, kname), times in per.items():
        r = runners[rid]
        k = kernel_of[(rid, kname)]
        res = resources[rid].get(kname, {}) if kname == k["name"] else {}
        ops = node_ops(r.cg)
        us = statistics.median(times)
        nbytes = kernel_bytes(r.cg, k)
        gbs = nbytes / (us * 1e-6) / 1e9 if us > 0 else 0.0
        rows.append({
            "graph": graph_index[rid], "kernel": kname, "shape": k["shape"] if kname == k["name"] else ("zeroing" if k["shape"] == "elementwise" else "col_partial"),
            "grid": res.get("launch_grid", k["grid"]) if kname == k["name"] else k["partial_grid"],
            "block": k["block"] if kname == k["name"] else k["partial_block"],
            "origins": list(dict.fromkeys(ops.get(o, str(o)) for o in k["origins"]))[:8], "calls_per_iter": len(times) // iters, "us": round(us, 2),
            "us_per_iter": round(us * len(times) / iters, 2), "bytes": nbytes, "gbs": round(gbs, 1),
            "registers": res.get("registers"), "blocks_per_sm": res.get("blocks_per_sm"), "planned_grid": k["grid"],
            "copy_fraction": round(gbs / copy_gbs, 3)})
    same = same_size_copy_gbs([x["bytes"] for x in rows])
    for x in rows:
        x["same_size_copy_gbs"] = round(same.get(x["bytes"], 0.0), 1)
        x["same_size_copy_fraction"] = round(x["gbs"] / same[x["bytes"]], 3) if same.get(x["bytes"]) else None
    rows.sort(key=lambda x: -x["us_per_iter"])
    ember_us = sum(e.time_range.elapsed_us() for e in ember_events) / iters
    aten_us = sum(e.time_range.elapsed_us() for e in kernels if not e.name.startswith("ember_")) / iters
    aten = {}
    for e in kernels:
        if not e.name.startswith("ember_"):
            aten[e.name[:90]] = aten.get(e.name[:90], 0.0) + e.time_range.elapsed_us() / iters
    span_us = (gpu[-1].time_range.end - gpu[0].time_range.start) / iters if gpu else 0.0
    total = sum(x["us_per_iter"] for x in rows) or 1.0

    def distribution(key):
        dist = {}
        for lo, hi in ((0, .2), (.2, .4), (.4, .6), (.6, .8), (.8, 10)):
            sel = [x for x in rows if x[key] is not None and lo <= x[key] < hi]
            dist[f"{lo:.0%}-{hi:.0%}" if hi < 10 else ">=80%"] = {
                "kernels": len(sel), "time_share": round(sum(x["us_per_iter"] for x in sel) / total, 3)}
        return dist

    dist = distribution("copy_fraction")
    dist_same = distribution("same_size_copy_fraction") if same else {}
    return {"model": name, "graphs": len(rec.records), "ember_kernels": len(rows),
            "ember_us_per_iter": round(ember_us, 1), "aten_us_per_iter": round(aten_us, 1),
            "gpu_span_us_per_iter": round(span_us, 1), "bandwidth_distribution": dist,
            "same_size_copy_distribution": dist_same,
            "top_aten": sorted(((round(v, 1), k) for k, v in aten.items()), reverse=True)[:8],
            "kernels": rows, "top": rows[:top]}


def print_report(res, top):
    print(f"\n== {res['model']}: {res['graphs']} graphs, {res['ember_kernels']} ember kernels; per iteration: "
          f"ember {res['ember_us_per_iter'] / 1e3:.2f} ms, ATen {res['aten_us_per_iter'] / 1e3:.2f} ms, "
          f"GPU span {res['gpu_span_us_per_iter'] / 1e3:.2f} ms")
    print("   bandwidth (share of ember kernel time): " +
          ", ".join(f"{k}: {v['kernels']} kernels {v['time_share']:.0%}" for k, v in res["bandwidth_distribution"].items()))
    if res["same_size_copy_distribution"]:
        print("   against a copy of the same bytes: " + ", ".join(
            f"{k}: {v['kernels']} kernels {v['time_share']:.0%}" for k, v in res["same_size_copy_distribution"].items()))
    print(f"   {'kernel':<14}{'shape':<12}{'grid':>8}{'blk':>5}{'regs':>5}{'b/SM':>5}{'us/it':>9}{'MB':>8}{'GB/s':>8}"
          f"{'copy%':>7}{'same%':>7}  origins")
    for x in res["kernels"][:top]:
        same = f"{x['same_size_copy_fraction']:>7.0%}" if x["same_size_copy_fraction"] is not None else f"{'-':>7}"
        regs = x.get("registers") if x.get("registers") is not None else -1
        bsm = x.get("blocks_per_sm") if x.get("blocks_per_sm") is not None else -1
        print(f"   g{x['graph']}.{x['kernel']:<11}{x['shape']:<12}{x['grid']:>8}{x['block']:>5}{regs:>5}{bsm:>5}"
              f"{x['us_per_iter']:>9.1f}"
              f"{x['bytes'] / 1e6:>8.1f}{x['gbs']:>8.0f}{x['copy_fraction']:>7.0%}{same}  {' '.join(x['origins'])[:70]}")
    print("   top ATen: " + "; ".join(f"{us:.0f} us {n[:50]}" for us, n in res["top_aten"][:5]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--json", default="")
    a = p.parse_args()
    copy_gbs = copy_bandwidth_gbs()
    print(f"{torch.cuda.get_device_name()}: device-to-device copy {copy_gbs:.0f} GB/s")
    results = []
    for name in a.models.split(","):
        res = profile_workload(name, a.iters, copy_gbs, a.top)
        print_report(res, a.top)
        results.append(res)
    if a.json:
        Path(a.json).write_text(json.dumps({
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_gbs": round(copy_gbs, 1),
            "command": " ".join(sys.argv), "workloads": results}, indent=1))


if __name__ == "__main__":
    main()
