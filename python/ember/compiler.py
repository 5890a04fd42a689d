"""One ATen graph to a runner: ember's C++ pipeline, its kernel cache, and the runner of
the graph's device; or, when that fails, the graph run eagerly.

`compile_graph` takes a graph a front end traced (ember's or AOTAutograd's) and imports
it; `load_graph` rebuilds one from a cache entry or an artifact (the caches call it). Both
record the graph (records.py), log it (compile_events.py) and count it (counters.py). A
CPU graph's C compiler runs in the background (config.compile_in_background): its runner
waits at the first call, where a failure falls back, or raises, as it would have here.
"""
from __future__ import annotations

import json
import os
import time
import traceback
import warnings

import torch
from torch._subclasses.fake_tensor import is_fake, unset_fake_temporarily

from . import _core, compile_events, counters as stats, logs, records
from .caches import cache_dirs, mega_cache
from .config import Config
from .frontend import graph_source
from .frontend.fx_import import UnsupportedGraph, import_graph
from .runtime.cuda import CudaGraphRunner, compile_cuda_code, compile_cuda_graph, graph_device
from .runtime.runner import GraphRunner


def build_runner(imported, attr_tensors: list, device: torch.device | None, cfg: Config, kind: str,
                 debug_dir: str = "", background: bool = False, compiled=None):
    """(compiled graph, runner) for an imported graph of `kind`: the C++ pipeline, its kernel
    cache, and the runner of the graph's device (None: the CPU). A freshly compiled graph
    and one loaded from a cache (load_graph) both come from here. With `background` a CPU
    graph's C compiler may still be running when this returns (cg.kernels_ready).
    `compiled`: run_pipeline's result, made already (on a thread: caches/precompile.py)."""
    cg = compiled or run_pipeline(imported, device, cfg, kind, debug_dir, background)
    # AOTAutograd calls its compilers under its FakeTensorMode. A runner is a run-time
    # object: the tensors it makes now (a CUDA graph's CPU constants moved to the device,
    # a plan's scalar inputs) must be real, where under that mode they would silently be
    # FakeTensors, whose data pointer the first call cannot read.
    with unset_fake_temporarily():
        if device is not None:
            cg, runner = compile_cuda_graph(imported, attr_tensors, device, cfg, debug_dir, compiled=cg)
        else:
            runner = GraphRunner(cg, imported, attr_tensors, prepare_weights=cfg.prepare_weights)
    _check_real(runner)
    return cg, runner


def _check_real(runner):
    """Raises (the graph then runs eagerly) where a runner holds a tensor with no data, such
    as a FakeTensor a caller passed as a constant: its first call would fail, not fall back."""
    plans = [runner._plan] if runner._plan is not None else []
    for t in list(runner.attr_tensors) + [t for plan in plans for t in plan.extra_inputs]:
        if isinstance(t, torch.Tensor) and is_fake(t):
            raise RuntimeError(f"a constant of the graph is a {type(t).__name__}, not a tensor with data")


def run_pipeline(imported, device: torch.device | None, cfg: Config, kind: str, debug_dir: str = "",
                 background: bool = False):
    """The C++ pipeline's compiled graph for an imported graph, its kernels built or loaded
    (None: the CPU), with no runner; C++ runs it with the GIL released."""
    if device is not None:
        return compile_cuda_code(imported, device, cfg, debug_dir)
    return _core.compile(
        imported.text,
        fuse=cfg.fuse,
        emulate_precision_casts=cfg.emulate_precision_casts,
        descriptive_names=cfg.descriptive_names,
        # A CPU graph with convolutions (or their backward) keeps its activations
        # channels-last, the layout the convolutions run in, as CUDA graphs do: no
        # transposing copy around each convolution (the small CNN 0.471 -> 0.355 ms against
        # Inductor's 0.35). A training forward's saved activations leave in that layout and
        # the backward is traced for it (own_layout_outputs).
        channels_last_activations=True,
        disk_cache=cfg.disk_cache,
        cache_dir=cfg.cache_dir or "",
        debug_dir=debug_dir,
        background=background,
    )


