"""2-d pooling, end to end: compiled by the backend under test, compared with eager.

Inputs are 13x11 (odd, and prime along H) so that ceil_mode and padding reach the border
windows, and each case runs on contiguous and channels_last layouts.
"""
import pytest
import torch
import torch.nn.functional as F

import ember
from ember.records import Recording

from helpers import check_compiled

LAYOUTS = [torch.contiguous_format, torch.channels_last]


def layout_id(fmt):
    return "channels_last" if fmt == torch.channels_last else "contiguous"


def image(memory_format, shape=(2, 5, 13, 11), dtype=torch.float32):
    return torch.randn(shape, dtype=dtype).to(memory_format=memory_format)


# (kernel, stride, padding, ceil_mode)
MAX_POOL = [
    (2, 2, 0, False),
    (2, 2, 0, True),
    (3, 2, 1, False),
    (3, 2, 1, True),
    (3, 1, 1, False),
    (3, 3, 0, True),
    ((3, 2), (2, 1), (1, 0), False),
]


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("k,s,p,ceil", MAX_POOL, ids=str)
def test_max_pool2d(k, s, p, ceil, fmt):
    check_compiled(lambda x: F.max_pool2d(x, k, s, p, ceil_mode=ceil), image(fmt))


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
def test_max_pool2d_with_indices_and_ties(fmt):
    # Rounded values make ties inside windows; the index of the first maximum must win.
    x = image(fmt).round()
    check_compiled(lambda a: F.max_pool2d(a, 3, 2, 1, return_indices=True), x)


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1)], ids=str)
def test_max_pool2d_with_indices_and_nans(k, s, p, fmt):
    # ATen's CPU kernel takes `val > maxval || isnan(val)`: with several NaNs in a
    # window the last one's index wins; the values are NaN either way.
    x = image(torch.contiguous_format)
    x[:, :, ::2, 1::3] = float("nan")
    x[:, :, 1::3, ::2] = float("nan")
    x[0, 1] = float("nan")
    check_compiled(lambda a: F.max_pool2d(a, k, s, p, return_indices=True), x.to(memory_format=fmt))


def test_max_pool2d_after_relu_and_neg_inf():
    x = image(torch.contiguous_format)
    x[0, 0, :4, :4] = float("-inf")
    check_compiled(lambda a: F.max_pool2d(torch.relu(a) - 1 + a, 2), x)


# A max-pool of a per-channel function of its input that is monotone in it (increasing
# or, where the channel's factor is negative, decreasing) is pooled as max(f(max x),
# f(min x)) (ir/monotone.h); functions that are not monotone take every window element.
POOLED_FUNCTIONS = {
    "batch_norm_relu": lambda a, s, b: torch.relu(a * s + b),
    "exp_of_negated": lambda a, s, b: torch.exp(-a) * s,
    "sigmoid_of_quotient": lambda a, s, b: torch.sigmoid((a - b) / (s.abs() + 0.5)),
    "clamped_and_floored": lambda a, s, b: torch.floor(torch.clamp(a * s, min=-1.5)),
    "silu": lambda a, s, b: F.silu(a * s + b),  # not monotone
    "squared": lambda a, s, b: (a + b) * (a + b),  # not monotone
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("k,s,p,ceil", [(3, 2, 1, False), (3, 2, 1, True), (2, 2, 0, True)], ids=str)
@pytest.mark.parametrize("name", sorted(POOLED_FUNCTIONS))
def test_max_pool2d_of_a_per_channel_function(name, k, s, p, ceil, fmt, dtype):
    fn = POOLED_FUNCTIONS[name]
    x = image(fmt, dtype=dtype)
    x[0, 0, 2:5, 3:6] = float("nan")
    x[1, 2, :3, :2] = float("inf")
    x[1, 3, 7:, 5:] = float("-inf")
    scale = torch.tensor([1.5, -2.0, 0.0, 0.75, -0.5], dtype=dtype).view(1, 5, 1, 1)
    shift = torch.tensor([0.1, -0.3, 0.2, 0.0, 1.0], dtype=dtype).view(1, 5, 1, 1)
    check_compiled(lambda a, sc, sh: F.max_pool2d(fn(a, sc, sh), k, s, p, ceil_mode=ceil), x, scale, shift)


# (kernel, stride, padding, ceil_mode)
AVG_POOL = [
    (2, 2, 0, False),
    (3, 2, 1, False),
    (3, 2, 1, True),
    (3, 1, 1, False),
    (2, 2, 1, True),
    ((3, 2), (2, 1), (1, 1), False),
]


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("k,s,p,ceil", AVG_POOL, ids=str)
def test_avg_pool2d(k, s, p, ceil, count_include_pad, fmt):
    check_compiled(lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil,
                                          count_include_pad=count_include_pad), image(fmt))


