"""One measuring process of benchmarks/dynamic_llm.py: one model at several (batch, sequence)
shapes, one backend, in a fresh process.

    backend "ember"     eager first (per-shape latency, no compile), then ember's variants
                        in this order, each after torch._dynamo.reset() and ember.reset_stats():
                          dynamic   torch.compile(dynamic=True); the process's first compile,
                                    on the empty cache directories the runner gives
                          mark      dynamic=None, torch._dynamo.mark_dynamic on batch and
                                    sequence of every input
                          auto      dynamic=None: the first shape compiles static, the second
                                    recompiles with Dynamo's automatic dynamic
                          static    dynamic=False, torch._dynamo.reset() before each shape: a
                                    compile per shape, what kernels specialized to it cost
                          ro        dynamic=True, mode="reduce-overhead" (only when asked): the
                                    serving pattern, a CUDA graph recorded per shape
    backend "inductor"  Inductor with dynamic=True, and with "ro" asked, also with
                        mode="reduce-overhead" (its cudagraph trees).

Per variant and shape: the first call at that shape (a compile where there is one), the
steady-state median of synchronized calls, correctness by the suite's rule (measure.py:
torch._dynamo.utils.same against eager with an fp64 reference) and whether the output is
bitwise equal to eager's (a compiled graph that silently ran eagerly is). Per variant: the
compiler counters after the first compile and after the last shape (ember.stats(); Dynamo's
graph and frame counters; Inductor's generated kernels), eager-fallback graphs with their
reasons, and per ember graph the ops left to ATen, its symbols and the kernels that took a
generic path because of a symbol. Shapes with batch 1 come last: Dynamo specializes sizes 0
and 1, so they are new graphs for every compiler (counted apart). Under "ro", per shape also
the device memory the process reserved more after the shape's calls than before them
(torch.cuda.memory_reserved: the recording, for either backend), and for ember each
recording's own report (python/ember/runtime/cudagraphs.py: its shared pool's growth, what it keeps
allocated there, its static input buffers).

A row is printed (measure.RESULT_TAG + JSON) after each variant, so a process the runner
kills leaves what it measured.
"""
from __future__ import annotations

import copy
import os
import statistics
import time

from . import measure, registry

ORDER = ("eager", "dynamic", "mark", "auto", "static", "ro")
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
EMBER_KEYS = ("graphs_compiled", "codegen_runs", "c_compiler_runs", "dynamo_compiles", "recompiles",
              "eager_fallbacks", "symbolic_graphs", "generic_paths")


def max_sequence(model) -> int | None:
    """The longest sequence a model with a learned position table takes (an embedding of
    config.max_position_embeddings rows, or 2 more: OPT's offset), less 2 (RoBERTa's
    positions start after its padding index); None where no table limits it (RoPE, ALiBi)."""
    import torch

    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not isinstance(limit, int):
        return None
    learned = any(isinstance(m, torch.nn.Embedding) and m.num_embeddings in (limit, limit + 2) for m in model.modules())
    return limit - 2 if learned else None


def make_inputs(entry, shape, device: str, size: str):
    """The entry's inputs at (batch, seq), the same in every process (seeded by the shape)."""
    import torch

    torch.manual_seed(1000 * shape[0] + shape[1])
    return entry.dynamic_inputs(shape[0], shape[1], device, size)


def _tensor_inputs(inputs) -> list:
    import torch

    return [v for v in (inputs.values() if isinstance(inputs, dict) else inputs) if torch.is_tensor(v)]


