"""Masked attention on CUDA stays one fused ATen call.

AOTAutograd decomposes `scaled_dot_product_attention` while tracing, choosing its kernel
from fake tensors; on CUDA, with an `attn_mask` (transformers' BERT builds one whenever it
is traced, even with no padding) that choice is the math path: bmm, softmax and bmm, with
the full [batch, heads, seq, seq] scores in memory. Eager, given the same mask, runs a
fused kernel (cuDNN or memory-efficient attention) on the mask ember realizes. Inference
graphs of CUDA tensors therefore get such a call (a mask whose last dim is not contiguous,
the case the trace-time choice refuses) as `ember::sdpa_masked`, an op AOTAutograd keeps whole and ember
runs as an extern ATen call: the kernel choice is made at run time, as in eager, on the
mask as ember stores it (last dim contiguous, rows aligned: csrc/lower/extern_layouts.cpp).
Where SDPA's own checks say no fused kernel would take even that (fused_kernel_takes), the
call stays, and is traced to bmm + softmax + bmm, whose scale, mask and softmax ember fuses.

Only graphs traced with grad disabled are rewritten (Dynamo guards on grad mode, so a
call with grad enabled compiles its own graph): the op has no backward.

Before that, a mask that keeps every position and depends on no graph input (BERT's,
built from torch.ones when no attention_mask is given) is dropped from CUDA graphs,
training ones too: eager, which checks the mask's values, passes no mask either.
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


# Ops whose result is not a function of their arguments: a mask built with one is no constant.
_RANDOM = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "poisson", "exponential", "cauchy",
           "geometric", "log_normal", "seed")


def _constant_value(gm: torch.fx.GraphModule, node: torch.fx.Node):
    """The value of `node` when it depends on no graph input (a mask built from torch.ones
    and the input's static sizes), computed once now; None otherwise."""
    order, seen, todo = [], set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op not in ("call_function", "call_method") or any(r in str(n.target).lower() for r in _RANDOM):
            return None
        order.append(n)
        todo.extend(n.all_input_nodes)
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    graph = torch.fx.Graph()
    env = {}
    for n in sorted(order, key=position.__getitem__):
        env[n] = graph.node_copy(n, lambda x: env[x])
    graph.output(env[node])
    with torch.no_grad():
        value = torch.fx.GraphModule(gm, graph)()
    return value if isinstance(value, torch.Tensor) else None


def _mask_is_no_op(gm: torch.fx.GraphModule, mask) -> bool:
    """Whether an attention mask keeps every position: all true (boolean) or all zero
    (additive). transformers builds such a mask from torch.ones whenever it is traced,
    where eager, seeing no padding, passes none and gets the unmasked fused kernel. With
    symbolic sizes the mask depends on them (arange over the sequence, compared and
    expanded): its value ranges decide it (_mask_range)."""
    if not isinstance(mask, torch.fx.Node):
        return False
    try:
        value = _constant_value(gm, mask)
        if value is None:
            lo, hi = _mask_range(gm, mask)
            val = mask.meta.get("example_value", mask.meta.get("val"))
            is_bool = isinstance(val, torch.Tensor) and val.dtype == torch.bool
            return (lo, hi) == ((1, 1) if is_bool else (0, 0))
        return bool(value.all()) if value.dtype == torch.bool else bool((value == 0).all())
    except Exception:  # an op that needs more than this graph: not a constant we can use
        return False


_INF = float("inf")
_SAME_VALUES = {"expand", "view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "contiguous", "clone",
                "expand_as", "flatten"}
_COMPARE = {"ge": lambda a, b: (a[0] >= b[1], a[1] < b[0]), "gt": lambda a, b: (a[0] > b[1], a[1] <= b[0]),
            "le": lambda a, b: (a[1] <= b[0], a[0] > b[1]), "lt": lambda a, b: (a[1] < b[0], a[0] >= b[1])}


class _Unknown(Exception):
    pass


def _mask_range(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[float, float]:
    """[lo, hi] bounding every element of `node`, when its subgraph depends on graph
    inputs only through sizes (SymInt placeholders, each >= 0) and uses only arange,
    ones/zeros/full, + - * with scalars, comparisons, logical and/or/not, indexing by
    None and slices, and views and expands (which keep the values). A comparison whose
    ranges decide it gives [1, 1] or [0, 0]: transformers' `arange(s) >= 0` is all true
    for every s. Raises _Unknown for anything else."""
    memo = {}

    def rng(a):
        if isinstance(a, torch.fx.Node):
            if a not in memo:
                memo[a] = node_range(a)
            return memo[a]
        if isinstance(a, bool) or isinstance(a, (int, float)):
            return (float(a), float(a))
        raise _Unknown(a)

    def node_range(n):
        val = n.meta.get("example_value", n.meta.get("val"))
        if n.op == "placeholder":
            if isinstance(val, torch.SymInt):
                return (0.0, _INF)
            raise _Unknown(n)
        if n.op not in ("call_function", "call_method"):
            raise _Unknown(n)
        name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
        args = n.args
        if n.op == "call_method" and name in _SAME_VALUES:
            return rng(args[0])
        is_bool = isinstance(val, torch.Tensor) and val.dtype == torch.bool
        if name == "to" and n.op == "call_method":
            lo, hi = rng(args[0])
            if is_bool:
                return (1.0, 1.0) if lo > 0 or hi < 0 else (0.0, 0.0) if (lo, hi) == (0, 0) else (0.0, 1.0)
            if isinstance(val, torch.Tensor) and val.dtype.is_floating_point:
                return (lo, hi)
            raise _Unknown(n)  # a conversion to integers rounds
        if name == "arange" and not n.kwargs.get("step") and 1 <= len(args) <= 2:
            start, end = (rng(0), rng(args[0])) if len(args) == 1 else (rng(args[0]), rng(args[1]))
            # Elements start, start + 1, ... below end: at most end - 1 when they are integers.
            integral = isinstance(val, torch.Tensor) and not val.dtype.is_floating_point
            return (start[0], end[1] - 1 if integral else end[1])
        if name in ("ones", "zeros"):
            v = 1.0 if name == "ones" else 0.0
            return (v, v)
        if name == "getitem":
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if all(i is None or i is Ellipsis or isinstance(i, (slice, int)) for i in index):
                return rng(args[0])
            raise _Unknown(n)
        if name in ("add", "sub", "mul") and len(args) == 2:
            (a0, a1), (b0, b1) = rng(args[0]), rng(args[1])
            if name == "add":
                return (a0 + b0, a1 + b1)
            if name == "sub":
                return (a0 - b1, a1 - b0)
            products = [x * y for x in (a0, a1) for y in (b0, b1)]
            if any(p != p for p in products):  # inf * 0
                raise _Unknown(n)
            return (min(products), max(products))
        if name in _COMPARE and len(args) == 2:
            always, never = _COMPARE[name](rng(args[0]), rng(args[1]))
            return (1.0, 1.0) if always else (0.0, 0.0) if never else (0.0, 1.0)
        if name in ("and_", "or_") and len(args) == 2 and is_bool:
            (a0, a1), (b0, b1) = rng(args[0]), rng(args[1])
            return (min(a0, b0), min(a1, b1)) if name == "and_" else (max(a0, b0), max(a1, b1))
        if name == "invert" and len(args) == 1 and is_bool:
            lo, hi = rng(args[0])
            return (1.0 - hi, 1.0 - lo)
        raise _Unknown(n)

    return rng(node)


def drop_no_op_masks(gm: torch.fx.GraphModule) -> int:
    """Removes attention masks that keep every position (see _mask_is_no_op) from a
    Dynamo graph's scaled_dot_product_attention calls. Returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA:
            continue
        a = _sdpa_args(node)
        if a is None or a["attn_mask"] is None or not _mask_is_no_op(gm, a["attn_mask"]):
            continue
        node.args = (a["query"], a["key"], a["value"])
        node.kwargs = {"attn_mask": None, "dropout_p": a["dropout_p"], "is_causal": a["is_causal"], "scale": a["scale"]}
        count += 1
    if count:
        gm.recompile()  # the mask's ops are left dead: AOTAutograd drops them
    return count


# Elements an attention mask's rows are aligned to when ember stores it for an
# ember::sdpa_masked call (kAttentionMaskAlignment, csrc/lower/extern_layouts.h).
_MASK_ALIGNMENT = 16


def _stored_mask_strides(mask: torch.Tensor) -> list[int]:
    """The strides ember stores an sdpa_masked mask with (sdpa_mask_strides in
    csrc/lower/extern_layouts.cpp): last dim contiguous, rows aligned, eager's broadcast
    dims still broadcast."""
    sizes, strides, step = list(mask.shape), [0] * mask.dim(), 1
    for d in reversed(range(mask.dim())):
        if sizes[d] > 1 and mask.stride(d) == 0 and d + 1 < mask.dim():
            continue
        strides[d] = step
        span = -(-sizes[d] // _MASK_ALIGNMENT) * _MASK_ALIGNMENT if d == mask.dim() - 1 else sizes[d]
        step *= max(span, 1)
    return strides


def fused_kernel_takes(q, k, v, mask, is_causal: bool) -> bool | None:
    """Whether one of SDPA's fused kernels (cuDNN, memory-efficient, flash) accepts this call
    with the mask as ember stores it, by SDPA's own dispatch checks on the example values; None
    when they cannot be asked (another torch, no CUDA). When none does, SDPA's run-time choice
    would be its math path, a dozen ATen kernels over the [b, h, q, k] scores: the call is
    better traced (bmm, softmax, bmm), where ember fuses the scale, mask and softmax."""
    backends = torch.backends.cuda
    checks = [getattr(backends, n, None) for n in ("can_use_cudnn_attention", "can_use_efficient_attention",
                                                   "can_use_flash_attention")]
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v, mask)) or not any(checks) or \
            q.device.type != "cuda" or not torch.cuda.is_available():
        return None
    try:
        fake_mode = torch._guards.detect_fake_mode([q, k, v, mask])
        with fake_mode if fake_mode is not None else torch._subclasses.FakeTensorMode():
            stored = torch.empty_strided(mask.shape, _stored_mask_strides(mask), dtype=mask.dtype, device=mask.device)
            params = backends.SDPAParams(q, k, v, stored, 0.0, is_causal, False)
            return any(check(params, False) for check in checks if check is not None)
    except Exception:  # an argument the checks do not take: leave the choice to run time
        return None


def fuse_masked_attention(gm: torch.fx.GraphModule) -> int:
    """Rewrites masked, dropout-free attention calls of a Dynamo graph into ember::sdpa_masked
    (the caller checks that the graph is a CUDA inference graph), where a fused kernel will
    take them (fused_kernel_takes). Returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA:
            continue
        a = _sdpa_args(node)
        if a is None or a["attn_mask"] is None or a["dropout_p"] != 0.0 or not _math_only_mask(a["attn_mask"]):
            continue
        vals = [x.meta.get("example_value", x.meta.get("val")) if isinstance(x, torch.fx.Node) else None
                for x in (a["query"], a["key"], a["value"], a["attn_mask"])]
        if fused_kernel_takes(*vals, a["is_causal"]) is False:
            continue
        node.target = torch.ops.ember.sdpa_masked.default
        node.args = (a["query"], a["key"], a["value"], a["attn_mask"], a["is_causal"], a["scale"])
        node.kwargs = {}
        count += 1
    if count:
        gm.recompile()
    return count
