"""A loaded CUDA graph's library calls, run once on scratch tensors before its first call.

A process's first convolution or matmul pays the libraries' first use: cuDNN's and
cuBLAS's handles and workspaces, their heuristics, and the modules of the kernels they
pick (loaded at their first launch). Measured on an H200, ResNet-50's first eager call in
a fresh process took 0.344 s, but 0.072 s once the model had run on another thread: that
cost is the process's, not the calling thread's. A precompiled graph's build thread
(precompile._RunnerBuild) runs while torch rebuilds Dynamo's guards, so it pays it there.

What runs is driven by the compiled graph's extern list, not by the model: each distinct
ATen call of a library op below (the same op, argument layouts and constants once), on
tensors made with torch.empty to the layouts ember compiled (its inputs', weights'
included: values do not change which algorithm a library picks), on a stream of its own,
synchronized before the graph's first call may run, the scratch tensors released after
each call. Never the user's tensors, never a CPU graph, nor a graph with symbolic sizes
(its layouts depend on the call), nor a call whose scratch memory exceeds the budget
(config.precompile_warm_budget_mb). The scratch blocks stay in torch's caching allocator,
pooled for that stream, which frees them when an allocation would otherwise fail.
ember.stats()["precompile"]: "externs_warmed", "externs_over_budget".
"""
from __future__ import annotations

import dataclasses
import math

import torch

from .. import counters as stats, logs
from ..frontend.fx_import import TORCH_DTYPES, Ref, SymValue
from ..runtime.runner import runtime_op

# ATen ops whose first call in a process initializes a library (cuDNN, cuBLAS/cuBLASLt,
# the attention kernels) or chooses and loads kernels per layout.
_LIBRARY_OPS = frozenset({
    "aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::conv1d", "aten::conv2d",
    "aten::conv3d", "aten::cudnn_convolution_transpose",
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::mv",
    "aten::addmv", "aten::_addmm_activation", "aten::_scaled_mm",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::scaled_dot_product_attention",
})


@dataclasses.dataclass(frozen=True)
class Scratch:
    """A tensor argument, as a layout: made with torch.empty_strided when the call runs."""

    sizes: tuple
    strides: tuple
    dtype: torch.dtype

    def nbytes(self) -> int:
        if any(s == 0 for s in self.sizes):
            return 0
        extent = 1 + sum((s - 1) * abs(st) for s, st in zip(self.sizes, self.strides))
        return extent * self.dtype.itemsize


@dataclasses.dataclass(frozen=True)
class WarmCall:
    op: str
    args: tuple
    kwargs: tuple  # (name, value) pairs
    nbytes: int  # its scratch tensors' and its results' bytes


def warm_list(cg, imported, budget_bytes: int) -> tuple[list[WarmCall], int]:
    """(the distinct library calls of a compiled graph to run once, in graph order; how
    many were left out for exceeding budget_bytes). Empty for a graph with symbols."""
    if imported.symbol_args:
        return [], 0
    buffers = {b["id"]: b for b in cg.buffers}
    calls, seen, over = [], set(), 0
    for e in cg.externs:
        call = imported.calls[e["node"]]
        if call.op.partition(".")[0] not in _LIBRARY_OPS:
            continue
        made = _scratch_call(call, e, buffers)
        try:
            if made is None or made in seen:
                continue
        except TypeError:  # an argument that is not hashable: not one of these ops' forms
            continue
        seen.add(made)
        if made.nbytes > budget_bytes:
            over += 1
            continue
        calls.append(made)
    return calls, over


def _scratch_call(call, extern: dict, buffers: dict) -> WarmCall | None:
    """The call with its tensor arguments replaced by their layouts, or None where an
    argument is not a plain tensor ember knows the layout of."""
    specs = {}
    for nid, idx, view in extern["tensor_args"]:
        b, _dtype, sizes, strides, _offset = view
        buf = buffers.get(b)
        if buf is None or buf.get("opaque") or not _ints(sizes) or not _ints(strides):
            return None
        specs[Ref(nid, idx)] = Scratch(tuple(sizes), tuple(strides), TORCH_DTYPES[buf["dtype"]])
    specs.update({Ref(nid, idx): None for nid, idx in extern["none_args"]})
    try:
        args = tuple(_substitute(a, specs) for a in call.args)
        kwargs = tuple((k, _substitute(v, specs)) for k, v in call.kwargs.items())
    except _NotWarmable:
        return None
    results = 0
    for b in extern["output_buffers"]:
        buf = buffers.get(b) if b >= 0 else None
        if buf is not None and not buf.get("opaque") and _ints(buf["sizes"]):
            results += math.prod(buf["sizes"]) * TORCH_DTYPES[buf["dtype"]].itemsize
    scratch = sum(s.nbytes() for s in _scratches(args + tuple(v for _, v in kwargs)))
    return WarmCall(call.op, args, kwargs, scratch + results)


class _NotWarmable(Exception):
    pass


def _ints(values) -> bool:
    return all(type(v) is int for v in values)


def _substitute(value, specs: dict):
    if isinstance(value, SymValue):
        raise _NotWarmable
    if isinstance(value, Ref):
        if value not in specs:
            raise _NotWarmable
        return specs[value]
    if isinstance(value, (list, tuple)):
        return tuple(_substitute(v, specs) for v in value) if type(value) is tuple else \
            _ListArg(_substitute(v, specs) for v in value)
    return value


class _ListArg(tuple):
    """A list argument, hashable (WarmCall is deduplicated), made a list again to run."""


def _scratches(values):
    for v in values:
        if isinstance(v, Scratch):
            yield v
        elif isinstance(v, tuple):
            yield from _scratches(v)


def _materialize(value, device):
    if isinstance(value, Scratch):
        return torch.empty_strided(value.sizes, value.strides, dtype=value.dtype, device=device)
    if isinstance(value, _ListArg):
        return [_materialize(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_materialize(v, device) for v in value)
    return value


def warm(calls: list[WarmCall], device: torch.device) -> int:
    """Runs each call once on scratch tensors on a side stream, and waits for them; returns
    how many ran. A call that fails stops the warm-up (logged): the graph's own first call
    then pays what is left, as it would have."""
    if not calls or device.type != "cuda":
        return 0
    ran, stream, op = 0, None, None
    try:
        stream = torch.cuda.Stream(device)
        with torch.cuda.device(device), torch.cuda.stream(stream), torch.no_grad():
            for c in calls:
                op = c.op
                args = [_materialize(a, device) for a in c.args]
                kwargs = {k: _materialize(v, device) for k, v in c.kwargs}
                runtime_op(op)(*args, **kwargs)  # the result is dropped at once
                del args, kwargs
                ran += 1
        stream.synchronize()  # done before the graph's first call may run (the build waits)
    except Exception as e:  # noqa: BLE001 (an optimization: the graph runs as it would have)
        logs.logger("cache").debug("warming a precompiled graph's library calls stopped at %s: %s", op, e)
        if stream is not None:
            stream.synchronize()
    if ran:
        stats.count_precompile("externs_warmed", ran)
    return ran


def warm_graph(cg, imported, device, cfg) -> int:
    """config.precompile_warm_externs: a loaded CUDA graph's library calls warmed."""
    if not cfg.precompile_warm_externs or device is None or device.type != "cuda":
        return 0
    calls, over = warm_list(cg, imported, cfg.precompile_warm_budget_mb << 20)
    if over:
        stats.count_precompile("externs_over_budget", over)
    return warm(calls, device)