class Checker:
    """Eager's and the fp64 reference's outputs at a shape, computed when a variant asks and
    kept for the next variant only while one shape's worth (a full model's logits at 2k
    tokens are gigabytes)."""

    def __init__(self, model, dtype_name: str):
        self.model, self.dtype_name = model, dtype_name
        self.ref_model = None
        self.ref_dtypes = ["float64"] + (["float32"] if dtype_name != "float32" else [])
        self.key, self.outs = None, None

    def outputs(self, shape, inputs):
        import torch

        if self.key != shape:
            self.outs = None
            with torch.no_grad():
                eager = [t.detach().clone() for t in registry.tensors(registry.call(self.model, inputs))]
                ref = self._reference(inputs)
            self.key, self.outs = shape, (eager, ref if ref is not None else eager)
        return self.outs

    def _reference(self, inputs):
        """The model in float64 (a mixture of experts with its experts looped, as the suite's
        reference; float32 where an op still has no float64 kernel); None when neither runs
        above the model's own precision: eager then stands for the reference, and the rule is
        allclose at tol."""
        import torch

        while self.ref_dtypes:
            dtype = getattr(torch, self.ref_dtypes[0])
            try:
                if self.ref_model is None:
                    self.ref_model = copy.deepcopy(self.model).to(dtype)
                    # torch's grouped expert matmul has no float64: the reference loops over the
                    # experts (as measure.fp64_outputs does). A float32 reference is no
                    # reference to torch's rule (same() then asks allclose at tol with eager).
                    if getattr(getattr(self.ref_model, "config", None), "_experts_implementation",
                               None) not in (None, "eager"):
                        self.ref_model.set_experts_implementation("eager")
                ref_inputs = {k: v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v
                              for k, v in inputs.items()}
                return [t.detach() for t in registry.tensors(registry.call(self.ref_model, ref_inputs))]
            except RuntimeError:
                self.ref_model = None
                self.ref_dtypes.pop(0)
        return None

    def check(self, shape, inputs, got) -> dict:
        eager, ref = self.outputs(shape, inputs)
        d = measure._accuracy(eager, [got], ref, measure.TOL.get((self.dtype_name, False), 1e-2))
        d["reference"] = self.ref_dtypes[0] if self.ref_dtypes else "eager"
        d["bitwise_eager"] = len(eager) == len(got) and all(
            e.shape == g.shape and e.dtype == g.dtype and bool((e == g).all()) for e, g in zip(eager, got))
        return d


def steady_ms(fn, sync, warmup: int, iters: int, max_s: float, paired=None) -> dict:
    """Median of synchronized calls of `fn`. With `paired` (eager at the same shape), each
    timed call of `fn` follows one of `paired`, timed too: on a machine whose load or
    clocks drift, a variant's time over eager's measured beside it compares variants
    measured minutes apart (`over_eager`)."""
    t_end = time.perf_counter() + max_s * (2 if paired else 1)
    for _ in range(warmup):
        fn()
    sync()
    times, issue, eager = [], [], []
    while len(times) < iters:
        if paired is not None:
            t0 = time.perf_counter()
            paired()
            sync()
            eager.append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        sync()
        times.append(1000 * (time.perf_counter() - t0))
        issue.append(1000 * (t1 - t0))
        if time.perf_counter() > t_end and len(times) >= 3:
            break
    # issue_ms: the host's time until the call returns, before the sync; close to median_ms,
    # the call is bound by the host issuing its work, far below it by the device.
    d = {"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4), "calls": len(times),
         "issue_ms": round(statistics.median(issue), 4)}
    if eager:
        d["eager_paired_ms"] = round(statistics.median(eager), 4)
        d["over_eager"] = round(d["median_ms"] / d["eager_paired_ms"], 4)
    return d


def counts(backend: str) -> dict:
    """The compiler counters now: ember's (its stats) or Inductor's, and Dynamo's."""
    from torch._dynamo.utils import counters

    c = {"dynamo_graphs": counters["stats"]["unique_graphs"], "dynamo_frames": counters["frames"]["total"]}
    if backend == "ember":
        import ember

        st = ember.stats()
        c.update({k: st.get(k, 0) for k in EMBER_KEYS})
        c["fallbacks_by_reason"] = dict(st["eager_fallbacks_by_reason"])
    elif backend == "inductor":
        from torch._inductor import metrics

        c["generated_kernels"] = metrics.generated_kernel_count
    return c


def delta(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if isinstance(v, int)}


def graph_summary(records) -> list[dict]:
    """Per ember graph: its front end, eager fallback, ops left to ATen (with why), symbols
    (ember.explain's: name, hint, Dynamo's source, range) and generic paths (where a symbol
    made the code more general than static sizes: csrc/generic_paths.h)."""
    from ember.explain import symbols_of

    out = []
    for r in records:
        g = {"name": r.name, "front_end": (r.front_end or "").split(" (")[0], "fallback": r.fallback_reason,
             "symbols": symbols_of(r)}
        if r.cg is not None:
            aten = {}
            for e in r.cg.externs:
                aten.setdefault(e["op"], {"count": 0, "reason": e["reason"][:160]})["count"] += 1
            g.update(kernels=len(r.cg.kernels), aten=aten, generic_paths=[dict(p) for p in r.cg.generic_paths])
        out.append(g)
    return out


def _compile(backend: str, variant: str, model):
    import torch

    mode = "reduce-overhead" if variant == "ro" else None
    if backend == "inductor":
        return torch.compile(model, dynamic=True, mode=mode)
    import ember  # noqa: F401  registers the backend from a source tree too

    dynamic = {"dynamic": True, "static": False, "ro": True}.get(variant)
    return torch.compile(model, backend="ember", dynamic=dynamic, mode=mode)


