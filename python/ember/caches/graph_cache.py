"""Warm starts of inference graphs: ember's own cache, keyed by the Dynamo graph.

Graphs ember traces itself (aten_trace.py) never reach AOTAutograd, so torch's
AOTAutogradCache does not see them; this cache takes its place. Its key is a SHA-256
over the Dynamo graph -- every node's op, target and arguments, every input's shape,
strides, dtype and device, the values of its constant tensors -- with torch's version,
the global state a trace depends on (aten_trace.global_state) and ember's tag
(tags.cache_tag: its build and the options that change generated code). Its entry
is the graph's state in ember's own format (graph_format.py: the graph text, the imported
graph, constants; no library, no pointer, no pickle), stored in ember's disk cache
(csrc/runtime/disk_cache.h), which verifies the content's SHA-256 on every read;
graph_format.decode_state checks format, tag and digest again before decoding. Computing
the key needs no torch source hash and no tracing: a warm start goes from Dynamo's graph
straight to the C++ pipeline and the kernel cache.

A graph whose calls ember cannot key exactly (a constant argument of a type it does not
know, a function outside torch's own namespaces, whose code could change between
processes under the same name) is traced every time, as is every graph when
ember.config.aot_cache or disk_cache is off or a debug dir is set.
"""
from __future__ import annotations

import hashlib

import torch
import torch.fx

from .. import _core, counters as stats, logs
from ..compiler import load_graph
from ..frontend.aten_trace import attribute, const_key, global_state, is_symbolic, tensor_key
from . import aot_cache, graph_format, mega_cache
from .tags import cache_tag

SUFFIX = "graph"

# Qualified-name prefixes of functions whose meaning is fixed by torch's version.
_KNOWN_NAMESPACES = ("torch.", "_operator.", "operator.", "math.")
_BUILTINS = frozenset({"getattr", "len", "abs", "min", "max", "int", "float", "bool"})


def key(gm: torch.fx.GraphModule, example_inputs, cfg) -> str | None:
    """The cache key of an inference graph, or None when it is not cached."""
    if aot_cache.off_reason(cfg):
        return None
    if is_symbolic(gm):
        # Its key would have to hold the ShapeEnv's symbols and facts; ember's front end
        # traces a symbolic graph again in every process (no AOTAutograd either way).
        return None
    from torch.fx.node import _get_qualified_name

    index: dict[torch.fx.Node, int] = {}

    def arg(v):
        if isinstance(v, torch.fx.Node):
            return ("n", index[v])
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, tuple(arg(x) for x in v))
        if isinstance(v, dict):
            return ("dict", tuple((k, arg(x)) for k, x in v.items()))
        k = const_key(v)
        if k is None:
            raise _Unkeyed(type(v).__name__)
        return k

    parts = [cache_tag(cfg), torch.__version__, torch.version.git_version, global_state()]
    inputs = iter(example_inputs)
    try:
        for i, node in enumerate(gm.graph.nodes):
            index[node] = i
            if node.op == "placeholder":
                parts.append(("in", tensor_key(next(inputs))))
            elif node.op == "get_attr":
                value = _tensor_attr(gm, node.target)
                parts.append(("attr", tensor_key(value), _content_hash(value)))
            elif node.op == "call_function":
                name = _get_qualified_name(node.target)
                if not (name.startswith(_KNOWN_NAMESPACES) or name in _BUILTINS):
                    raise _Unkeyed(name)
                parts.append(("f", name, arg(node.args), arg(node.kwargs)))
            elif node.op == "call_method":
                parts.append(("m", node.target, arg(node.args), arg(node.kwargs)))
            elif node.op == "output":
                parts.append(("out", arg(node.args)))
            else:
                raise _Unkeyed(node.op)
    except _Unkeyed as e:
        logs.logger("cache").info("graph not cached: its key would need %s", e)
        return None
    return hashlib.sha256(repr(parts).encode()).hexdigest()


class _Unkeyed(Exception):
    pass


def _tensor_attr(module, target: str) -> torch.Tensor:
    value = attribute(module, target)
    if not isinstance(value, torch.Tensor):
        raise _Unkeyed(f"an attribute of type {type(value).__name__}")
    return value


def _content_hash(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def _dir(cfg) -> str:
    return cfg.cache_dir or _core.default_cache_dir()


def load(graph_key: str, cfg, static_inputs: list[int]):
    """The runner of a cached graph, or None (a miss, or an entry that fails to load). A
    hit is counted here; a miss by the caller, once the graph turns out to be one ember
    traces (a graph left to AOTAutograd is never in this cache)."""
    data = _core.cache_read(_dir(cfg), graph_key, SUFFIX)
    if data is None:
        return None
    try:
        state = graph_format.decode_state(data, cache_tag(cfg))
        runner = load_graph(state, cfg, static_inputs, "graph cache")
    except Exception as e:
        logs.logger("cache").info("graph cache entry %s not used, tracing instead: %s: %s", graph_key[:16],
                                  type(e).__name__, e)
        return None
    stats.count_graph_cache("hit")
    mega_cache.record(_dir(cfg), graph_key, SUFFIX, data)
    return runner


def save(graph_key: str, runner, cfg) -> None:
    """Stores a compiled graph's state. Its kernels may still be compiling (a background
    C compile): a process that loads the entry before they are cached compiles them."""
    try:
        state = aot_cache.graph_state(runner, "inference", cache_tag(cfg))
        ok = _core.cache_write(_dir(cfg), graph_key, SUFFIX, state)
    except Exception as e:  # a value ember's format has no encoding for: trace it every time
        ok, why = False, f"{type(e).__name__}: {e}"
    else:
        why = "the cache directory is not usable"
    if ok:
        stats.count_graph_cache("saved_graphs")
        mega_cache.record(_dir(cfg), graph_key, SUFFIX, state)
    else:
        logs.logger("cache").info("graph %s not written to the graph cache: %s", graph_key[:16], why)
