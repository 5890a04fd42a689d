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


# ---- a padded result returned as a strided view ------------------------------------------
#
# A graph output that is a padded matmul's [.., :N] slice (GPT-2's logits) is a view of
# the wider ATen result with its strides, as Inductor returns it: no copy kernel.

VIEW = "result returned as a strided view"


@pytest.fixture
def padded_graphs(monkeypatch):
    """(extern reasons, compiled graphs) of every CPU graph compiled in the test, padded."""
    graphs = []
    return pad_every_cpu_compile(monkeypatch, graphs), graphs


def _kernel_names(graphs):
    return [k["name"] for cg in graphs for k in cg.kernels]


@pytest.mark.parametrize("front_end", ["ember", "AOTAutograd"])
def test_lm_head_logits_are_a_view_of_the_padded_result(front_end, padded_graphs, monkeypatch):
    """The LM head's logits come back with the padded result's strides (2056, not 2053), no
    kernel copies them (wte^T is a parameter: padded once, so no kernel at all), values are
    eager's, and what a user does with logits (view(-1, V), a loss) works. Both front ends:
    ember's own (every output the user's) and AOTAutograd's (its metadata says which)."""
    from ember.config import config

    reasons, graphs = padded_graphs
    monkeypatch.setattr(config, "trace_inference", front_end == "ember")
    h, wte = _rand(256, 768, dtype=torch.bfloat16), _rand(2053, 768, dtype=torch.bfloat16)
    with torch.no_grad():
        out = check_compiled(_lm_head, h, wte)
    assert out.shape == (2, 128, 2053) and out.stride() == (128 * 2056, 2056, 1), out.stride()
    assert not out.is_contiguous()
    assert any(r.endswith(VIEW) or f"{VIEW};" in r for r in reasons), reasons
    assert _kernel_names(graphs) == [], _kernel_names(graphs)
    expected = _lm_head(h, wte)
    torch.testing.assert_close(out.view(-1, 2053), expected.view(-1, 2053), rtol=0, atol=0)
    labels = torch.randint(0, 2053, (256,))
    torch.testing.assert_close(F.cross_entropy(out.view(-1, 2053).float(), labels),
                               F.cross_entropy(expected.view(-1, 2053).float(), labels))


def test_logits_read_in_the_graph_are_returned_as_a_view_and_copied_for_the_readers(padded_graphs):
    """Logits returned and read by a softmax in the same graph: the output is the view, the
    softmax reads the slice (its copy fused into the softmax's kernels)."""
    reasons, graphs = padded_graphs

    def head_and_probs(h, wte):
        logits = _lm_head(h, wte)
        return logits, logits.float().softmax(-1)

    with torch.no_grad():
        logits, probs = check_compiled(head_and_probs, _rand(256, 768, dtype=torch.bfloat16),
                                       _rand(2053, 768, dtype=torch.bfloat16))
    assert logits.stride() == (128 * 2056, 2056, 1) and probs.is_contiguous()
    assert any(f"{VIEW}, sliced by a copy for its readers" in r for r in reasons), reasons


def test_an_output_the_graph_also_returns_transposed_keeps_the_copy(padded_graphs):
    """Two outputs view the result, one transposed (no reshape of the slice): both stay views
    of the copy, still aliasing each other."""
    reasons, _ = padded_graphs

    def two_views(h, wte):
        logits = h @ wte.t()
        return logits, logits.t()

    with torch.no_grad():
        a, b = check_compiled(two_views, _rand(256, 768, dtype=torch.bfloat16), _rand(2053, 768, dtype=torch.bfloat16))
    assert a.is_contiguous() and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert any("result sliced by a copy" in r for r in reasons), reasons


def test_symbolic_rows_logits_are_a_view_at_every_size(padded_graphs):
    """dynamic=True: one graph over symbolic rows returns views with the padded strides."""
    from helpers import check_call, compile_fresh

    reasons, graphs = padded_graphs
    torch.manual_seed(0)
    head = torch.nn.Linear(768, 2053, bias=False).to(torch.bfloat16)
    compiled = compile_fresh(lambda x: head(x), dynamic=True)
    with torch.no_grad():
        for batch in (2, 3, 1):
            x = _rand(batch, 128, 768, dtype=torch.bfloat16)
            out = check_call(compiled, lambda x: head(x), x)
            # (a dim of size 1 (Dynamo's own graph for batch 1) may have any stride)
            assert out.stride()[1:] == (2056, 1) and (batch == 1 or out.stride(0) == 128 * 2056), out.stride()
    assert any(VIEW in r for r in reasons), reasons
    assert _kernel_names(graphs) == [], _kernel_names(graphs)


def _tiny_gpt2(dtype=torch.float32):
    """A transformers GPT-2 with GPT-2's vocabulary (50,257: N odd) and little else: 2
    layers, 64 wide; 2x64 tokens make its LM head 128 x 64 x 50257 (padded: above the
    pass's thresholds, and its logits are not copied)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64, use_cache=False,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).to(dtype)
    model.loss_type = "ForCausalLM"
    return model, torch.randint(0, config.vocab_size, (2, 64))


def test_gpt2_logits_match_eager_as_a_view(padded_graphs):
    from helpers import check_call, compile_fresh

    reasons, graphs = padded_graphs
    model, ids = _tiny_gpt2()
    model.eval()
    compiled = compile_fresh(lambda ids: model(input_ids=ids).logits)
    with torch.no_grad():
        logits = check_call(compiled, lambda ids: model(input_ids=ids).logits, ids)
    assert logits.shape == (2, 64, 50257) and logits.stride() == (64 * 50260, 50260, 1), logits.stride()
    assert any("(N 50257->50260)" in r and VIEW in r for r in reasons), reasons
    assert not [n for n in _kernel_names(graphs) if "copy" in n], _kernel_names(graphs)


@pytest.mark.parametrize("loss_inside", [False, True])
def test_gpt2_training_step_matches_eager(loss_inside, padded_graphs):
    """One training step: the loss from the logits outside the model (the forward returns
    them as a view; the backward gets their gradient) or inside (labels: the loss reads the
    logits in the forward graph). Loss and every gradient match eager's."""
    from helpers import compile_fresh

    reasons, _ = padded_graphs
    model, ids = _tiny_gpt2()
    model.train()

    def step(fn):
        model.zero_grad(set_to_none=True)
        if loss_inside:
            out = fn(input_ids=ids, labels=ids)
            loss, logits = out.loss, out.logits
        else:
            logits = fn(input_ids=ids).logits
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        return logits.detach(), [loss.detach()] + [p.grad.clone() for p in model.parameters()]

    expected_logits, expected = step(model)
    logits, actual = step(compile_fresh(model))
    torch.testing.assert_close(logits, expected_logits, rtol=1e-4, atol=1e-4)
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-5, msg=lambda m: f"#{i}: {m}")
    if not loss_inside:
        assert logits.stride() == (64 * 50260, 50260, 1), logits.stride()
        assert any("(N 50257->50260)" in r and VIEW in r for r in reasons), reasons
