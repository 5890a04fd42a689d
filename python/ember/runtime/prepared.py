"""Weights prepared once: a convolution's weight in the layout its library computes with,
made at the first call and reused while the parameter is unchanged.

The lowering passes a 2-D convolution's weight that is a graph input (a parameter) to the
extern as it is (PipelineOptions::prepared_weights, on for the CPU target; the extern's
`prepared_args`), instead of through a channels-last copy made on every call. The runner
replaces the call:

    oneDNN   where ATen itself would run the convolution through oneDNN (fp32 by ATen's own
             rule; bf16/f16 where the CPU supports them), the weight is reordered once into
             oneDNN's blocked layout (torch.ops.mkldnn._reorder_convolution_weight, as
             Inductor's weight prepacking under freezing does) and the convolution runs as
             torch.ops.mkldnn._convolution_pointwise, which then reorders no weight.
             Eager and the channels-last path reorder it on every call: for
             Conv2d(512, 512, 3) on a 2x512x4x4 input that reorder is most of the call.
    channels-last   otherwise (ATen's native kernels: a single-threaded 1x1 convolution at
             a small batch), the weight's channels-last copy, or the weight itself when it
             is channels-last already (a 1x1 weight is).

A matmul operand that pad_matmuls pads (csrc/lower/pad_matmuls.h) and that is a view of a
graph input (the extern's `padded_args`: the LM head's transposed, tied embedding) is
padded here, once, instead of by a copy kernel on every call (`padded_input`).

A prepared value is reused while the call passes the same tensor object with the same
version counter (`tensor._version`, bumped by every in-place update: an optimizer step,
`p.mul_(...)` under no_grad, load_state_dict) and the same data pointer (`p.data = t`
swaps the storage). An update through `p.data.<op>_()` bypasses the version counter (as it
bypasses autograd's checks) and is not seen: update parameters in place under
torch.no_grad() instead, or turn this off with `ember.config.prepare_weights = False`
(the weight is then prepared on every call: the layout copy of before).
"""
from __future__ import annotations

import weakref

import torch

from ..frontend.fx_import import TORCH_DTYPES

_CONV = "aten::convolution.default"


class PreparedWeight:
    """One parameter's prepared form. Called with the tensor a call passes, returns the
    prepared value, made again only when that tensor changed (see the module docstring).
    Thread-safe: the state is one tuple, replaced whole."""

    def __init__(self, form: str, prepare, shape: tuple, dtype: torch.dtype, input_index: int, reuse: bool):
        self.form = form          # "oneDNN blocked" or "channels-last"
        self.shape, self.dtype, self.input_index = shape, dtype, input_index
        self._prepare = prepare   # tensor -> prepared value (None: the tensor itself serves)
        self._reuse = reuse       # config.prepare_weights
        self._state = None        # (weakref to the source, data_ptr, version, value)
        self.preparations = 0     # how many times it was (re)made

    @property
    def held_bytes(self) -> int:
        """Memory the prepared copy holds (0 before the first call, or when the parameter
        itself serves)."""
        st = self._state
        if st is None or st[3] is None:
            return 0
        return self.dtype.itemsize * _numel(self.shape)

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        st = self._state
        if st is not None and st[0]() is w and st[2] == w._version and st[1] == w.data_ptr() and not _capturing(w):
            return w if st[3] is None else st[3]
        with torch.no_grad():
            value = self._prepare(w.detach())
        self.preparations += 1
        if self._reuse and not _capturing(w):
            self._state = (weakref.ref(w), w.data_ptr(), w._version, value)
        return w if value is None else value


class PaddedInput(PreparedWeight):
    """A graph input's view, zero-padded for an aligned GEMM (ExternCall::padded_args). A
    parameter is padded once; another input (a gradient passed to a backward graph) is a new
    tensor on every call, padded once per call for every extern that pads it alike, its copy
    held until the next call (where the arena held the copy kernel's before)."""


def _capturing(w: torch.Tensor) -> bool:
    """A CUDA graph being recorded: the value is made inside the recording, so that every
    replay makes it again (a replay runs no Python and would not see an update)."""
    return w.is_cuda and torch.cuda.is_current_stream_capturing()


