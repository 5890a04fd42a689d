"""The runner's call as one generated function per plan (python/ember/runtime/plan_code.py), and
the per-call work it keeps from repeating: views of parameters, arena pointers."""
import torch

import ember
from ember.runtime import plan_code
from ember.frontend.fx_import import Ref, SymValue


def _runner(fn, *args, **compile_kwargs):
    """(ember's runner of fn's one graph, the compiled function)."""
    backend = ember.make_backend()
    made = []

    def capture(gm, example_inputs):
        out = backend(gm, example_inputs)
        made.append(out)
        return out

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=capture, **compile_kwargs)
    with torch.no_grad():
        compiled(*args)
    (out,) = made
    return out.runner, compiled


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8), torch.nn.Tanh()).eval()


def test_a_plan_runs_as_one_generated_function():
    model = _mlp()
    x = torch.randn(4, 16)
    runner, compiled = _runner(model, x)
    src = runner._plan.source
    assert src.startswith("def run(bufs, P, launch, X, empty, dev, conform):")
    assert src.count("launch(") == sum(kind == "kernels" for kind, _, _ in runner.cg.steps)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x))


def test_parameter_views_are_made_once_and_follow_a_moved_parameter():
    # Linear's weight reaches ATen's addmm as its transpose: a view of a parameter, made on
    # the first call and reused while the parameter stays where it is.
    from ember.runtime.runner import _InputView

    model = _mlp()
    x = torch.randn(4, 16)
    runner, compiled = _runner(model, x)
    views = [v for v in runner._plan.run.__globals__.values() if isinstance(v, _InputView)]
    assert views, runner._plan.source
    with torch.no_grad():
        compiled(x)
        kept = [v.entry[2] for v in views]
        compiled(x)
        assert all(v.entry[2] is k for v, k in zip(views, kept))
        # `param.data = ...` keeps the Parameter object and moves its memory: the view is made again.
        model[0].weight.data = torch.randn(32, 16)
        torch.testing.assert_close(compiled(x), model(x))


def test_views_of_other_inputs_are_not_kept():
    # A view of the caller's tensor would hold its memory until the next call.
    def fn(x, w):
        return torch.mm(x, w.t()).relu()

    x, w = torch.randn(4, 16), torch.randn(8, 16)
    runner, compiled = _runner(fn, x, w)
    from ember.runtime.runner import _InputView

    views = [v for v in runner._plan.run.__globals__.values() if isinstance(v, _InputView)]
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, w), fn(x, w))
        w2 = torch.randn(8, 16)
        torch.testing.assert_close(compiled(x, w2), fn(x, w2))
    assert views and all(v.entry[0] is None for v in views)


def test_generated_arguments():
    names = plan_code.Names()

    class Fetch(dict):
        def value(self, sym):
            return 7

    ref = Ref(3)
    fetch = Fetch({ref: plan_code_access("bufs[3]")})
    assert plan_code.value_expr(ref, fetch, names) == "bufs[3]"
    assert plan_code.value_expr([ref, 2], fetch, names) == "[bufs[3], 2]"
    assert plan_code.value_expr((ref,), fetch, names) == "(bufs[3], )"
    assert plan_code.value_expr(SymValue(None), fetch, names) == "7"
    assert plan_code.value_expr((1, 2), fetch, names) == "(1, 2)"
    f = plan_code.value_expr(1.5, fetch, names)
    assert names.values[f] == 1.5
    # A keyword that is not a Python identifier (aten::random_.from's `from`) is passed by dict.
    expr = plan_code.call_expr(torch.ops.aten.add.Tensor, (ref,), {"from": 2, "alpha": ref}, fetch, names)
    assert expr.endswith("(bufs[3], alpha=bufs[3], **{'from': 2})"), expr


def plan_code_access(source):
    fn = lambda bufs: None  # noqa: E731
    fn.source = source
    return fn


def test_dynamic_plans_share_nothing_that_moves():
    # Two symbol values: two plans, each with its own arena and pointers; results as eager.
    model = _mlp()
    compiled = ember.compile(model, dynamic=True)
    with torch.no_grad():
        for rows in (5, 9, 5, 9):
            x = torch.randn(rows, 16)
            torch.testing.assert_close(compiled(x), model(x))


def test_results_made_what_the_kernels_read_are_counted():
    # An ATen result whose strides differ from the compiled ones is copied on every call:
    # ember.stats()["result_copies"] counts it (a graph with symbols plans strides from its
    # sizes); one that needs nothing is not counted.
    from ember.runtime.runner import _conform_result

    ember.reset_stats()
    r = torch.randn(4, 8).t()
    out = _conform_result(r, plan_code.Expected(0, (8, 4), (4, 1), torch.float32), torch.device("cpu"))
    assert out.stride() == (4, 1) and torch.equal(out, r)
    assert ember.stats()["result_copies"] == 1
    one = torch.randn(1, 1).as_strided((1, 1), (5, 5))
    assert _conform_result(one, plan_code.Expected(0, (1, 1), (1, 1), torch.float32), torch.device("cpu")) is one
    assert ember.stats()["result_copies"] == 1
    ember.reset_stats()
    assert ember.stats()["result_copies"] == 0