def _reserved(device: str) -> int:
    import torch

    return torch.cuda.memory_reserved() if device == "cuda" else 0


def recordings_of(records) -> dict:
    """ember's CUDA graph recordings now, by the symbols' values: {"s0=4, s1=128": {graph:
    its report (cudagraphs.py)}}."""
    out = {}
    for r in records:
        replay = getattr(r, "cuda_graphs", None)
        if replay is None:
            continue
        for rec in replay.recordings():
            key = ", ".join(f"{k}={v}" for k, v in rec["sizes"].items()) or "static"
            out.setdefault(key, {})[r.name] = {k: rec[k] for k in ("pool_growth", "pool_held", "static_inputs")}
    return out


def host_profile(fn, sync, calls: int = 10, top: int = 12) -> list[dict]:
    """Where the host's time of `calls` synchronized calls of `fn` goes: the functions with the
    most time of their own (cProfile, which slows Python calls down: shares, not latencies),
    in us per call, the sync's wait included as its own entry."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
        sync()
    prof.disable()
    stats = pstats.Stats(prof).stats
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [{"function": f"{os.path.basename(file)}:{line}({name})" if file != "~" else name,
             "calls": nc // calls, "own_us": round(1e6 * tt / calls, 1), "cum_us": round(1e6 * ct / calls, 1)}
            for (file, line, name), (_, nc, tt, ct, _) in rows]


def device_profile(fn, sync, calls: int = 5, top: int = 10) -> dict:
    """The device's time per call of `fn` under torch.profiler: in all, and the kernels with
    the most (CUDA graph replays included: their kernels are traced on the device)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        sync()
    # The device's own events (kernels, copies): an op's event counts its kernels' time too.
    kernels = [e for e in prof.key_averages()
               if e.device_type != torch.autograd.DeviceType.CPU and e.self_device_time_total > 0]
    kernels.sort(key=lambda e: -e.self_device_time_total)
    return {"device_us": round(sum(e.self_device_time_total for e in kernels) / calls, 1),
            "kernels": round(sum(e.count for e in kernels) / calls, 1),
            "top": [{"name": e.key[:120], "calls": round(e.count / calls, 1),
                     "us": round(e.self_device_time_total / calls, 1)} for e in kernels[:top]]}


def _cuda_graph_counts(backend: str) -> dict:
    if backend != "ember":
        return {}
    import ember

    st = ember.stats()
    return {"recordings": st["cuda_graph_recordings"], "replays": st["cuda_graph_replays"]}


class _ReplayTimer:
    """While active, the host time of each call into ember's CUDA graph replays (the
    CudaGraphReplay of each record's runner, timed around)."""

    def __init__(self, records):
        self._replays = [r.cuda_graphs for r in records if getattr(r, "cuda_graphs", None) is not None]
        self.times = []

    def __enter__(self):
        for replay in self._replays:
            runner, times = replay._runner, self.times

            def timed(args, replay=replay):
                t0 = time.perf_counter()
                try:
                    return replay(args)
                finally:
                    times.append(1000 * (time.perf_counter() - t0))

            runner._replay = timed
        return self

    def __exit__(self, *exc):
        for replay in self._replays:
            replay._runner._replay = replay

    def median_ms(self):
        return round(statistics.median(self.times), 4) if self.times else None


