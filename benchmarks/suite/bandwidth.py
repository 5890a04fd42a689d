"""How close ember's kernels come to the memory's speed (issue 23, acceptance 3): each
kernel's achieved bandwidth against a device-to-device copy's, measured in the same process.

Every ember kernel is memory-bound work (pointwise, reductions, scans, layout copies; the
GEMMs, convolutions and attention of a graph are ATen's and cuBLAS's calls, not ember's
kernels). Its bytes are the ideal count the compiled graph gives (`kernel_traffic()`,
csrc/schedule/kernel_traffic.h: what it must read of buffers it does not compute, plus
what it stores), at the graph's hints; its time is its device time in the profile (a
column split's `_partial` launch counted with it). Achieved = bytes per call / device
time per call; `of_copy` = achieved / the copy's bandwidth (bytes read + written by a
1 GiB `copy_`, median of several).

A kernel name the profiler shows may stand for several kernels of the graphs (kernels
equal but for their buffers share one function; two graphs may each have a kernel of the
name). While profiling, the graphs' calls are counted per symbol values (GraphCalls), so
a name's bytes per step are the sum over the kernels that launched under it, at each
call's sizes: exact whenever those launches per step are the profile's. Otherwise (a
CUDA graph replay, a count that differs) the bytes are the average over the graphs'
kernels of the name at their hints, marked `approx` when they differ or the graph has
symbolic sizes.

`summary()` prints, over all ember rows, the distribution (p10/p50/p90) of of_copy
weighted by launches and by device time, for kernels moving at least `min_mib` per call
(the smaller ones, bound by launch latency, are counted and their share of time given),
the scan kernels one by one, and the kernels losing the most time against the copy's
speed.
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict

COPY_BYTES = 1 << 30
MIN_MIB = 4.0  # default size below which a kernel is "tiny" (launch-bound) in the summary


def copy_bandwidth(nbytes: int = COPY_BYTES, reps: int = 10) -> dict:
    """Device-to-device copy bandwidth of the current CUDA device: (read + written bytes)
    / time of dst.copy_(src) on `nbytes`, median of `reps` (CUDA events)."""
    import torch

    while True:
        try:
            src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            break
        except torch.OutOfMemoryError:
            if nbytes <= 1 << 26:
                raise
            nbytes //= 4
    src.fill_(1)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    del src, dst
    torch.cuda.empty_cache()
    return {"copy_gbps": round(2 * nbytes / ms / 1e6, 1), "copy_bytes": nbytes, "copy_ms": round(ms, 4),
            "copy_reps": reps}


def base_name(name: str) -> str:
    """The kernel a profiler name belongs to: a column split's `<name>_partial` is its kernel's."""
    return re.sub(r"_partial$", "", name.split("(")[0].split("<")[0].strip().split(" ")[-1])


def kernel_bytes(records) -> dict[str, dict]:
    """Profiler name (the CUDA function) -> {"bytes": per call, "kind", "approx"} from the
    backend's graph records."""
    found: dict[str, list] = defaultdict(list)
    for r in records:
        cg = getattr(r, "cg", None)
        if cg is None or not hasattr(cg, "kernel_traffic"):
            continue
        functions = {k["name"]: k.get("function") or k["name"] for k in cg.kernels}
        symbolic = cg.num_symbols > 0
        for t in cg.kernel_traffic():
            found[functions.get(t["name"], t["name"])].append(
                (t["read_bytes"] + t["write_bytes"], t["read_bytes"], t["kind"], symbolic))
    out = {}
    for name, ks in found.items():
        totals = {k[0] for k in ks}
        out[name] = {"bytes": round(sum(k[0] for k in ks) / len(ks)), "read_bytes": round(sum(k[1] for k in ks) / len(ks)),
                     "kind": "/".join(sorted({k[2] for k in ks})),
                     "approx": len(totals) > 1 or any(k[3] for k in ks), "kernels": len(ks)}
    return out


