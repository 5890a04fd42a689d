"""The decomposition table ember's front ends trace with (ember's own and AOTAutograd),
and ember's own rules in it.

max_pool2d_with_indices_backward(grad, self, ..., indices) reads `self` for its shape
and strides only (the indices say where each gradient goes), but a traced call that
takes `self` makes the partitioner save it: the max-pool input of a training step,
which for conv-BN-ReLU-pool is a full-size ReLU output written by the forward and
read by the backward (16 MB per step in the benchmark CNN), although the backward
recomputes the ReLU mask from the saved convolution output anyway. The rule traces
the same op with an empty tensor of that shape and those strides in place of `self`.
"""
from __future__ import annotations

import collections.abc
import functools
import threading

import torch

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
    "unbind",
    "std_mean",
]


# Ops kept whole although PyTorch's core table decomposes them: attention runs in
# ATen's fused (flash) kernel, not as the math path's bmm + softmax + bmm.
_KEEP_WHOLE = [
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention_math",
    # PyTorch's rule computes baddbmm in float32 for bf16/f16 operands (its opmath cast
    # covers the product too), which leaves the GPU a float32 GEMM without tensor cores:
    # BLOOM's ALiBi scores took 4x as long as ATen's bf16 baddbmm. Kept whole it is one
    # BLAS call with its scale and bias in the epilogue, rounded once, as in eager.
    "baddbmm",
    # An embedding's weight gradient: the decomposition is index_put with accumulate=True,
    # which on the GPU is ATen's sort-and-walk kernel, one thread per run of equal
    # indices: T5's relative position bias (32 buckets indexed by 512 x 512 positions)
    # took 12 ms a call on an H200. ATen's own embedding backward sums the runs in
    # parallel segments.
    "embedding_dense_backward",
    # index_add decomposes into index_put(accumulate=True), which index_put's rule below turns
    # back into index_add (see _index_put_accumulate_as_index_add).
    "index_add",
    # Creation ops whose decompositions round differently from ATen's kernels in
    # integer and low-precision dtypes; they run once per call, as ATen calls.
    "linspace",
    "logspace",
]


@functools.lru_cache(maxsize=1)
def decomposition_table():
    """The table both front ends trace with: PyTorch's core ATen set, the ops above, less the
    ones kept whole, with ember's own rules (below)."""
    from torch._decomp import get_decompositions

    table = dict(_core_aten_table())
    extra = [getattr(aten, name) for name in _EXTRA_DECOMPOSITIONS if hasattr(aten, name)]
    table.update(get_decompositions(extra))
    for name in _KEEP_WHOLE:
        packet = getattr(aten, name, None)
        for overload in (packet.overloads() if packet is not None else []):
            table.pop(getattr(packet, overload), None)
    table.update(ember_decompositions())
    return table


def _core_aten_table():
    """PyTorch's core ATen decompositions. core_aten_decompositions() (torch >= 2.6) adds an
    entry for each of ~500 CompositeImplicitAutograd ops, found by walking the dispatcher
    (0.25 s of every cold process on a 2-core VM), whose rule is to run the op's implicit
    kernel: what the dispatcher does with such an op anyway while make_fx traces (the
    tracer's decompositions see no CompositeImplicitAutograd op). The explicit part alone
    gives the same graphs."""
    import torch._decomp as decomp

    explicit = getattr(decomp, "_core_aten_decompositions_post_autograd", None)
    return explicit() if explicit is not None else decomp.core_aten_decompositions()


class LazyDecompositionTable(collections.abc.Mapping):
    """decomposition_table(), built on first use: AOTAutograd reads it only to trace, so a
    Dynamo graph found in the AOTAutogradCache never pays for building it (~0.2 s)."""

    def __getitem__(self, op):
        return decomposition_table()[op]

    def __iter__(self):
        return iter(decomposition_table())

    def __len__(self):
        return len(decomposition_table())


_tracing = threading.local()


def _max_pool2d_backward_without_input(grad, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    # The inner call dispatches through the same table; NotImplemented there traces the op.
    if getattr(_tracing, "inside", False):
        return NotImplemented
    _tracing.inside = True
    try:
        like = torch.empty_strided(self.shape, self.stride(), dtype=self.dtype, device=self.device)
        return aten.max_pool2d_with_indices_backward.default(grad, like, kernel_size, stride, padding, dilation,
                                                             ceil_mode, indices)
    finally:
        _tracing.inside = False


def _index_put_accumulate_as_index_add(x, indices, values, accumulate=False):
    """index_put(x, [None, .., idx], values, accumulate=True) with one integer index tensor
    as index_add(x, d, idx.flatten(), values broadcast and flattened alike): the backward of
    x[:, idx], of index_select and of index_add itself. ATen runs the two differently on the
    GPU: index_put's accumulation sorts the indices and walks each run of equal ones on one
    thread (gather_block's training step: 468 us of 2.3 ms on an H200), index_add adds with
    atomics (and, under torch.use_deterministic_algorithms, takes index_put's sorted path).
    Anything else (no accumulation, several or boolean indices) is traced as it is."""
    live = [d for d, t in enumerate(indices) if t is not None]
    if not accumulate or len(live) != 1:
        return NotImplemented
    d = live[0]
    idx = indices[d]
    if idx.dtype not in (torch.int64, torch.int32) or x.dim() <= d:
        return NotImplemented
    before, after = list(x.shape[:d]), list(x.shape[d + 1:])
    flat = idx.reshape(-1)
    flat = torch.where(flat < 0, flat + x.shape[d], flat)  # index_put wraps negative indices
    v = values.expand(before + list(idx.shape) + after).reshape(before + [flat.numel()] + after)
    return aten.index_add.default(x, d, flat, v.to(x.dtype))


def ember_decompositions():
    """Op overload -> rule, on top of PyTorch's tables (see decomposition_table)."""
    return {aten.max_pool2d_with_indices_backward.default: _max_pool2d_backward_without_input,
            aten.index_put.default: _index_put_accumulate_as_index_add}
