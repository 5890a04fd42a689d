"""Counters of what ember and Dynamo did in this process: ember.stats(), ember.reset_stats().

    ember.reset_stats()
    model(x)                      # compiled with ember
    s = ember.stats()
    assert s["codegen_runs"] == 0 and s["recompiles"] == 0   # nothing compiled again

The compiler's counts (graphs, code generations, C compiler runs, cache hits) come from
the C++ core, counted where the work happens (csrc/runtime/compiled_graph.h,
CompileCounts). The rest is counted by the backend glue: graphs handed to ember by
AOTAutograd, graphs that run eagerly, and the Dynamo compilations that reached ember:
a compile id whose per-frame count is above 0 is a recompilation.
"""
from __future__ import annotations

import threading

from . import _core

_lock = threading.Lock()
_graphs: dict[str, int] = {}          # AOTAutograd graphs given to ember, by kind
_fallbacks: dict[str, int] = {}       # graphs running eagerly, by why
_compile_seconds = [0.0]              # time in ember's compile_graph (import + C++, C compiler), all graphs
_loaded: dict[str, int] = {}          # graphs rebuilt from AOTAutograd cache entries, by kind
_load_seconds = [0.0]                 # time rebuilding them (C++ pipeline, kernel cache)
# Dynamo graphs ember looked up in torch's AOTAutogradCache, by outcome (hit, miss, bypass),
# and graphs ember handed to it to write.
_aot: dict[str, int] = {}
# Dynamo compilations that reached ember: [first compilations of a frame, recompilations].
# Counted per call, not by compile id: torch._dynamo.reset() restarts Dynamo's ids.
_dynamo = [0, 0]
# Dynamo graphs by who traced them to ATen: "ember" (aten_trace.py), "cache" (ember's
# graph cache: not traced), "AOTAutograd"; and the seconds ember's tracing took.
_front_end: dict[str, int] = {}
_trace_seconds = [0.0]
# ember's graph cache (graph_cache.py): lookups by outcome (hit, miss) and graphs written.
_graph_cache: dict[str, int] = {}
# torch's precompile (precompile.py): artifacts saved, graphs loaded from one, kernels
# installed into the kernel cache from one.
_precompile: dict[str, int] = {}
# Graphs compiled or loaded with symbolic sizes, and the generic paths the compiler found
# in them (csrc/generic_paths.h: where a symbol made a kernel more general than static sizes).
_symbolic = [0, 0]
# mode="reduce-overhead" (cudagraphs.py): [CUDA graph recordings made, replays, bytes of
# device memory the recordings took].
_cuda_graphs = [0, 0, 0]
# max-autotune (cuda.py): kernel functions whose launch was chosen by timing its
# variants ("timed") or taken from the cache ("cached"), and the seconds timing took.
_autotune: dict[str, int] = {}
_autotune_seconds = [0.0]
# ATen results a runner converted or copied on a call because they differ from what the
# kernels were compiled to read (runner.py, _conform_result): its dtype, device or strides.
_result_copies = [0]


def count_graph(kind: str, seconds: float) -> None:
    with _lock:
        _graphs[kind] = _graphs.get(kind, 0) + 1
        _compile_seconds[0] += seconds


def add_compile_seconds(seconds: float) -> None:
    """The C compiler's run of a graph compiled in the background, added when it ends."""
    with _lock:
        _compile_seconds[0] += seconds


def count_loaded(kind: str, seconds: float) -> None:
    with _lock:
        _loaded[kind] = _loaded.get(kind, 0) + 1
        _load_seconds[0] += seconds


def count_front_end(which: str, seconds: float = 0.0) -> None:
    with _lock:
        _front_end[which] = _front_end.get(which, 0) + 1
        _trace_seconds[0] += seconds


def count_graph_cache(outcome: str) -> None:
    """'hit', 'miss', or 'saved_graphs'."""
    with _lock:
        _graph_cache[outcome] = _graph_cache.get(outcome, 0) + 1


def count_precompile(outcome: str, n: int = 1) -> None:
    """'saved', 'loaded', 'kernels_installed' or 'cubins_seeded'."""
    with _lock:
        _precompile[outcome] = _precompile.get(outcome, 0) + n