def run_variant(spec, backend, variant, model, entry, shapes, checker, sync, row_base) -> dict:
    import torch

    row = {**row_base, "backend": backend, "variant": variant, "shapes": []}
    torch._dynamo.reset()
    if backend == "ember":
        import ember

        ember.reset_stats()
    records = measure._EmberRecords(backend == "ember")
    fn = None
    marks = []
    shape_of = []  # per ember graph, the index of the shape whose call compiled it
    with records:
        before = counts(backend) if variant != "eager" else {}
        t_compile = time.perf_counter()
        if variant not in ("eager", "static"):
            fn = _compile(backend, variant, model)
        for i, shape in enumerate(shapes):
            inputs = make_inputs(entry, shape, spec["device"], spec["size"])
            reserved_before = _reserved(spec["device"]) if variant == "ro" else 0
            recorded_before = recordings_of(records.records) if variant == "ro" else {}
            if variant == "mark":
                for t in _tensor_inputs(inputs):
                    torch._dynamo.mark_dynamic(t, 0)
                    if t.dim() > 1:
                        torch._dynamo.mark_dynamic(t, 1)
            if variant == "static":
                torch._dynamo.reset()
                t_compile = time.perf_counter()
                fn = _compile(backend, variant, model)
            call = (lambda: registry.call(model, inputs)) if variant == "eager" else (lambda: registry.call(fn, inputs))
            t0 = t_compile if (i == 0 or variant == "static") else time.perf_counter()
            with torch.no_grad():
                got = [t.detach().clone() for t in registry.tensors(call())]
            sync()
            s = {"batch": shape[0], "seq": shape[1], "first_call_s": round(time.perf_counter() - t0, 4)}
            if variant != "eager":
                s.update(checker.check(shape, inputs, got))
            del got

            def step():
                with torch.no_grad():
                    return call()
            def eager_step():
                with torch.no_grad():
                    return registry.call(model, inputs)
            if backend == "ember" and variant != "eager":
                # ATen results one call copies because their strides (or dtype) differ from
                # what the kernels were compiled to read: an extra copy per call.
                import ember

                copies = ember.stats()["result_copies"]
                step()
                s["result_copies_per_call"] = ember.stats()["result_copies"] - copies
            graphs_before = _cuda_graph_counts(backend)
            with _ReplayTimer(records.records if variant == "ro" else []) as replay_time:
                s.update(steady_ms(step, sync, spec["warmup"], spec["iters"], spec["max_shape_s"],
                                   paired=eager_step if variant != "eager" and spec.get("paired", True) else None))
            if variant == "ro":
                # What the timed calls did: replays only, once the shape's recording exists; and the
                # host's time inside ember's replays (the rest of issue_ms is Dynamo's frame and the model's).
                s["cuda_graphs_in_timing"] = {k: v - graphs_before.get(k, 0)
                                              for k, v in _cuda_graph_counts(backend).items()}
                s["replay_host_ms"] = replay_time.median_ms()
                s["host_profile"] = host_profile(step, sync)
                # The shape's first call runs as usual, its second records: both are behind us.
                s["reserved_growth"] = _reserved(spec["device"]) - reserved_before
                s["recordings"] = {k: new for k, graphs in recordings_of(records.records).items()
                                   if (new := {g: m for g, m in graphs.items() if g not in recorded_before.get(k, {})})}
            row["shapes"].append(s)
            if variant != "eager":
                marks.append(counts(backend))
                for r in records.records[len(shape_of):]:
                    shape_of.append(i)
            measure.emit({**row, "status": "running"})
            if spec["device"] == "cuda" and variant in ("static", "ro") and i == len(shapes) - 1:
                # Where the device's time goes at the last shape, per kernel (after the row is
                # out: a profiler failure leaves the timings).
                try:
                    s["device_profile"] = device_profile(step, sync)
                except Exception as e:
                    s["device_profile"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    if variant != "eager":
        # Counters: the first compile (after shape 1; "auto": after shape 2, its dynamic
        # recompile), then what shapes with batch > 1 added after it, then batch 1.
        settle = 1 if variant == "auto" and len(shapes) > 1 else 0
        multi = [i for i, s in enumerate(shapes) if s[0] > 1]
        last_multi = multi[-1] if multi else settle
        row["counters_first_compile"] = delta(marks[settle], before)
        row["new_after_first_compile"] = delta(marks[last_multi], marks[settle]) if last_multi >= settle else {}
        if len(shapes) - 1 > last_multi:
            row["added_by_batch_1"] = delta(marks[-1], marks[last_multi])
        row["fallbacks_by_reason"] = marks[-1].get("fallbacks_by_reason")
    if backend == "ember" and variant != "eager":
        row["graphs"] = graph_summary(records.records)
        for g, i in zip(row["graphs"], shape_of):
            g["compiled_at"] = f"{shapes[i][0]}x{shapes[i][1]}"
            g["shape_index"] = i
    row["status"] = "ok"
    measure.emit(row)
    return row


def interleaved(spec, model, entry, shapes, sync, base) -> dict:
    """Eager, ember static and ember dynamic=True timed call by call in rounds (each round: at
    every shape, one call of each), so that all three see the same load: on a loaded machine
    (the CPU of a shared VM) the only comparison of variants that holds. A fourth,
    dynamic_sf, is dynamic=True traced with Dynamo's specialize_float: dynamic=True
    otherwise makes Dynamo pass every float attribute of the model (eps, dropout p,
    attention scale) as a 0-d tensor it makes and guards per call, for every backend;
    dynamic_sf over static is what the symbolic sizes cost without that. Each compiled
    variant is a copy of the model (Dynamo keeps a cache entry per instance); ember's kernel
    cache makes the compiles after the variants' own cheap. Shapes with batch 1 are left out.
    spec["clock"] "cpu" times the calling thread's CPU time (with one thread, all of a
    call's work): time the machine gives other processes is not counted."""
    import torch

    clock = time.thread_time if spec.get("clock") == "cpu" else time.perf_counter

    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 4 * len(shapes) + 8)
    shapes = [sh for sh in shapes if sh[0] > 1]
    inputs = {sh: make_inputs(entry, sh, spec["device"], spec["size"]) for sh in shapes}
    fns = {("eager", sh): model for sh in shapes}
    dynamic = _compile("ember", "dynamic", copy.deepcopy(model))
    dynamic_sf = _compile("ember", "dynamic", copy.deepcopy(model))
    for sh in shapes:
        fns[("static", sh)] = _compile("ember", "static", copy.deepcopy(model))
        fns[("dynamic", sh)] = dynamic
        fns[("dynamic_sf", sh)] = dynamic_sf
    times = {k: [] for k in fns}
    t_end = time.perf_counter() + spec["max_shape_s"] * 4 * len(shapes)
    with torch.no_grad():
        for k, fn in fns.items():
            with torch._dynamo.config.patch(specialize_float=k[0] == "dynamic_sf" or
                                            torch._dynamo.config.specialize_float):
                for _ in range(max(spec["warmup"], 1)):  # the first call traces
                    registry.call(fn, inputs[k[1]])
        sync()
        done = times[next(iter(fns))]
        while len(done) < 2 * spec["iters"] and (time.perf_counter() < t_end or len(done) < 3):
            for k, fn in fns.items():
                t0 = clock()
                registry.call(fn, inputs[k[1]])
                sync()
                times[k].append(1000 * (clock() - t0))
    row = {**base, "backend": "ember", "variant": "interleaved", "shapes": [], "status": "ok",
           "clock": spec.get("clock") or "wall"}
    for sh in shapes:
        med = {v: statistics.median(times[(v, sh)]) for v in ("eager", "static", "dynamic", "dynamic_sf")}
        low = {v: min(times[(v, sh)]) for v in ("eager", "static", "dynamic", "dynamic_sf")}
        row["shapes"].append({"batch": sh[0], "seq": sh[1], "rounds": len(times[("eager", sh)]),
                              **{f"{v}_ms": round(m, 4) for v, m in med.items()},
                              **{f"{v}_min_ms": round(m, 4) for v, m in low.items()},
                              "dynamic_over_static": round(med["dynamic"] / med["static"], 4),
                              "dynamic_over_static_min": round(low["dynamic"] / low["static"], 4),
                              "dynamic_sf_over_static": round(med["dynamic_sf"] / med["static"], 4)})
    measure.emit(row)
    return row


