"""One measuring process: one model, one variant (inference or training), one backend, one
mode, one thread count, in a fresh process (run.py starts it).

    cold   the cache directories run.py gives are empty. Times the first call (from before
           the backend's import and torch.compile to the end of the call, as the anchors did;
           call_s is the call alone), checks correctness, times the steady state (on the
           CPU a compiled backend's also alternating with eager's calls: `beside`),
           profiles a few steps, and records graphs, graph breaks, eager fallbacks and memory.
    warm   the cache directories a cold process filled: the first call only.

The backend "dynamo" is torch.compile(backend="eager"): Dynamo's trace and guards, then the
captured graph run by eager, with no compiler and no cache. Its process times the first call
only: Dynamo's floor, below which no Dynamo backend's first call (cold or warm) can go.

Correctness is Inductor's accuracy rule, torch._dynamo.utils.same(eager, compiled,
fp64_ref, tol): allclose at tol, else RMSE(compiled, fp64) <= k * RMSE(eager, fp64) + tol/10,
with the model and its floating inputs in float64 as the reference; the first call's
outputs and a steady-state call's are both checked. Training is forward + backward (a loss
of the mean square of the first output; outputs and every gradient are checked), under
bf16 autocast on the GPU (fp32 weights), fp32 on the CPU.

The process prints its row as one line after each phase (RESULT_TAG + JSON): a process
that is killed (timeout) leaves what it measured.
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import statistics
import sys
import time

RESULT_TAG = "SUITE_RESULT "
# Inductor's tolerances in its model benchmarks: 1e-3 inference, 1e-2 training; at least
# 1e-2 in bf16.
TOL = {("float32", False): 1e-3, ("float32", True): 1e-2, ("bfloat16", False): 1e-2, ("bfloat16", True): 1e-2}


def emit(row: dict):
    print(RESULT_TAG + json.dumps(row, default=str), flush=True)


def _rss_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def compile_for(backend: str, mode: str, model, device: str):
    import torch

    if backend == "eager":
        return model
    if backend == "dynamo":
        return torch.compile(model, backend="eager")
    kw = {} if mode == "default" else {"mode": mode}
    if backend == "inductor":
        if device == "cpu":
            # Inductor's C++ kernels then show in the profiler by name (a RECORD_FUNCTION
            # per kernel call: a flag check when no profiler runs).
            import torch._inductor.config as inductor_config
            inductor_config.cpp.enable_kernel_profile = True
        return torch.compile(model, **kw)
    if backend == "ember":
        import ember  # noqa: F401  registers the backend from a source tree too
        return torch.compile(model, backend="ember", **kw)
    raise ValueError(f"unknown backend {backend!r}")


def loss_module(model):
    """Training compiles the model and its loss together (a loss of the mean square of the
    first floating output), as a training step is usually compiled: the loss's few ops are
    then the compiler's too, not uncompiled ATen calls beside it."""
    import torch

    from .registry import tensors

    class LossOf(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *args, **kwargs):
            first = next(t for t in tensors(self.model(*args, **kwargs)) if t.is_floating_point())
            return first.float().square().mean(), first

    return LossOf(model)


