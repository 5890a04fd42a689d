"""Masked attention on CUDA stays one fused ATen call.

AOTAutograd decomposes `scaled_dot_product_attention` while tracing, choosing its kernel
from fake tensors; on CUDA, with an `attn_mask` (transformers' BERT builds one whenever it
is traced, even with no padding) that choice is the math path: bmm, softmax and bmm, with
the full [batch, heads, seq, seq] scores in memory. Eager, given the same mask, runs a
fused kernel (cuDNN or memory-efficient attention) on the mask ember realizes. Inference
graphs of CUDA tensors therefore get such a call (a mask whose last dim is not contiguous,
the case the trace-time choice refuses) as `ember::sdpa_masked`, an op AOTAutograd keeps whole and ember
runs as an extern ATen call: the kernel choice is made at run time, as in eager.

Only graphs traced with grad disabled are rewritten (Dynamo guards on grad mode, so a
call with grad enabled compiles its own graph): the op has no backward.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

_SDPA = (F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)


@torch.library.custom_op("ember::sdpa_masked", mutates_args=())
def sdpa_masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, is_causal: bool,
                scale: float | None) -> torch.Tensor:
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
    return out.contiguous()  # the layout the fake declares, whichever kernel ran


@sdpa_masked.register_fake
def _(q, k, v, mask, is_causal, scale):
    return q.new_empty(q.shape[:-1] + v.shape[-1:])


def _sdpa_args(node):
    """(q, k, v, mask, dropout_p, is_causal, scale) of an F.scaled_dot_product_attention call,
    or None when the call has arguments this rewrite does not carry (enable_gqa)."""
    names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
    defaults = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
    if len(node.args) > len(names) or any(k not in names for k in node.kwargs):
        return None
    args = dict(zip(names, node.args), **node.kwargs)
    args = {n: args.get(n, defaults.get(n)) for n in names}
    if args["enable_gqa"] or "query" not in args:
        return None
    return args


def _math_only_mask(mask) -> bool:
    """A mask whose last dim is not contiguous (BERT's: [b,1,1,s] expanded over the query
    rows has stride 0 there) is one the fused kernels refuse at trace time. Other masks
    (GPT-2's causal one) already trace to a fused kernel (cuDNN), which stays."""
    val = mask.meta.get("example_value", mask.meta.get("val")) if isinstance(mask, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.dim() > 0 and val.size(-1) > 1 and val.stride(-1) != 1


def fuse_masked_attention(gm: torch.fx.GraphModule) -> int:
    """Rewrites masked, dropout-free attention calls of a Dynamo graph into ember::sdpa_masked
    (the caller checks that the graph is a CUDA inference graph). Returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA:
            continue
        a = _sdpa_args(node)
        if a is None or a["attn_mask"] is None or a["dropout_p"] != 0.0 or not _math_only_mask(a["attn_mask"]):
            continue
        node.target = torch.ops.ember.sdpa_masked.default
        node.args = (a["query"], a["key"], a["value"], a["attn_mask"], a["is_causal"], a["scale"])
        node.kwargs = {}
        count += 1
    if count:
        gm.recompile()
    return count
