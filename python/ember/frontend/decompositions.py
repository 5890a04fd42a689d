"""ember's own decomposition rules, added to the table AOTAutograd traces with.

max_pool2d_with_indices_backward(grad, self, ..., indices) reads `self` for its shape
and strides only (the indices say where each gradient goes), but a traced call that
takes `self` makes the partitioner save it: the max-pool input of a training step,
which for conv-BN-ReLU-pool is a full-size ReLU output written by the forward and
read by the backward (16 MB per step in the benchmark CNN), although the backward
recomputes the ReLU mask from the saved convolution output anyway. The rule traces
the same op with an empty tensor of that shape and those strides in place of `self`.
"""
from __future__ import annotations

import threading

import torch

aten = torch.ops.aten

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


def ember_decompositions():
    """Op overload -> rule, on top of PyTorch's tables (see backend.decomposition_table)."""
    return {aten.max_pool2d_with_indices_backward.default: _max_pool2d_backward_without_input}
