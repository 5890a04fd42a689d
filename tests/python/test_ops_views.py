"""View and layout ops, end to end: compiled by the backend under test, compared with eager.

Most cases follow the view with arithmetic so that the backend has to read through the view's
strides rather than hand back a view of its input.
"""
import pytest
import torch
import torch.nn.functional as F

from helpers import check_compiled


def rand(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype)


VIEWS = [
    ("view", lambda x: x.view(4, 91) * 2),
    ("view_infer", lambda x: x.view(-1, 13) + 1),
    ("view_merge_split", lambda x: x.view(28, 13).view(2, 2, 91) - 1),
    ("reshape", lambda x: x.reshape(7, 52).relu()),
    ("reshape_of_permute", lambda x: x.permute(2, 0, 1).reshape(13, 28) * 3),
    ("permute", lambda x: x.permute(2, 0, 1) + 1),
    ("permute_neg", lambda x: x.permute(-1, -3, -2).exp()),
    ("transpose", lambda x: x.transpose(0, 2) * x.transpose(0, 2)),
    ("transpose_add_original", lambda x: x[0] + x[0].t()[:7, :7].t().sum()),
    ("t", lambda x: x[1].t().sigmoid()),
    ("mT", lambda x: x.mT - 1),
    ("expand", lambda x: x[:, :1, :].expand(4, 7, 13) + x),
    ("expand_new_dim", lambda x: x[0, 0].expand(5, 13) * 2),
    ("expand_as", lambda x: x.sum(1, keepdim=True).expand_as(x) - x),
    ("slice_step", lambda x: x[:, 1::2, ::3] * 2),
    ("slice_neg", lambda x: x[-2:, :-3, 2:-2] + 1),
    ("slice_chain", lambda x: x[1:][:, ::2][..., 3:11:4].neg()),
    ("narrow", lambda x: x.narrow(2, 3, 5) * x.narrow(2, 7, 5)),
    ("select", lambda x: x.select(1, 3) + x[:, -1, :]),
    ("select_int_index", lambda x: x[2, 5] - x[-1, 0]),
    ("squeeze_unsqueeze", lambda x: x[:, :1].squeeze(1).unsqueeze(0).unsqueeze(-1) * 2),
    ("squeeze_all", lambda x: x[:1, :, :1].squeeze() + 1),
    ("none_index", lambda x: x[:, None, :, None, :] * 2),
    ("flatten", lambda x: x.flatten() + 1),
    ("flatten_range", lambda x: x.flatten(1).relu() + x.flatten(0, 1).sum()),
    ("unflatten", lambda x: x.flatten(1).unflatten(1, (13, 7)) * 2),
    ("movedim", lambda x: x.movedim(0, -1).contiguous() + 1),
    ("contiguous_of_transpose", lambda x: x.transpose(1, 2).contiguous()),
    ("unbind", lambda x: tuple(t * 2 for t in x.unbind(0))),
    ("flip", lambda x: x.flip(-1) + x.flip(0, 1)),
    ("roll", lambda x: x.roll(3, dims=-1) * 2),
    ("repeat", lambda x: x[:, :2].repeat(2, 1, 3) + 1),
    ("diagonal", lambda x: x[0].diagonal()[:5] + x[1, :, 1:].diagonal(offset=-1)[:5]),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_ops(name, fn):
    check_compiled(fn, rand(4, 7, 13))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dim):
    a, b, c = rand(4, 7, 13), rand(4, 7, 13), rand(4, 7, 13)
    check_compiled(lambda x, y, z: torch.cat([x, y * 2, z + 1], dim), a, b, c)


def test_cat_different_sizes():
    a, b, c = rand(4, 1, 13), rand(4, 7, 13), rand(4, 2, 13)
    check_compiled(lambda x, y, z: torch.cat([x, y, z], 1).relu(), a, b, c)
    check_compiled(lambda x, y: torch.cat([x, y.exp(), x], 1) * 2, a, b)


