"""ember.explain: what torch.compile and ember did with a function or module.

    report = ember.explain(model, x)                        # compile with ember, call once
    report = ember.explain(model, x, calls=[(x2,)], measure=True)
    print(report)              # readable text
    report.to_dict()           # JSON-able

The report has, in order: the counters of ember.stats() over the explain run (graphs,
code generations, C compiler runs, cache hits, eager fallbacks, Dynamo compilations
and recompilations), the graph breaks (Dynamo's reason and the user's source
line), the recompilations (the guard that failed, and where its value came from), per
graph ember's fusion plan (kernels and the ATen ops fused into each, the ops left to
ATen and why, compile time by phase, cache hit or miss), whether its sizes are static or
symbolic (each symbol: where Dynamo read it, its hint, the range its guards admit) and
where a symbol made the code more general than static sizes would (csrc/generic_paths.h),
with mode="reduce-overhead" its CUDA graph recordings and the memory each took, and with
measure=True the estimated speedup next to the measured one (ember/tools/estimate.py).
explain(..., dynamic=True) compiles as torch.compile(dynamic=True) does.
"""
from __future__ import annotations

import linecache
import os
import re
import time

import torch

from . import counters as _stats
from . import records as _records
from .backend import make_backend
from .compile_events import BACKGROUND_PHASES
from .frontend import graph_source
from .runtime import prepared as _prepared


def _op_name(imported, node_id):
    op = imported.node_ops[node_id]
    return "placeholder" if op == "input" else op


def symbols_of(record) -> list[dict]:
    """The graph's symbols: name (s0, ...), hint, where Dynamo read the size, and the range
    its guards admit (None: unbounded); [] for a static graph."""
    cg, imported = record.cg, record.imported
    if cg is not None:
        named = list(cg.symbols)
    else:
        header = re.match(r"graph\(([^)]*)\)", imported.text) if imported is not None else None
        named = [(n.strip(), int(h)) for n, h in (p.split("=") for p in header.group(1).split(","))] if header else []
    info = list(getattr(imported, "symbol_info", None) or [])
    out = []
    for k, (name, hint) in enumerate(named):
        source, lo, hi = info[k] if k < len(info) else (None, None, None)
        out.append({"name": name, "hint": hint, "source": source, "min": lo, "max": hi})
    return out


def _graph_dict(record, frame: dict | None, step_us: dict | None = None) -> dict:
    """The graph as data; with `step_us` (explain's details: each kernel step's measured
    time) also its fusion plan, generated code and kernel steps with bytes and time."""
    d = {"name": record.name, "source": record.source.to_dict(), "label": record.source.label(), "frame": frame,
         "fallback_reason": record.fallback_reason, "kernels": [], "externs": [], "steps": 0,
         "times_s": {k: round(v, 6) for k, v in record.times.items()}, "cache": None,
         "background_phases": [p for p in BACKGROUND_PHASES if record.background and p in record.times],
         "loaded": record.loaded, "front_end": record.front_end, "symbols": symbols_of(record),
         "generic_paths": [dict(p) for p in record.cg.generic_paths] if record.cg is not None else [],
         "cuda_graphs": _cuda_graphs_of(record)}
    cg, imported = record.cg, record.imported
    if cg is None:
        if imported is not None:
            d["ops"] = dict(imported.op_counts)
        return d
    tuned = {t["kernel"]: t for t in getattr(cg, "autotune_decisions", [])}
    for k in cg.kernels:
        ops = [_op_name(imported, o) for o in k["origins"]]
        entry = {"name": k["name"], "ops": ops, "function": k.get("function", k["name"])}
        if "rows" in k:  # a CPU kernel
            entry.update(rows=k["rows"], work_per_row=k["work_per_row"])
        else:  # a CUDA kernel: its shape and launch (csrc/schedule/cuda/launch.h), and max-autotune's choice
            entry["launch"] = f"{k['shape']} grid {k['grid']} x {k['block']}"
            if entry["function"] in tuned:
                entry["autotune"] = _autotune_text(tuned[entry["function"]])
        d["kernels"].append(entry)
    for e in cg.externs:
        d["externs"].append({"op": e["op"], "reason": e["reason"]})
    d["prepared"] = _prepared.describe(record.prepared, record.input_names)
    d["steps"] = len(cg.steps)
    d["cache"] = cg.cache_status
    d["cache_note"] = cg.cache_note
    d["ops"] = dict(imported.op_counts)
    if step_us is not None:
        from .tools.kernel_times import kernel_steps

        d.update(fusion_plan=cg.schedule_text, code=cg.source,
                 code_language="CUDA C" if "__global__" in cg.source else "C",
                 kernel_steps=[{**s, "us": step_us.get(s["label"])} for s in kernel_steps(cg)])
    return d