def make_step(fn, model, inputs, train: bool, device: str, cudagraphs: bool = False):
    """One call: inference under no_grad returning the output tensors; or (fn a compiled or
    plain loss_module) forward + backward returning [loss, first output] + the parameters'
    gradients."""
    import torch

    from .registry import call, tensors

    mark = torch.compiler.cudagraph_mark_step_begin if cudagraphs else (lambda: None)
    if not train:
        def step():
            mark()
            with torch.no_grad():
                return tensors(call(fn, inputs))
        return step
    autocast = ((lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device == "cuda"
                else contextlib.nullcontext)
    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        mark()
        model.zero_grad(set_to_none=True)
        with autocast():
            loss, first = call(fn, inputs)
        loss.backward()
        return [loss.detach(), first.detach()] + [p.grad for p in params if p.grad is not None]
    return step


def _detached(outs):
    return [t.detach().clone() for t in outs]


def fp64_outputs(model, inputs, train: bool):
    import torch
    from torch.utils._pytree import tree_map

    ref = copy.deepcopy(model).double()
    # torch's grouped GEMM has no float64: a mixture-of-experts model's reference loops over
    # its experts instead (the same arithmetic).
    if getattr(getattr(ref, "config", None), "_experts_implementation", None) not in (None, "eager"):
        ref.set_experts_implementation("eager")
    ref_inputs = tree_map(lambda t: t.double() if torch.is_tensor(t) and t.is_floating_point() else t, inputs)
    fn = loss_module(ref) if train else ref
    out = _detached(make_step(fn, ref, ref_inputs, train, "cpu")())  # no autocast: fp64 throughout
    del ref
    return out


def fingerprint(model, inputs) -> str:
    """What is measured, as a short hash: parameter names, shapes and dtypes, and the
    inputs' shapes and dtypes. A stored reference row is reused only for the same one."""
    import hashlib

    import torch
    from torch.utils._pytree import tree_leaves

    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(f"{name}:{tuple(p.shape)}:{p.dtype};".encode())
    for t in tree_leaves(inputs):
        if torch.is_tensor(t):
            h.update(f"in:{tuple(t.shape)}:{t.dtype};".encode())
    return h.hexdigest()[:16]


class _EmberRecords:
    """The backend's per-graph records (the mechanism ember.explain uses) while active."""

    def __init__(self, active: bool):
        self.records, self.active = [], active

    def __enter__(self):
        if self.active:
            from ember.records import Recording
            self._recording = Recording(self.records)
        return self

    def __exit__(self, *exc):
        if self.active:
            self._recording.stop()

    def summary(self) -> dict:
        fallbacks, externs, kernels = [], {}, 0
        for r in self.records:
            if r.fallback_reason:
                fallbacks.append({"graph": r.name, "reason": r.fallback_reason[:300]})
            if r.cg is not None:
                kernels += len(r.cg.kernels)
                for e in r.cg.externs:
                    externs[e["op"]] = externs.get(e["op"], 0) + 1
        return {"graphs": len(self.records), "kernels": kernels, "eager_fallback_graphs": len(fallbacks),
                "fallbacks": fallbacks, "aten_ops": dict(sorted(externs.items())),
                "front_ends": sorted({r.front_end.split(" (")[0] for r in self.records if r.front_end})}


def _dynamo_counts() -> dict:
    from torch._dynamo.utils import counters

    breaks = counters["graph_break"]
    return {"graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": [f"{n}x {r[:200]}" for r, n in breaks.most_common(3)]}


def _steady(step, sync, warmup: int, iters: int, max_s: float) -> dict:
    t_end = time.perf_counter() + max_s
    for _ in range(warmup):
        step()
    sync()
    times = []
    while len(times) < iters:
        t0 = time.perf_counter()
        step()
        sync()
        times.append(1000 * (time.perf_counter() - t0))
        if time.perf_counter() > t_end and len(times) >= 5:
            break
    times.sort()
    return {"median_ms": round(statistics.median(times), 4), "min_ms": round(times[0], 4),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))], 4), "timed_calls": len(times)}


def _beside_eager(step, eager_step, sync, threads: int | None, calls: int, max_s: float) -> dict:
    """The compiled step and eager's alternating call by call in this process (CPU rows).
    On a shared host a process's neighbours (other processes' compiles, the last-level cache
    and memory bandwidth they share, hyperthread siblings) move its speed by up to 2x for
    seconds at a time, and a backend's median from one process against eager's from another
    inherits that; calls that alternate share it, so each backend's speedup over the eager
    calls beside it compares backends measured in different processes (report.speedup).
    One thread: the calling thread's CPU time (time.thread_time: all the work runs on it,
    and time the machine gives to other processes is not counted); more threads: wall time.
    The order alternates too (eager first, then the compiled step first), so that neither
    always finds the caches as the other left them."""
    clock = time.thread_time if threads == 1 else time.perf_counter
    eager_step()
    sync()
    t_end = time.perf_counter() + max_s
    eager, compiled = [], []
    while len(compiled) < calls:
        pair = (eager_step, step) if len(compiled) % 2 == 0 else (step, eager_step)
        for fn in pair:
            t0 = clock()
            fn()
            sync()
            (eager if fn is eager_step else compiled).append(1000 * (clock() - t0))
        if time.perf_counter() > t_end and len(compiled) >= 6:
            break
    e, c = statistics.median(eager), statistics.median(compiled)
    return {"clock": "cpu" if threads == 1 else "wall", "eager_ms": round(e, 4), "ms": round(c, 4),
            "speedup": round(e / c, 4), "calls": len(compiled)}