def test_cat_many_and_mixed_dtype():
    xs = [rand(3, k) for k in (1, 2, 3, 5, 7, 11)]
    check_compiled(lambda *t: torch.cat(t, -1), *xs)
    # cat promotes its inputs to a common dtype.
    check_compiled(lambda x, y: torch.cat([x, y]), rand(3, 5), rand(2, 5, dtype=torch.float16))


@pytest.mark.parametrize("widths", [(17, 30, 5), (1, 63, 2, 9), (33,)])
def test_cat_inner_dim_split_points_exact(widths):
    # Each run of a row reads only its operand (codegen/c/branch_runs.cpp): bitwise eager's.
    xs = [rand(3, 5, w) for w in widths]
    fn = lambda *t: torch.cat([t[0] * 2, *t[1:], t[0]], -1).relu()  # noqa: E731
    assert torch.equal(check_compiled(fn, *xs), fn(*xs))
    x = rand(6, 37)
    roll = lambda x: torch.cat([x[:, 11:], x[:, :11]], 1) - 1  # noqa: E731
    assert torch.equal(check_compiled(roll, x), roll(x))


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_cat_of_many_feature_maps_then_batch_norm(layout):
    # DenseNet's pattern: a cat of 20 feature maps (over the 8 loop bodies a general
    # decision tree may print, codegen/c/branch_runs.cpp), then BatchNorm and ReLU; along the
    # innermost dim in channels-last, along an outer one otherwise.
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    xs = [rand(2, w, 5, 3).contiguous(memory_format=fmt) for w in [16] + [3, 8, 5, 1] * 5][:20]
    channels = sum(x.shape[1] for x in xs)
    mean, var, weight, bias = rand(channels), rand(channels).abs() + 0.5, rand(channels), rand(channels)

    def fn(*t):
        return F.batch_norm(torch.cat(t, 1), mean, var, weight, bias, False, 0.1, 1e-5).relu()

    check_compiled(fn, *xs)


@pytest.mark.parametrize("slope", [1, 3, -2])
@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge"])
def test_where_split_points_move_with_the_row(slope, op):
    # A mask linear in the column and the row: each row's runs start elsewhere.
    def fn(x, y):
        j = torch.arange(x.shape[1])[None, :]
        i = torch.arange(x.shape[0])[:, None]
        return torch.where(getattr(torch, op)(slope * j - 4 * i, -7), x, y * 2)
    x, y = rand(9, 41), rand(9, 41)
    assert torch.equal(check_compiled(fn, x, y), fn(x, y))


@pytest.mark.parametrize("channels", [58, 7])
def test_channel_shuffle_exact(channels):
    def shuffle(a, b):
        x = torch.cat([a, b], 1)
        n, c, h, w = x.shape
        return x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w).relu()
    a, b = rand(2, channels, 5, 9), rand(2, channels, 5, 9)
    assert torch.equal(check_compiled(shuffle, a, b), shuffle(a, b))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim):
    a, b = rand(7, 13), rand(7, 13)
    check_compiled(lambda x, y: torch.stack([x, y.sin(), x * y], dim), a, b)


