"""ember's own front end for inference graphs (python/ember/frontend/aten_trace.py) and its graph
cache (python/ember/caches/graph_cache.py): which graphs it takes, which it leaves to
AOTAutograd (and that those stay correct), that repeated calls are traced once, and
that a warm process loads what a cold one stored, never another graph's entry."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
from ember.frontend import aten_trace
from ember.frontend.decompositions import decomposition_table

from helpers import check_compiled, compile_fresh


def front_ends_of(fn, *args):
    """Calls fn(*args) compiled once; (the outputs, each graph's front end)."""
    report = ember.explain(fn, *args)
    return report, [g["front_end"] for g in report.graphs]


def block(width=32):
    return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.LayerNorm(width))


def test_inference_graphs_are_traced_by_ember_and_match_eager():
    model = nn.Sequential(*[block() for _ in range(3)]).eval()
    x = torch.randn(4, 7, 32)
    before = ember.stats()
    with torch.no_grad():
        check_compiled(model, x)
    s = ember.stats()
    assert s["front_end"].get("ember", 0) - before["front_end"].get("ember", 0) == 1, s
    assert s["front_end"].get("AOTAutograd", 0) == before["front_end"].get("AOTAutograd", 0), s


def capture(fn, *args, dynamic=None):
    """(Dynamo's graph, its example inputs) of fn(*args)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic)(*args)
    return graphs[0]


def fake_mode_of(gm):
    """The fake mode of Dynamo's example values in gm (what aten_trace traces under)."""
    return next(v.fake_mode for v in (n.meta.get("example_value") for n in gm.graph.nodes)
                if isinstance(v, torch.Tensor))


def test_repeated_calls_are_traced_once():
    x = torch.randn(4, 32)
    traced = {}
    for depth in (1, 6):
        model = nn.Sequential(*[block() for _ in range(depth)]).eval()
        gm, inputs = capture(model, x)
        with torch.no_grad():
            t = aten_trace.trace(gm, inputs, decomposition_table())
            torch.testing.assert_close(t.gm(*inputs)[0], model(x))
        traced[depth] = t.templates_traced
        calls = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
        assert t.templates_traced < calls or depth == 1
    # Six layers cost what one does: every layer after the first is copied.
    assert traced[6] == traced[1], traced


def _op_sequence(gm):
    return [(n.op, str(n.target), tuple(n.meta["val"].shape) if isinstance(n.meta.get("val"), torch.Tensor) else None)
            for n in gm.graph.nodes if n.op != "placeholder"]


@pytest.mark.parametrize("dynamic", [False, True])
def test_one_tracing_session_gives_the_graph_of_a_make_fx_per_call(dynamic, monkeypatch):
    # trace_session.Session runs every call's trace inside one make_fx; its graph must be
    # the one a make_fx per call gives (the same ops, constants, sizes and size inputs).
    from ember.frontend import trace_session

    model = nn.Sequential(block(16), nn.ReLU(inplace=True), block(16)).eval()

    def fn(t):
        n, s, w = t.size()
        y = model(t).reshape(n * s, w)
        return y.softmax(-1)[: n * s // 2] * torch.tensor(0.5), t.new_zeros(n, 2) + s

    x = torch.randn(3, 5, 16)
    gm, inputs = capture(fn, x, dynamic=dynamic)
    from torch._guards import TracingContext, tracing

    fake_mode = fake_mode_of(gm)
    traced = {}
    for kind in ("session", "per call"):
        if kind == "per call":
            monkeypatch.setattr(trace_session, "open_session", trace_session.PerCall)
        else:
            assert isinstance(trace_session.open_session(fake_mode, {}), trace_session.Session)
        with tracing(TracingContext(fake_mode)), torch.no_grad():
            traced[kind] = aten_trace.trace(gm, inputs, decomposition_table())
    assert _op_sequence(traced["session"].gm) == _op_sequence(traced["per call"].gm)
    assert traced["session"].templates_traced == traced["per call"].templates_traced
    if not dynamic:
        with torch.no_grad():
            for a, e in zip(traced["session"].gm(*inputs), fn(x)):
                torch.testing.assert_close(a, e)


def test_a_template_depends_on_its_constants_and_metadata():
    def fn(x, y):
        return x * 2 + 1, x * 3 + 1, y * 2 + 1, x.t() * 2 + 1

    x, y = torch.randn(4, 6), torch.randn(4, 6, dtype=torch.float64)
    gm, inputs = capture(fn, x, y)
    with torch.no_grad():
        out = aten_trace.trace(gm, inputs, decomposition_table()).gm(*inputs)
    for a, e in zip(out, fn(x, y)):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e)


