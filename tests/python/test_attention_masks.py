"""Attention masks that keep every position and depend on no graph input are dropped
before AOTAutograd (ember.frontend.attention.drop_no_op_masks): transformers' BERT builds one from
torch.ones whenever it is traced, or, with symbolic sizes, from arange over the sequence
(all true for every size by its value ranges). Anything else keeps its mask."""
import pytest
import torch
import torch.nn.functional as F


def _sdpa_with_mask(make_mask):
    def fn(q, k, v, keep):
        mask = make_mask(q, keep)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return fn


@pytest.mark.parametrize("case, dropped", [
    ("ones_expanded", True),      # BERT's: torch.ones, expanded with stride 0 over the query rows
    ("zeros_additive", True),     # an additive mask of zeros
    ("causal", False),            # a constant that masks something
    ("from_input", False),        # depends on a graph input
    ("random", False),            # not a function of its arguments
])
def test_no_op_attention_masks_are_dropped(case, dropped):
    from ember.frontend.attention import drop_no_op_masks

    makers = {
        "ones_expanded": lambda q, keep: torch.ones(q.shape[0], q.shape[2], dtype=torch.bool)[:, None, None, :].expand(
            q.shape[0], 1, q.shape[2], q.shape[2]),
        "zeros_additive": lambda q, keep: torch.zeros(q.shape[0], 1, q.shape[2], q.shape[2]),
        "causal": lambda q, keep: torch.ones(q.shape[2], q.shape[2], dtype=torch.bool).tril(),
        "from_input": lambda q, keep: keep[:, None, None, :],
        "random": lambda q, keep: torch.rand(q.shape[2], q.shape[2]) > -1,
    }
    fn = _sdpa_with_mask(makers[case])
    q, k, v = (torch.randn(2, 3, 8, 16) for _ in range(3))
    keep = torch.rand(2, 8) > 0.3
    counts = []

    def backend(gm, example_inputs):
        counts.append(drop_no_op_masks(gm))
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(q, k, v, keep)
    assert counts == [1 if dropped else 0]
    if case != "random":
        torch.testing.assert_close(out, fn(q, k, v, keep))


@pytest.mark.parametrize("case, dropped", [
    ("arange_ge_0", True),       # transformers' padding-free SDPA mask: arange(s) >= 0, expanded
    ("arange_plus_1_gt_0", True),
    ("causal", False),           # q >= kv: masks the upper triangle
    ("arange_lt_100", False),    # true only for sequences up to 100
    ("float_arange_ge_0", True),
])
def test_size_dependent_masks_by_their_ranges(case, dropped):
    """dynamic=True: the mask depends on the sequence length (a SymInt) only; it is dropped
    when its value ranges show it keeps every position at every length."""
    from ember.frontend.attention import drop_no_op_masks

    def make(q, keep):
        s = q.shape[2]
        if case == "arange_ge_0":
            m = (torch.arange(s) + 0)[None, None, :, None] >= 0
        elif case == "arange_plus_1_gt_0":
            m = (torch.arange(s) + 1)[None, None, :, None] > 0
        elif case == "causal":
            m = torch.arange(s)[:, None] >= torch.arange(s)[None, :]
        elif case == "arange_lt_100":
            m = torch.arange(s)[None, None, :, None] < 100
        else:
            m = torch.arange(0.5, s)[None, None, :, None] >= 0
        return m.expand(q.shape[0], 1, s, s)

    fn = _sdpa_with_mask(make)
    counts = []

    def backend(gm, example_inputs):
        counts.append(drop_no_op_masks(gm))
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    for seq in (8, 13):
        q, k, v = (torch.randn(2, 3, seq, 16) for _ in range(3))
        keep = torch.rand(2, seq) > 0.3
        torch.testing.assert_close(compiled(q, k, v, keep), fn(q, k, v, keep))
    assert counts and all(c == (1 if dropped else 0) for c in counts), counts


def test_stored_mask_strides_match_the_cpp_layout():
    # The strides fused_kernel_takes asks SDPA about are the ones lowering stores the mask
    # with (tests/cpp/test_extern_layouts.cpp has the same two cases).
    from ember.frontend.attention import _stored_mask_strides

    assert _stored_mask_strides(torch.empty(8, 8, 4).permute(2, 0, 1).unsqueeze(0)) == [512, 128, 16, 1]
    assert _stored_mask_strides(torch.empty(2, 1, 1, 8).expand(2, 1, 8, 8)) == [16, 16, 0, 1]


def test_fused_kernel_check_declines_without_cuda():
    from ember.frontend.attention import fused_kernel_takes

    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only answer")
    q = torch.empty(2, 4, 8, 16)
    assert fused_kernel_takes(q, q, q, torch.empty(2, 1, 8, 8), False) in (None, False)
