"""Dynamic shapes (docs/dynamic_shapes.md): one compiled graph serves every size
Dynamo's guards admit. Each test compiles once, runs several sizes against eager, and
checks with ember.stats() that no size after the first generated or compiled code."""
import pytest
import torch
import torch.nn.functional as F

import ember
from ember.records import Recording


def run_sizes(fn, make_args, sizes, dynamic=True, mark=None, atol=1e-5, rtol=1e-5):
    """Compiles fn once and runs it at each size; returns the stats after the first call
    and after the last."""
    torch._dynamo.reset()
    ember.reset_stats()
    compiled = torch.compile(fn, backend="ember", dynamic=dynamic)
    first = None
    for size in sizes:
        args = make_args(size)
        if mark:
            for i, dims in mark.items():
                for d in dims:
                    torch._dynamo.mark_dynamic(args[i], d)
        got, want = compiled(*args), fn(*args)
        for a, e in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol)
        if first is None:
            first = ember.stats()
    return first, ember.stats()


def assert_compiled_once(first, last):
    assert first["eager_fallbacks"] == 0, first
    assert first["codegen_runs"] >= 1, first
    for key in ("codegen_runs", "c_compiler_runs", "graphs_compiled", "recompiles", "eager_fallbacks"):
        assert last[key] == first[key], (key, first, last)


def test_layer_norm_softmax_and_column_sum_serve_every_size():
    def fn(x, w, b):
        y = F.layer_norm(x, (x.shape[-1],), w, b)
        return torch.softmax(y * 2.0, dim=-1) + x.sum(dim=0, keepdim=True)

    w, b = torch.randn(16), torch.randn(16)
    first, last = run_sizes(fn, lambda n: (torch.randn(n, 5, 16), w, b), [3, 7, 64, 129])
    assert_compiled_once(first, last)


def test_views_slices_and_extern_matmuls_with_symbolic_sizes():
    def fn(x, w):
        y = F.layer_norm(x, [x.shape[-1]]) @ w
        return y.view(-1, 4).softmax(-1), y.sum(0), y[:, 1:].expand(2, -1, -1, -1)

    first, last = run_sizes(fn, lambda s: (torch.randn(*s), torch.randn(8, 16)), [(6, 5, 8), (3, 7, 8), (2, 9, 8)])
    assert_compiled_once(first, last)


def test_sizes_rounded_up_by_a_true_division():
    """math.ceil(s / 32) (sympy's CeilToInt(IntTrueDiv(s, 32)); CUDA attention kernels
    pad sequences so) and its floor: sizes printed as floor divisions, exact at every size."""
    import math

    def fn(x):
        up = math.ceil(x.shape[-1] / 32) * 32
        down = math.floor(x.shape[-1] / 8)
        return F.pad(x, (0, up - x.shape[-1])) * 2, x[..., :down] + 1

    first, last = run_sizes(fn, lambda n: (torch.randn(3, n),), [33, 64, 70, 95])
    assert_compiled_once(first, last)


def test_mark_dynamic_batch_of_an_mlp_block():
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(32), torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    fn = lambda x: block(x) + x  # noqa: E731
    first, last = run_sizes(fn, lambda n: (torch.randn(n, 32),), [4, 9, 33, 100], dynamic=None, mark={0: [0]})
    assert_compiled_once(first, last)


def test_slices_select_cat_pad_and_permute_with_symbolic_sizes():
    def fn(x):
        n = x.shape[1]
        a = x[:, : n - 1] * 2 + x[:, 1:]              # slices ending at a symbolic size
        b = torch.cat([a, x[:, -1:]], dim=1)          # cat along a symbolic dim
        c = F.pad(b, (1, 2)) + 1                      # constant pad around a symbolic dim
        d = c.transpose(0, 1).contiguous()
        return d, x[:, -1], x.flip(1)

    first, last = run_sizes(fn, lambda s: (torch.randn(*s),), [(3, 5, 4), (4, 11, 4), (2, 40, 4)])
    assert_compiled_once(first, last)


