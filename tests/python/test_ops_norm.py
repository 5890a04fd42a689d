"""Normalizations and attention, end to end: compiled by the backend under test, compared
with eager."""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import check_compiled


def rand(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,normalized", [
    ((4, 7, 13), (13,)),
    ((4, 7, 13), (7, 13)),
    ((3, 256), (256,)),
    ((5, 1), (1,)),
    ((2, 127), (127,)),
], ids=str)
def test_layer_norm(shape, normalized, affine):
    x = rand(*shape) * 3 + 5  # an offset catches a variance computed without centring
    w = rand(*normalized) if affine else None
    b = rand(*normalized) if affine else None
    check_compiled(lambda a, w, b: F.layer_norm(a, normalized, w, b, eps=1e-5), x, w, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_over_channels_of_a_convolution(dtype):
    # ConvNeXt's downsample: a biased convolution permuted to NHWC, scaled, LayerNorm over
    # its channels in f32, permuted back; the value the LayerNorm reads is stored with its
    # channels last (lower/activation_layout.h), not "channels-last" of its own dims.
    x = rand(2, 16, 6, 6, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w, b, g, beta = rand(16, 16, 3, 3, dtype=dtype), rand(16, dtype=dtype), rand(16), rand(16)

    def block(x, w, b, g, beta):
        y = F.conv2d(x, w, b, padding=1).permute(0, 2, 3, 1) * 2
        return F.layer_norm(y.float(), (16,), g, beta).to(x.dtype).permute(0, 3, 1, 2)

    tol = dict(rtol=4e-2, atol=4e-2) if dtype == torch.bfloat16 else {}
    check_compiled(block, x, w, b, g, beta, **tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_layer_norm_low_precision(dtype):
    x, w, b = rand(4, 7, 64, dtype=dtype), rand(64, dtype=dtype), rand(64, dtype=dtype)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else dict(rtol=4e-2, atol=4e-2)
    check_compiled(lambda a, w, b: F.layer_norm(a, (64,), w, b), x, w, b, **tol)


def test_layer_norm_module_residual():
    norm = torch.nn.LayerNorm(32).eval()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    check_compiled(lambda a: a + norm(a).relu(), rand(3, 9, 32))


def bn_stats(c):
    return (rand(c) * 0.5, torch.rand(c) + 0.5, torch.rand(c) + 0.5, rand(c) * 0.5)


@pytest.mark.parametrize("shape,fmt", [
    ((2, 6, 5, 7), torch.contiguous_format),
    ((2, 6, 5, 7), torch.channels_last),
    ((4, 6), torch.contiguous_format),
    ((3, 6, 11), torch.contiguous_format),
], ids=["4d", "4d_channels_last", "2d", "3d"])
def test_batch_norm_eval(shape, fmt):
    x = rand(*shape).to(memory_format=fmt)
    mean, var, w, b = bn_stats(6)
    check_compiled(lambda a, m, v, w, b: F.batch_norm(a, m, v, w, b, training=False, eps=1e-3),
                   x, mean, var, w, b)


def test_batch_norm_eval_no_affine():
    mean, var, _, _ = bn_stats(6)
    check_compiled(lambda a, m, v: F.batch_norm(a, m, v, training=False), rand(2, 6, 5, 7), mean, var)


def test_batch_norm_module_eval_conv_block():
    torch.manual_seed(1)
    block = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6),
                                torch.nn.ReLU()).eval()
    bn = block[1]
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    with torch.no_grad():
        check_compiled(block, rand(2, 3, 9, 9))


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
@pytest.mark.parametrize("shape", [(2, 6, 5, 7), (3, 6, 11)], ids=str)
def test_group_norm(shape, groups):
    x = rand(*shape) * 2 + 3
    w, b = rand(6), rand(6)
    check_compiled(lambda a, w, b: F.group_norm(a, groups, w, b, eps=1e-5), x, w, b)
    check_compiled(lambda a: F.group_norm(a, groups), x)


def rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(4, 7, 64), (3, 127), (5, 1)], ids=str)
def test_rms_norm_by_hand(shape, dtype):
    x, w = rand(*shape, dtype=dtype), rand(shape[-1], dtype=dtype)
    tol = dict(rtol=3e-2, atol=3e-2) if dtype == torch.bfloat16 else {}
    check_compiled(rms_norm, x, w, **tol)


def test_rms_norm_upcast_pattern():
    # The Llama pattern: normalize in float32, multiply the weight in the input dtype.
    def fn(x, w):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return w * h.to(x.dtype)
    check_compiled(fn, rand(4, 7, 64, dtype=torch.bfloat16), rand(64, dtype=torch.bfloat16),
                   rtol=1.6e-2, atol=1.6e-2)


def attention(q, k, v, causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        t = q.shape[-2]
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,t,d", [(2, 4, 16, 8), (1, 3, 13, 7), (2, 1, 1, 16)], ids=str)
def test_attention_by_hand(b, h, t, d, causal):
    q, k, v = rand(b, h, t, d), rand(b, h, t, d), rand(b, h, t, d)
    check_compiled(lambda q, k, v: attention(q, k, v, causal), q, k, v)


def test_attention_by_hand_from_projection():
    # Heads split out of one projection: q, k, v are non-contiguous views of it.
    torch.manual_seed(2)
    proj = torch.nn.Linear(32, 96).eval()

    def fn(x):
        b, t, _ = x.shape
        q, k, v = proj(x).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4).unbind(0)
        return attention(q, k, v, causal=True).transpose(1, 2).reshape(b, t, 32)
    with torch.no_grad():
        check_compiled(fn, rand(2, 11, 32))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(causal):
    q, k, v = rand(2, 4, 16, 8), rand(2, 4, 16, 8), rand(2, 4, 16, 8)
    check_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)
