"""The torch.compile backend: Dynamo graph -> ATen graph(s) -> ember's C++ compiler.

`torch.compile(model, backend="ember")` finds `ember_backend` through the
`torch_dynamo_backends` entry point. An inference graph (no autograd, no input
mutation) is traced to ATen by ember itself (aten_trace.py) and, with static sizes, kept
in ember's graph cache (graph_cache.py); every other graph goes through AOTAutograd, which traces
forward (and backward) with ember's decomposition table. Each resulting graph goes to
`compile_graph`, which imports it into the C++ IR, compiles it and returns a runner.
Any failure there warns once per graph and runs that graph eagerly
(config.fallback_on_error=False makes it raise instead).
"""
from __future__ import annotations

import collections.abc
import functools
import time
import warnings

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition

from . import _core, compile_events, counters as stats, logs
from .caches import aot_cache, cache_dirs, graph_cache, mega_cache, precompile
from .config import Config, config as global_config
from .frontend import aten_trace, graph_source
from .frontend.attention import drop_no_op_masks, fuse_masked_attention
from .frontend.cse import eliminate_common_subexpressions
from .frontend.decompositions import ember_decompositions
from .frontend.fx_import import UnsupportedGraph, import_graph
from .runtime.cuda import compile_cuda_graph, graph_device
from .runtime.runner import GraphRunner

aten = torch.ops.aten

# Ops decomposed before ember sees the graph, on top of PyTorch's core ATen set:
# composite normalizations become reductions + pointwise that ember fuses.
_EXTRA_DECOMPOSITIONS = [
    "native_layer_norm",
    "native_group_norm",
    "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional",
    "native_batch_norm",
    "native_layer_norm_backward",
    "native_batch_norm_backward",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "gelu_backward",
    "tanh_backward",
    "sigmoid_backward",
    "threshold_backward",
    "embedding_dense_backward",
    "unbind",
    "std_mean",
]


# Ops kept whole although PyTorch's core table decomposes them: attention runs in
# ATen's fused (flash) kernel, not as the math path's bmm + softmax + bmm.
_KEEP_WHOLE = [
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention_math",
    # Creation ops whose decompositions round differently from ATen's kernels in
    # integer and low-precision dtypes; they run once per call, as ATen calls.
    "linspace",
    "logspace",
]


@functools.lru_cache(maxsize=1)
def decomposition_table():
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    extra = [getattr(aten, name) for name in _EXTRA_DECOMPOSITIONS if hasattr(aten, name)]
    table.update(get_decompositions(extra))
    for name in _KEEP_WHOLE:
        packet = getattr(aten, name, None)
        for overload in (packet.overloads() if packet is not None else []):
            table.pop(getattr(packet, overload), None)
    table.update(ember_decompositions())
    return table


class _LazyDecompositionTable(collections.abc.Mapping):
    """decomposition_table(), built on first use: AOTAutograd reads it only to trace, so a
    Dynamo graph found in the AOTAutogradCache never pays for building it (~0.2 s)."""

    def __getitem__(self, op):
        return decomposition_table()[op]

    def __iter__(self):
        return iter(decomposition_table())

    def __len__(self):
        return len(decomposition_table())


class GraphRecord:
    """What happened to one graph, for explain() and stats."""

    def __init__(self, name, source: graph_source.GraphSource | None = None):
        self.name = name
        self.source = source or graph_source.GraphSource()  # the user's module and file:line
        self.cg = None
        self.imported = None
        self.times = {}
        self.fallback_reason = None
        self.loaded = False  # rebuilt from a cache entry, not compiled
        # Who traced it to ATen: "ember" (aten_trace.py) or "AOTAutograd (why)"; for a loaded
        # graph, the cache it came from ("AOTAutograd cache", "graph cache").
        self.front_end = ""
        self.ops: list[str] = []  # the graph's ATen ops, in order
        self.trace_id = compile_events.trace_id()  # Dynamo's compile id and attempt, for logs and artifacts
        # The C compiler ran on a thread of its own: times["compile"] and ["load"] are not
        # part of times["total"], the time spent in the backend.
        self.background = False
        self.prepared: list = []  # the runner's prepared weights (prepared.PreparedWeight)
        self.input_names: list[str] = []  # the graph's inputs (placeholders, then attributes), for explain
        self.cuda_graphs = None  # mode="reduce-overhead": its CudaGraphReplay (cudagraphs.py), for explain

    def title(self) -> str:
        """How logs and dumps name the graph: 'inference_0 LayerNormGeluBlock.forward (examples.py:33)'."""
        return f"{self.name} {self.source.label()}"