class GraphCalls:
    """While active (a context manager), counts the calls of ember's CUDA graph runners,
    per graph and symbol values (a call's plan): which kernels launched how often, and at
    which sizes, without matching launches one by one."""

    def __init__(self):
        self.calls: dict = defaultdict(int)  # (id(cg), symbols or None) -> calls
        self.graphs: dict = {}

    def __enter__(self):
        try:
            from ember.runtime.cuda import CudaGraphRunner
        except ImportError:
            self._runner = None
            return self
        self._runner, self._original = CudaGraphRunner, CudaGraphRunner._call_context
        original, calls, graphs = self._original, self.calls, self.graphs

        def counted(runner, plan):
            calls[(id(runner.cg), tuple(plan.symbols) if plan.symbols is not None else None)] += 1
            graphs[id(runner.cg)] = runner.cg
            return original(runner, plan)

        CudaGraphRunner._call_context = counted
        return self

    def __exit__(self, *exc):
        if self._runner is not None:
            self._runner._call_context = self._original

    def per_step(self, steps: int) -> list[tuple]:
        """[(compiled graph, symbol values or None, calls per step)]."""
        return [(self.graphs[g], syms, n / steps) for (g, syms), n in self.calls.items()]


def launched_bytes(calls: list[tuple]) -> dict[str, dict]:
    """Profiler name -> {"bytes", "launches"} per step, summed over the graphs' calls
    (GraphCalls.per_step) at their symbol values: each kernel with a grid, under the
    function it runs (the name the profiler sees)."""
    out: dict[str, dict] = {}
    for cg, syms, per_step in calls:
        traffic = {t["name"]: t for t in cg.kernel_traffic(list(syms) if syms else [])}
        for k in cg.kernels:
            t = traffic.get(k["name"])
            if t is None or not (k["grid"] or syms):
                continue
            e = out.setdefault(k.get("function") or k["name"], {"bytes": 0.0, "read_bytes": 0.0, "launches": 0.0,
                                                               "kinds": set()})
            e["bytes"] += per_step * (t["read_bytes"] + t["write_bytes"])
            e["read_bytes"] += per_step * t["read_bytes"]
            e["launches"] += per_step
            e["kinds"].add(t["kind"])
    return out


def per_kernel(ember_kernels: dict, records, copy: dict, calls: list[tuple] | None = None) -> dict:
    """The row's "bandwidth": per ember kernel of the profile (ember_kernels: profiler
    name -> {"us": per step, "calls": per step}) its bytes, time, GB/s and share of the
    copy's bandwidth, slowest first. With `calls` (GraphCalls.per_step), a kernel whose
    launches per step are the profile's gets the exact bytes of its calls; any other the
    records' average over the kernels of its name (approx when they differ)."""
    known = kernel_bytes(records)
    for name, e in launched_bytes(calls or []).items():
        profiled = (ember_kernels.get(name) or {}).get("calls", 0.0)
        if e["launches"] and abs(profiled - e["launches"]) <= 0.01 * e["launches"]:
            known[name] = {"bytes": round(e["bytes"] / e["launches"]), "read_bytes": round(e["read_bytes"] / e["launches"]),
                           "kind": "/".join(sorted(e["kinds"])), "approx": False}
    merged: dict[str, dict] = {}
    for name, v in ember_kernels.items():
        m = merged.setdefault(base_name(name), {"us": 0.0, "calls": 0.0, "partial_calls": 0.0})
        m["us"] += v["us"]
        m["partial_calls" if base_name(name) != name else "calls"] += v["calls"]
    for m in merged.values():  # a _partial launch belongs to its kernel's call
        m["calls"] = m["calls"] or m.pop("partial_calls")
    gbps = copy.get("copy_gbps")
    kernels = []
    for name, m in sorted(merged.items(), key=lambda kv: -kv[1]["us"]):
        info = known.get(name)
        k = {"name": name, "calls": round(m["calls"], 2), "us": round(m["us"] / m["calls"], 3) if m["calls"] else None}
        if info is None or not k["us"]:
            k["bytes"] = None
        else:
            k.update(kind=info["kind"], bytes=info["bytes"], read_bytes=info["read_bytes"],
                     gbps=round(info["bytes"] / k["us"] / 1e3, 1))
            k["of_copy"] = round(k["gbps"] / gbps, 4) if gbps else None
            if info["approx"]:
                k["approx"] = True
        kernels.append(k)
    return {**copy, "kernels": kernels}