@pytest.mark.parametrize("op", ["sum", "mean", "var", "amax", "argmax", "log_softmax", "cumsum"])
def test_reductions_over_symbolic_dims(op):
    fns = {
        "sum": lambda x: x.sum(-1),
        "mean": lambda x: x.mean(0),
        "var": lambda x: torch.var(x, dim=-1, correction=1),
        "amax": lambda x: x.amax(1),
        "argmax": lambda x: x.argmax(-1),
        "log_softmax": lambda x: torch.log_softmax(x, dim=-1),
        "cumsum": lambda x: x.cumsum(-1),
    }
    # 6000 columns: past the 4096-element blocks of the long float sums.
    first, last = run_sizes(fns[op], lambda s: (torch.randn(*s),), [(3, 5), (4, 6000), (17, 33)], atol=1e-4, rtol=1e-4)
    assert_compiled_once(first, last)


def test_training_step_with_a_dynamic_batch_matches_eager():
    torch.manual_seed(0)

    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Tanh(), torch.nn.Linear(32, 4))

    eager, model = build(), build()
    compiled = torch.compile(model, backend="ember", dynamic=True)
    torch._dynamo.reset()
    ember.reset_stats()
    first = None
    for n in [3, 8, 27, 5]:
        x, t = torch.randn(n, 16), torch.randn(n, 4)
        le = F.mse_loss(eager(x), t)
        le.backward()
        lc = F.mse_loss(compiled(x), t)
        lc.backward()
        torch.testing.assert_close(lc, le, atol=1e-6, rtol=1e-5)
        for pe, pc in zip(eager.parameters(), model.parameters()):
            torch.testing.assert_close(pc.grad, pe.grad, atol=1e-6, rtol=1e-5)
            pe.grad = pc.grad = None
        if first is None:
            first = ember.stats()
    last = ember.stats()
    assert first["graphs_by_kind"].get("backward", 0) >= 1, first
    assert_compiled_once(first, last)


def gpt2_tiny():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=256, vocab_size=500, bos_token_id=499,
                        eos_token_id=499, use_cache=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def test_gpt2_inference_over_batch_and_sequence_compiles_once():
    model = gpt2_tiny().eval()
    shapes = [(3, 7), (8, 64), (5, 129), (2, 33)]
    with torch.no_grad():
        first, last = run_sizes(lambda ids: model(input_ids=ids).logits,
                                lambda s: (torch.randint(0, 500, s, generator=torch.Generator().manual_seed(s[1])),),
                                shapes, atol=1e-4, rtol=1e-4)
    assert_compiled_once(first, last)


def test_gpt2_training_over_batch_and_sequence_compiles_once():
    eager, model = gpt2_tiny(), gpt2_tiny()
    compiled = torch.compile(model, backend="ember", dynamic=True)
    torch._dynamo.reset()
    ember.reset_stats()
    records = []
    recording = Recording(records)
    first = None
    g = torch.Generator().manual_seed(1)
    for b, t in [(3, 7), (8, 64), (5, 129), (2, 33)]:
        ids = torch.randint(0, 500, (b, t), generator=g)
        le = eager(input_ids=ids, labels=ids).loss
        le.backward()
        lc = compiled(input_ids=ids, labels=ids).loss
        lc.backward()
        torch.testing.assert_close(lc, le, atol=1e-5, rtol=1e-5)
        for (name, pe), pc in zip(eager.named_parameters(), model.parameters()):
            scale = pe.grad.abs().max().item() + 1e-12
            assert (pc.grad - pe.grad).abs().max().item() / scale < 1e-4, name
            pe.grad = pc.grad = None
        if first is None:
            first = ember.stats()
            recording.stop()
    last = ember.stats()
    assert first["graphs_by_kind"].get("backward", 0) >= 1, first
    assert_compiled_once(first, last)
    # The symbolic graphs run in ember kernels as the static ones do: ATen gets the
    # matmuls, attention and the embeddings' backward, nothing else.
    allowed = {"aten.mm.default", "aten.addmm.default", "aten.embedding_dense_backward.default",
               "aten._scaled_dot_product_flash_attention_for_cpu.default",
               "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"}
    assert all(r.imported.num_symbols for r in records), [r.name for r in records]
    assert {e["op"] for r in records for e in r.cg.externs} <= allowed