def any_strides_outputs(kind: str) -> list[int]:
    """The positions of an AOTAutograd graph's outputs that reach the user as they are, so
    that any strides do (Graph::any_strides_outputs): a forward or inference graph's user
    outputs that alias nothing, as its metadata says, and that no other output is regenerated
    from. Not the inputs it mutates (before them), its intermediate bases nor the activations
    a forward saves (after them): AOTAutograd rebuilds aliases from a base with the strides it
    traced, and the backward reads saved values with theirs. None for a backward graph (its
    gradients' strides are the parameters') or where the metadata is not at hand."""
    if kind not in ("inference", "forward"):
        return []
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    infos = getattr(meta, "output_info", None)
    start = getattr(meta, "num_mutated_inp_runtime_indices", None)
    if infos is None or start is None:
        return []
    from torch._functorch._aot_autograd.schemas import OutputType

    plain = (OutputType.non_alias, OutputType.unsafe_view_alias, OutputType.custom_function_view)
    bases = {info.base_idx for info in infos
             if info.output_type == OutputType.alias_of_intermediate_base_is_user_output}
    return [start + i for i, info in enumerate(infos) if info.output_type in plain and i not in bases]


def own_layout_outputs(kind: str, gm: torch.fx.GraphModule) -> list[int]:
    """The positions of a training forward's outputs that are activations saved for the
    backward (Graph::own_layout_outputs): they leave in the layout ember stores them in
    (channels-last around convolutions), and report_output_strides tells AOTAutograd, which
    then traces the backward for those strides, as it does for Inductor's layouts. Empty
    for other graphs, or where the metadata is not at hand."""
    if kind != "forward":
        return []
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None) if context is not None else None
    start = getattr(meta, "num_forward", None)
    if start is None or getattr(context, "output_strides", None) is None:
        return []
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return list(range(start, len(outs) if isinstance(outs, (list, tuple)) else 1))


