"""pad_matmuls (csrc/lower/pad_matmuls.h), a CUDA pass, run here on the CPU path: the CPU
compile takes it as an internal option, so that the padded programs (operand copies, the
wider ATen result and the copy of its slice) run and are compared with eager. Sizes are
above the pass's thresholds (2^27 multiply-adds, 32 per element moved) with odd M, N, K."""
import functools

import pytest
import torch
import torch.nn.functional as F

from helpers import check_compiled, pad_every_cpu_compile

PADDED = "padded for 16-byte leading dims"


@pytest.fixture
def padded(monkeypatch):
    """Every CPU graph compiled in the test runs pad_matmuls; returns the extern reasons."""
    return pad_every_cpu_compile(monkeypatch)


def _rand(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def _mm(a, b):
    return (a @ b).relu()


def _mm_transposed(x, w):
    return x @ w.t()


def _mm_column_major_a(a, b):
    return a.t() @ b


def _linear(x, w, bias):
    return F.linear(x, w, bias) * 2


def _bmm(a, b):
    return torch.bmm(a, b)


def _bmm_transposed_a(a, b):
    return torch.bmm(a.transpose(1, 2), b) + 1


def _lm_head(h, wte):
    return (h @ wte.t()).view(2, -1, wte.shape[0])


CASES = {
    # f32: 4-element alignment. K (509) and N (515) padded.
    "mm_f32": (_mm, lambda: (_rand(513, 509), _rand(509, 515)), "K 509->512, N 515->516"),
    # A transposed weight (column-major): N padded on the copy of w, K (520) aligned.
    "mm_transposed_bf16": (_mm_transposed, lambda: (_rand(512, 520, dtype=torch.bfloat16),
                                                     _rand(515, 520, dtype=torch.bfloat16)), "N 515->520"),
    # a column-major: M is its leading dim; the result grows by rows.
    "mm_column_major_a_f16": (_mm_column_major_a, lambda: (_rand(520, 515, dtype=torch.float16),
                                                          _rand(520, 512, dtype=torch.float16)), "M 515->520"),
    # addmm: the bias is padded with b's columns.
    "linear_bias_bf16": (_linear, lambda: (_rand(512, 520, dtype=torch.bfloat16), _rand(515, 520, dtype=torch.bfloat16),
                                           _rand(515, dtype=torch.bfloat16)), "N 515->520"),
    "bmm_bf16": (_bmm, lambda: (_rand(8, 129, 255, dtype=torch.bfloat16), _rand(8, 255, 513, dtype=torch.bfloat16)),
                 "K 255->256, N 513->520"),
    # a batched transposed operand: M padded, the batched result is sliced by a copy.
    "bmm_transposed_a_bf16": (_bmm_transposed_a, lambda: (_rand(8, 255, 129, dtype=torch.bfloat16),
                                                         _rand(8, 255, 513, dtype=torch.bfloat16)),
                              "M 129->136, N 513->520"),
    # GPT-2's LM head in miniature: the vocabulary odd, the result viewed.
    "lm_head_bf16": (_lm_head, lambda: (_rand(256, 768, dtype=torch.bfloat16), _rand(2053, 768, dtype=torch.bfloat16)),
                     "N 2053->2056"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_padded_matmul_matches_eager(name, padded):
    fn, make_args, sizes = CASES[name]
    # Zero padding leaves the sums alone, but BLAS blocks a padded K differently: f32
    # sums of 509 products differ from eager's in the last bits.
    tol = {"rtol": 1e-4, "atol": 1e-4} if name.endswith("f32") else {}
    with torch.no_grad():
        check_compiled(fn, *make_args(), **tol)
    assert any(PADDED in r and f"({sizes})" in r for r in padded), padded


def test_small_matmul_is_not_padded(padded):
    with torch.no_grad():
        check_compiled(_mm, _rand(5, 7), _rand(7, 9))
    assert any("not padded" in r and "under 2^27" in r for r in padded), padded


def test_aligned_matmul_is_left_alone(padded):
    with torch.no_grad():
        check_compiled(_mm, _rand(512, 512), _rand(512, 512))
    assert padded == ["matmul: ATen (BLAS)"]


def test_training_pads_the_backward_gradient(padded):
    """Forward and backward of a linear layer with an odd output width (an LM head): the
    backward's gradient is a graph input, padded by the runtime once for grad @ W and
    grad^T @ x (test_padded_parameters.py)."""
    torch.manual_seed(0)
    x = _rand(512, 768, dtype=torch.bfloat16).requires_grad_()
    w = _rand(2053, 768, dtype=torch.bfloat16).requires_grad_()

    def step(x, w):
        out = x @ w.t()
        out.float().square().mean().backward()
        return out.detach(), x.grad, w.grad

    expected = step(x, w)
    x.grad = w.grad = None
    got = step_compiled = None
    from helpers import compile_fresh

    compiled = compile_fresh(lambda x, w: x @ w.t())

    def step_compiled(x, w):
        out = compiled(x, w)
        out.float().square().mean().backward()
        return out.detach(), x.grad, w.grad

    got = step_compiled(x, w)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=2e-2, atol=2e-2)
    assert sum(PADDED in r for r in padded) == 3, padded  # the forward's mm and the backward's two
    assert all("(a graph input: padded once)" in r for r in padded if PADDED in r), padded


def test_lm_head_with_symbolic_rows_is_padded(padded):
    """dynamic=True: the LM head's rows (batch x sequence) are symbolic, its vocabulary
    and width (a parameter's: static) are not: b is padded and the result's slice
    copied, at every row count."""
    from helpers import check_call, compile_fresh

    torch.manual_seed(0)
    head = torch.nn.Linear(768, 2053, bias=False).to(torch.bfloat16)
    compiled = compile_fresh(head, dynamic=True)
    with torch.no_grad():
        for rows in (256, 300, 50):
            check_call(compiled, head, _rand(rows, 768, dtype=torch.bfloat16))
    assert sum(PADDED in r and "(N 2053->2056)" in r for r in padded) == 1, padded