def test_avg_pool2d_divisor_override():
    check_compiled(lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4),
                   image(torch.contiguous_format))


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("out", [1, (1, 1), (3, 5), (4, 4), 7, (13, 11)], ids=str)
def test_adaptive_avg_pool2d(out, fmt):
    # (3, 5) and 7 do not divide 13x11: windows overlap and vary in size.
    check_compiled(lambda x: F.adaptive_avg_pool2d(x, out), image(fmt))


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
def test_adaptive_max_pool2d(fmt):
    check_compiled(lambda x: F.adaptive_max_pool2d(x, (3, 5)), image(fmt))


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
def test_pool_bfloat16(fmt):
    x = image(fmt, dtype=torch.bfloat16)
    check_compiled(lambda a: (F.max_pool2d(a, 3, 2, 1), F.avg_pool2d(a, 2),
                              F.adaptive_avg_pool2d(a, 1)), x, rtol=1.6e-2, atol=1.6e-2)


def test_pool_after_pointwise_and_flatten():
    # The classifier-head pattern: BN-like affine, ReLU, global average pool, flatten.
    x = image(torch.channels_last, shape=(4, 8, 7, 7))
    scale, shift = torch.randn(1, 8, 1, 1), torch.randn(1, 8, 1, 1)
    check_compiled(lambda a, s, b: F.adaptive_avg_pool2d(torch.relu(a * s + b), 1).flatten(1),
                   x, scale, shift)


# (kernel, stride, padding, dilation, ceil_mode): non-overlapping, overlapping, padded,
# dilated and ceil-mode windows.
MAX_POOL_BACKWARD = [
    (2, 2, 0, 1, False),
    (3, 2, 1, 1, True),
    (3, 1, 1, 1, False),
    ((3, 2), (2, 1), (1, 0), 1, False),
    (2, 1, 0, 2, False),
]


@pytest.mark.parametrize("fmt", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("k,s,p,d,ceil", MAX_POOL_BACKWARD, ids=str)
def test_max_pool2d_backward(k, s, p, d, ceil, fmt):
    from helpers import compile_fresh

    x = image(fmt)
    # A weight per output element: the gradient flowing back differs per window.
    out_shape = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil).shape
    weight = torch.randn(out_shape)

    def loss(t):
        return (F.max_pool2d(t, k, s, p, d, ceil_mode=ceil) * weight).sum()

    expected = x.clone().requires_grad_()
    loss(expected).backward()
    actual = x.clone().requires_grad_()
    records = []
    recording = Recording(records)
    try:
        compile_fresh(loss)(actual).backward()
    finally:
        recording.stop()
    torch.testing.assert_close(actual.grad, expected.grad, rtol=0, atol=0)
    backward = [r for r in records if r.name.startswith("backward")]
    assert backward and not [e for r in backward for e in r.cg.externs], "max-pool backward ran in ATen"


def test_cpu_inference_cnn_keeps_activations_channels_last():
    # A CPU inference graph with convolutions stores its activations channels-last, the
    # layout the convolutions run in: BatchNorm + ReLU + max-pool is one kernel reading the
    # first convolution's output along its channels, with no transposing copy to NCHW and
    # back (compiler.build_runner; the small CNN ran 0.47 -> 0.36 ms).
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1)).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        report = ember.explain(model, x)
        check_compiled(model, x)
    kernels = [set(k["ops"]) for g in report.graphs for k in g["kernels"]]
    with_relu = [ops for ops in kernels if "aten.relu.default" in ops]
    assert with_relu and all("aten.max_pool2d_with_indices.default" in ops for ops in with_relu), kernels
