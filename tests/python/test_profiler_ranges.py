"""A torch.profiler trace of a model compiled with ember shows each compiled graph as a
range named after the graph and its source, and each kernel step as a range named after
its kernels (on the GPU, the device's kernels carry the same names); with no profiler
active no range is entered at all."""
import json

import pytest
import torch
import torch.nn as nn

import ember
from ember.runtime import runner
from ember.records import Recording


class NormGelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.up = nn.Linear(32, 64)

    def forward(self, x):
        return torch.nn.functional.gelu(self.up(self.norm(x))) * 2.0


def _trace_events(tmp_path, fn, device="cpu"):
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def _run_and_trace(tmp_path, model, x, train=False, device="cpu"):
    records = []
    recording = Recording(records)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="ember")
        grad = torch.enable_grad() if train else torch.no_grad()

        def step():
            with grad:
                out = compiled(x)
                if train:
                    out.sum().backward()

        step()  # compile outside the trace
        events = _trace_events(tmp_path, step, device)
    finally:
        recording.stop()
        torch._dynamo.reset()
    return records, events


def _inside(inner, outer):
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1


def test_trace_shows_the_graph_range_and_its_kernels(tmp_path):
    model = NormGelu().eval()
    (record,), events = _run_and_trace(tmp_path, model, torch.randn(8, 32))
    graph_ranges = [e for e in events if e["name"].startswith(f"ember {record.name} ")]
    assert len(graph_ranges) == 1, [e["name"] for e in events if "ember" in e["name"]]
    (graph_range,) = graph_ranges
    assert "NormGelu.forward (" in graph_range["name"] and "test_profiler_ranges.py:" in graph_range["name"]
    kernel_names = {k["name"] for k in record.cg.kernels}
    assert kernel_names
    kernel_ranges = [e for e in events if e["name"] in kernel_names or
                     any(n in kernel_names for n in e["name"].split(", "))]
    seen = {n for e in kernel_ranges for n in e["name"].split(", ")}
    assert seen == kernel_names
    assert all(_inside(k, graph_range) for k in kernel_ranges)
    # ATen's own calls (the matmul) show under the graph too.
    assert any(e["name"].startswith("aten::") and _inside(e, graph_range) for e in events)


def test_training_graphs_each_have_a_range(tmp_path):
    records, events = _run_and_trace(tmp_path, NormGelu(), torch.randn(8, 32, requires_grad=True), train=True)
    names = [e["name"] for e in events]
    for r in records:
        assert any(n.startswith(f"ember {r.name} NormGelu.forward") for n in names), (r.name, names)


def test_no_range_is_entered_without_a_profiler(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a range was entered with no profiler active")

    monkeypatch.setattr(runner, "_RecordFunctionFast", refuse)
    model = NormGelu().eval()
    x = torch.randn(8, 32)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="ember")
        torch.testing.assert_close(compiled(x), model(x))
        compiled(x)
    torch._dynamo.reset()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_trace_names_device_kernels_under_the_graph_range(tmp_path):
    model = NormGelu().cuda().eval()
    (record,), events = _run_and_trace(tmp_path, model, torch.randn(8, 32, device="cuda"), device="cuda")
    assert any(e["name"].startswith(f"ember {record.name} NormGelu.forward") for e in events)
    device_kernels = {e["name"] for e in events if e.get("cat") == "kernel"}
    functions = {k.get("function", k["name"]) for k in record.cg.kernels}
    assert functions <= device_kernels, (functions, device_kernels)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_report_times_each_kernel_step_on_the_device():
    model = NormGelu().cuda().eval()
    with torch.no_grad():
        report = ember.explain(model, torch.randn(64, 32, device="cuda"), graph_breaks=False, details=True)
    (g,) = report.graphs
    assert report.device["name"].startswith("cuda") and report.device["copy_gbs"] > 100
    assert g["code_language"] == "CUDA C"
    steps = g["kernel_steps"]
    assert steps and all(s["us"] and s["us"] > 0 for s in steps), steps
