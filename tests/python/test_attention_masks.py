"""Attention masks that keep every position and depend on no graph input are dropped
before AOTAutograd (ember.attention.drop_no_op_masks): transformers' BERT builds one from
torch.ones whenever it is traced. Anything else keeps its mask."""
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
    from ember.attention import drop_no_op_masks

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
