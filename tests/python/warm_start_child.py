"""One process of tests/python/test_warm_start.py: compiles SCENARIO's functions with ember,
checks every output and gradient against eager, and prints ember.stats() as one JSON line.

    python warm_start_child.py SCENARIO [--other-build] [--options JSON] [--explain]

The caches are the environment's (EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR): run twice, the
first process compiles (cold), the second finds what it wrote (warm).
"""
import argparse
import json
import sys

import torch
import torch.nn as nn

import ember

RESULT_TAG = "WARM_START_STATS "


def compiled(fn, options, dynamic=None):
    return torch.compile(fn, backend=ember.make_backend(None, options), dynamic=dynamic)


def assert_grads_equal(params_a, params_b):
    for a, b in zip(params_a, params_b):
        torch.testing.assert_close(a.grad, b.grad)


def inference(options):
    # A LayerNorm/GELU MLP, a graph break (two graphs), an input mutated in place and
    # outputs that are views of an input (AOTAutograd's runtime wrappers handle both).
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).eval()
    x = torch.randn(8, 16)
    with torch.no_grad():
        torch.testing.assert_close(compiled(mlp, options)(x), mlp(x))

    def with_break(t):
        u = torch.softmax(t * 2, -1)
        torch._dynamo.graph_break()
        return u.cumsum(-1) + t.tanh()

    torch.testing.assert_close(compiled(with_break, options)(x), with_break(x))

    def mutates(t, acc):
        acc.add_(t.sin())
        return t.t(), (t * acc).sum(-1), t[1:]

    # Tensor constants (get_attr in AOTAutograd's graph): the entry must hold them. Taking
    # them under AOTAutograd's fake mode failed, and the graph was never saved.
    def with_constant(t):
        return (t + torch.tensor([1.0, -2.0] * 8)) * 3

    torch.testing.assert_close(compiled(with_constant, options)(x), with_constant(x))

    acc_e, acc_c = torch.ones(8, 16), torch.ones(8, 16)
    expected, actual = mutates(x, acc_e), compiled(mutates, options)(x, acc_c)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(acc_c, acc_e)
    assert actual[0]._base is x and actual[2]._base is x  # real views, as eager returns


def training(options):
    # Forward + backward through an MLP, and a CNN whose BatchNorm updates its running
    # statistics (input mutations) in train mode.
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    ref = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    ref.load_state_dict(mlp.state_dict())
    x = torch.randn(8, 16)
    loss = compiled(mlp, options)(x).square().mean()
    loss.backward()
    ref_loss = ref(x).square().mean()
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    assert_grads_equal(mlp.parameters(), ref.parameters())

    torch.manual_seed(1)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(8 * 4 * 4, 5))
    cnn_ref = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(8 * 4 * 4, 5))
    cnn_ref.load_state_dict(cnn.state_dict())
    images, labels = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 4, 2])
    step = compiled(lambda m, a, b: nn.functional.cross_entropy(m(a), b), options)
    loss = step(cnn, images, labels)
    loss.backward()
    ref_loss = nn.functional.cross_entropy(cnn_ref(images), labels)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    assert_grads_equal(cnn.parameters(), cnn_ref.parameters())
    torch.testing.assert_close(cnn[1].running_mean, cnn_ref[1].running_mean)
    torch.testing.assert_close(cnn[1].running_var, cnn_ref[1].running_var)
    _scaled_training_step(options, "cpu")


def _scaled_training_step(options, device):
    # A training graph with a CPU tensor constant (DeBERTa's sqrt(torch.tensor(d) * s)):
    # its entry holds the constant, taken outside AOTAutograd's fake mode (encoding it under
    # that mode failed, and the graph was never saved); on CUDA the runner moves it to the
    # device outside that mode too (under it, the move made a FakeTensor).
    torch.manual_seed(2)
    w = torch.randn(16, 16, device=device, requires_grad=True)
    x = torch.randn(4, 16, 16, device=device)

    def scaled(x, w):
        scale = torch.sqrt(torch.tensor(x.size(-1), dtype=torch.float) * 2)
        return torch.softmax((x @ w) / scale.to(dtype=x.dtype), -1).square().mean()

    loss = compiled(scaled, options)(x, w)
    loss.backward()
    grad, w.grad = w.grad, None
    ref_loss = scaled(x, w)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(grad, w.grad)