# explain() installs a list here to collect full records while it runs.
_recorders: list[list] = []
# One small summary per compiled graph (no references to graphs or libraries, so
# that compiling many graphs in a long-running process does not retain them).
_summaries: list[dict] = []


def _new_record(kind: str, source: graph_source.GraphSource | None) -> tuple[GraphRecord, dict]:
    record = GraphRecord(f"{kind}_{len(_summaries)}", source or graph_source.current())
    summary = {"name": record.name, "source": record.source.label(), "cache": "fallback", "times": {}, "kernels": 0,
               "cache_note": ""}
    _summaries.append(summary)
    for r in _recorders:
        r.append(record)
    return record, summary


def build_runner(imported, attr_tensors: list, device: torch.device | None, cfg: Config, kind: str,
                 debug_dir: str = "", background: bool = False):
    """(compiled graph, runner) for an imported graph of `kind`: the C++ pipeline, its kernel
    cache, and the runner of the graph's device (None: the CPU). A freshly compiled graph
    and one loaded from a cache (load_graph) both come from here. With `background` a CPU
    graph's C compiler may still be running when this returns (cg.kernels_ready)."""
    if device is not None:
        return compile_cuda_graph(imported, attr_tensors, device, cfg, debug_dir)
    cg = _core.compile(
        imported.text,
        fuse=cfg.fuse,
        emulate_precision_casts=cfg.emulate_precision_casts,
        descriptive_names=cfg.descriptive_names,
        # A CPU inference graph with convolutions keeps its activations channels-last, the
        # layout the convolutions run in, as CUDA graphs do: no transposing copy around
        # each convolution (the small CNN 0.471 -> 0.355 ms against Inductor's 0.35). A
        # training graph does not: its backward kernels would mix layouts.
        channels_last_activations=kind == "inference",
        disk_cache=cfg.disk_cache,
        cache_dir=cfg.cache_dir or "",
        debug_dir=debug_dir,
        background=background,
    )
    return cg, GraphRunner(cg, imported, attr_tensors, prepare_weights=cfg.prepare_weights)


class RunAsUserCode(Exception):
    """Raised by compile_graph(user_fallback=True) for a graph that must run eagerly: the
    backend then hands Dynamo its own graph, which runs the user's ops as eager does,
    instead of the ATen graph traced from it (decomposed into many more, smaller ops)."""