# ----------------------------------------------------------------------------- summary

def _percentiles(samples: list[tuple[float, float]], ps=(0.1, 0.5, 0.9)) -> list[float | None]:
    """Weighted percentiles of (value, weight) samples: the first value at which the
    cumulative weight reaches p of the total."""
    samples = sorted((v, w) for v, w in samples if w > 0)
    total = sum(w for _, w in samples)
    out = []
    for p in ps:
        if not samples:
            out.append(None)
            continue
        acc, chosen = 0.0, samples[-1][0]
        for v, w in samples:
            acc += w
            if acc >= p * total - 1e-12:
                chosen = v
                break
        out.append(chosen)
    return out


def _pct(v) -> str:
    return "  n/a" if v is None else f"{100 * v:4.0f}%"


def _met(v, target) -> str:
    return "n/a" if v is None else f"{'met' if v >= target else 'NOT met'} ({_pct(v).strip()})"


def samples_of(rows: list[dict]) -> list[dict]:
    """One sample per (row, kernel) with bytes: model, name, kind, of_copy, calls and
    device time per step, bytes per call, and the time lost against the copy's speed."""
    out = []
    for r in rows:
        bw = r.get("bandwidth") or {}
        gbps = bw.get("copy_gbps")
        for k in bw.get("kernels", []):
            us_step = (k.get("us") or 0.0) * (k.get("calls") or 0.0)
            s = {"model": r["model"], "variant": r.get("variant"), "name": k["name"], "kind": k.get("kind"),
                 "calls": k.get("calls") or 0.0, "us_step": us_step, "bytes": k.get("bytes"),
                 "of_copy": k.get("of_copy"), "approx": bool(k.get("approx"))}
            if k.get("bytes") and gbps:
                s["lost_us_step"] = us_step - k["bytes"] * s["calls"] / (gbps * 1e3)
            out.append(s)
    return out