def _cuda_graphs_of(record) -> dict | None:
    """mode="reduce-overhead": the graph's CUDA graph recordings and the memory each took
    (cudagraphs.py), or None where it records none."""
    replay = record.cuda_graphs
    if replay is None:
        return None
    reserved, allocated = replay.pool_usage()
    return {"recordings": replay.recordings(), "pool_reserved": reserved, "pool_allocated": allocated,
            "off_reason": replay.off_reason()}


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def _autotune_text(t: dict) -> str:
    """max-autotune's choice for a kernel function: the launch kept, against the default."""
    chosen = t["choices"][t["chosen"]]
    if t["cached"]:
        return f"autotune: {chosen} (cached)"
    us = t["us"]
    return f"autotune: {chosen} {us[t['chosen']]:.1f} us, default {us[0]:.1f} us, of {len(us)} candidates"


class Report:
    def __init__(self, graphs: list[dict], first_call_s: float, graph_breaks: dict | None,
                 recompiles: list[dict] | None = None, estimate: dict | None = None, stats: dict | None = None):
        self.graphs = graphs
        self.stats = stats or {}
        self.first_call_s = first_call_s
        self.graph_breaks = graph_breaks
        self.recompiles = recompiles or []
        self.estimate = estimate
        self.device = None  # explain(details=True): the device and its copy bandwidth

    def to_dict(self) -> dict:
        return {"graphs": self.graphs, "first_call_s": round(self.first_call_s, 6), "graph_breaks": self.graph_breaks,
                "recompiles": self.recompiles, "estimate": self.estimate, "stats": self.stats, "device": self.device}

    @property
    def kernels(self):
        return [k for g in self.graphs for k in g["kernels"]]

    @property
    def externs(self):
        return [e for g in self.graphs for e in g["externs"]]

    def __str__(self) -> str:
        frames = {g["frame"]["compile_id"].split("/")[0] for g in self.graphs if g.get("frame")}
        lines = [f"ember.explain: {len(self.graphs)} graph(s)"
                 + (f" from {len(frames)} Python frame(s)" if frames else "")
                 + f", first call {self.first_call_s:.3f} s"]
        if self.stats:
            lines.append("counters: " + format_stats(self.stats))
        if self.graph_breaks:
            lines += ["", f"graph breaks: {self.graph_breaks['count']}"]
            for i, b in enumerate(self.graph_breaks.get("breaks", []), 1):
                lines.append(f"  {i}. {_where(b)}")
                lines += [f"     {ln}" for ln in _reason_lines(b["reason"])]
            if not self.graph_breaks.get("breaks"):
                lines += [f"  - {r}" for r in self.graph_breaks.get("reasons", [])]
        if self.recompiles:
            lines += ["", f"recompilations: {len(self.recompiles)}"]
            for i, r in enumerate(self.recompiles, 1):
                lines.append(f"  {i}. {r['label']} compiled again as "
                             f"{r['compile_id']}, because a guard failed:")
                for f in r["failures"]:
                    lines.append(f"     [{f['entry']}] {f['guard']}")
                    if f.get("source"):
                        lines.append(f"         from {_where(f['source'])}")
        for g in self.graphs:
            lines.append("")
            frame = g.get("frame")
            dynamo = f", Dynamo frame {frame['compile_id']}" if frame else ""
            lines.append(f"graph {g['name']}: {g['label']}{dynamo}" + (f"; cache {g['cache']}" if g["cache"] else ""))
            if g["fallback_reason"]:
                lines.append(f"  runs eagerly: {g['fallback_reason']}")
                lines += sizes_lines(g)
                continue
            if g.get("loaded"):
                lines.append(f"  loaded from the {g['front_end']} in {format_times(g)}")
            else:
                lines.append(f"  traced to ATen by {g['front_end']}; compile {format_times(g)}")
            lines += sizes_lines(g)
            lines.append(f"  {len(g['kernels'])} ember kernel(s):")
            width = max([12] + [len(k["name"]) for k in g["kernels"]])  # descriptive names vary in length
            for k in g["kernels"]:
                ops = _summarize(k["ops"]) or "layout copy (for an ATen op's preferred layout)"
                # A kernel whose code differs from an earlier one's only in its buffers runs
                # that kernel's compiled function (the C compiler saw it once).
                shared = f" [code of {k['function']}]" if k.get("function", k["name"]) != k["name"] else ""
                where = f"rows={k['rows']:<8}" if "rows" in k else f"{k['launch']:<30}"
                tune = f" ({k['autotune']})" if k.get("autotune") else ""
                lines.append(f"    {k['name']:<{width}} {where} {ops}{shared}{tune}")
            lines.append(f"  {len(g['externs'])} ATen call(s):")
            for e in g["externs"]:
                lines.append(f"    {e['op']:<40} {e['reason']}")
            lines += cuda_graphs_lines(g)
            if g.get("prepared"):
                held = sum(p["held_bytes"] for p in g["prepared"])
                lines.append(f"  {len(g['prepared'])} prepared weight(s), {_size(held)} held "
                             "(made at a call, reused while the parameter is unchanged):")
                for p in g["prepared"]:
                    shape = "x".join(str(s) for s in p["shape"])
                    lines.append(f"    {p['name'] or 'input %d' % p['input']:<40} {p['dtype']}[{shape}] {p['form']}, "
                                 f"{_size(p['held_bytes'])}, prepared {p['preparations']} time(s)")
        if self.estimate:
            from .tools.estimate import format_estimate

            lines += [""] + format_estimate(self.estimate)
        return "\n".join(lines)

    __repr__ = __str__