def main(spec: dict):
    """Measures one (model, backend) process as dynamic_llm.py's runner specifies it."""
    import torch

    if spec["device"] == "cpu" and spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    sync = torch.cuda.synchronize if spec["device"] == "cuda" else (lambda: None)
    dtype = getattr(torch, DTYPES[spec["dtype"]])
    entry = registry.get(spec["model"])
    base = {k: spec.get(k) for k in ("model", "device", "dtype", "size", "threads")}
    t0 = time.perf_counter()
    model, _ = entry.build(spec["device"], dtype, spec["size"])
    model.eval()
    limit = max_sequence(model)
    shapes = [(b, min(s, limit) if limit else s) for b, s in spec["shapes"]]
    shapes = list(dict.fromkeys(shapes))  # a cap may make two shapes one
    base.update(build_s=round(time.perf_counter() - t0, 3), max_sequence=limit,
                params_m=round(sum(p.numel() for p in model.parameters()) / 1e6, 2))
    checker = Checker(model, DTYPES[spec["dtype"]])
    variants = (["dynamic"] + (["ro"] if "ro" in spec["variants"] else [])) if spec["backend"] == "inductor" else \
        [v for v in ORDER if v == "eager" or v in spec["variants"]]
    for variant in variants:
        try:
            run_variant(spec, spec["backend"], variant, model, entry, shapes, checker, sync, base)
        except Exception as e:  # a variant that fails leaves the others measured
            import traceback

            measure.emit({**base, "backend": spec["backend"], "variant": variant, "status": "error",
                          "error": f"{type(e).__name__}: {str(e)[:600]}", "traceback": traceback.format_exc()[-2000:]})
    if spec["backend"] == "ember" and spec.get("interleaved"):
        interleaved(spec, model, entry, shapes, sync, base)