def dynamic(options):
    # Symbolic sizes (dynamic=True): one graph serves every batch size, inference and training.
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    f = compiled(mlp, options, dynamic=True)
    for n in (8, 5, 13):
        x = torch.randn(n, 16)
        with torch.no_grad():
            torch.testing.assert_close(f(x), mlp(x))
    g = compiled(lambda t: mlp(t).square().mean(), options, dynamic=True)
    for n in (6, 11):
        x = torch.randn(n, 16)
        mlp.zero_grad()
        loss = g(x)
        loss.backward()
        grads = [p.grad.clone() for p in mlp.parameters()]
        mlp.zero_grad()
        ref_loss = mlp(x).square().mean()
        ref_loss.backward()
        torch.testing.assert_close(loss, ref_loss)
        for a, p in zip(grads, mlp.parameters()):
            torch.testing.assert_close(a, p.grad)


def refuse_graphs_with(op):
    """Makes ember refuse every graph calling `op`, as it refuses a graph its IR cannot
    express (UnsupportedGraph): such graphs are rare enough that none is at hand."""
    from ember import compiler
    from ember.frontend.fx_import import UnsupportedGraph

    real = compiler.build_runner

    def build_runner(imported, *args, **kwargs):
        if op in imported.text:
            raise UnsupportedGraph(f"refused for the test: {op}")
        return real(imported, *args, **kwargs)

    compiler.build_runner = build_runner


def fallbacks(options):
    # A graph ember refuses runs eagerly and is never written to the cache; a graph whose
    # ATen result contradicts its metadata (embedding_bag in bf16) falls back to eager at
    # run time, also when it was loaded from the cache.
    refuse_graphs_with("aten.tanh")
    x = torch.randn(3, 3)
    torch.testing.assert_close(compiled(lambda t: t.tanh() * 2 + 1, options)(x), x.tanh() * 2 + 1)
    w = torch.randn(10, 3).bfloat16()
    idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4])
    fn = lambda w: torch.nn.functional.embedding_bag(idx, w, offsets, mode="sum")  # noqa: E731
    torch.testing.assert_close(compiled(fn, options)(w), fn(w))


def small_fn(t):
    return torch.softmax(t * 2, -1) + t.tanh()


def small(options):
    # One small graph, for the tests that tamper with its cache entry.
    x = torch.linspace(-3, 3, 64).reshape(8, 8)
    torch.testing.assert_close(compiled(small_fn, options)(x), small_fn(x))


def cuda(options):
    # The CUDA path (test_warm_start's gpu test): a LayerNorm/GELU MLP in bf16 inference
    # with a tensor constant, and in f32 training. (A CUDA tensor constant in a training
    # graph is not saved: torch 2.11's AOTAutogradCache copies it to the CPU under its
    # fake mode and gives up, logging "unable to serialize"; that graph compiles again.)
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 64)).cuda()
    x = torch.randn(32, 64, device="cuda")

    def with_constant(t):
        return mlp(t) + torch.tensor([0.5, -1.0] * 32, device=t.device, dtype=t.dtype)

    with torch.no_grad():
        mlp.bfloat16()
        xb = x.bfloat16()
        torch.testing.assert_close(compiled(with_constant, options)(xb), with_constant(xb), rtol=2e-2, atol=2e-2)
        mlp.float()
    loss = compiled(lambda t: mlp(t).square().mean(), options)(x)
    loss.backward()
    grads = [p.grad.clone() for p in mlp.parameters()]
    mlp.zero_grad()
    mlp(x).square().mean().backward()
    for g, p in zip(grads, mlp.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-5)
    _scaled_training_step(options, "cuda")


SCENARIOS = {f.__name__: f for f in (inference, training, dynamic, fallbacks, small, cuda)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--options", default="{}", help="ember options, as JSON")
    parser.add_argument("--other-build", action="store_true", help="pretend to be another ember build")
    parser.add_argument("--explain", action="store_true", help="ember.explain the small scenario's function")
    args = parser.parse_args()
    if args.other_build:
        ember.caches.tags.build_id = lambda: "another-ember-build"
    options = json.loads(args.options)
    if args.explain:
        report = ember.explain(small_fn, torch.linspace(-3, 3, 64).reshape(8, 8), options=options)
        print("EXPLAIN " + json.dumps(report.to_dict()["graphs"]))
        print(report)
    else:
        SCENARIOS[args.scenario](options)
    print(RESULT_TAG + json.dumps(ember.stats()))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
