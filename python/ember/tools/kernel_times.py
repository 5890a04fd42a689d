"""Per-kernel time, bytes and bandwidth of compiled graphs, for `ember report`.

Time: the graphs are called under torch.profiler, where each call runs in its graph's range
and each kernel step in a range named after its kernels (python/ember/runtime/runner.py). On the
CPU a step's time is its range's; on a CUDA device it is the device time of the kernels
launched inside the range (the trace links each device kernel to the range it was launched
from by its External id), or, where the trace has no such link, of the device kernels
named as the step's functions. The mean over the profiled calls.

Bytes: the compulsory traffic of a step, every buffer its kernels take read or written once
(a broadcast operand re-read from cache counts once), as benchmarks/gpu_kernels.py counts.
Bandwidth: bytes over time, against the device's copy bandwidth: a copy of a buffer larger
than the caches, bytes read plus bytes written over its median time.
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import torch

from .estimate import _quiet_stderr

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "bool": 1,
               "c64": 8, "c128": 16, "f8e4m3": 1, "f8e5m2": 1}


def step_bytes(cg, kernel_ids) -> int | None:
    """Bytes a kernel step moves at least; None when a size is symbolic."""
    buffers = {b["id"]: b for b in cg.buffers}
    seen, total = set(), 0
    for k in kernel_ids:
        for b in cg.kernels[k]["args"]:
            if b in seen or b not in buffers:
                continue
            seen.add(b)
            n = 1
            for s in buffers[b]["sizes"]:
                if not isinstance(s, int):
                    return None
                n *= s
            total += n * DTYPE_BYTES.get(buffers[b]["dtype"], 4)
    return total


def kernel_steps(cg) -> list[dict]:
    """The graph's kernel steps in order: their label (the profiler range's name), kernels
    and the functions a device trace names."""
    out = []
    for si, (kind, payload, _) in enumerate(cg.steps):
        if kind != "kernels":
            continue
        kernels = [cg.kernels[k] for k in payload]
        out.append({"step": si, "label": ", ".join(k["name"] for k in kernels),
                    "kernels": [k["name"] for k in kernels],
                    "functions": sorted({k.get("function", k["name"]) for k in kernels}),
                    "bytes": step_bytes(cg, payload)})
    return out


def _events(prof) -> list[dict]:
    """The trace's complete events, from the Chrome trace torch writes (the form that keeps
    device kernels' links to the ranges that launched them)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    finally:
        os.unlink(path)


def _enclosing(event, ranges):
    for r in ranges:
        if r["tid"] == event["tid"] and r["ts"] <= event["ts"] and event["ts"] + event["dur"] <= r["ts"] + r["dur"] + 1:
            return r
    return None


def profile_steps(fn, args, records, calls: int = 10, device: str = "cpu") -> dict:
    """{graph name: {step label: mean microseconds per call}} for the graphs in `records`
    (records.GraphRecord), from `calls` calls of fn(*args) under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with _quiet_stderr(), profile(activities=activities) as prof:
        for _ in range(calls):
            fn(*args)
        if cuda:
            torch.cuda.synchronize()
    events = _events(prof)
    graph_ranges = {r.name: [e for e in events if e["name"].startswith(f"ember {r.name} ")] for r in records}
    out = {}
    for r in records:
        if r.cg is None or not graph_ranges[r.name]:
            continue
        ranges = graph_ranges[r.name]
        per_step = {}
        for step in kernel_steps(r.cg):
            cpu = [e for e in events if e["name"] == step["label"] and e.get("cat") == "cpu_op"
                   and _enclosing(e, ranges) is not None]
            if cuda:
                times = _device_times(events, cpu, step)
            else:
                times = [e["dur"] for e in cpu]
            if times:
                per_step[step["label"]] = sum(times) / len(ranges)
        out[r.name] = per_step
    return out


def _device_times(events, step_ranges, step) -> list[float]:
    """Device time of the kernels launched inside a step's ranges: by the External id the
    trace gives a range and the kernels launched under it; else by the kernels' names."""
    ids = {e.get("args", {}).get("External id") for e in step_ranges} - {None}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    linked = [e["dur"] for e in kernels if e.get("args", {}).get("External id") in ids]
    if linked:
        return linked
    names = set(step["functions"]) | {f + "_partial" for f in step["functions"]}
    return [e["dur"] for e in kernels if e["name"] in names]


def copy_bandwidth_gbs(device: str = "cpu") -> float:
    """GB/s of a copy larger than the caches: bytes read plus bytes written over its time."""
    cuda = device.startswith("cuda")
    n = (1 << 30) if cuda else (128 << 20)
    src = torch.empty(n, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(2):
        dst.copy_(src)
    times = []
    for _ in range(7 if not cuda else 10):
        sync()
        t0 = time.perf_counter()
        dst.copy_(src)
        sync()
        times.append(time.perf_counter() - t0)
    return 2 * n / statistics.median(times) / 1e9