def mutates_input(x):
    x.add_(1)
    return x * 2


def mutates_a_view(x):
    y = x * 2
    y[1:].add_(1)
    return y


def reads_a_stale_view(x):
    y = x * 2
    v = y.view(-1)
    y.add_(1)
    return v * 3  # eager's view sees the add


def views_input(x):
    return x.t(), x[1:], x * 2


@pytest.mark.parametrize("fn, why", [(mutates_input, "mutates an input"), (mutates_a_view, "read through its base"),
                                     (reads_a_stale_view, "view made before"), (views_input, "view of")])
def test_graphs_ember_does_not_trace_go_to_aot_autograd_and_stay_correct(fn, why):
    x = torch.randn(5, 6)
    report, front_ends = front_ends_of(fn, x.clone())
    assert len(front_ends) == 1 and front_ends[0].startswith("AOTAutograd") and why in front_ends[0], front_ends
    xe, xc = x.clone(), x.clone()
    expected = fn(xe)
    actual = compile_fresh(fn)(xc)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(xc, xe)  # the input mutated as eagerly
    if fn is views_input:
        assert actual[0]._base is xc and actual[1]._base is xc  # real views, as eager returns


def mutates_a_view_of_an_intermediate(x):
    # Falcon's `mlp_output += attention_output`: the mutated value is a view (a reshape)
    # of a linear's result, whose base nothing reads again.
    y = (x * 2).view(-1, 3)
    y += x.view(-1, 3).cos()
    return y.sum(-1), y * 3


def divides_topk_values_in_place(x):
    # Mixtral's router: topk's values are a tensor of their own, not a view of its input.
    w, i = torch.topk(x.softmax(-1), 2)
    w /= w.sum(-1, keepdim=True)
    return w, i


def mutates_a_split(x):
    # split's pieces are views: mutating one changes its base, which is read afterwards.
    y = x * 2
    a, b = y.split(3, dim=1)
    a.mul_(2)
    return y + 1


@pytest.mark.parametrize("fn", [mutates_a_view_of_an_intermediate, divides_topk_values_in_place])
def test_in_place_ops_on_views_of_intermediates_are_traced_by_ember(fn):
    x = torch.randn(5, 6)
    _, front_ends = front_ends_of(fn, x)
    assert front_ends == ["ember"], front_ends
    for a, e in zip(compile_fresh(fn)(x), fn(x)):
        torch.testing.assert_close(a, e)


def test_mutated_split_piece_whose_base_is_read_goes_to_aot_autograd():
    x = torch.randn(5, 6)
    _, front_ends = front_ends_of(mutates_a_split, x)
    assert front_ends[0].startswith("AOTAutograd") and "read through its base" in front_ends[0], front_ends
    torch.testing.assert_close(compile_fresh(mutates_a_split)(x), mutates_a_split(x))


def logs_api_usage(x):
    torch._C._log_api_usage_once("ember.test")  # Hugging Face's masks reach it through torch's APIs
    return x.softmax(-1) * 2


def test_api_usage_logging_is_dropped():
    _, front_ends = front_ends_of(logs_api_usage, torch.randn(4, 8))
    assert front_ends == ["ember"], front_ends