def compile_graph(gm: torch.fx.GraphModule, example_inputs, cfg: Config, kind: str = "forward",
                  mode: str | None = None, front_end: str = "AOTAutograd", imported=None,
                  static_inputs: list[int] | None = None, user_fallback: bool = False, user_gm=None,
                  source: graph_source.GraphSource | None = None):
    """The runner of an ATen graph (`imported`: its import, when the caller made it). A
    graph that must run eagerly runs `gm` as it is, or, with `user_fallback`, raises
    RunAsUserCode so that the backend runs the user's own graph. `user_gm`: Dynamo's graph,
    when it takes the same arguments as `gm` (ember's front end), is what runs if the C
    compiler, still running in the background when this returns, fails. `source`: where
    the graph comes from in the user's code (default: the Dynamo graph being compiled,
    else what the ATen graph's nodes say)."""
    record, summary = _new_record(kind, source or graph_source.current() or graph_source.describe_aten(gm))
    record.front_end = summary["front_end"] = front_end
    if _recorders:
        record.ops = [str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
        record.input_names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    t0 = time.perf_counter()
    try:
        device = graph_device(example_inputs)  # None: a CPU graph
        if imported is None:
            imported = import_graph(gm, "cpu" if device is None else str(device))
        record.imported = imported
        record.input_names += list(imported.attr_inputs) if record.input_names else []
        t1 = time.perf_counter()
        attrs = [getattr(gm, name) for name in imported.attr_inputs]
        cg, runner = build_runner(imported, attrs, device, cfg, kind, _debug_dir(cfg, record.name),
                                  background=cfg.compile_in_background)
        runner.profile_name = f"ember {record.title()}"
        record.cg = cg
        record.background = not getattr(cg, "kernels_ready", True)
        record.prepared = getattr(runner, "prepared", [])
        t2 = time.perf_counter()
        record.times = {"import": t1 - t0, **cg.times, "total": t2 - t0}
        stats.count_graph(kind, t2 - t0)
        stats.count_symbolic(cg)
        summary.update(cache=cg.cache_status, kernels=len(cg.kernels), cache_note=cg.cache_note)
        if cg.cache_note:
            cache_dirs.warn_ember_cache_refused(cfg)
        if getattr(cg, "kernels_ready", True):
            _kernels_loaded(cfg, record, summary)
        else:
            runner.wait_for_kernels(lambda: _finish_background_compile(user_gm or gm, cfg, record, summary))
        record.cuda_graphs = _use_cuda_graphs(runner, kind, mode, record.name, static_inputs)
        return runner
    except UnsupportedGraph as e:
        stats.count_graph(kind, time.perf_counter() - t0)
        stats.count_fallback("unsupported")
        record.fallback_reason = str(e)
        compile_events.graph_fallback(record)
    except Exception as e:  # an ember bug or a C compiler failure
        stats.count_graph(kind, time.perf_counter() - t0)
        _compile_failed(cfg, record, e)
    if user_fallback:
        raise RunAsUserCode(record.fallback_reason)
    return _eager(gm)


def _kernels_loaded(cfg: Config, record: GraphRecord, summary: dict):
    """What is told about a graph once its kernels are loaded: its times, logs and dumps;
    its kernels are recorded for torch's Mega-Cache."""
    summary.update(times=record.times)
    mega_cache.record_graph(cfg, record.cg)
    compile_events.graph_ready(record)
    _dump_timings(cfg, record)


def _finish_background_compile(gm, cfg: Config, record: GraphRecord, summary: dict):
    """Run by the graph's first call: wait for its C compiler. None once the kernels are
    loaded; the FX graph (to run eagerly) when the compile failed and cfg.fallback_on_error
    is on, else the error is raised, as compile_graph would have done."""
    try:
        record.cg.wait_kernels()
    except Exception as e:
        _compile_failed(cfg, record, e)
        return gm
    times = record.cg.times
    record.times.update(compile=times["compile"], load=times["load"])
    stats.add_compile_seconds(times["compile"])
    _kernels_loaded(cfg, record, summary)
    return None


def _compile_failed(cfg: Config, record: GraphRecord, e: Exception):
    """A graph that failed to compile (called while its exception is handled): raise, or
    warn once and count it as an eager fallback (the caller runs it eagerly)."""
    if not cfg.fallback_on_error:
        raise e
    stats.count_fallback("error")
    record.fallback_reason = f"{type(e).__name__}: {e}"
    compile_events.graph_fallback(record)
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()] or [type(e).__name__]
    # The first line says what failed; add the first line of the cause (a compiler error).
    cause = next((ln for ln in lines[1:] if "error" in ln.lower() or "not found" in ln), lines[1] if len(lines) > 1 else "")
    first_line = lines[0] + (f" -- {cause}" if cause else "")
    dump_dir = _dump_error(cfg, record.name)
    where = (f" (traceback and IR dumps in {dump_dir})" if dump_dir
             else " (set ember.config.debug_dir or EMBER_DEBUG_DIR to keep the traceback and IR)")
    warnings.warn(
        f"ember: compiling graph {record.title()} failed, running it eagerly: {first_line}{where}. "
        "Set ember.config.fallback_on_error = False to raise instead.",
        RuntimeWarning,
        stacklevel=3,
    )


