"""Graphs are named after the user's code (module class, file:line) in explain, logs and
stats, never after torch's wrappers (torch/_dynamo/external_utils.py's `inner`)."""
import logging
import os

import torch
import torch.nn as nn

import ember
from ember.frontend import graph_source
from ember.records import Recording

THIS_FILE = os.path.basename(__file__)


class ScaledNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        y = self.norm(x) * 2.0  # SCALED_NORM_LINE
        return torch.relu(y) + 1.0


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, ln in enumerate(f, 1) if marker in ln and "_line_of" not in ln)


def test_explain_names_a_module_after_its_class_and_line_not_torch():
    model = ScaledNorm().eval()
    with torch.no_grad():
        report = ember.explain(model, torch.randn(4, 16), graph_breaks=False)
    (g,) = report.graphs
    assert g["source"]["module"] == "ScaledNorm" and g["source"]["function"] == "forward"
    assert os.path.basename(g["source"]["file"]) == THIS_FILE
    assert g["source"]["line"] == _line_of("SCALED_NORM_LINE")
    assert g["frame"]["module"] == "ScaledNorm"
    text = str(report)
    assert f"ScaledNorm.forward ({THIS_FILE}" in text or f"ScaledNorm.forward (tests/python/{THIS_FILE}" in text
    assert "external_utils" not in text and "site-packages/torch" not in text


def test_logs_and_stats_name_training_graphs_forward_and_backward():
    model = ScaledNorm()
    records = []
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    log = logging.getLogger("ember.fusion")
    handler, level = Collect(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    recording = Recording(records)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="ember")
        compiled(torch.randn(4, 16, requires_grad=True)).sum().backward()
    finally:
        recording.stop()
        log.removeHandler(handler)
        log.setLevel(level)
        torch._dynamo.reset()
    kinds = {r.name.split("_")[0]: r for r in records}
    assert {"forward", "backward"} <= set(kinds)
    for r in kinds.values():  # the backward is compiled outside the backend call: same source
        assert r.source.module == "ScaledNorm" and os.path.basename(r.source.file) == THIS_FILE, r.source
    assert any("ScaledNorm.forward" in m for m in messages), messages
    assert any("ScaledNorm.forward" in s for s in ember.last_compile_stats()["sources"])


def test_a_plain_function_is_named_after_itself():
    def scale_and_shift(x):
        return x * 3.0 + 1.0  # PLAIN_FN_LINE

    with torch.no_grad():
        report = ember.explain(scale_and_shift, torch.randn(8), graph_breaks=False)
    (g,) = report.graphs
    src = graph_source.GraphSource(**g["source"])
    assert src.module is None and src.function == "scale_and_shift"
    assert src.line == _line_of("PLAIN_FN_LINE")
    assert src.label().startswith("scale_and_shift (")


def test_torch_files_are_internal():
    assert graph_source.is_internal(os.path.join(os.path.dirname(torch.__file__), "_dynamo", "external_utils.py"))
    assert not graph_source.is_internal(__file__)
    assert graph_source.GraphSource().label() == "graph"
