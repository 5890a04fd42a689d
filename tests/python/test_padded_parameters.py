"""pad_matmuls pads a matmul operand that is a graph input (a parameter: an LM head's
weight) once, in the runtime (ExternCall::padded_args, python/ember/runtime/prepared.py),
not by a copy kernel on every call; an update of the parameter (an optimizer step) makes
the next call pad it again. A CUDA pass, run here on the CPU path as test_pad_matmuls.py
runs it; the mechanism is the runtime's, the same on both devices."""
import pytest
import torch
import torch.nn as nn

from ember.records import Recording
from ember.runtime.prepared import PaddedInput
from helpers import BACKEND, compile_fresh, pad_every_cpu_compile

pytestmark = pytest.mark.skipif(BACKEND != "ember", reason="ember's pad_matmuls")


@pytest.fixture
def reasons(monkeypatch):
    """Every CPU graph compiled in the test runs pad_matmuls; returns the extern reasons."""
    return pad_every_cpu_compile(monkeypatch)


@pytest.fixture
def records():
    recording = Recording()
    yield recording.records
    recording.stop()
    torch._dynamo.reset()


def padded_inputs(records):
    return [p for r in records for p in r.prepared if isinstance(p, PaddedInput)]


def test_lm_head_weight_is_padded_once(reasons, records):
    # GPT-2's LM head in miniature: a 2,053-word vocabulary (N padded to 2,056).
    torch.manual_seed(0)
    head = nn.Linear(768, 2053, bias=False).to(torch.bfloat16)
    fn = compile_fresh(head)
    x = torch.randn(256, 768, dtype=torch.bfloat16)
    with torch.no_grad():
        expected = head(x)
        for _ in range(3):
            torch.testing.assert_close(fn(x), expected)
    # No copy kernel of the weight: the runtime padded it at the first call and kept it.
    assert any("b (a graph input: padded once)" in r for r in reasons), reasons
    (pad,) = padded_inputs(records)
    assert pad.preparations == 1
    assert pad.held_bytes == 768 * 2056 * 2


def test_in_place_update_pads_again(reasons, records):
    torch.manual_seed(0)
    head = nn.Linear(768, 2053, bias=False).to(torch.bfloat16)
    fn = compile_fresh(head)
    x = torch.randn(256, 768, dtype=torch.bfloat16)
    with torch.no_grad():
        fn(x)
        head.weight.mul_(-2.0)
        # A stale padded copy would give the old weight's result, far from this.
        torch.testing.assert_close(fn(x), head(x))
    (pad,) = padded_inputs(records)
    assert pad.preparations == 2


def test_training_steps_match_eager(reasons, records):
    # f32 (4-element alignment), 515 outputs: the forward's addmm pads the weight and the
    # bias once per step (SGD updates them in place); the backward pads the gradient, a new
    # tensor each step.
    torch.manual_seed(0)
    eager_model = nn.Linear(512, 515)
    ember_model = nn.Linear(512, 515)
    ember_model.load_state_dict(eager_model.state_dict())
    fn = compile_fresh(ember_model)
    opts = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (eager_model, ember_model)]
    x = torch.randn(512, 512)
    steps = 3
    for _ in range(steps):
        losses = []
        for f, opt in zip((eager_model, fn), opts):
            opt.zero_grad()
            loss = f(x).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    assert any("padded once" in r for r in reasons), reasons
    pads = padded_inputs(records)
    assert pads and all(p.preparations == steps for p in pads), [(p.shape, p.preparations) for p in pads]