def padded_input(view, sizes, strides, input_index: int, reuse: bool) -> PaddedInput:
    """The PaddedInput for a view (buffer, dtype, sizes, strides, offset) of graph input
    `input_index`, padded to `sizes` laid out by `strides`; called with the input itself."""
    _, dtype, v_sizes, v_strides, offset = view
    v_sizes, v_strides, sizes, strides = tuple(v_sizes), tuple(v_strides), tuple(sizes), tuple(strides)
    inside = tuple(slice(0, n) for n in v_sizes)

    def pad(w):
        src = w.as_strided(v_sizes, v_strides, w.storage_offset() + offset)
        out = torch.empty_strided(sizes, strides, dtype=w.dtype, device=w.device)
        for d, (n, m) in enumerate(zip(v_sizes, sizes)):
            if m > n:
                out.narrow(d, n, m - n).zero_()  # the padding only
        out[inside].copy_(src)
        return out

    return PaddedInput("zero-padded", pad, sizes, TORCH_DTYPES[dtype], input_index, reuse)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _onednn_runs(dtype: torch.dtype, x_shape, w_shape, stride, dilation, groups) -> bool:
    """Whether ATen would run this convolution through oneDNN (its use_mkldnn rule in
    ConvUtils: for fp32, not a single-threaded unstrided 1x1 convolution at a batch under 16,
    nor a small ungrouped one at batch 1, where its native kernels are faster)."""
    if not torch.backends.mkldnn.is_available() or not torch.backends.mkldnn.enabled:
        return False
    if dtype == torch.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported()
    if dtype != torch.float32:
        return False
    strided, dilated = any(s != 1 for s in stride), any(d != 1 for d in dilation)
    one_by_one = w_shape[-1] == 1 and w_shape[-2] == 1
    if not (strided or dilated or x_shape[0] >= 16 or not one_by_one or torch.get_num_threads() > 1):
        return False
    return (groups > 1 or (w_shape[-1] > 3 and w_shape[-2] > 3) or x_shape[0] > 1
            or _numel(x_shape) > 20480)


def _channels_last(w: torch.Tensor):
    if w.is_contiguous(memory_format=torch.channels_last):
        return None  # the parameter itself serves
    return w.contiguous(memory_format=torch.channels_last)


def convolution(call, fetch, weight_input: int, x_view, w_view, reuse: bool):
    """(a function bufs -> the convolution's result, its PreparedWeight) for an
    aten.convolution call whose weight (argument 1) is prepared; None when the call is not
    one this handles (its arguments not positional as traced), and then it runs as traced."""
    if call.op != _CONV or len(call.args) != 9 or call.kwargs:
        return None
    x_ref, w_ref, b_ref, stride, padding, dilation, transposed, out_pad, groups = call.args
    if transposed or not all(isinstance(v, (list, tuple)) and len(v) == 2 for v in (stride, padding, dilation)):
        return None
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    x_shape, w_shape, dtype = tuple(x_view[2]), tuple(w_view[2]), TORCH_DTYPES[w_view[1]]
    x, w = fetch[x_ref], fetch[w_ref]
    bias = fetch[b_ref] if b_ref is not None else None
    if _onednn_runs(dtype, x_shape, w_shape, stride, dilation, groups):
        def reorder(t):
            # oneDNN reads the weight as a dense NCHW tensor (a channels-last or strided
            # parameter is made one first; once, like the reorder).
            return torch.ops.mkldnn._reorder_convolution_weight(t.contiguous(), padding, stride, dilation, groups,
                                                                 list(x_shape))

        prepared = PreparedWeight("oneDNN blocked", reorder, w_shape, dtype, weight_input, reuse)
        op = torch.ops.mkldnn._convolution_pointwise.default

        def run(bufs):
            return op(x(bufs), prepared(w(bufs)), bias(bufs) if bias is not None else None, padding, stride, dilation,
                      groups, "none", [], "")
        return run, prepared

    prepared = PreparedWeight("channels-last", _channels_last, w_shape, dtype, weight_input, reuse)
    op = torch.ops.aten.convolution.default._op

    def run_aten(bufs):
        return op(x(bufs), prepared(w(bufs)), bias(bufs) if bias is not None else None, stride, padding, dilation,
                  False, out_pad, groups)
    return run_aten, prepared


def describe(prepared: list[PreparedWeight], input_names: list[str] = ()) -> list[dict]:
    """What a runner holds, for explain: one entry per prepared parameter (named after the
    graph input it comes from, when the names are known)."""
    return [{"input": p.input_index, "name": input_names[p.input_index] if p.input_index < len(input_names) else None,
             "shape": list(p.shape), "dtype": str(p.dtype).removeprefix("torch."), "form": p.form,
             "held_bytes": p.held_bytes, "preparations": p.preparations} for p in prepared]
