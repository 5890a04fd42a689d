"""CI's slice of the OpInfo conformance sweep (tests/conformance/).

A fixed list of OpInfos, at least one per op family, each run on its first
samples in float32 and a few in the other dtypes; every case must match eager
(classes ember, aten or skip; never wrong or crash). The full sweep is
`python tests/conformance/sweep.py` (docs/conformance.md).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
cases = pytest.importorskip("cases")  # needs expecttest and hypothesis (torch.testing._internal)

FAMILIES = {
    "unary": ["abs", "exp", "log1p", "sigmoid", "tanh", "erf", "rsqrt", "sign", "frac", "nan_to_num",
              "bitwise_not", "logical_not"],
    "binary": ["add", "sub", "mul", "div.floor_rounding", "div.trunc_rounding", "true_divide", "pow", "remainder",
               "fmod", "maximum", "atan2", "bitwise_and", "lerp", "addcmul"],
    "comparison": ["eq", "lt", "ge", "isnan", "isinf", "where", "clamp", "masked_fill"],
    "activation": ["nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.hardtanh",
                   "nn.functional.leaky_relu", "nn.functional.softplus", "nn.functional.elu"],
    "reduction": ["sum", "mean", "prod", "amax", "argmax", "max.reduction_with_dim", "var", "std", "any", "all",
                  "logsumexp", "linalg.vector_norm"],
    "scan": ["cumsum", "cumprod"],
    "softmax/norm": ["softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.group_norm",
                     "nn.functional.batch_norm", "nn.functional.rms_norm"],
    "view/layout": ["view", "reshape", "permute", "transpose", "t", "expand", "squeeze", "unsqueeze", "flatten",
                    "narrow", "select", "slice", "as_strided", "movedim", "contiguous", "clone", "flip", "roll",
                    "repeat", "tile", "tril", "triu"],
    "join/split": ["cat", "stack", "split", "chunk", "unbind", "constant_pad_nd", "nn.functional.pad.constant",
                   "nn.functional.pad.reflect"],
    "indexing": ["gather", "index_select", "take_along_dim", "__getitem__", "nn.functional.embedding", "index_put", "scatter", "scatter_add", "index_add"],
    "pooling": ["nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d"],
    "creation/conversion": ["full_like", "zeros_like", "arange", "ones", "new_full", "to", "double", "bool"],
    "matmul/conv (ATen)": ["mm", "addmm", "bmm", "matmul", "nn.functional.linear", "nn.functional.conv2d"],
    "loss": ["nn.functional.mse_loss", "nn.functional.cross_entropy", "nn.functional.binary_cross_entropy",
             "nn.functional.smooth_l1_loss"],
    "sort/select (ATen)": ["sort", "topk"],
    "random": ["nn.functional.dropout", "bernoulli", "rand_like"],
}
OTHER_DTYPES = {  # a few ops per family in the other dtypes
    "f64": ["add", "softmax", "sum", "cumsum"],
    "f16": ["mul", "nn.functional.gelu", "mean"],
    "bf16": ["add", "softmax", "nn.functional.layer_norm", "sum", "exp"],
    "i32": ["add", "remainder", "sum", "bitwise_and"],
    "i64": ["div.floor_rounding", "cumsum", "amax", "where", "gather"],
    "bool": ["logical_not", "add", "any", "eq"],
}
SAMPLES_F32 = 3
SAMPLES_OTHER = 3

PARAMS = [(op, "f32", SAMPLES_F32) for ops in FAMILIES.values() for op in ops] + \
         [(op, dt, SAMPLES_OTHER) for dt, ops in OTHER_DTYPES.items() for op in ops]


@pytest.mark.parametrize("name,dtype,limit", PARAMS, ids=[f"{o}-{d}" for o, d, _ in PARAMS])
def test_opinfo(name, dtype, limit):
    op = cases.find_op(name)
    if dtype not in cases.supported_dtypes(op):
        pytest.skip(f"{name} does not support {dtype} on CPU")
    bad = []
    for i, sample in enumerate(cases.samples(op, dtype)[:limit]):
        r = cases.run_case(op, dtype, sample)
        if r["class"] in ("wrong", "crash"):
            bad.append(f"sample {i}: {r['class']}: {r['reason']}")
    assert not bad, "\n".join(bad)


def test_slice_covers_ops_ember_lowers():
    """The slice's op names exist in this torch's op_db (a rename must not silently drop a family)."""
    names = {cases.op_full_name(op) for op in cases.op_db()}
    missing = [o for o, _, _ in PARAMS if o not in names]
    assert not missing, missing


def test_classifier_flags_a_wrong_result(monkeypatch):
    """The harness can fail: a backend that perturbs results is classified wrong."""
    import torch

    def bad_backend(gm, example_inputs):
        def run(*args):
            out = gm(*args)
            return tuple(o + 1e-2 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out) \
                if isinstance(out, (tuple, list)) else out + 1e-2
        return run

    op = cases.find_op("exp")
    r = cases.run_case(op, "f32", cases.samples(op, "f32")[0], backend=bad_backend)
    assert r["class"] == "wrong", r


def test_classifier_flags_a_wrong_low_precision_result():
    """The float64 RMSE rule for f16/bf16 does not excuse a real error."""
    import torch

    def bad_backend(gm, example_inputs):
        def run(*args):
            out = gm(*args)
            first = out[0] if isinstance(out, (tuple, list)) else out
            first = first + 0.05 * first.abs().max()
            return (first, *out[1:]) if isinstance(out, (tuple, list)) else first
        return run

    op = cases.find_op("exp")
    r = cases.run_case(op, "bf16", cases.samples(op, "bf16")[0], backend=bad_backend)
    assert r["class"] == "wrong", r