def _use_cuda_graphs(runner, kind: str, mode: str | None, name: str, static_inputs: list[int] | None = None):
    """mode="reduce-overhead" or "max-autotune": a CUDA inference graph replays CUDA graph
    recordings (python/ember/runtime/cudagraphs.py); training graphs run as usual, logged once.
    `static_inputs`: the parameters' indices (ember's front end knows them from Dynamo).
    Returns the runner's CudaGraphReplay, or None."""
    from .runtime.cuda import CudaGraphRunner

    if mode not in ("reduce-overhead", "max-autotune") or not isinstance(runner, CudaGraphRunner):
        return None
    if kind == "inference":
        if static_inputs is None:
            # AOTAutograd's parameter indices, as Inductor's cudagraphs read them (None where
            # its metadata is not at hand: the replay then tells parameters by identity).
            context = torch._guards.TracingContext.try_get()
            meta = getattr(context, "fw_metadata", None) if context is not None else None
            static_inputs = getattr(meta, "static_input_indices", None)
        return runner.use_cuda_graphs(name, static_inputs)
    else:
        logs.logger("fallback").info("graph %s (%s) runs without CUDA graph recordings: %s records "
                                     "inference graphs only (a training graph's saved activations would be "
                                     "copied out of the recording on every call)", name, kind, mode)


def load_graph(payload: dict, cfg: Config, mode: str | None = None, static_inputs: list[int] | None = None,
               source: str = "AOTAutograd cache"):
    """The runner of a graph from a cache entry (graph_format.decode_state's result, from
    torch's AOTAutogradCache or ember's graph cache): no tracing and no import, only the
    C++ pipeline from the stored text, whose libraries come from ember's disk cache (or
    the C compiler, if missing there). Errors propagate: the caller then compiles the
    graph as usual."""
    kind = payload["kind"]
    record, summary = _new_record(kind, None)
    record.front_end = summary["front_end"] = source
    t0 = time.perf_counter()
    imported = payload["imported"]
    device = None if payload["device"] == "cpu" else torch.device(payload["device"])
    attrs = [t.to(device) if device is not None else t for t in payload["attrs"]]
    cg, runner = build_runner(imported, attrs, device, cfg, kind)
    runner.profile_name = f"ember {record.title()}"
    record.imported, record.cg = imported, cg
    record.prepared = getattr(runner, "prepared", [])
    record.ops = [imported.node_ops[nid] for nid in imported.calls]
    mega_cache.record_graph(cfg, cg)
    seconds = time.perf_counter() - t0
    record.times = {**cg.times, "total": seconds}
    record.loaded = True
    stats.count_loaded(kind, seconds)
    stats.count_symbolic(cg)
    summary.update(cache=cg.cache_status, times=record.times, kernels=len(cg.kernels), cache_note=cg.cache_note,
                   loaded=True)
    if cg.cache_note:
        cache_dirs.warn_ember_cache_refused(cfg)
    if logs.enabled("cache"):
        logs.logger("cache").info("graph %s: loaded from the %s (kernels: cache %s %s)",
                                  record.title(), source, cg.cache_status, cg.cache_key[:16])
    compile_events.graph_ready(record, cache_line=False)
    record.cuda_graphs = _use_cuda_graphs(runner, kind, mode, record.name, static_inputs)
    return runner


def _eager(gm):
    def run(args):
        return gm(*args)

    run._boxed_call = True
    return run


def _debug_dir(cfg: Config, name: str) -> str:
    if not cfg.debug_dir:
        return ""
    import os

    path = os.path.join(cfg.debug_dir, name)
    os.makedirs(path, exist_ok=True)
    return path


def _dump_timings(cfg: Config, record: GraphRecord):
    if not cfg.debug_dir:
        return
    import json
    import os

    cg = record.cg
    info = {"graph": record.name, "source": record.source.to_dict(), "times_s": record.times,
            "background_phases": ["compile", "load"] if record.background else [], "cache": cg.cache_status,
            "cache_key": cg.cache_key, "cache_note": cg.cache_note, "kernels": len(cg.kernels),
            "externs": len(cg.externs), "passes": [name for name, _ in cg.passes]}
    with open(os.path.join(_debug_dir(cfg, record.name), "timings.json"), "w") as f:
        json.dump(info, f, indent=2)