def sizes_lines(g: dict) -> list[str]:
    """'sizes: static', or the symbols and the generic paths they caused."""
    syms = g.get("symbols") or []
    if not syms:
        return ["  sizes: static"]

    def one(s):
        where = f" = {s['source']}" if s.get("source") else ""
        hi = "inf" if s.get("max") is None else s["max"]
        span = f", {s['min']}..{hi}" if s.get("min") is not None else ""
        return f"{s['name']}{where} (hint {s['hint']}{span})"

    lines = ["  sizes: symbolic, one compile for every size the guards admit: " + ", ".join(one(s) for s in syms)]
    paths = g.get("generic_paths") or []
    if paths:
        lines.append(f"  {len(paths)} generic path(s) because of a symbol (what static sizes compile better):")
        lines += [f"    {p['kernel'] or 'graph':<12} {p['what']}" for p in paths]
    elif not g.get("fallback_reason"):
        lines.append("  no generic path: the kernels are those of the same graph at static sizes")
    return lines


def cuda_graphs_lines(g: dict) -> list[str]:
    """mode="reduce-overhead": the graph's recordings, one line each, with their memory."""
    cgs = g.get("cuda_graphs")
    if cgs is None:
        return []
    if cgs["off_reason"]:
        return [f"  CUDA graphs: none, calls run as usual: {cgs['off_reason']}"]
    recs = cgs["recordings"]
    if not recs:
        return ["  CUDA graphs: none recorded yet (a size records at its second call)"]
    lines = [f"  {len(recs)} CUDA graph recording(s) sharing one memory pool: {_size(cgs['pool_reserved'])} "
             f"reserved, {_size(cgs['pool_allocated'])} of it allocated (their outputs); each took when recorded:"]
    for r in recs:
        sizes = ", ".join(f"{k}={v}" for k, v in r["sizes"].items()) or "static sizes"
        lines.append(f"    {sizes:<24} pool +{_size(r['pool_growth'])} ({_size(r['pool_held'])} held), "
                     f"static inputs {_size(r['static_inputs'])}, {r['replays']} replay(s)")
    return lines


PHASE_NAMES = {"compile": "C compiler"}


def format_times(g: dict) -> str:
    """'12.3 ms in the backend (import 0.1 ms, ...); in the background: compile 640.0 ms, load
    4.0 ms': phases that ran on a thread of their own while compilation went on are not part
    of the time spent in the backend, and are not summed into it."""
    t, background = g["times_s"], g.get("background_phases", [])
    ms = lambda k: f"{PHASE_NAMES.get(k, k)} {1000 * t[k]:.1f} ms"  # noqa: E731
    inside = ", ".join(ms(k) for k in t if k != "total" and k not in background)
    text = f"{1000 * t.get('total', 0):.1f} ms" + (" in the backend" if background else "")
    text += f" ({inside})" if inside else ""
    if background:
        text += "; in the background: " + ", ".join(ms(k) for k in background)
    return text


