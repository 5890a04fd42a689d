"""Prepared weights (python/ember/runtime/prepared.py): a convolution's weight is prepared at the
first call and reused while the parameter is unchanged; any update of the parameter (in
place under no_grad, load_state_dict, a new storage through `.data =`, an optimizer step)
makes the next call prepare it again. Training with prepared weights is covered by
test_training.py's CNN run (20 AdamW steps against fp64)."""
import pytest
import torch
import torch.nn as nn

import ember
from ember.records import Recording
from helpers import BACKEND, compile_fresh

pytestmark = pytest.mark.skipif(BACKEND != "ember", reason="ember's prepared weights")


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, stride=2, bias=False)
        self.conv3 = nn.Conv2d(16, 8, 1)  # 1x1: ATen's native kernels at a small batch

    def forward(self, x):
        return self.conv3(torch.relu(self.conv2(torch.relu(self.conv1(x)))))


def compiled_net(**options):
    torch.manual_seed(0)
    model = ConvNet().eval()
    records = _recorded()
    fn = compile_fresh(model, options=options) if options else compile_fresh(model)
    return model, fn, records


# Recordings that the fixture below stops after each test.
_recordings: list[Recording] = []


def _recorded() -> list:
    """The records of the graphs compiled from now until the end of the test."""
    _recordings.append(Recording())
    return _recordings[-1].records


def prepared_of(records):
    return [p for r in records for p in r.prepared]


def run(fn, x):
    with torch.no_grad():
        return fn(x)


@pytest.fixture(autouse=True)
def _clean():
    yield
    while _recordings:
        _recordings.pop().stop()
    torch._dynamo.reset()


def test_weights_prepared_once_and_reused():
    model, fn, records = compiled_net()
    x = torch.randn(2, 8, 10, 10)
    for _ in range(3):
        torch.testing.assert_close(run(fn, x), run(model, x))
    prepared = prepared_of(records)
    assert len(prepared) == 3, prepared
    assert [p.preparations for p in prepared] == [1, 1, 1]


def test_in_place_update_between_calls_invalidates_the_prepared_copy():
    model, fn, records = compiled_net()
    x = torch.randn(2, 8, 10, 10)
    run(fn, x)
    with torch.no_grad():
        model.conv1.weight.mul_(-2.0)
        model.conv2.weight.add_(0.5)
        model.conv3.weight.mul_(3.0)
    # A stale prepared copy would give the old weights' result, far from this.
    torch.testing.assert_close(run(fn, x), run(model, x))
    assert all(p.preparations == 2 for p in prepared_of(records))


def test_load_state_dict_and_new_storage_invalidate():
    model, fn, records = compiled_net()
    x = torch.randn(2, 8, 10, 10)
    run(fn, x)
    torch.manual_seed(1)
    model.load_state_dict(ConvNet().state_dict())  # copies in place: versions change
    torch.testing.assert_close(run(fn, x), run(model, x))
    model.conv1.weight.data = torch.randn_like(model.conv1.weight)  # a new storage, same object
    torch.testing.assert_close(run(fn, x), run(model, x))


def test_prepare_weights_off_prepares_on_every_call():
    model, fn, records = compiled_net(prepare_weights=False)
    x = torch.randn(2, 8, 10, 10)
    for _ in range(3):
        torch.testing.assert_close(run(fn, x), run(model, x))
    assert all(p.preparations == 3 for p in prepared_of(records))
    assert all(p.held_bytes == 0 for p in prepared_of(records))


@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
def test_weight_in_another_layout(layout):
    # A parameter stored channels-last, and a weight passed as a transposed view: prepared
    # from their own strides.
    torch.manual_seed(0)
    base = torch.randn(16, 8, 3, 3)
    w = base.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else \
        base.transpose(0, 1).contiguous().transpose(0, 1)

    def f(x, w):
        return nn.functional.conv2d(x, w, padding=1)

    fn = compile_fresh(f)
    x = torch.randn(2, 8, 6, 6)
    torch.testing.assert_close(run(lambda x: fn(x, w), x), f(x, w))


def test_weight_computed_in_the_graph_is_not_prepared():
    # A weight that the graph computes (not an input) goes through the layout copy as before.
    conv = nn.Conv2d(4, 4, 3)

    def f(x):
        return nn.functional.conv2d(x, conv.weight * 2, conv.bias)

    records = _recorded()
    fn = compile_fresh(f)
    x = torch.randn(2, 4, 6, 6)
    torch.testing.assert_close(run(fn, x), run(f, x))
    assert not prepared_of(records)


def test_training_step_updates_reach_the_next_forward():
    # Forward + backward graphs (AOTAutograd): SGD updates the weights in place after each
    # step; every step's loss must be the eager one.
    torch.manual_seed(0)
    eager_model = ConvNet()
    ember_model = ConvNet()
    ember_model.load_state_dict(eager_model.state_dict())
    records = _recorded()
    fn = compile_fresh(ember_model)
    opts = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (eager_model, ember_model)]
    x = torch.randn(2, 8, 10, 10)
    for _ in range(4):
        losses = []
        for model, f, opt in zip((eager_model, ember_model), (eager_model, fn), opts):
            opt.zero_grad()
            loss = f(x).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    assert all(p.preparations == 4 for p in prepared_of(records))


def test_explain_lists_prepared_weights_and_their_memory():
    torch.manual_seed(0)
    model = ConvNet().eval()
    with torch.no_grad():
        report = ember.explain(model, torch.randn(2, 8, 10, 10), graph_breaks=False)
    text = str(report)
    assert "3 prepared weight(s)" in text, text
    (graph,) = report.graphs
    held = [p["held_bytes"] for p in graph["prepared"]]
    # conv1 and conv2 hold a copy of their weight (16x8x3x3, 16x16x3x3 floats); conv3's 1x1
    # weight either has oneDNN's copy or is its own channels-last form (none held).
    assert held[0] == 16 * 8 * 9 * 4 and held[1] == 16 * 16 * 9 * 4
    assert held[2] in (0, 8 * 16 * 4)