def test_a_graph_keeps_few_plans_for_many_sizes():
    from ember.runtime import runner

    def fn(x):
        return torch.softmax(x * 3.0, dim=-1)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="ember", dynamic=True)
    runners = []
    orig = runner.GraphRunner.__init__

    def spy(self, *a, **k):
        orig(self, *a, **k)
        runners.append(self)

    runner.GraphRunner.__init__ = spy
    try:
        for n in range(2, 2 + 3 * runner.MAX_PLANS):
            x = torch.randn(n, 5)
            torch.testing.assert_close(compiled(x), fn(x))
    finally:
        runner.GraphRunner.__init__ = orig
    assert len(runners) == 1 and len(runners[0]._plans) == runner.MAX_PLANS
    x = torch.randn(3, 5)  # an evicted size is planned again, correctly
    torch.testing.assert_close(compiled(x), fn(x))


def test_cnn_training_with_a_dynamic_batch_keeps_pooling_in_ember_kernels():
    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(8, 4))

    eager, model = build(), build()
    compiled = torch.compile(model, backend="ember")  # the batch dim marked dynamic
    torch._dynamo.reset()
    ember.reset_stats()
    records = []
    recording = Recording(records)
    first = None
    try:
        # Batches up to 15: torch's fake convolution guards batch <= 15 (its layout
        # heuristic), so batch 16+ is a Dynamo recompilation for every backend.
        for i, n in enumerate([3, 6, 11, 14]):
            x = torch.randn(n, 3, 12, 12)
            torch._dynamo.mark_dynamic(x, 0)  # spatial sizes static: pooling stays in ember
            le = eager(x).square().mean()
            le.backward()
            lc = compiled(x).square().mean()
            lc.backward()
            torch.testing.assert_close(lc, le, atol=1e-5, rtol=1e-5)
            for pe, pc in zip(eager.parameters(), model.parameters()):
                torch.testing.assert_close(pc.grad, pe.grad, atol=1e-5, rtol=1e-4)
                pe.grad = pc.grad = None
            # Dynamo may compile a frame of this step (a wrapper in external_utils) static
            # first and dynamic on the second size (automatic dynamic): count from there.
            if i == 1:
                first = ember.stats()
    finally:
        recording.stop()
    assert_compiled_once(first, ember.stats())
    ops = {e["op"] for r in records for e in r.cg.externs}
    assert ops <= {"aten.convolution.default", "aten.convolution_backward.default", "aten.mm.default",
                   "aten.addmm.default"}, ops


def test_automatic_dynamic_after_a_second_size():
    # dynamic=None (the default): Dynamo compiles the first size static, and on a second
    # size recompiles with that dim symbolic; from then on one graph serves every size.
    def fn(x, w):
        return F.gelu(F.layer_norm(x, (16,)) @ w).sum(-1)

    w = torch.randn(16, 8)
    torch._dynamo.reset()
    ember.reset_stats()
    compiled = torch.compile(fn, backend="ember")
    seen = []
    for n in [4, 7, 19, 33, 100]:
        x = torch.randn(n, 16)
        torch.testing.assert_close(compiled(x, w), fn(x, w), atol=1e-5, rtol=1e-5)
        seen.append(ember.stats())
    assert seen[1]["recompiles"] == 1 and seen[0]["eager_fallbacks"] == 0, seen[1]
    assert_compiled_once(seen[1], seen[-1])