def format_stats(s: dict) -> str:
    """ember.stats() (or a difference of two) on one line."""
    fallbacks = s.get("eager_fallbacks", 0)
    why = ", ".join(f"{k} {v}" for k, v in s.get("eager_fallbacks_by_reason", {}).items())
    loaded = f"{s['graphs_loaded']} loaded from a cache, " if s.get("graphs_loaded") else ""
    return (f"{s.get('graphs_compiled', 0)} graph(s) compiled, {loaded}{s.get('codegen_runs', 0)} code generation(s), "
            f"{s.get('c_compiler_runs', 0)} C compiler run(s), cache hits {s.get('memory_cache_hits', 0)} in memory / "
            f"{s.get('disk_cache_hits', 0)} on disk, {fallbacks} eager fallback(s)" + (f" ({why})" if why else "")
            + f"; Dynamo: {s.get('dynamo_compiles', 0)} compilation(s), {s.get('recompiles', 0)} recompilation(s)")


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def _where(src: dict) -> str:
    code = f": {src['code']}" if src.get("code") else ""
    fn = f" in {src['function']}" if src.get("function") else ""
    return f"{_short(src['file'])}:{src['line']}{fn}{code}"


def _reason_lines(reason: str) -> list[str]:
    """Dynamo's reason, without its developer context: the headline, explanation, first hint."""
    out, hints = [], 0
    for ln in (ln.strip() for ln in reason.splitlines()):
        if not ln:
            continue
        if ln.startswith("Developer debug context") or ln.startswith("For more details"):
            break
        if ln.startswith("Hint:"):
            hints += 1
            if hints > 1:
                continue
        out.append(ln)
    return out[:3]