def _profile(step, sync, spec, records, graph_calls=None) -> dict:
    """The profile summary of `profile_steps` steps; `graph_calls` (a bandwidth.GraphCalls)
    counts the ember graphs' calls during them."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from . import profiling

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if spec["device"] == "cuda" else [])
    named = profiling.named_cpu_kernels(records) if spec["device"] == "cpu" and spec["backend"] == "ember" else None
    steps = spec["profile_steps"]
    with named if named is not None else contextlib.nullcontext():
        step()  # the wrapper's first call builds its names outside the profile
        sync()
        with profile(activities=activities) as prof, graph_calls or contextlib.nullcontext():
            for _ in range(steps):
                with torch.profiler.record_function(profiling.STEP_NAME):
                    step()
            sync()
    return profiling.summarize(prof.events(), steps, spec["device"], spec["top"], profiling.kernel_ops(records))


ROW_KEYS = ("model", "variant", "backend", "mode", "device", "size", "threads", "phase")


def measure(spec: dict, row: dict) -> dict:
    """Fills `row` for one process (see the module docstring); spec as run.py writes it."""
    t_process = time.perf_counter()
    import torch

    if spec["device"] == "cpu" and spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    if spec.get("cpus"):
        row["cpus"] = sorted(os.sched_getaffinity(0))  # run.py pinned the process
    from . import bandwidth, registry

    cuda = spec["device"] == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    train = spec["variant"] == "train"
    entry = registry.get(spec["model"])
    dtype = torch.bfloat16 if cuda and not train else torch.float32
    row.update(torch=torch.__version__, dtype=str(dtype).removeprefix("torch."), version=entry.version,
               device_name=torch.cuda.get_device_name() if cuda else _cpu_name(),
               autocast="bf16" if cuda and train else None)
    t0 = time.perf_counter()
    model, inputs = entry.build(spec["device"], dtype, spec["size"])
    model.train(train)
    sync()
    row.update(build_s=round(time.perf_counter() - t0, 3), fingerprint=fingerprint(model, inputs),
               params_m=round(sum(p.numel() for p in model.parameters()) / 1e6, 2))
    rss_before = _rss_kb("VmRSS")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    records = _EmberRecords(spec["backend"] == "ember")

    t0 = time.perf_counter()
    fn = compile_for(spec["backend"], spec["mode"], loss_module(model) if train else model, spec["device"])
    step = make_step(fn, model, inputs, train, spec["device"], cudagraphs=spec["mode"] == "reduce-overhead")
    t1 = time.perf_counter()
    with records:
        first = _detached(step())
        sync()
    t2 = time.perf_counter()
    row.update(first_call_s=round(t2 - t0, 3), call_s=round(t2 - t1, 3), status="first_call")
    if cuda:
        row["peak_first_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    _compiler_counts(row, spec, records)
    emit(row)
    if spec["phase"] == "warm" or spec["backend"] == "dynamo":
        row["status"] = "ok"
        return row

    if spec["backend"] != "eager" and spec.get("check", True):
        t0 = time.perf_counter()
        eager = _detached(make_step(loss_module(model) if train else model, model, inputs, train, spec["device"])())
        reference = fp64_outputs(model, inputs, train)
        later = _detached(step())
        row.update(_accuracy(eager, [first, later], reference, TOL[(row["dtype"], train)]))
        row["check_s"] = round(time.perf_counter() - t0, 3)
        del eager, reference, later
    del first
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    row.update(_steady(step, sync, spec["warmup"], spec["iters"], spec["max_steady_s"]))
    if cuda:
        row["peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    else:
        peak = _rss_kb("VmHWM")
        row["peak_rss_delta_mib"] = round((peak - rss_before) / 1024, 1) if peak and rss_before else None
    if not cuda and spec["backend"] != "eager" and spec.get("beside", True):
        eager_step = make_step(loss_module(model) if train else model, model, inputs, train, spec["device"])
        row["beside"] = _beside_eager(step, eager_step, sync, spec.get("threads"), spec["iters"], spec["max_steady_s"])
    row["status"] = "steady"
    emit(row)
    if spec["profile_steps"]:
        graph_calls = bandwidth.GraphCalls() if cuda and spec["backend"] == "ember" else None
        try:
            row["profile"] = _profile(step, sync, spec, records.records, graph_calls)
        except Exception as e:  # a profile that fails must not lose the timings
            row["profile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        ember_kernels = (row.get("profile") or {}).pop("ember_kernels", None)
        if graph_calls is not None and ember_kernels is not None:
            try:
                row["bandwidth"] = bandwidth.per_kernel(ember_kernels, records.records, bandwidth.copy_bandwidth(),
                                                        graph_calls.per_step(spec["profile_steps"]))
            except Exception as e:
                row["bandwidth_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    _compiler_counts(row, spec, records)  # again: a later call may have compiled more (a recompile)
    row["process_s"] = round(time.perf_counter() - t_process, 2)
    row["status"] = "ok"
    return row


def _compiler_counts(row: dict, spec: dict, records: _EmberRecords):
    if spec["backend"] == "eager":
        return
    row["dynamo"] = _dynamo_counts()
    if spec["backend"] == "ember":
        import ember

        st = ember.stats()
        row["ember"] = {**records.summary(), **{k: st[k] for k in (
            "graphs_compiled", "graphs_loaded", "eager_fallbacks", "eager_fallbacks_by_reason", "front_end",
            "compile_seconds", "load_seconds", "recompiles", "cuda_graph_recordings")}}
    elif spec["backend"] == "inductor":
        from torch._inductor import metrics

        row["inductor"] = {"generated_kernels": metrics.generated_kernel_count}


def _accuracy(eager, results, reference, tol) -> dict:
    from torch._dynamo.utils import same

    notes = []

    def log_error(msg, *args):
        if len(notes) < 3:
            notes.append((msg % args if args else str(msg))[:300])

    ok = all(same(eager, r, reference, tol=tol, equal_nan=True, log_error=log_error) for r in results)
    d = {"accurate": bool(ok), "tol": tol}
    if notes:
        d["accuracy_note"] = notes
    worst = 0.0
    for r in results:
        for e, a in zip(eager, r):
            if e.shape == a.shape and e.is_floating_point() and e.numel():
                diff = (e.double() - a.double()).abs().nan_to_num(0.0).max().item()
                scale = e.double().abs().nan_to_num(0.0).max().item()
                worst = max(worst, diff / max(scale, 1e-30))
    d["max_rel_err"] = float(f"{worst:.3e}")
    return d


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def main(argv):
    spec = json.loads(argv[0])
    row = {k: spec.get(k) for k in ROW_KEYS}
    try:
        measure(spec, row)
    except Exception as e:  # what was measured before stays in the row
        import traceback

        row["status"] = "skipped" if isinstance(e, ImportError) else "error"
        row["error"] = f"{type(e).__name__}: {str(e)[:600]}"
        print(traceback.format_exc()[-3000:], file=sys.stderr, flush=True)
    emit(row)
    sys.stdout.flush()
    sys.stderr.flush()
    # Inductor's compile workers and CUDA teardown can take seconds; the row is out.
    os._exit(0)
