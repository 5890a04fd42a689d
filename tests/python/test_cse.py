"""ember's CSE of the joint graph (python/ember/frontend/cse.py), on small traced graphs and end to end."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from ember.frontend.cse import eliminate_common_subexpressions

aten = torch.ops.aten


def calls(gm, target):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target == target)


def traced(fn, *args):
    return make_fx(fn)(*args)


def test_equal_computations_merge_and_the_graph_still_computes_the_same():
    def f(x, y):
        a = torch.exp(x + y)
        b = torch.exp(x + y)
        return (a * b).sum()

    x, y = torch.randn(4, 5), torch.randn(4, 5)
    gm = traced(f, x, y)
    assert calls(gm, aten.exp.default) == 2
    assert eliminate_common_subexpressions(gm.graph) == 2  # the add and the exp
    gm.recompile()
    assert calls(gm, aten.exp.default) == 1 and calls(gm, aten.add.Tensor) == 1
    torch.testing.assert_close(gm(x, y), f(x, y), rtol=0, atol=0)


def test_different_constants_and_signed_zeros_stay_apart():
    def f(x):
        return x + 1, x + 1.0, x + 0.0, x + -0.0, x.sum(0), x.sum(1)

    gm = traced(lambda x: [t * 2 for t in f(x)], torch.randn(3, 3))
    assert eliminate_common_subexpressions(gm.graph) == 0


def test_random_ops_never_merge():
    def f(x):
        return torch.rand_like(x) + torch.rand_like(x)

    gm = traced(f, torch.randn(8))
    assert eliminate_common_subexpressions(gm.graph) == 0
    gm.recompile()
    assert calls(gm, aten.rand_like.default) == 2


def test_outputs_eager_returns_separately_stay_separate():
    def f(x):
        return x * 2, x * 2, (x * 2).t()

    gm = traced(f, torch.randn(3, 3))
    eliminate_common_subexpressions(gm.graph)
    gm.recompile()
    a, b, c = gm(torch.randn(3, 3))
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    assert c.untyped_storage().data_ptr() not in (a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr())


def test_training_with_duplicated_work_matches_eager():
    import ember  # noqa: F401

    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 16)

    def f(x):
        h = torch.tanh(lin(x))
        return (torch.tanh(lin(x)) * h).sum() + torch.sigmoid(lin(x)).sum()

    x = torch.randn(8, 16, requires_grad=True)
    expected = f(x)
    expected.backward()
    grads = (x.grad.clone(), lin.weight.grad.clone())
    x.grad = None
    lin.weight.grad = None
    torch._dynamo.reset()
    got = torch.compile(f, backend="ember")(x)
    got.backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x.grad, grads[0])
    torch.testing.assert_close(lin.weight.grad, grads[1])