def _summarize(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for o in ops:
        short = o.replace("aten.", "").replace(".default", "")
        counts[short] = counts.get(short, 0) + 1
    return ", ".join(f"{k}x{v}" if v > 1 else k for k, v in counts.items())


def _source(filename: str, line: int, function: str | None = None) -> dict:
    return {"file": filename, "line": line, "function": function,
            "code": linecache.getline(filename, line).strip() or None}


def _guard_failure(text: str) -> dict:
    """One of Dynamo's guard failure strings: '0/0: <guard>  # <code>  # <file:line> ...' and,
    for some guards, a 'User stack trace:' block naming where the guarded value was read."""
    head, _, rest = text.partition("\n")
    entry, _, guard = head.partition(": ")
    d = {"entry": entry.strip(), "guard": guard.split("  #")[0].strip() or guard.strip(), "text": text}
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', rest)
    if frames:
        f, ln, fn = frames[-1]
        d["source"] = _source(f, int(ln), fn)
    return d


class _CompileTracker:
    """Wraps a backend to learn, for every graph Dynamo compiles, its compile id, the Python
    frame it comes from and, for a recompilation, the guard failures that caused it."""

    def __init__(self, inner):
        self.inner = inner
        self.frames: list[dict] = []       # one per backend call, in order
        self.recompiles: list[dict] = []
        self._seen_failures: dict = {}

    def __call__(self, gm, example_inputs):
        from torch._dynamo.symbolic_convert import InstructionTranslator
        from torch._dynamo.utils import guard_failures
        from torch._guards import CompileContext

        compile_id = str(CompileContext.current_compile_id())
        tx = InstructionTranslator.current_tx()
        code = tx.f_code if tx is not None else None
        # Named after the user's code (module class, file:line), not the frame's code object,
        # which is torch's own wrapper when Dynamo compiles an nn.Module.
        source = graph_source.describe(gm, tx)
        frame = {"compile_id": compile_id, "label": source.label(), **source.to_dict()}
        self.frames.append(frame)
        new = []
        for key, reasons in guard_failures.items():
            seen = self._seen_failures.get(key, 0)
            if key is code:
                new = reasons[seen:]
            self._seen_failures[key] = len(reasons)
        if new and not compile_id.endswith("/0"):
            self.recompiles.append({**frame, "failures": [_guard_failure(r) for r in new]})
        return self.inner(gm, example_inputs)


def explain(fn, *example_inputs, options=None, graph_breaks=True, calls=(), measure=False,
            details=False, dynamic=None, mode=None) -> Report:
    """Compile `fn` with ember, call it on `example_inputs` (then on each tuple in `calls`),
    and report what happened. measure=True also times eager against ember and estimates
    the speedup (a few seconds). details=True (`ember report`) adds each graph's fusion
    plan and code, each kernel step's bytes and time under torch.profiler, and the device's
    copy bandwidth. `dynamic`: torch.compile's (True: symbolic sizes from the first call).
    `mode`: ember's (mode="reduce-overhead" lists each graph's CUDA graph recordings and the
    memory they took; a size records at its second call). Resets Dynamo's caches before and
    after."""
    torch._dynamo.reset()
    frame_of_record: dict = {}  # id(record) -> frame; a lazily compiled backward has none
    tracker = _CompileTracker(make_backend(mode, options))

    def tracked(gm, example_inputs_):
        start = len(records)
        out = tracker(gm, example_inputs_)
        for r in records[start:]:
            frame_of_record[id(r)] = tracker.frames[-1]
        return out

    stats_before = _stats.stats()
    est_counts = None
    with _records.recording() as records:  # every graph compiled or loaded in the block
        compiled = torch.compile(fn, backend=tracked, dynamic=dynamic)
        t0 = time.perf_counter()
        compiled(*example_inputs)
        first = time.perf_counter() - t0
        estimate = None
        if measure:
            # Before `calls` add cache entries: these graphs are the ones example_inputs run.
            from .tools.estimate import estimate_speedup

            first_graphs = [_graph_dict(r, frame_of_record.get(id(r))) for r in records]
            est_before = _stats.stats()
            estimate = estimate_speedup(fn, compiled, example_inputs, first_graphs)
            est_counts = _stats.stats_delta(est_before, _stats.stats())
            del records[len(first_graphs):]  # the estimate's own calibration graph
        step_us, device = {}, None
        if details:
            from .tools import kernel_times
            from .runtime.cuda import graph_device

            device = str(graph_device(example_inputs) or "cpu")
            compiled(*example_inputs)  # a graph compiled in the background has its kernels now
            step_us = kernel_times.profile_steps(compiled, example_inputs, list(records), device=device)
        for args in calls:
            compiled(*args)
    counters = _stats.stats_delta(stats_before, _stats.stats())
    if est_counts:  # the estimate's calibration graph is not the user's
        counters = _stats.stats_delta(est_counts, counters)
    graphs = [_graph_dict(r, frame_of_record.get(id(r)), step_us.get(r.name, {}) if details else None)
              for r in records]
    breaks = _graph_breaks(fn, example_inputs) if graph_breaks else None
    torch._dynamo.reset()
    if estimate is not None and breaks is not None:
        estimate["graph_breaks"] = breaks["count"]
    report = Report(graphs, first, breaks, tracker.recompiles, estimate, counters)
    if details:
        from .tools.kernel_times import copy_bandwidth_gbs

        report.device = {"name": device, "copy_gbs": copy_bandwidth_gbs(device)}
    return report


def _graph_breaks(fn, example_inputs) -> dict:
    try:
        torch._dynamo.reset()
        ex = torch._dynamo.explain(fn)(*example_inputs)
    except Exception as e:  # explain is diagnostics; never fail the report for it
        return {"count": None, "reasons": [f"torch._dynamo.explain failed: {e}"], "breaks": []}
    finally:
        torch._dynamo.reset()
    breaks = []
    for b in ex.break_reasons:
        stack = list(b.user_stack or [])
        src = _source(stack[-1].filename, stack[-1].lineno, stack[-1].name) if stack else {}
        if stack and stack[-1].line:
            src["code"] = stack[-1].line.strip()
        breaks.append({**src, "reason": str(b.reason)})
    return {"count": ex.graph_break_count, "reasons": [str(b.reason) for b in ex.break_reasons], "breaks": breaks}


def last_compile_stats() -> dict:
    """Totals over every graph ember compiled in this process."""
    summaries = _records.summaries()
    return {
        "graphs": len(summaries),
        "sources": [f"{s['name']}: {s['source']}" for s in summaries],
        "backend_seconds": sum(s["times"].get("total", 0.0) for s in summaries),
        "compile_seconds": sum(s["times"].get("compile", 0.0) for s in summaries),
        "cache": [s["cache"] for s in summaries],
        "kernels": sum(s["kernels"] for s in summaries),
        "cache_notes": [s["cache_note"] for s in summaries if s["cache_note"]],
    }