def count_aot_save() -> None:
    with _lock:
        _aot["saved_graphs"] = _aot.get("saved_graphs", 0) + 1


def aot_cache_counts() -> dict:
    """torch's AOTAutogradCache counters (hit, miss, bypass), to diff around one lookup."""
    from torch._dynamo.utils import counters

    c = counters["aot_autograd"]
    return {k: c.get(f"autograd_cache_{k}", 0) for k in ("hit", "miss", "bypass")}


def count_aot_lookup(before: dict) -> None:
    """The outcome of ember's AOTAutogradCache lookup since `before` (aot_cache_counts())."""
    after = aot_cache_counts()
    with _lock:
        for k, v in after.items():
            if v > before.get(k, 0):
                _aot[k] = _aot.get(k, 0) + v - before.get(k, 0)


def count_fallback(why: str) -> None:
    """why: 'unsupported' (the IR cannot express the graph), 'error' (a compile error,
    with fallback_on_error), or 'runtime' (an ATen result contradicted the metadata)."""
    with _lock:
        _fallbacks[why] = _fallbacks.get(why, 0) + 1


def count_symbolic(cg) -> None:
    """A compiled graph: counted when it has symbols, with its generic paths."""
    if not getattr(cg, "num_symbols", 0):
        return
    with _lock:
        _symbolic[0] += 1
        _symbolic[1] += len(cg.generic_paths)


def count_cuda_graph(recorded: bool, nbytes: int = 0) -> None:
    """A CUDA graph recording made (recorded), taking `nbytes` of device memory, or replayed."""
    with _lock:
        _cuda_graphs[0 if recorded else 1] += 1
        _cuda_graphs[2] += nbytes


def count_autotune(timed: int, cached: int, seconds: float = 0.0) -> None:
    with _lock:
        for k, v in (("timed", timed), ("cached", cached)):
            if v:
                _autotune[k] = _autotune.get(k, 0) + v
        _autotune_seconds[0] += seconds


def count_result_copy() -> None:
    """An ATen result made what the kernels read on a call (converted, moved or copied)."""
    with _lock:
        _result_copies[0] += 1


def count_dynamo_compile() -> None:
    """Called once per graph Dynamo hands to ember's backend."""
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    if cid is None or cid.frame_id is None:
        return  # called outside Dynamo (the fuzzer calls the backend directly)
    with _lock:
        _dynamo[1 if cid.frame_compile_id else 0] += 1


