"""The torch.compile backend: Dynamo graph -> ATen graph(s) -> ember's C++ compiler.

`torch.compile(model, backend="ember")` finds `ember_backend` through the
`torch_dynamo_backends` entry point. An inference graph (no autograd, no input
mutation) is traced to ATen by ember itself (frontend/aten_trace.py) and, with static
sizes, kept in ember's graph cache (caches/graph_cache.py); every other graph goes through
AOTAutograd, which traces forward (and backward) with ember's decomposition table,
through torch's AOTAutogradCache (caches/aot_cache.py). Each resulting graph goes to
compiler.compile_graph, which imports it into the C++ IR, compiles it and returns a
runner. Any failure there warns once per graph and runs that graph eagerly
(config.fallback_on_error=False makes it raise instead).
"""
from __future__ import annotations

import time

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition

from . import counters as stats, logs
from .caches import aot_cache, graph_cache, precompile
from .compiler import RunAsUserCode, compile_graph
from .config import Config, config as global_config
from .frontend import aten_trace, graph_source
from .frontend.attention import drop_no_op_masks, fuse_masked_attention
from .frontend.cse import eliminate_common_subexpressions
from .frontend.decompositions import LazyDecompositionTable, decomposition_table
from .frontend.fx_import import UnsupportedGraph, import_graph
from .runtime.cuda import graph_device
from .runtime.runner import GraphRunner


def make_backend(mode: str | None = None, options: dict | None = None):
    """A Dynamo backend: AOTAutograd (ember's decompositions, the min-cut partitioner),
    then every graph compiled with ember, through torch's AOTAutogradCache where it can
    (python/ember/caches/aot_cache.py). `.aot` is an AOTAutograd backend as each call makes it.
    Its config is ember.config with `options` applied, in torch.compile's `mode` (None:
    the config's own)."""
    cfg = global_config.update(options)
    cfg = cfg.with_mode(cfg.mode if mode is None else mode)

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
            compiled, reason = _compile_inference(gm, example_inputs, cfg)
            if compiled is not None:
                return compiled, "ember"
        stats.count_front_end("AOTAutograd")
        logs.logger("front_end").info("Dynamo graph %s %s: AOTAutograd traces it: %s",
                                      torch._guards.CompileContext.current_compile_id(),
                                      graph_source.current().label(), reason)
        front_end = f"AOTAutograd ({reason})"
        # torch's precompile (aot_compile) needs the serializable compilers whatever the cache says.
        if not precompiling and aot_cache.note_unused(cfg):
            aot = _aot_autograd(cfg, cached=False, front_end=front_end, user_fallback=True)
            return aot(gm, example_inputs), "AOTAutograd"
        before = stats.aot_cache_counts()
        with aot_cache.enabled(cfg):
            compiled = _aot_autograd(cfg, cached=True, front_end=front_end,
                                     user_fallback=True)(gm, example_inputs)
        stats.count_aot_lookup(before)
        return compiled, "AOTAutograd"

    def backend(gm, example_inputs):
        with graph_source.compiling(graph_source.describe(gm)):
            if precompile.active():  # torch's aot_compile: the result must serialize itself
                return precompile.compile_for_precompile(lambda g, x: compile(g, x, precompiling=True), gm,
                                                         example_inputs, cfg)
            return compile(gm, example_inputs)[0]

    backend.aot = _aot_autograd(cfg, cached=False)
    return backend


def _compile_inference(gm, example_inputs, cfg: Config):
    """ember's own front end (aten_trace.py) and graph cache (graph_cache.py) for an
    inference graph: (what Dynamo calls, None) or (None, why AOTAutograd must trace it)."""
    reason = aten_trace.ineligible_reason(gm, example_inputs)
    device = graph_device(example_inputs)
    if reason is not None:
        return None, reason
    static_inputs = aten_trace.static_inputs(gm)
    key = graph_cache.key(gm, example_inputs, cfg)
    runner = graph_cache.load(key, cfg, static_inputs) if key is not None else None
    if runner is not None:
        stats.count_front_end("cache")
        return _unboxed(runner, static_inputs), None
    t0 = time.perf_counter()
    try:
        traced = aten_trace.trace(gm, example_inputs, decomposition_table())
        # Its outputs are the user's (none a view of an input): any strides do.
        imported = import_graph(traced.gm, "cpu" if device is None else str(device), any_strides="all")
    except (aten_trace.NotTraced, UnsupportedGraph) as e:
        return None, str(e)
    except Exception as e:  # an ember bug: AOTAutograd's path may still compile the graph
        if not cfg.fallback_on_error:
            raise
        return None, f"ember's trace failed ({type(e).__name__}: {e})"
    stats.count_front_end("ember", time.perf_counter() - t0)
    if key is not None:
        stats.count_graph_cache("miss")
    runner = compile_graph(traced.gm, example_inputs, cfg, "inference", front_end="ember",
                           imported=imported, static_inputs=static_inputs, user_fallback=True, user_gm=gm)
    if key is not None and isinstance(runner, GraphRunner):
        graph_cache.save(key, runner, cfg)
    return _unboxed(runner, static_inputs), None


def _unboxed(runner, static_inputs):
    """A runner (called with one list of arguments) as Dynamo calls a compiled graph; the
    runner and the parameters' indices stay at hand for torch's precompile (precompile.py)."""
    def call(*args):
        return runner(args)

    call.runner, call.static_inputs = runner, static_inputs
    return call


def _aot_autograd(cfg: Config, cached: bool, front_end: str = "AOTAutograd",
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
            return compile_graph(gm, example_inputs, cfg, kind, front_end=front_end,
                                 user_fallback=user_fallback and in_call[0], source=source[0])

        return aot_cache.serializable(compile, cfg, kind) if cached else compile

    # aot_autograd's default partitioner saves every forward value the backward reads;
    # the min-cut one saves a minimal set and recomputes cheap pointwise work in the
    # backward, where ember fuses it into the kernels that read it (as Inductor does).
    aot = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=LazyDecompositionTable(),
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
