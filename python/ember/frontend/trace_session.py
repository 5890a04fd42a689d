"""One make_fx session for all of a graph's ATen templates (aten_trace.py).

aten_trace traces each distinct call of a Dynamo graph to ATen on its own fake inputs.
make_fx costs a fixed ~8-15 ms a trace before the first op (a tracer, fx's patcher
patching and restoring the wrapped functions, a GraphModule and its Python code), so a
GPT-2's 66 distinct calls spent most of their 1.1 s in that fixed part. A `Session` runs
the whole graph walk inside one make_fx instead: the walk itself runs with the proxy mode
off, and each call is traced with it back on, over placeholders of its own that the
session adds as the call starts; the call's nodes are then moved out into a template
graph of their own, and the session's graph is emptied for the next call. The result is
the graph make_fx of that call alone gives (the same placeholders, ops, constants and
output), at the cost of the ops only.

The session reaches into make_fx's tracer (its proxy mode, `track_tensor_tree`,
`get_proxy_slot`); where a torch release lacks one of those, `PerCall` traces each call
with its own make_fx, as before.
"""
from __future__ import annotations

import types

import torch


def open_session(fake_mode, decompositions):
    """The session aten_trace's walk runs in: one make_fx, or one per call."""
    try:
        from torch.fx.experimental.proxy_tensor import (disable_proxy_modes_tracing, get_proxy_mode,  # noqa: F401
                                                        get_proxy_slot, track_tensor_tree)
        from torch._subclasses.fake_tensor import unset_fake_temporarily  # noqa: F401
    except ImportError:
        return PerCall(fake_mode, decompositions)
    return Session(fake_mode, decompositions)


class PerCall:
    """make_fx once per traced call."""

    def __init__(self, fake_mode, decompositions):
        self.fake_mode = fake_mode
        self.decompositions = decompositions

    def run(self, walk):
        return walk()

    def trace(self, fn, inputs):
        """The graph (with .graph, constants as attributes) of fn over the fake `inputs`."""
        from torch.fx.experimental.proxy_tensor import make_fx

        # Composite ops decompose through the Python dispatcher, as under AOTAutograd (which
        # turns it on whenever Dynamo's ShapeEnv is there): the same ATen ops as its graphs
        # (eval dropout a clone, not an alias), and sizes that stay symbolic, which a C++
        # composite kernel would read as ints, specializing them.
        with self.fake_mode, torch._dispatch.python.enable_python_dispatcher():
            return make_fx(fn, decomposition_table=self.decompositions, tracing_mode="real",
                           pre_dispatch=False)(*inputs)


class Session(PerCall):
    """One make_fx around the whole walk; `trace` records one call into a template."""

    def run(self, walk):
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, get_proxy_mode, make_fx

        result = {}

        def body():
            self._mode = get_proxy_mode()
            with disable_proxy_modes_tracing(), unset_fake_temporarily():
                result["value"] = walk()
            return []

        with self.fake_mode, torch._dispatch.python.enable_python_dispatcher():
            make_fx(body, decomposition_table=self.decompositions, tracing_mode="real", pre_dispatch=False)()
        return result["value"]

    def trace(self, fn, inputs):
        from torch.fx.experimental.proxy_tensor import get_proxy_slot, track_tensor_tree

        tracer = self._mode.tracer
        _fresh_trackers(tracer)  # no proxy of an earlier call's values (its nodes are gone)
        graph = tracer.graph
        try:
            for i, x in enumerate(inputs):
                track_tensor_tree(x, tracer.create_proxy("placeholder", f"arg{i}", (), {}), constant=None,
                                  tracer=tracer)
            with self.fake_mode, self._mode:
                outs = fn(*inputs)
                nodes = []
                for o in outs:
                    slot = get_proxy_slot(o, tracer, None, lambda p: p.proxy)
                    nodes.append(slot.node if slot is not None else tracer.create_arg(o))
            return _move_out(graph, tracer.root, nodes)
        finally:
            for n in reversed(list(graph.nodes)):
                graph.erase_node(n)


def _fresh_trackers(tracer):
    """The tracer's maps from values to proxies, emptied (a fresh tracer's)."""
    fresh = type(tracer)()
    for name in ("tensor_tracker", "symnode_tracker", "script_object_tracker", "opaque_tracker",
                 "_opaque_real_obj_proxy", "sympy_expr_tracker"):
        if hasattr(fresh, name):
            setattr(tracer, name, getattr(fresh, name))


def _move_out(graph, root, outputs):
    """The session graph's nodes (one call's) as a graph of their own, with `outputs` as its
    output and the constants they read as attributes of the returned holder."""
    template = types.SimpleNamespace(graph=torch.fx.Graph())
    env = {}
    for n in graph.nodes:
        if n.op == "get_attr":
            setattr(template, n.target, getattr(root, n.target))
        env[n] = template.graph.node_copy(n, lambda a: env[a])
    template.graph.output([env[o] for o in outputs])
    _tidy(template.graph)
    return template


def _tidy(graph):
    """What make_fx does to a finished trace: size arithmetic nothing reads is dropped (a
    decomposition's shape checks), and uses of a size reread from a tensor become the
    size input that holds it."""
    from torch._inductor.fx_passes.dedupe_symint_uses import dedupe_symints
    from torch.fx.experimental.proxy_tensor import py_sym_types
    from torch.fx.experimental.symbolic_shapes import is_accessor_node

    def impure(n):
        if n.is_impure():
            return True
        if is_accessor_node(n):
            return False
        symbolic = isinstance(n.meta.get("val"), py_sym_types)
        return not (symbolic and all(isinstance(a.meta.get("val"), py_sym_types)
                                     for a in n.args if isinstance(a, torch.fx.Node)))

    graph.eliminate_dead_code(impure)
    dedupe_symints(graph)