@pytest.mark.parametrize("name,fn", [
    ("split_size", lambda x: tuple(t * 2 for t in torch.split(x, 4, dim=-1))),
    ("split_sections", lambda x: tuple(t + 1 for t in torch.split(x, [2, 5, 6], dim=-1))),
    ("chunk", lambda x: tuple(t.exp() for t in x.chunk(3, dim=1))),
    ("chunk_uneven", lambda x: tuple(t.neg() for t in x.chunk(5, dim=-1))),
    ("split_raw", lambda x: torch.split(x, 2, dim=0)),
    ("tensor_split", lambda x: tuple(t * t for t in torch.tensor_split(x, [1, 5], dim=1))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_split(name, fn):
    check_compiled(fn, rand(4, 7, 13))


@pytest.mark.parametrize("pad,value", [
    ((1, 1), 0.0),
    ((2, 0, 0, 3), 0.0),
    ((1, 2, 3, 4, 1, 0), -1.5),
    ((-1, -2), 0.0),
    ((-2, 3, 1, -1), 2.0),
    ((0, 0, -3, 0), 0.0),
], ids=str)
def test_constant_pad(pad, value):
    check_compiled(lambda x: F.pad(x * 2, pad, value=value) + 1, rand(4, 7, 13))
    check_compiled(lambda x: torch.constant_pad_nd(x, pad, value), rand(4, 7, 13))


def test_pad_int():
    x = torch.randint(-5, 5, (3, 7), dtype=torch.int64)
    check_compiled(lambda a: F.pad(a, (1, 2, -1, 1), value=9) * 2, x)


STRIDED_INPUTS = [
    ("step_slice", lambda: rand(7, 26)[:, ::2]),
    ("transposed", lambda: rand(13, 7).t()),
    ("offset_slice", lambda: rand(9, 15)[2:, 2:]),
    ("as_strided", lambda: torch.as_strided(rand(200), (7, 13), (17, 1), storage_offset=3)),
    ("as_strided_overlap", lambda: torch.as_strided(rand(40), (7, 13), (3, 1))),
    ("expanded", lambda: rand(1, 13).expand(7, 13)),
    ("zero_stride_scalar", lambda: rand(1).expand(7, 13)),
    ("permuted_3d", lambda: rand(13, 7, 3).permute(2, 1, 0)[0]),
]


@pytest.mark.parametrize("name,make", STRIDED_INPUTS, ids=[s[0] for s in STRIDED_INPUTS])
def test_strided_inputs(name, make):
    x = make()
    y = rand(7, 13)
    assert x.shape == (7, 13)
    check_compiled(lambda a, b: (a * b + 1, a.exp().sum(-1), a.t() - b.t()), x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_channels_last_pointwise(dtype):
    x = rand(2, 5, 7, 9, dtype=dtype).to(memory_format=torch.channels_last)
    y = rand(2, 5, 7, 9, dtype=dtype)
    bias = rand(1, 5, 1, 1, dtype=dtype)
    tol = dict(rtol=1.6e-2, atol=1.6e-2) if dtype == torch.bfloat16 else {}
    check_compiled(lambda a, b, c: (torch.relu(a * 2 + c), a + b, (a - c).sigmoid() * a),
                   x, y, bias, **tol)


def test_channels_last_reduction():
    x = rand(2, 5, 7, 9).to(memory_format=torch.channels_last)
    check_compiled(lambda a: (a.sum(1), a.mean((2, 3)), a.amax(-1), torch.softmax(a, 1)), x)


VIEW_OUTPUTS = [
    ("t", lambda x: x.t()),
    ("slice", lambda x: x[1:, ::2]),
    ("view", lambda x: x.view(13, 7)),
    ("select", lambda x: x[3]),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("expand", lambda x: x[:1].expand(5, 13)),
    ("view_of_computed", lambda x: (x * 2).t()),
    ("view_and_base", lambda x: (x + 1, (x + 1)[2:5])),
    ("input_and_view", lambda x: (x.sin(), x.view(-1), x[::2])),
    ("diagonal", lambda x: x.diagonal()),
]


@pytest.mark.parametrize("name,fn", VIEW_OUTPUTS, ids=[v[0] for v in VIEW_OUTPUTS])
def test_view_outputs(name, fn):
    check_compiled(fn, rand(7, 13))


def test_view_output_aliases_input():
    # A view returned from a compiled function must still alias its input, as in eager.
    x = rand(7, 13)
    fn = lambda a: (a.t(), a[1:] * 2)  # noqa: E731
    check_compiled(fn, x)
    from helpers import compile_fresh
    view, _ = compile_fresh(fn)(x)
    x[0, 0] = 42.0
    assert view[0, 0].item() == 42.0


def test_mutation_of_input():
    def fn(x, y):
        x.mul_(2)
        x[:, 0] = y[:, 1]
        return x + y
    x, y = rand(7, 13), rand(7, 13)
    check_compiled(fn, x, y)
    from helpers import compile_fresh
    xe, xc = x.clone(), x.clone()
    fn(xe, y)
    compile_fresh(fn)(xc, y)
    torch.testing.assert_close(xc, xe)
