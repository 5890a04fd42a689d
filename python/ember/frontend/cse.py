"""Common subexpressions of the joint graph, merged before the min-cut partitioner sees it.

The partitioner decides what the forward saves from the graph as traced: a value that the
forward computes and the backward's decompositions compute again appears twice, and both
copies may be saved. torch runs its own CSE there (`torch._functorch.config.cse`), but that
pass imports Inductor's pattern matcher and with it Inductor's lowerings, 0.3-0.6 s of a
cold start that ember has no other use for; ember turns it off and runs this one.

Two nodes merge when they call the same op overload with equal arguments. Never merged:
ops that mutate or draw random numbers (their schema says so), views, and any value whose
storage a graph output shares: two outputs that eager returns as separate tensors stay
separate (a gradient accumulated in place into one must not change the other).
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

_NO_KEY = object()


def _freeze(value):
    """A hashable stand-in for an argument, or _NO_KEY when it has none."""
    if isinstance(value, fx.Node):
        return ("node", value)
    if isinstance(value, (list, tuple)):
        items = tuple(_freeze(v) for v in value)
        return _NO_KEY if any(i is _NO_KEY for i in items) else (type(value).__name__, items)
    if isinstance(value, dict):
        items = tuple((k, _freeze(v)) for k, v in sorted(value.items()))
        return _NO_KEY if any(i is _NO_KEY for _, i in items) else ("dict", items)
    if isinstance(value, float):
        return ("float", value.hex())  # -0.0 and 0.0 apart (x + 0.0 is not x + -0.0 at x = -0.0)
    if value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device, torch.layout,
                                           torch.memory_format)):
        # 1 == True in Python: keep the type.
        return (type(value).__name__, value)
    return _NO_KEY


def _mergeable(node: fx.Node) -> bool:
    target = node.target
    if node.op != "call_function":
        return False
    if not isinstance(target, torch._ops.OpOverload):
        return target is operator.getitem
    schema = target._schema
    if schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    if target.is_view or any(a.alias_info is not None for a in schema.returns):
        return False
    return not target._schema.name.startswith(("aten::empty", "aten::new_empty"))


def _storage(node: fx.Node):
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return torch.multiprocessing.reductions.StorageWeakRef(val.untyped_storage())
    except (NotImplementedError, RuntimeError):
        return None


def eliminate_common_subexpressions(graph: fx.Graph) -> int:
    """Merges equal computations in `graph` (in place); the number of nodes removed."""
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    outputs = set(output.all_input_nodes)
    output_storages = {s for s in map(_storage, outputs) if s is not None}
    seen: dict = {}
    removed = 0
    for node in list(graph.nodes):
        if not _mergeable(node):
            continue
        storage = _storage(node)
        if storage is not None and storage in output_storages:
            continue
        if node in outputs:
            continue
        key = (node.target, _freeze(node.args), _freeze(node.kwargs))
        if key[1] is _NO_KEY or key[2] is _NO_KEY:
            continue
        first = seen.setdefault(key, node)
        if first is node:
            continue
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        removed += 1
    return removed