def _dump_error(cfg: Config, name: str) -> str | None:
    """The full traceback of the exception being handled, kept in the graph's debug dir."""
    if not cfg.debug_dir:
        return None
    import os
    import traceback

    path = os.path.join(_debug_dir(cfg, name), "error.txt")
    try:
        with open(path, "w") as f:
            f.write(traceback.format_exc())
    except OSError:
        return None
    return os.path.dirname(path)


def make_backend(mode: str | None = None, options: dict | None = None):
    """A Dynamo backend: AOTAutograd (ember's decompositions, the min-cut partitioner),
    then every graph compiled with ember, through torch's AOTAutogradCache where it can
    (python/ember/caches/aot_cache.py). `.aot` is an AOTAutograd backend as each call makes it."""
    if mode not in (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        raise ValueError(f"ember: unknown mode {mode!r}")
    cfg = global_config.update(options)
    if mode in ("max-autotune", "max-autotune-no-cudagraphs"):
        cfg = cfg.update({"max_autotune": True})

    def compile(gm, example_inputs, precompiling=False):
        """(what Dynamo calls, the front end that traced it: "ember", "AOTAutograd", or
        "user" for Dynamo's own graph, run as eager runs it)."""
        stats.count_dynamo_compile()
        try:
            return traced_backend(gm, example_inputs, precompiling)
        except RunAsUserCode as e:
            if precompiling:  # an artifact cannot hold a graph ember does not compile
                raise precompile.PrecompileRefused(f"this graph cannot be precompiled: it runs eagerly ({e}). Fix "
                                                   "what the reason names, or compile at run time") from None
            # Dynamo's own graph: the user's ops, run (and differentiated) as eager runs them.
            return gm, "user"

    def traced_backend(gm, example_inputs, precompiling):
        if graph_device(example_inputs) is not None:
            drop_no_op_masks(gm)  # an all-true mask: attention runs unmasked, as in eager
            if not torch.is_grad_enabled():
                fuse_masked_attention(gm)  # CUDA inference: masked attention stays one fused call
        reason = "ember.config.trace_inference is off"
        if cfg.trace_inference:
            compiled, reason = _compile_inference(gm, example_inputs, cfg, mode)
            if compiled is not None:
                return compiled, "ember"
        stats.count_front_end("AOTAutograd")
        logs.logger("front_end").info("Dynamo graph %s %s: AOTAutograd traces it: %s",
                                      torch._guards.CompileContext.current_compile_id(),
                                      graph_source.current().label(), reason)
        front_end = f"AOTAutograd ({reason})"
        # torch's precompile (aot_compile) needs the serializable compilers whatever the cache says.
        if not precompiling and aot_cache.note_unused(cfg):
            aot = _aot_autograd(cfg, mode, cached=False, front_end=front_end, user_fallback=True)
            return aot(gm, example_inputs), "AOTAutograd"
        before = stats.aot_cache_counts()
        with aot_cache.enabled(cfg, mode):
            compiled = _aot_autograd(cfg, mode, cached=True, front_end=front_end,
                                     user_fallback=True)(gm, example_inputs)
        stats.count_aot_lookup(before)
        return compiled, "AOTAutograd"

    def backend(gm, example_inputs):
        with graph_source.compiling(graph_source.describe(gm)):
            if precompile.active():  # torch's aot_compile: the result must serialize itself
                return precompile.compile_for_precompile(lambda g, x: compile(g, x, precompiling=True), gm,
                                                         example_inputs, cfg, mode)
            return compile(gm, example_inputs)[0]

    backend.aot = _aot_autograd(cfg, mode, cached=False)
    return backend


def _compile_inference(gm, example_inputs, cfg: Config, mode: str | None):
    """ember's own front end (aten_trace.py) and graph cache (graph_cache.py) for an
    inference graph: (what Dynamo calls, None) or (None, why AOTAutograd must trace it)."""
    reason = aten_trace.ineligible_reason(gm, example_inputs)
    device = graph_device(example_inputs)
    if reason is not None:
        return None, reason
    static_inputs = aten_trace.static_inputs(gm)
    key = graph_cache.key(gm, example_inputs, cfg, mode)
    runner = graph_cache.load(key, cfg, mode, static_inputs) if key is not None else None
    if runner is not None:
        stats.count_front_end("cache")
        return _unboxed(runner, static_inputs), None
    t0 = time.perf_counter()
    try:
        traced = aten_trace.trace(gm, example_inputs, decomposition_table())
        imported = import_graph(traced.gm, "cpu" if device is None else str(device))
    except (aten_trace.NotTraced, UnsupportedGraph) as e:
        return None, str(e)
    except Exception as e:  # an ember bug: AOTAutograd's path may still compile the graph
        if not cfg.fallback_on_error:
            raise
        return None, f"ember's trace failed ({type(e).__name__}: {e})"
    stats.count_front_end("ember", time.perf_counter() - t0)
    if key is not None:
        stats.count_graph_cache("miss")
    runner = compile_graph(traced.gm, example_inputs, cfg, "inference", mode, front_end="ember",
                           imported=imported, static_inputs=static_inputs, user_fallback=True, user_gm=gm)
    if key is not None and isinstance(runner, GraphRunner):
        graph_cache.save(key, runner, cfg, mode)
    return _unboxed(runner, static_inputs), None


def _unboxed(runner, static_inputs):
    """A runner (called with one list of arguments) as Dynamo calls a compiled graph; the
    runner and the parameters' indices stay at hand for torch's precompile (precompile.py)."""
    def call(*args):
        return runner(args)

    call.runner, call.static_inputs = runner, static_inputs
    return call


def _aot_autograd(cfg: Config, mode: str | None, cached: bool, front_end: str = "AOTAutograd",
                  user_fallback: bool = False):
    """AOTAutograd with ember's compilers, made per Dynamo graph: torch's AotAutograd wraps
    a SerializableAOTDispatchCompiler's backward compiler again on every call, so a shared
    one would nest one more torch._dynamo.disable around every backward per graph compiled.
    With `user_fallback` a graph that must run eagerly raises RunAsUserCode (the backend
    then runs Dynamo's graph); a backward compiled later, at the first backward pass
    (outside the backend call), runs its own ATen graph instead."""
    in_call = [False]
    source = [None]  # the Dynamo graph's, for a backward compiled after the backend call

    def compiler(kind):
        def compile(gm, example_inputs):
            return compile_graph(gm, example_inputs, cfg, kind, mode, front_end,
                                 user_fallback=user_fallback and in_call[0], source=source[0])

        return aot_cache.serializable(compile, cfg, mode, kind) if cached else compile

    # aot_autograd's default partitioner saves every forward value the backward reads;
    # the min-cut one saves a minimal set and recomputes cheap pointwise work in the
    # backward, where ember fuses it into the kernels that read it (as Inductor does).
    aot = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=_LazyDecompositionTable(),
        partition_fn=_partition,
    )

    def call(gm, example_inputs):
        in_call[0] = True
        source[0] = graph_source.current()
        try:
            return aot(gm, example_inputs)
        finally:
            in_call[0] = False

    call.kwargs = aot.kwargs  # what AOTAutograd is given (compilers, partitioner), for tests
    return call


def _partition(joint_module, joint_inputs, **kwargs):
    """The min-cut partitioner on the joint graph after ember's CSE (python/ember/frontend/cse.py),
    with torch's own CSE, which would import Inductor, turned off."""
    eliminate_common_subexpressions(joint_module.graph)
    joint_module.recompile()
    with torch._functorch.config.patch(cse=False):
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)


def ember_backend(gm, example_inputs, mode=None, options=None):
    """The `backend="ember"` entry point of torch.compile."""
    return make_backend(mode, options)(gm, example_inputs)