def stats() -> dict:
    """Totals since the process started or the last reset_stats():

    graphs_compiled      graphs AOTAutograd gave ember (forward, backward, inference)
    graphs_by_kind       the same, by kind
    graphs_loaded        graphs rebuilt from torch's AOTAutogradCache instead (a warm start:
                         no AOTAutograd, no import; python/ember/caches/aot_cache.py)
    aot_cache            Dynamo graphs looked up there: {"hit", "miss", "bypass"}, and
                         "saved_graphs": ember graphs written to it
    front_end            Dynamo graphs by who traced them to ATen: {"ember", "cache" (ember's
                         graph cache, not traced), "AOTAutograd"}
    trace_seconds        time in ember's own tracing (aten_trace.py)
    graph_cache          ember's graph cache (graph_cache.py): {"hit", "miss"} lookups and
                         "saved_graphs" written
    codegen_runs         C source generations (the core's generate_c)
    c_compiler_runs      system C compiler invocations
    memory_cache_hits    graphs whose kernels were already loaded in this process
    disk_cache_hits      graphs whose kernels came from the disk cache
    eager_fallbacks      graphs that run eagerly (eager_fallbacks_by_reason says why)
    symbolic_graphs      graphs compiled (or loaded) with symbolic sizes: one artifact for many shapes
    generic_paths        in those, the places a symbol made the compiled code more general than the
                         same graph at static sizes gets (an op left to ATen, a kernel without its
                         vector or tiled form, fusion kept apart); ember.explain names each
    dynamo_frames        Python frames Dynamo compiled with ember (first compilations)
    dynamo_compiles      Dynamo compilations that reached ember (first ones + recompiles)
    recompiles           of those, recompilations: a frame compiled again after a guard failed
    compile_seconds      time inside ember's compile of each graph (import + C++ pipeline)
    load_seconds         time rebuilding the loaded graphs (C++ pipeline, kernel cache)
    cuda_graph_recordings  mode="reduce-overhead": CUDA graph recordings made (cudagraphs.py)
    cuda_graph_replays   and calls that replayed one
    cuda_graph_bytes     device memory those recordings took when made: the growth of their
                         graph's shared memory pool, and their static input buffers
                         (ember.explain(mode="reduce-overhead") lists each recording)
    autotune             max-autotune on CUDA: kernel functions whose launch was chosen by
                         timing at the first call ("timed") or taken from the cache ("cached")
    autotune_seconds     time the first calls spent timing launch variants
    result_copies        ATen results a call converted or copied because their dtype, device or
                         strides differ from what the kernels were compiled to read (an extra
                         copy per call while it happens; a graph with symbols plans strides from
                         its sizes, and ATen may choose other ones at some sizes)
    precompile           torch's precompile API: artifacts "saved", graphs "loaded" from one,
                         "kernels_installed" into the kernel cache from one, and its
                         "cubins_seeded" into the process's memory (a CUDA graph's)
    """
    core = _core.compile_counts()
    with _lock:
        return {
            "graphs_compiled": sum(_graphs.values()),
            "graphs_by_kind": dict(_graphs),
            "graphs_loaded": sum(_loaded.values()),
            "aot_cache": dict(_aot),
            "front_end": dict(_front_end),
            "trace_seconds": round(_trace_seconds[0], 6),
            "graph_cache": dict(_graph_cache),
            "codegen_runs": core["codegen_runs"],
            "c_compiler_runs": core["c_compiler_runs"],
            "memory_cache_hits": core["memory_cache_hits"],
            "disk_cache_hits": core["disk_cache_hits"],
            "eager_fallbacks": sum(_fallbacks.values()),
            "eager_fallbacks_by_reason": dict(_fallbacks),
            "symbolic_graphs": _symbolic[0],
            "generic_paths": _symbolic[1],
            "dynamo_frames": _dynamo[0],
            "dynamo_compiles": _dynamo[0] + _dynamo[1],
            "recompiles": _dynamo[1],
            "compile_seconds": round(_compile_seconds[0], 6),
            "load_seconds": round(_load_seconds[0], 6),
            "cuda_graph_recordings": _cuda_graphs[0],
            "cuda_graph_replays": _cuda_graphs[1],
            "cuda_graph_bytes": _cuda_graphs[2],
            "autotune": dict(_autotune),
            "autotune_seconds": round(_autotune_seconds[0], 6),
            "result_copies": _result_copies[0],
            "precompile": dict(_precompile),
        }


def reset_stats() -> None:
    _core.reset_compile_counts()
    with _lock:
        _graphs.clear()
        _fallbacks.clear()
        _loaded.clear()
        _aot.clear()
        _front_end.clear()
        _graph_cache.clear()
        _trace_seconds[0] = 0.0
        _load_seconds[0] = 0.0
        _cuda_graphs[0] = _cuda_graphs[1] = _cuda_graphs[2] = 0
        _symbolic[0] = _symbolic[1] = 0
        _autotune.clear()
        _autotune_seconds[0] = 0.0
        _result_copies[0] = 0
        _precompile.clear()
        _dynamo[0] = _dynamo[1] = 0
        _compile_seconds[0] = 0.0


def stats_delta(before: dict, after: dict) -> dict:
    """after - before for the numeric counters (dicts of counts subtract key by key)."""
    out = {}
    for k, v in after.items():
        b = before.get(k)
        if isinstance(v, dict):
            out[k] = {kk: vv - (b or {}).get(kk, 0) for kk, vv in v.items() if vv - (b or {}).get(kk, 0)}
        elif isinstance(v, float):
            out[k] = round(v - (b or 0.0), 6)
        else:
            out[k] = v - (b or 0)
    return out
