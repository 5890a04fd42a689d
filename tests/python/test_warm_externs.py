"""A loaded CUDA graph's library calls warmed on the build thread (python/ember/caches/warm_externs.py):
the list comes from the compiled graph's externs (distinct calls, layouts only, within the
budget), and nothing runs for a CPU graph or one with symbolic sizes. The GPU part (the
calls run, the loaded graph's output unchanged) is test_precompile.py's cuda_conv case."""
import torch
import torch.nn as nn

import ember
from ember.caches import warm_externs


def _runner(fn, *args, **compile_kwargs):
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
    return out.runner


class _Net(nn.Module):
    """Two convolutions of one layout (one warm call), one of another."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Conv2d(8, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.c = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def _convolutions(runner):
    return [e for e in runner.cg.externs if runner.imported.calls[e["node"]].op.startswith("aten::convolution")]


def test_the_warm_list_is_the_graphs_distinct_library_calls_as_layouts():
    x = torch.randn(2, 8, 12, 12)
    runner = _runner(_Net().eval(), x)
    assert len(_convolutions(runner)) == 3
    calls, over = warm_externs.warm_list(runner.cg, runner.imported, 1 << 30)
    assert over == 0 and [c.op for c in calls] == ["aten::convolution.default"] * 2, calls
    first = calls[0]
    scratch = [a for a in first.args if isinstance(a, warm_externs.Scratch)]
    # input (in the layout ember compiled: channels-last here), weight, bias
    assert [s.sizes for s in scratch] == [(2, 8, 12, 12), (8, 8, 3, 3), (8,)], first.args
    assert scratch[0].strides == (1152, 1, 96, 8) and scratch[0].dtype == torch.float32, scratch
    # Layouts and dtypes, never the user's tensors.
    assert not any(isinstance(a, torch.Tensor) for a in first.args)
    assert first.nbytes >= 2 * 2 * 8 * 12 * 12 * 4  # its input and its result at least
    # The calls as made from the list run (here on the CPU, which warm() never does) and
    # give the graph's shapes: the list holds everything the op takes.
    from ember.runtime.runner import runtime_op

    for c in calls:
        args = [warm_externs._materialize(a, torch.device("cpu")) for a in c.args]
        assert runtime_op(c.op)(*args, **{k: warm_externs._materialize(v, "cpu") for k, v in c.kwargs}).shape[0] == 2
    # Over the budget: left to the graph's first call, and counted.
    calls, over = warm_externs.warm_list(runner.cg, runner.imported, first.nbytes - 1)
    assert over >= 1 and all(c.nbytes < first.nbytes for c in calls), calls


def test_nothing_runs_for_a_cpu_graph():
    x = torch.randn(2, 8, 12, 12)
    runner = _runner(_Net().eval(), x)
    ember.reset_stats()
    assert warm_externs.warm_graph(runner.cg, runner.imported, runner.device, ember.config) == 0
    assert warm_externs.warm_graph(runner.cg, runner.imported, None, ember.config) == 0
    calls, _ = warm_externs.warm_list(runner.cg, runner.imported, 1 << 30)
    assert warm_externs.warm(calls, torch.device("cpu")) == 0
    assert "externs_warmed" not in ember.stats()["precompile"]


def test_a_graph_with_symbolic_sizes_has_no_warm_list():
    model = nn.Linear(16, 8)
    runner = _runner(model, torch.randn(5, 16), dynamic=True)
    assert runner.imported.symbol_args
    assert warm_externs.warm_list(runner.cg, runner.imported, 1 << 30) == ([], 0)


def test_the_switch_and_the_budget_are_options():
    assert ember.config.precompile_warm_externs is True
    off = ember.config.update({"precompile_warm_externs": False})
    assert warm_externs.warm_graph(None, None, torch.device("cuda"), off) == 0  # not even looked at