class Bottleneck(nn.Module):
    """torchvision's pattern: in-place ReLUs and `out += identity` on intermediates."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = x
        out = self.relu(self.bn(self.conv(x)))
        out += identity
        out.mul_(0.5)
        return self.relu(out), out.sum()


def test_in_place_ops_on_intermediates_are_traced_by_ember():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), Bottleneck(8)).eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        _, front_ends = front_ends_of(model, x)
    assert front_ends == ["ember"], front_ends
    with torch.no_grad():
        check_compiled(model, x)

    def promotes(t):
        y = t * 2
        y.add_(torch.ones(5, dtype=torch.float64))  # stays f32, as in place
        return y

    _, front_ends = front_ends_of(promotes, torch.randn(4, 5))
    assert front_ends == ["ember"], front_ends
    check_compiled(promotes, torch.randn(4, 5))


def test_autograd_and_autocast_go_to_aot_autograd():
    x = torch.randn(6, 8, requires_grad=True)
    _, front_ends = front_ends_of(lambda t: (t * 2).tanh(), x)
    assert "autograd" in front_ends[0], front_ends

    def autocast(t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return t @ t.t()

    _, front_ends = front_ends_of(autocast, x.detach())
    assert front_ends and all(f.startswith("AOTAutograd") for f in front_ends), front_ends
    assert check_compiled(autocast, x.detach()).dtype == torch.bfloat16  # the autocast region kept


def test_symbolic_sizes_are_traced_by_ember_and_one_artifact_serves_every_size():
    model = nn.Sequential(block(16), block(16)).eval()

    def fn(t):
        n, s, w = t.size()
        flat = model(t).reshape(n * s, w)  # size arithmetic between calls
        return flat.softmax(-1)[: n * s // 2], t.new_zeros(n, 2) + s

    f = compile_fresh(fn, dynamic=True)
    ember.reset_stats()
    with torch.no_grad():
        for n, s in ((2, 6), (3, 5), (4, 9), (2, 7)):
            x = torch.randn(n, s, 16)
            for a, e in zip(f(x), fn(x)):
                torch.testing.assert_close(a, e)
    st = ember.stats()
    assert st["front_end"] == {"ember": 1} and st["codegen_runs"] == 1 and st["recompiles"] == 0, st


def test_symbolic_float_attributes_are_specialized_with_a_guard():
    # dynamic=True makes a module's float attributes symbolic inputs read by .item(); ember
    # reads their value as AOTAutograd does, which guards it: a new value recompiles.
    norm = nn.LayerNorm(8, eps=1e-5).eval()
    f = compile_fresh(norm, dynamic=True)
    x = torch.randn(3, 8) * 1e-3
    with torch.no_grad():
        torch.testing.assert_close(f(x), norm(x))
        norm.eps = 0.5
        torch.testing.assert_close(f(x), norm(x))


def test_multi_output_calls_constants_and_sizes():
    def fn(x):
        a, b = x.split([2, 4], dim=1)
        values, indices = x.max(dim=1)
        n = x.size(0) * x.shape[1]
        c = torch.tensor([1.5, -2.0, 0.5, 4.0, 1.0, 3.0]) + torch.arange(6)
        return a.sum(1) + values, b * c[2:] + n, indices, x.chunk(3, 1)[2] * 2

    check_compiled(fn, torch.randn(5, 6))


def test_inference_mode_and_odd_layouts():
    model = block(16).eval()
    x = torch.randn(3, 16, 5).transpose(1, 2)  # not contiguous
    with torch.inference_mode():
        expected = model(x)
        actual = compile_fresh(model)(x)
    torch.testing.assert_close(actual, expected)
    check_compiled(lambda t: (t.sum(), t * 2), torch.randn(0, 4))
    check_compiled(lambda t: t.relu() + 1, torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last))


# ---- the graph cache, across processes --------------------------------------------------------

def run(code, cache):
    env = {**os.environ, "EMBER_CACHE_DIR": str(cache / "ember"), "TORCHINDUCTOR_CACHE_DIR": str(cache / "torch"),
           "EMBER_FALLBACK_ON_ERROR": "0"}
    prelude = "import json, torch, ember\ntorch.manual_seed(0)\n"
    epilogue = "\nprint('STATS ' + json.dumps(ember.stats()))\n"
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code) + epilogue], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import json
    return json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("STATS "))[6:])


AFFINE = """
    x = torch.linspace(-2, 2, 48).reshape(6, 8)
    f = lambda t: torch.softmax(t * {scale}, -1) + torch.tensor([{shift}] * 8)
    torch.testing.assert_close(torch.compile(f, backend="ember")(x), f(x))