@pytest.mark.parametrize("op", ["full_sum", "column_sum", "channel_stats"])
def test_split_reductions_over_symbolic_extents(op):
    # A few rows with long symbolic reductions run in chunks on the thread team; the
    # chunk span comes from the call's sizes (any size, down to fewer elements than chunks).
    fns = {
        "full_sum": lambda x: x.sum(),
        "column_sum": lambda x: x.sum(0),
        "channel_stats": lambda x: torch.var_mean(x, dim=(0, 2), correction=0),
    }
    make = {
        "full_sum": lambda n: (torch.randn(n, 97),),
        "column_sum": lambda n: (torch.randn(n, 24),),
        "channel_stats": lambda n: (torch.randn(n, 8, 1000),),
    }
    first, last = run_sizes(fns[op], lambda n: make[op](n), [70000, 3, 123457, 1000], dynamic=None,
                            mark={0: [0]}, atol=1e-3, rtol=1e-4)
    assert_compiled_once(first, last)


def test_repeat_by_a_symbolic_count_stays_in_ember_kernels():
    # BLOOM repeats its ALiBi slopes batch-size times: a repeat count that is a size.
    def fn(x, slopes):
        return slopes.repeat(x.shape[0], 1) * x.sum(-1, keepdim=True)

    slopes = torch.randn(1, 5)
    records = []
    recording = Recording(records)
    try:
        first, last = run_sizes(fn, lambda n: (torch.randn(n, 3), slopes), [4, 7, 19])
    finally:
        recording.stop()
    assert_compiled_once(first, last)
    assert not [e for r in records for e in r.cg.externs], [e for r in records for e in r.cg.externs]


def test_explain_and_stats_name_symbols_and_generic_paths():
    # A column sum whose kept dim is symbolic is a row reduction, where a static kept dim
    # makes a vector one (csrc/generic_paths.h): reported per graph and counted.
    ember.reset_stats()
    report = ember.explain(lambda x: x.sum(0) * 2.0, torch.randn(64, 16), dynamic=True, graph_breaks=False,
                           calls=[(torch.randn(9, 24),)])
    (g,) = report.to_dict()["graphs"]
    assert [s["name"] for s in g["symbols"]] == ["s0", "s1"]
    assert [s["hint"] for s in g["symbols"]] == [64, 16]
    assert g["symbols"][0]["source"] == "L['x'].size()[0]" and g["symbols"][0]["min"] == 2
    assert len(g["generic_paths"]) == 1 and "vector one" in g["generic_paths"][0]["what"], g["generic_paths"]
    text = str(report)
    assert "sizes: symbolic" in text and "s1 = L['x'].size()[1] (hint 16, 2..inf)" in text
    assert "1 generic path(s) because of a symbol" in text
    s = ember.stats()
    assert s["symbolic_graphs"] == 1 and s["generic_paths"] == 1 and s["codegen_runs"] == 1
    static = ember.explain(lambda x: x.sum(0) * 2.0, torch.randn(64, 16), graph_breaks=False)
    assert static.to_dict()["graphs"][0]["symbols"] == [] and "sizes: static" in str(static)


def test_float_attributes_dynamo_passes_per_call_are_not_stored():
    """dynamic=True makes Dynamo pass each float attribute (eps, dropout p) as a 0-d tensor
    made per call; the traced graph specializes them and no step reads them, so a call
    neither stores them nor (on a GPU) copies them to the device (runner.inputs_read)."""
    from ember.runtime import runner

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)
            self.drop = torch.nn.Dropout(0.1)
            self.scale = 0.5

        def forward(self, x):
            return self.drop(self.norm(x)) * self.scale

    model = Block().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="ember", dynamic=True)
    calls = []
    orig = runner.GraphRunner.run

    def spy(self, args, step_names=None):
        calls.append((self, list(args)))
        return orig(self, args, step_names)

    runner.GraphRunner.run = spy
    try:
        with torch.no_grad():
            for n in (3, 5, 3):
                x = torch.randn(n, 4, 8)
                torch.testing.assert_close(compiled(x), model(x))
    finally:
        runner.GraphRunner.run = orig
    r, args = calls[-1]
    scalars = {i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dim() == 0}
    assert scalars, "Dynamo passed no float attribute as a tensor: the test no longer tests anything"
    assert not scalars & r.inputs_read()
    assert len(r._plans) == 2
    for plan in r._plans.values():
        assert not scalars & {i for _, i in plan.inputs}