def summary(rows: list[dict], min_mib: float = MIN_MIB, worst: int = 15) -> str:
    """The distribution the acceptance asks for, per device and (variant, mode), over the
    ember rows that carry a "bandwidth" record."""
    groups: dict = defaultdict(list)
    for r in rows:
        if r.get("backend") == "ember" and (r.get("bandwidth") or {}).get("kernels"):
            groups[(r.get("device_name"), r.get("variant"), r.get("mode"))].append(r)
    out = []
    for (device, variant, mode), rs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        copies = [r["bandwidth"]["copy_gbps"] for r in rs if r["bandwidth"].get("copy_gbps")]
        ss = samples_of(rs)
        measured = [s for s in ss if s["of_copy"] is not None]
        unknown = [s for s in ss if s["of_copy"] is None]
        big = [s for s in measured if s["bytes"] >= min_mib * 2**20]
        tiny = [s for s in measured if s["bytes"] < min_mib * 2**20]
        t_all = sum(s["us_step"] for s in ss) or 1.0
        out.append(f"{device}, {variant} {mode}: {len(rs)} ember rows, copy bandwidth median "
                   f"{statistics.median(copies):.0f} GB/s (range {min(copies):.0f}-{max(copies):.0f}); "
                   f"{len(ss)} ember kernels, {t_all / 1e3:.1f} ms device time per step summed over the models")
        out.append(f"  kernels of >= {min_mib:g} MiB per call: {len(big)}, "
                   f"{sum(s['us_step'] for s in big) / t_all:.0%} of ember kernel time; "
                   f"achieved / copy bandwidth p10/p50/p90")
        by_count = _percentiles([(s["of_copy"], s["calls"]) for s in big])
        by_time = _percentiles([(s["of_copy"], s["us_step"]) for s in big])
        out.append(f"    by launches:    {' '.join(_pct(v) for v in by_count)}")
        out.append(f"    by device time: {' '.join(_pct(v) for v in by_time)}")
        approx = [s for s in big if s["approx"]]
        if approx:
            out.append(f"    ({len(approx)} of them approximate: one profiler name for kernels of different bytes, "
                       f"or symbolic sizes counted at their hints; {sum(s['us_step'] for s in approx) / t_all:.1%} of time)")
        out.append(f"  tiny (< {min_mib:g} MiB per call, skipped above): {len(tiny)} kernels, "
                   f"{sum(s['us_step'] for s in tiny) / t_all:.1%} of ember kernel time, p50 by time "
                   f"{_pct(_percentiles([(s['of_copy'], s['us_step']) for s in tiny])[1]).strip()}; "
                   f"no byte count: {len(unknown)} kernels, {sum(s['us_step'] for s in unknown) / t_all:.1%} of time")
        bands = []
        for lo, hi in ((0, 1), (1, 16), (16, 128), (128, None)):
            sel = [s for s in measured if s["bytes"] >= lo * 2**20 and (hi is None or s["bytes"] < hi * 2**20)]
            if sel:
                p50 = _percentiles([(s["of_copy"], s["us_step"]) for s in sel])[1]
                bands.append(f"{lo}-{hi or ''} MiB: {len(sel)} kernels, p50 {_pct(p50).strip()}")
        out.append("  by size (p50 by time): " + "; ".join(bands))
        scans = [s for s in measured if "scan" in (s["kind"] or "")]
        big_scans = [s["of_copy"] for s in scans if s["bytes"] >= min_mib * 2**20]
        verdict = [f"median >= 80%: by launches {_met(by_count[1], 0.8)}, by device time {_met(by_time[1], 0.8)}"]
        if big_scans:
            verdict.append(f"scan kernels >= 70%: {_met(min(big_scans), 0.7)} (slowest of {len(big_scans)})")
        out.append("  acceptance 3: " + "; ".join(verdict))
        if scans:
            p = _percentiles([(s["of_copy"], s["us_step"]) for s in scans])[1]
            out.append(f"  scan kernels: {len(scans)}, p50 by time {_pct(p).strip()} of copy bandwidth")
            for s in sorted(scans, key=lambda s: -s["us_step"]):
                out.append(f"    {_pct(s['of_copy'])} {s['bytes'] / 2**20:8.1f} MiB {s['us_step'] / max(s['calls'], 1e-9):8.1f} us "
                           f"{s['model']}: {s['name']}")
        lost = sorted((s for s in measured if s.get("lost_us_step", 0) > 0), key=lambda s: -s["lost_us_step"])
        if lost:
            out.append(f"  worst by time lost against the copy's speed (us per step; the next fixes):")
            for s in lost[:worst]:
                out.append(f"    {s['lost_us_step']:8.1f} us lost {s['us_step']:8.1f} us {s['calls']:4g}x "
                           f"{_pct(s['of_copy'])} {s['bytes'] / 2**20:7.1f} MiB {s['model'][:18]:18} {s['name'][:70]}")
        per_model = []
        for r in sorted(rs, key=lambda r: r["model"]):
            ms = [s for s in samples_of([r]) if s["of_copy"] is not None and s["bytes"] >= min_mib * 2**20]
            p50 = _percentiles([(s["of_copy"], s["us_step"]) for s in ms])[1]
            per_model.append(f"{r['model']} {_pct(p50).strip()}")
        out.append("  per model, p50 by time: " + ", ".join(per_model))
    return "\n".join(out)
