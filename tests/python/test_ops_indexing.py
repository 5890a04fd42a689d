"""Indexing ops, end to end: compiled by the backend under test, compared with eager."""
import pytest
import torch
import torch.nn.functional as F

from helpers import check_compiled


def rand(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype)


@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32], ids=str)
def test_embedding(idx_dtype):
    weight = rand(97, 16)
    ids = torch.randint(0, 97, (4, 13), dtype=idx_dtype)
    ids[0, :3] = torch.tensor([0, 96, 0])  # first and last rows, and a repeat
    check_compiled(lambda i, w: F.embedding(i, w) * 2 + 1, ids, weight)


def test_embedding_padding_idx_and_fused_use():
    weight = rand(50, 8)
    ids = torch.randint(0, 50, (3, 7))
    pos = rand(7, 8)
    check_compiled(lambda i, w, p: F.layer_norm(F.embedding(i, w, padding_idx=3) + p, (8,)),
                   ids, weight, pos)


@pytest.mark.parametrize("ids_layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int32], ids=str)
def test_embedding_layer_norm_rows_prefetched_ahead(idx_dtype, ids_layout):
    """Rows of 128 floats gathered through ids: the kernel prefetches the rows 4 rows ahead
    (codegen/c/row_prefetch.cpp), computing the ids' index of a row ahead from the row
    number. 21 rows (not a multiple of 4), ids read through strides when transposed."""
    weight = rand(300, 128)
    ids = torch.randint(0, 300, (3, 7) if ids_layout == "contiguous" else (7, 3), dtype=idx_dtype)
    ids[0, :2] = torch.tensor([299, 0])
    if ids_layout == "transposed":
        ids = ids.t()
    pos = rand(7, 128)
    check_compiled(lambda i, w, p: F.layer_norm(F.embedding(i, w) + p, (128,)), ids, weight, pos)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    x = rand(5, 7, 13)
    idx = torch.tensor([0, 4, 2, 2, 4])
    check_compiled(lambda a, i: torch.index_select(a, dim, i).exp(), x, idx)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64, torch.bool], ids=str)
def test_index_select_dtypes(dtype):
    x = torch.randint(-5, 5, (7, 13)).to(dtype)
    check_compiled(lambda a, i: a.index_select(1, i), x, torch.tensor([12, 0, 5]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather(dim):
    x = rand(5, 7, 13)
    shape = [5, 7, 13]
    shape[dim] = 4  # gather's index may be shorter than the input along dim
    idx = torch.randint(0, x.shape[dim], shape)
    check_compiled(lambda a, i: torch.gather(a, dim, i) * 3, x, idx)


def test_gather_smaller_index_all_dims():
    x = rand(5, 7, 13)
    idx = torch.randint(0, 13, (2, 3, 4))
    check_compiled(lambda a, i: torch.gather(a, 2, i).sigmoid(), x, idx)


def test_gather_log_prob_pattern():
    # The cross-entropy pattern: pick each row's target log-probability.
    logits = rand(9, 31)
    target = torch.randint(0, 31, (9,))
    check_compiled(lambda z, t: -torch.log_softmax(z, -1).gather(1, t[:, None]).squeeze(1).mean(),
                   logits, target)


INDEX_CASES = [
    ("rows", lambda x, i: x[i]),
    ("rows_neg", lambda x, i: x[i - 3]),                 # negative indices wrap
    ("cols", lambda x, i: x[:, i]),
    ("last_dim", lambda x, i: x[..., i] + 1),
    ("two_tensors", lambda x, i: x[i, i.flip(0)]),       # advanced indices broadcast together
    ("two_tensors_split", lambda x, i: x[i, :, i.flip(0)]),  # separated: result dims go first
    ("2d_index", lambda x, i: x[i.view(2, 2)] * 2),
    ("then_pointwise", lambda x, i: x[i].relu().sum(-1)),
]


@pytest.mark.parametrize("name,fn", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_tensor(name, fn):
    x = rand(5, 7, 13)
    idx = torch.tensor([4, 0, 2, 2])
    check_compiled(fn, x, idx)


def test_index_tensor_int_values():
    x = torch.randint(-100, 100, (11, 6))
    idx = torch.tensor([10, -1, 0, 3])
    check_compiled(lambda a, i: a[i] * 2, x, idx)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64], ids=str)
def test_masked_fill(dtype):
    x = rand(5, 7, 13, dtype=dtype) if dtype.is_floating_point else torch.randint(-9, 9, (5, 7, 13))
    mask = torch.rand(5, 7, 13) < 0.3
    check_compiled(lambda a, m: a.masked_fill(m, -7), x, mask)
    check_compiled(lambda a, m: a.masked_fill(m, torch.tensor(5, dtype=dtype)), x, mask)


def test_masked_fill_broadcast_mask_and_inf():
    x = rand(2, 4, 9, 9)
    causal = torch.ones(9, 9, dtype=torch.bool).triu(1)
    check_compiled(lambda a, m: a.masked_fill(m, float("-inf")).softmax(-1), x, causal)
    check_compiled(lambda a: a.masked_fill(a > 0.5, float("nan")), x)


def test_index_put_and_scatter():
    x = rand(7, 13)
    idx = torch.tensor([1, 5, 6])
    v = rand(3, 13)
    check_compiled(lambda a, i, b: torch.index_put(a, (i,), b), x, idx, v)
    check_compiled(lambda a, i, b: torch.index_put(a, (i,), b, accumulate=True),
                   x, torch.tensor([1, 5, 1]), v)
    src = rand(7, 13)
    sidx = torch.randint(0, 7, (7, 13))
    check_compiled(lambda a, i, s: torch.scatter_add(a, 0, i, s), x, sidx, src)


@pytest.mark.parametrize("where", ["dim0", "dim1", "broadcast"])
def test_index_put_accumulate_runs_as_index_add(where):
    """index_put(accumulate=True) with one integer index (repeated and negative entries,
    values broadcast) is traced as ATen's index_add (frontend/decompositions.py), and
    index_add stays itself: the same values as eager, bit for bit on the CPU."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from ember.frontend.decompositions import decomposition_table

    aten = torch.ops.aten
    if where == "dim0":
        args = (rand(10, 3), torch.tensor([1, -1, 3, 1, 9, -10]), rand(6, 3))
        fn = lambda x, i, v: aten.index_put(x, [i], v, True) * 2  # noqa: E731
    elif where == "dim1":
        args = (rand(4, 10, 3), torch.tensor([[1, 2], [2, -3]]), rand(4, 2, 2, 3))
        fn = lambda x, i, v: aten.index_put(x, [None, i], v, True) + 1  # noqa: E731
    else:
        args = (rand(10, 5), torch.tensor([0, 0, 7]), rand(5))
        fn = lambda x, i, v: aten.index_put(x, [i], v, True).relu()  # noqa: E731
    traced = make_fx(fn, decomposition_table=decomposition_table())(*args)
    ops = {str(n.target) for n in traced.graph.nodes if n.op == "call_function"}
    assert "aten.index_add.default" in ops and not any("index_put" in op for op in ops), ops
    check_compiled(fn, *args, rtol=0, atol=0)


def test_index_put_without_accumulate_is_left_alone():
    from torch.fx.experimental.proxy_tensor import make_fx

    from ember.frontend.decompositions import decomposition_table

    fn = lambda x, i, v: torch.ops.aten.index_put(x, [i], v, False)  # noqa: E731
    traced = make_fx(fn, decomposition_table=decomposition_table())(rand(10, 3), torch.tensor([1, 4]), rand(2, 3))
    assert "aten.index_put.default" in {str(n.target) for n in traced.graph.nodes}