"""


def graph_entries(cache):
    return sorted((cache / "ember").rglob("*.graph"))


def test_warm_process_loads_the_graph_without_tracing_or_compiling(tmp_path):
    cold = run(AFFINE.format(scale=2.0, shift=0.5), tmp_path)
    assert cold["front_end"] == {"ember": 1} and cold["graph_cache"] == {"miss": 1, "saved_graphs": 1}, cold
    assert len(graph_entries(tmp_path)) == 1
    warm = run(AFFINE.format(scale=2.0, shift=0.5), tmp_path)
    assert warm["front_end"] == {"cache": 1} and warm["graph_cache"] == {"hit": 1}, warm
    assert warm["graphs_loaded"] == 1 and warm["graphs_compiled"] == 0 and warm["c_compiler_runs"] == 0, warm


@pytest.mark.parametrize("first, second", [((2.0, 0.5), (3.0, 0.5)), ((2.0, 0.5), (2.0, -0.5)),
                                           ((0.0, 0.5), (-0.0, 0.5))])
def test_another_constant_is_another_graph(tmp_path, first, second):
    run(AFFINE.format(scale=first[0], shift=first[1]), tmp_path)
    other = run(AFFINE.format(scale=second[0], shift=second[1]), tmp_path)  # asserts its own result
    assert other["front_end"] == {"ember": 1} and "hit" not in other["graph_cache"], other


def test_tampered_graph_entry_is_traced_again(tmp_path):
    run(AFFINE.format(scale=2.0, shift=0.5), tmp_path)
    for path in graph_entries(tmp_path):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))
    again = run(AFFINE.format(scale=2.0, shift=0.5), tmp_path)
    assert again["front_end"] == {"ember": 1} and again["graph_cache"].get("miss") == 1, again


def test_graph_cache_off_with_the_aot_cache_option(tmp_path):
    stats = run("""
        ember.config.aot_cache = False
        x = torch.randn(4, 4)
        torch.testing.assert_close(torch.compile(lambda t: t.exp() * 2, backend="ember")(x), x.exp() * 2)
    """, tmp_path)
    assert stats["front_end"] == {"ember": 1} and stats["graph_cache"] == {}, stats
    assert graph_entries(tmp_path) == []


def test_baddbmm_in_bf16_stays_one_bf16_blas_call():
    """PyTorch's decomposition of baddbmm upcasts its product to float32 (a GEMM with no
    tensor cores on the GPU); ember keeps the op whole, in the operands' dtype."""
    def scores(bias, q, k):
        return torch.baddbmm(bias, q, k, beta=1.0, alpha=0.125).softmax(-1)

    bias, q, k = (torch.randn(s, dtype=torch.bfloat16) for s in ([4, 16, 16], [4, 16, 8], [4, 8, 16]))
    gm, inputs = capture(scores, bias, q, k)
    with torch.no_grad():
        traced = aten_trace.trace(gm, inputs, decomposition_table())
    ops = [n.target for n in traced.gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.baddbmm.default in ops, ops
    assert torch.ops.aten.bmm.default not in ops, ops
    check_compiled(scores, bias, q, k)


def test_the_explicit_core_aten_table_traces_what_the_full_one_does(monkeypatch):
    # decompositions._core_aten_table leaves out core_aten_decompositions()' entries for
    # CompositeImplicitAutograd ops (0.25 s a cold process to collect); the dispatcher
    # decomposes those ops while make_fx traces anyway, so the ATen graph is the same.
    import torch._decomp

    from ember.frontend import decompositions

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.block, self.drop = block(8), nn.Dropout(0.1)

        def forward(self, img):
            y = F.interpolate(self.bn(self.conv(img)).relu(), scale_factor=2.0, mode="bilinear")
            t = self.drop(y.flatten(2).transpose(1, 2))
            q = self.block(t).unflatten(-1, (2, 4)).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
            return torch.einsum("bhsd,bhtd->bhst", a, q).softmax(-1).log_softmax(-1)

    model = Mixed().eval()
    gm, inputs = capture(model, torch.randn(2, 3, 6, 6))
    fake_mode = fake_mode_of(gm)
    graphs, sizes = [], []
    for full in (False, True):
        decompositions.decomposition_table.cache_clear()
        if full:
            monkeypatch.setattr(decompositions, "_core_aten_table", torch._decomp.core_aten_decompositions)
        table = decompositions.decomposition_table()
        sizes.append(len(table))
        with torch._guards.tracing(torch._guards.TracingContext(fake_mode)), torch.no_grad():
            graphs.append(_op_sequence(aten_trace.trace(gm, inputs, table).gm))
    decompositions.decomposition_table.cache_clear()
    assert graphs[0] == graphs[1]
    assert sizes[0] < sizes[1] or not hasattr(torch._decomp, "_core_aten_decompositions_post_autograd"), sizes