def restride_placeholders(gm: torch.fx.GraphModule, example_inputs) -> None:
    """A backward's saved activations come with the strides the forward reported
    (report_output_strides): AOTAutograd restrides its example inputs, not the placeholders'
    metadata, which import_graph reads; the metadata takes the example's strides."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, x in zip(placeholders, example_inputs):
        val = node.meta.get("val")
        if (isinstance(x, torch.Tensor) and isinstance(val, torch.Tensor) and x.shape == val.shape
                and x.stride() != val.stride()):
            node.meta["val"] = x


def report_output_strides(cg, imported) -> None:
    """Tells AOTAutograd (TracingContext.output_strides, read around a forward's compile)
    the strides of the outputs that left in ember's layout (None for the others: they have
    the strides AOTAutograd traced)."""
    context = torch._guards.TracingContext.try_get()
    strides = getattr(context, "output_strides", None) if context is not None else None
    if strides is None or strides or not imported.own_layout or imported.num_symbols:
        return  # (a graph with symbols keeps the declared strides: Graph::own_layout_outputs)
    own = set(imported.own_layout)
    for pos, out in enumerate(cg.outputs):
        strides.append(tuple(out[3]) if pos in own and out is not None else None)


class RunAsUserCode(Exception):
    """Raised by compile_graph(user_fallback=True) for a graph that must run eagerly: the
    backend then hands Dynamo its own graph, which runs the user's ops as eager does,
    instead of the ATen graph traced from it (decomposed into many more, smaller ops)."""


def compile_graph(gm: torch.fx.GraphModule, example_inputs, cfg: Config, kind: str = "forward",
                  front_end: str = "AOTAutograd", imported=None,
                  static_inputs: list[int] | None = None, user_fallback: bool = False, user_gm=None,
                  source: graph_source.GraphSource | None = None):
    """The runner of an ATen graph (`imported`: its import, when the caller made it). A
    graph that must run eagerly runs `gm` as it is, or, with `user_fallback`, raises
    RunAsUserCode so that the backend runs the user's own graph. `user_gm`: Dynamo's graph,
    when it takes the same arguments as `gm` (ember's front end), is what runs if the C
    compiler, still running in the background when this returns, fails. `source`: where
    the graph comes from in the user's code (default: the Dynamo graph being compiled,
    else what the ATen graph's nodes say)."""
    record, summary = records.new_record(kind, source or graph_source.current() or graph_source.describe_aten(gm))
    record.front_end = summary["front_end"] = front_end
    if records.recording_active():
        record.ops = [str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
        record.input_names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    t0 = time.perf_counter()
    try:
        device = graph_device(example_inputs)  # None: a CPU graph
        if imported is None:
            if kind == "backward":
                restride_placeholders(gm, example_inputs)
            imported = import_graph(gm, "cpu" if device is None else str(device), any_strides_outputs(kind),
                                    own_layout_outputs(kind, gm))
        record.imported = imported
        record.input_names += list(imported.attr_inputs) if record.input_names else []
        t1 = time.perf_counter()
        attrs = [getattr(gm, name) for name in imported.attr_inputs]
        cg, runner = build_runner(imported, attrs, device, cfg, kind, _debug_dir(cfg, record.name),
                                  background=cfg.compile_in_background)
        report_output_strides(cg, imported)
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
        record.cuda_graphs = _use_cuda_graphs(runner, kind, cfg, record.name, static_inputs)
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


def _kernels_loaded(cfg: Config, record: records.GraphRecord, summary: dict):
    """What is told about a graph once its kernels are loaded: its times, logs and dumps;
    its kernels are recorded for torch's Mega-Cache."""
    summary.update(times=record.times)
    mega_cache.record_graph(cfg, record.cg)
    compile_events.graph_ready(record)
    _dump_timings(cfg, record)


def _finish_background_compile(gm, cfg: Config, record: records.GraphRecord, summary: dict):
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


def _compile_failed(cfg: Config, record: records.GraphRecord, e: Exception):
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


def _use_cuda_graphs(runner, kind: str, cfg: Config, name: str, static_inputs: list[int] | None = None):
    """mode="reduce-overhead" or "max-autotune": a CUDA inference graph replays CUDA graph
    recordings (python/ember/runtime/cudagraphs.py); training graphs run as usual, logged once.
    `static_inputs`: the parameters' indices (ember's front end knows them from Dynamo).
    Returns the runner's CudaGraphReplay, or None."""
    if not cfg.cuda_graphs or not isinstance(runner, CudaGraphRunner):
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
                                     "copied out of the recording on every call)", name, kind, cfg.mode)


def load_graph(payload: dict, cfg: Config, static_inputs: list[int] | None = None, source: str = "AOTAutograd cache",
               compiled=None):
    """The runner of a graph from a cache entry (graph_format.decode_state's result, from
    torch's AOTAutogradCache or ember's graph cache): no tracing and no import, only the
    C++ pipeline from the stored text, whose libraries come from ember's disk cache (or
    the C compiler, if missing there). Errors propagate: the caller then compiles the
    graph as usual."""
    kind = payload["kind"]
    record, summary = records.new_record(kind, None)
    record.front_end = summary["front_end"] = source
    t0 = time.perf_counter()
    imported = payload["imported"]
    device = None if payload["device"] == "cpu" else torch.device(payload["device"])
    with unset_fake_temporarily():  # real constants whatever mode the loader runs under (see build_runner)
        attrs = [t.to(device) if device is not None else t for t in payload["attrs"]]
    cg, runner = build_runner(imported, attrs, device, cfg, kind, compiled=compiled)
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
    record.cuda_graphs = _use_cuda_graphs(runner, kind, cfg, record.name, static_inputs)
    return runner


def _eager(gm):
    def run(args):
        return gm(*args)

    run._boxed_call = True
    return run


def _debug_dir(cfg: Config, name: str) -> str:
    if not cfg.debug_dir:
        return ""
    path = os.path.join(cfg.debug_dir, name)
    os.makedirs(path, exist_ok=True)
    return path


def _dump_timings(cfg: Config, record: records.GraphRecord):
    if not cfg.debug_dir:
        return
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
    path = os.path.join(_debug_dir(cfg, name), "error.txt")
    try:
        with open(path, "w") as f:
            f.write(traceback.format_exc())
    except OSError:
        return None
    return os.path.dirname(path)


